-- One `pgdyno bench` invocation: what was asked, on which host and server.
CREATE TABLE sessions (
    id            INTEGER PRIMARY KEY,
    started_at    TEXT NOT NULL,            -- ISO 8601, UTC
    finished_at   TEXT,
    status        TEXT NOT NULL DEFAULT 'running',  -- running / done / interrupted / failed
    hostname      TEXT NOT NULL,            -- where pgdyno ran
    pid           INTEGER NOT NULL,         -- its process, to spot sessions cut off by a kill
    command       TEXT NOT NULL,            -- JSON: pgdyno argv (no passwords)
    target        TEXT NOT NULL,            -- 'sandbox pg18' or the server, without password
    host          TEXT NOT NULL,            -- JSON: HostFacts
    server        TEXT NOT NULL             -- JSON: version, version_num, binaries source
);

-- One pgbench execution (one cell of the matrix, one repeat).
CREATE TABLE runs (
    id                  INTEGER PRIMARY KEY,
    session_id          INTEGER NOT NULL REFERENCES sessions(id),
    status              TEXT NOT NULL,      -- ok / failed / interrupted
    started_at          TEXT NOT NULL,
    finished_at         TEXT NOT NULL,
    workload            TEXT NOT NULL,
    scale               INTEGER NOT NULL,
    clients             INTEGER NOT NULL,
    jobs                INTEGER NOT NULL,
    duration_s          INTEGER NOT NULL,
    protocol            TEXT NOT NULL,
    rate                REAL,
    repeat              INTEGER NOT NULL,
    warmup_s            INTEGER NOT NULL,
    tps                 REAL,
    latency_avg_ms      REAL,
    latency_stddev_ms   REAL,
    transactions        INTEGER,
    failed_transactions INTEGER,
    dataset_bytes       INTEGER,
    pg_version          TEXT NOT NULL,
    pgbench_version     TEXT NOT NULL,
    pgbench_argv        TEXT NOT NULL,      -- JSON list, connection string without password
    settings            TEXT NOT NULL,      -- JSON: non-default settings from pg_settings
    summary             TEXT,               -- JSON: everything parsed from pgbench's summary
    error               TEXT,               -- one sentence, for failed runs
    stderr              TEXT                -- pgbench's stderr, for failed runs
);
CREATE INDEX runs_session ON runs(session_id);

-- pgbench's aggregated log, one row per second of a run.
CREATE TABLE run_seconds (
    run_id            INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t                 INTEGER NOT NULL,     -- unix epoch second
    tps               REAL NOT NULL,
    latency_avg_ms    REAL,
    latency_stddev_ms REAL,
    latency_min_ms    REAL,
    latency_max_ms    REAL,
    failures          INTEGER NOT NULL,
    lag_avg_ms        REAL,
    skipped           INTEGER NOT NULL,
    PRIMARY KEY (run_id, t)
) WITHOUT ROWID;

-- pgbench -r: average latency per statement.
CREATE TABLE run_statements (
    run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    script     INTEGER NOT NULL,
    line       INTEGER NOT NULL,
    latency_ms REAL NOT NULL,
    failures   INTEGER,
    retries    INTEGER,
    command    TEXT NOT NULL,
    PRIMARY KEY (run_id, script, line)
) WITHOUT ROWID;
