-- Every client updates the same row, reading it first and holding the snapshot a moment:
-- under repeatable read a concurrent update ends in a serialization failure (SQLSTATE 40001).
BEGIN;
SELECT v FROM pgdyno_hot_row WHERE id = 1;
SELECT pg_sleep(0.002);
UPDATE pgdyno_hot_row SET v = v + 1 WHERE id = 1;
END;
