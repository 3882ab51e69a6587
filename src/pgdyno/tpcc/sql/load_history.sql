-- One history row per customer of warehouses w_lo..w_hi (4.3.3.1).
INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
SELECT c, d, w, d, w, localtimestamp, 10.00, tpcc_load_text(12, 24, %(pool)s)
FROM generate_series(%(w_lo)s::integer, %(w_hi)s::integer) AS w,
     generate_series(1, 10) AS d, generate_series(1, 3000) AS c
