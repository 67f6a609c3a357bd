-- EXECUTE STATEMENT SET: two INSERTs into two sinks, compiled into one plan
-- (its "sluiceStatements" name both), with a SET of a Flink option first.
SET 'table.exec.sink.not-null-enforcer' = 'ERROR';

CREATE TABLE cheap_bids (
  auction  BIGINT,
  price  BIGINT
) WITH (
  'connector' = 'blackhole'
);

CREATE TABLE person_names (
  id  BIGINT,
  name  VARCHAR,
  up  VARCHAR
) WITH (
  'connector' = 'blackhole'
);

EXECUTE STATEMENT SET
BEGIN
INSERT INTO cheap_bids SELECT auction, price FROM bid WHERE price < 1000;
INSERT INTO person_names SELECT id, name, UPPER(city) || '/' || state FROM person;
END;
