-- UNION ALL of two filtered projections of the Nexmark bids (a union node
-- whose inputs are named differently), into a blackhole sink.
CREATE TABLE union_sink (
  id  BIGINT,
  price  BIGINT,
  tag  VARCHAR
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO union_sink
SELECT auction, price, 'even' FROM bid WHERE MOD(auction, 2) = 0
UNION ALL
SELECT bidder AS who, price * 2, channel FROM bid WHERE price > 100000;
