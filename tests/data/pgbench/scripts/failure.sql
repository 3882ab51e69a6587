\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgdyno_missing_table WHERE aid = :aid;
