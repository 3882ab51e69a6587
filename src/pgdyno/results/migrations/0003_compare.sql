-- Comparisons (issue 4): a plan's configuration sets, what was in effect, and their runs.
CREATE TABLE comparisons (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    plan_path   TEXT NOT NULL,
    plan_digest TEXT NOT NULL,      -- of the plan's text: --resume continues only the same plan
    plan_text   TEXT NOT NULL,
    mode        TEXT NOT NULL,      -- sets / ladder
    baseline    TEXT NOT NULL,
    scales      TEXT NOT NULL,      -- JSON list: the scales resolved once, kept for --resume
    status      TEXT NOT NULL DEFAULT 'running',  -- running / done / interrupted / failed
    started_at  TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX comparisons_digest ON comparisons(plan_digest);

CREATE TABLE comparison_sets (
    comparison_id INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    name          TEXT NOT NULL,
    requested     TEXT NOT NULL,    -- JSON: pg, sysctl, block, binaries as the plan asks
    effective     TEXT,             -- JSON: the same, read back when the set was last applied
    PRIMARY KEY (comparison_id, name)
) WITHOUT ROWID;

ALTER TABLE runs ADD COLUMN comparison_id INTEGER REFERENCES comparisons(id);
ALTER TABLE runs ADD COLUMN set_name TEXT;
CREATE INDEX runs_comparison ON runs(comparison_id, set_name);
