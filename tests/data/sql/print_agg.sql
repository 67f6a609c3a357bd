-- A group aggregate into Flink's 'print' connector, which takes a retract
-- changelog: +I, then -U old / +U new per change (none when a bid changes
-- no result: MIN and MAX are often unchanged), printed as Flink does.
CREATE TABLE print_agg (
  channel VARCHAR,
  lowest BIGINT,
  highest BIGINT,
  bidders BIGINT
) WITH (
  'connector' = 'print'
);

INSERT INTO print_agg
SELECT channel, MIN(price), MAX(price), COUNT(DISTINCT bidder) FILTER (WHERE price > 1000)
FROM bid
GROUP BY channel;
