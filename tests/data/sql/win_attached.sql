-- An aggregate over a window aggregate's rows (q5's MaxBids): the outer GROUP BY window_start,
-- window_end is planned over windows attached by the inner one (windowing strategy WindowAttached).
CREATE TABLE win_attached (
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3),
  maxn BIGINT,
  auctions BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO win_attached
SELECT starttime, endtime, MAX(num), COUNT(*)
FROM (
  SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end
) AS AuctionBids
GROUP BY starttime, endtime;
