-- The on-CPU profile (issue 34): the functions the server's processes spent their CPU in, per
-- process type, and the folded call chains of the flame graph.

-- JSON as results/encode.py `profile_json` writes it; NULL when the run was not profiled
-- (profiling off, perf missing or not permitted) and for runs stored before this column existed.
ALTER TABLE runs ADD COLUMN profile TEXT;
