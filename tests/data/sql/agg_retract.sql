-- A group aggregate over an updating input (another group aggregate):
-- retraction (-U / -D in), COUNT, COUNT DISTINCT, SUM, AVG and FILTER under
-- retraction, and groups that disappear (-D out).  Over the official views.
CREATE TABLE agg_retract (
  cnt BIGINT,
  auctions BIGINT,
  bidders BIGINT,
  total BIGINT,
  mean BIGINT,
  max_sum BIGINT,
  rich BIGINT,
  rich_bidders BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO agg_retract
SELECT
    cnt,
    COUNT(*),
    COUNT(DISTINCT last_bidder),
    SUM(s),
    AVG(s),
    SUM(mx),
    COUNT(*) FILTER (WHERE s > 5000000),
    COUNT(DISTINCT last_bidder) FILTER (WHERE mx >= 1000000)
FROM (
    SELECT auction, COUNT(*) AS cnt, SUM(price) AS s, MAX(price) AS mx, MAX(bidder) AS last_bidder
    FROM bid
    GROUP BY auction
)
GROUP BY cnt;
