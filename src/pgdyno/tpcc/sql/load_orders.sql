-- 3,000 orders per district of warehouses w_lo..w_hi, their 5-15 lines each, and the last 900
-- (o_id 2101..3000) undelivered in new_order (4.3.3.1), in one statement: the lines and the
-- new_order rows come from the orders' RETURNING, so that o_ol_cnt matches the line count
-- (consistency condition 4) without reading the table back. o_c_id is a random permutation of
-- 1..3000 per district: the rank of each order in a random order of its district's orders.
WITH o AS (
    INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt,
                        o_all_local)
    SELECT o, d, w, c, localtimestamp,
           CASE WHEN o < 2101 THEN tpcc_load_int(1, 10) END, tpcc_load_int(5, 15), 1
    FROM (SELECT w, d, o, row_number() OVER (PARTITION BY w, d ORDER BY random()) AS c
          FROM generate_series(%(w_lo)s::integer, %(w_hi)s::integer) AS w,
               generate_series(1, 10) AS d, generate_series(1, 3000) AS o) AS dealt
    ORDER BY w, d, o
    RETURNING o_id, o_d_id, o_w_id, o_entry_d, o_ol_cnt
), undelivered AS (
    INSERT INTO new_order (no_o_id, no_d_id, no_w_id)
    SELECT o_id, o_d_id, o_w_id FROM o WHERE o_id > 2100 ORDER BY o_w_id, o_d_id, o_id
)
INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id,
                        ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)
SELECT o_id, o_d_id, o_w_id, n, tpcc_load_int(1, 100000), o_w_id,
       CASE WHEN o_id < 2101 THEN o_entry_d END, 5,
       CASE WHEN o_id < 2101 THEN 0.00 ELSE tpcc_load_int(1, 999999) / 100.0 END,
       tpcc_load_text(24, 24, %(pool)s)
FROM o, generate_series(1, o.o_ol_cnt) AS n
