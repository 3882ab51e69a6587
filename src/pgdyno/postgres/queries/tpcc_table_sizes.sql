-- The heap size of the nine tables (with TOAST, free space and visibility maps, without
-- indexes) and the database's size.
SELECT sum(pg_table_size(to_regclass(t)))::bigint AS table_bytes,
       pg_database_size(current_database()) AS total_bytes
FROM unnest(ARRAY['warehouse', 'district', 'customer', 'history', 'new_order', 'orders',
                  'order_line', 'item', 'stock']) AS t
