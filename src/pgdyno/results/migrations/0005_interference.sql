-- Interference (issue 13): CPU taken by processes outside the experiment, and steal, for a run
-- during which either exceeded its threshold (collect/interference.py).

-- JSON {"foreign_cpu_pct": x, "steal_pct": y, "top": [[command, pct], ...]}; NULL when the run
-- was clean, and for runs stored before this column existed.
ALTER TABLE runs ADD COLUMN interference TEXT;
