-- A GROUP BY of nothing: one group, behind Flink's SINGLETON exchange.
CREATE TABLE agg_global (
  bids BIGINT,
  total BIGINT,
  mean BIGINT,
  top_channel VARCHAR,
  cheap BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO agg_global
SELECT COUNT(*), SUM(price), AVG(price), MAX(channel), COUNT(DISTINCT auction) FILTER (WHERE price < 1000)
FROM bid;
