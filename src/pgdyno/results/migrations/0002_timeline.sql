-- The run timeline (issue 3): latency percentiles, OS and PostgreSQL samples, events.

-- Per run: latency percentiles over the measured window and where they came from.
ALTER TABLE runs ADD COLUMN latency_p50_ms REAL;
ALTER TABLE runs ADD COLUMN latency_p90_ms REAL;
ALTER TABLE runs ADD COLUMN latency_p99_ms REAL;
ALTER TABLE runs ADD COLUMN latency_p999_ms REAL;
ALTER TABLE runs ADD COLUMN latency_max_ms REAL;
-- 'every transaction', 'sampled: 10% of transactions', or 'aggregated log' (schema 1 runs)
ALTER TABLE runs ADD COLUMN latency_source TEXT;
-- JSON: steady-state and load-generator health (TPS stability, trend, client CPU, warnings)
ALTER TABLE runs ADD COLUMN health TEXT;
-- JSON: the block devices under the data and WAL directories
ALTER TABLE runs ADD COLUMN devices TEXT;
UPDATE runs SET latency_source = 'aggregated log' WHERE status = 'ok';

-- Per second: percentiles beside the throughput.
ALTER TABLE run_seconds ADD COLUMN latency_p50_ms REAL;
ALTER TABLE run_seconds ADD COLUMN latency_p90_ms REAL;
ALTER TABLE run_seconds ADD COLUMN latency_p99_ms REAL;
ALTER TABLE run_seconds ADD COLUMN latency_p999_ms REAL;
ALTER TABLE run_seconds ADD COLUMN logged INTEGER;  -- transactions in the latency log

-- OS and PostgreSQL metrics, one value per metric per second, on the same clock as
-- run_seconds (t = the epoch second the interval starts).
CREATE TABLE run_samples (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    metric TEXT NOT NULL,          -- e.g. cpu.iowait_pct, disk.vda.write_mbps, pg.wal_bytes_per_s
    t      INTEGER NOT NULL,
    value  REAL NOT NULL,
    PRIMARY KEY (run_id, metric, t)
) WITHOUT ROWID;

-- Things that happen at an instant: checkpoint start / complete, warnings.
CREATE TABLE run_events (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t      REAL NOT NULL,          -- epoch seconds
    kind   TEXT NOT NULL,          -- checkpoint_start, checkpoint_complete, ...
    detail TEXT NOT NULL           -- JSON
);
CREATE INDEX run_events_run ON run_events(run_id, t);
