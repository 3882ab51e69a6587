-- pg_stat_io, PostgreSQL 16 and 17: reads, writes and extends count operations of op_bytes
-- bytes each. "backend" is every process type but the checkpointer and the background writer.
-- Writes, extends and fsyncs are those of shared buffers (object 'relation'), as counted by
-- buffers_backend of pg_stat_bgwriter; reads and hits of client backends include temporary
-- relations. Buffers are bytes divided by the block size.
WITH io AS (
    SELECT CASE backend_type
               WHEN 'checkpointer' THEN 'checkpointer'
               WHEN 'background writer' THEN 'bgwriter'
               ELSE 'backend'
           END AS who,
           backend_type,
           object,
           coalesce(reads * op_bytes, 0) AS read_bytes,
           coalesce(writes * op_bytes, 0) AS write_bytes,
           coalesce(extends * op_bytes, 0) AS extend_bytes,
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
    sum(read_bytes) FILTER (WHERE backend_type = 'client backend') AS client_read_bytes,
    sum(hits) FILTER (WHERE backend_type = 'client backend') AS client_hits
FROM io
