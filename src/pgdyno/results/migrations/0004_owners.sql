-- Who owns a running session or comparison (issue 11): a pgdyno killed by SIGKILL cannot mark
-- its rows; the next command that opens the database finds them by their owner being gone.

-- The owner's start time (clock ticks since boot, /proc/PID/stat) tells a reused pid apart.
ALTER TABLE sessions ADD COLUMN owner_started INTEGER;
-- When a later command found the session cut off (its status became 'interrupted' then).
ALTER TABLE sessions ADD COLUMN found_interrupted_at TEXT;

ALTER TABLE comparisons ADD COLUMN hostname TEXT;
ALTER TABLE comparisons ADD COLUMN pid INTEGER;
ALTER TABLE comparisons ADD COLUMN owner_started INTEGER;
ALTER TABLE comparisons ADD COLUMN found_interrupted_at TEXT;

-- Comparisons left 'running' by an older pgdyno: their owner is the session of their last run.
UPDATE comparisons SET
    hostname = (SELECT s.hostname FROM runs r JOIN sessions s ON s.id = r.session_id
                WHERE r.comparison_id = comparisons.id ORDER BY r.id DESC LIMIT 1),
    pid = (SELECT s.pid FROM runs r JOIN sessions s ON s.id = r.session_id
           WHERE r.comparison_id = comparisons.id ORDER BY r.id DESC LIMIT 1)
WHERE status = 'running';
