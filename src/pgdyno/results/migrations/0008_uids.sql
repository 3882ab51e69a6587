-- Shared results (issue 22): every session, comparison and run gets an id that is the same in
-- every results database it is copied to, so that `runs import` adds a run once however often
-- the same export is imported, and many hosts can write into one PostgreSQL database.

-- 32 hex digits, derived by store/uids.py from what makes the row itself (its host, process,
-- start and cell); rows written before this column existed get theirs when a pgdyno that
-- knows it next opens the database.
ALTER TABLE sessions ADD COLUMN uid TEXT;
ALTER TABLE comparisons ADD COLUMN uid TEXT;
ALTER TABLE runs ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX sessions_uid ON sessions(uid);
CREATE UNIQUE INDEX comparisons_uid ON comparisons(uid);
CREATE UNIQUE INDEX runs_uid ON runs(uid);
