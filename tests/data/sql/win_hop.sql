-- Window TVF HOP (size 10 s, slide 2 s) with a filter, keyed by channel, with window_time.
CREATE TABLE win_hop (
  channel VARCHAR,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  window_time TIMESTAMP(3),
  bids BIGINT,
  bidders BIGINT,
  highest BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO win_hop
SELECT channel, window_start, window_end, window_time, COUNT(*), COUNT(DISTINCT bidder), MAX(price)
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
WHERE price > 1000
GROUP BY channel, window_start, window_end, window_time;
