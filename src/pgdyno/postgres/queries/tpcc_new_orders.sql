-- The count behind NOPM: every committed new-order raises one d_next_o_id by one (2.4.2.2).
SELECT coalesce(sum(d_next_o_id), 0)::bigint AS new_orders FROM district
