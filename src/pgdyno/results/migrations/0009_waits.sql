-- The wait-event profile (issue 24): where the client backends' database time went, and what
-- the background processes were doing beside them.

-- JSON as store/encode.py `waits_json` writes it; NULL when the run was not sampled (wait
-- sampling off, no PostgreSQL sampler) and for runs stored before this column existed.
ALTER TABLE runs ADD COLUMN waits TEXT;
