-- The bids of nexmark-flink's q1 into Flink's 'print' connector, with a
-- BOOLEAN, a NULL, a computed TIMESTAMP and DOUBLE arithmetic: test_sql_nexmark compares
-- sluice's print output with Flink's, line for line.
CREATE TABLE print_bids (
  auction  BIGINT,
  bidder  BIGINT,
  price  DECIMAL(23, 3),
  `dateTime`  TIMESTAMP(3),
  extra  VARCHAR,
  expensive  BOOLEAN,
  later  TIMESTAMP(3),
  ratio  DOUBLE
) WITH (
  'connector' = 'print'
);

INSERT INTO print_bids
SELECT
    auction,
    bidder,
    0.908 * price as price,
    `dateTime`,
    extra,
    price > 100000,
    `dateTime` + INTERVAL '1' SECOND,
    CAST(price AS DOUBLE) / (MOD(auction, 1000) - 3) * 1e-4
FROM bid WHERE MOD(bidder, 7) <> 3;
