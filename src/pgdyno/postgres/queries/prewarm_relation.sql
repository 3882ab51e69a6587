-- Read one relation (an oid from prewarm_relations) into shared buffers; the blocks read.
SELECT pg_prewarm(%(oid)s) AS blocks
