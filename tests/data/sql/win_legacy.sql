-- Legacy group windows: GROUP BY TUMBLE(...) and HOP(...) with their _START/_END/_ROWTIME.
CREATE TABLE win_legacy_tumble (
  bidder BIGINT,
  bids BIGINT,
  mean BIGINT,
  wstart TIMESTAMP(3),
  wend TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

CREATE TABLE win_legacy_hop (
  channel VARCHAR,
  bids BIGINT,
  lowest BIGINT,
  wstart TIMESTAMP(3),
  wend TIMESTAMP(3),
  wtime TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

EXECUTE STATEMENT SET BEGIN
INSERT INTO win_legacy_tumble
SELECT bidder, COUNT(*), AVG(price),
       TUMBLE_START(`dateTime`, INTERVAL '3' SECOND), TUMBLE_END(`dateTime`, INTERVAL '3' SECOND)
FROM bid
GROUP BY bidder, TUMBLE(`dateTime`, INTERVAL '3' SECOND);
INSERT INTO win_legacy_hop
SELECT channel, COUNT(*), MIN(price),
       HOP_START(`dateTime`, INTERVAL '1' SECOND, INTERVAL '4' SECOND),
       HOP_END(`dateTime`, INTERVAL '1' SECOND, INTERVAL '4' SECOND),
       HOP_ROWTIME(`dateTime`, INTERVAL '1' SECOND, INTERVAL '4' SECOND)
FROM bid
WHERE price < 50000000
GROUP BY channel, HOP(`dateTime`, INTERVAL '1' SECOND, INTERVAL '4' SECOND);
END;
