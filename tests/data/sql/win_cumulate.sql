-- Window TVF CUMULATE (step 2 s, size 10 s) without keys: one row per window.
CREATE TABLE win_cumulate (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  bids BIGINT,
  total BIGINT,
  lowest BIGINT,
  auctions BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO win_cumulate
SELECT window_start, window_end, COUNT(*), SUM(price), MIN(price), COUNT(DISTINCT auction)
FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY window_start, window_end;
