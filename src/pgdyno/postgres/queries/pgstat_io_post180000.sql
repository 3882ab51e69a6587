-- pg_stat_io, PostgreSQL 18+: sizes are in read_bytes, write_bytes and extend_bytes (op_bytes
-- is gone: one operation may now cover several blocks), and object 'wal' holds the WAL writes
-- and fsyncs that 18 removed from pg_stat_wal. "backend" is every process type but the
-- checkpointer and the background writer. Writes, extends and fsyncs are those of shared
-- buffers (object 'relation'), as counted by buffers_backend of pg_stat_bgwriter before 17;
-- reads and hits of client backends include temporary relations. Buffers are bytes divided by
-- the block size.
WITH io AS (
    SELECT CASE backend_type
               WHEN 'checkpointer' THEN 'checkpointer'
               WHEN 'background writer' THEN 'bgwriter'
               ELSE 'backend'
           END AS who,
           backend_type,
           object,
           coalesce(read_bytes, 0) AS read_bytes,
           coalesce(write_bytes, 0) AS write_bytes,
           coalesce(extend_bytes, 0) AS extend_bytes,
           coalesce(writes, 0) AS writes,
           coalesce(fsyncs, 0) AS fsyncs,
           coalesce(hits, 0) AS hits
    FROM pg_stat_io
)
SELECT
    sum(write_bytes) FILTER (WHERE who = 'checkpointer' AND object = 'relation')
        AS checkpointer_write_bytes,
    sum(write_bytes) FILTER (WHERE who = 'checkpointer' AND object = 'relation')
        / current_setting('block_size')::int AS checkpointer_buffers,
    sum(fsyncs) FILTER (WHERE who = 'checkpointer' AND object = 'relation')
        AS checkpointer_fsyncs,
    sum(write_bytes) FILTER (WHERE who = 'bgwriter' AND object = 'relation')
        AS bgwriter_write_bytes,
    sum(write_bytes) FILTER (WHERE who = 'bgwriter' AND object = 'relation')
        / current_setting('block_size')::int AS bgwriter_buffers,
    sum(write_bytes) FILTER (WHERE who = 'backend' AND object = 'relation')
        AS backend_write_bytes,
    sum(write_bytes) FILTER (WHERE who = 'backend' AND object = 'relation')
        / current_setting('block_size')::int AS backend_buffers,
    sum(extend_bytes) FILTER (WHERE who = 'backend' AND object = 'relation')
        AS backend_extend_bytes,
    sum(fsyncs) FILTER (WHERE who = 'backend' AND object = 'relation') AS backend_fsyncs,
    sum(read_bytes) FILTER (WHERE backend_type = 'client backend' AND object <> 'wal')
        AS client_read_bytes,
    sum(hits) FILTER (WHERE backend_type = 'client backend' AND object <> 'wal') AS client_hits,
    sum(writes) FILTER (WHERE object = 'wal') AS wal_writes,
    sum(write_bytes) FILTER (WHERE object = 'wal') AS wal_write_bytes,
    sum(fsyncs) FILTER (WHERE object = 'wal') AS wal_fsyncs
FROM io
