-- Window TVF TUMBLE planned in one phase (stream-exec-window-aggregate), no keys, with a filter.
SET 'table.optimizer.agg-phase-strategy' = 'ONE_PHASE';

CREATE TABLE win_one_phase (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  bids BIGINT,
  total BIGINT,
  highest BIGINT,
  channels BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO win_one_phase
SELECT window_start, window_end, COUNT(*), SUM(price), MAX(price), COUNT(DISTINCT channel)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '5' SECOND))
WHERE auction % 3 <> 0
GROUP BY window_start, window_end;
