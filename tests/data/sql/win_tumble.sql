-- Window TVF TUMBLE: bids and price statistics per auction and 10-second window.
CREATE TABLE win_tumble (
  auction BIGINT,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  bids BIGINT,
  total BIGINT,
  lowest BIGINT,
  highest BIGINT,
  mean BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO win_tumble
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MIN(price), MAX(price), AVG(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
