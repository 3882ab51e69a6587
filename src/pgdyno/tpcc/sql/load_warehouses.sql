-- Warehouses w_lo..w_hi and their ten districts each (4.3.3.1): w_ytd 300,000.00, d_ytd
-- 30,000.00 (so that consistency condition 1 holds), d_next_o_id 3001.
WITH w AS (
    INSERT INTO warehouse (w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax,
                           w_ytd)
    SELECT w, tpcc_load_text(6, 10, %(pool)s), tpcc_load_text(10, 20, %(pool)s),
           tpcc_load_text(10, 20, %(pool)s), tpcc_load_text(10, 20, %(pool)s), tpcc_load_state(),
           tpcc_load_zip(), tpcc_load_int(0, 2000) / 10000.0, 300000.00
    FROM generate_series(%(w_lo)s::integer, %(w_hi)s::integer) AS w
    RETURNING w_id
)
INSERT INTO district (d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip,
                      d_tax, d_ytd, d_next_o_id)
SELECT d, w_id, tpcc_load_text(6, 10, %(pool)s), tpcc_load_text(10, 20, %(pool)s),
       tpcc_load_text(10, 20, %(pool)s), tpcc_load_text(10, 20, %(pool)s), tpcc_load_state(),
       tpcc_load_zip(), tpcc_load_int(0, 2000) / 10000.0, 30000.00, 3001
FROM w, generate_series(1, 10) AS d
ORDER BY w_id, d
