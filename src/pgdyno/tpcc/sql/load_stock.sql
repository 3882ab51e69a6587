-- 100,000 stock rows per warehouse w_lo..w_hi (4.3.3.1); a tenth of s_data hold "ORIGINAL".
INSERT INTO stock (s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04,
                   s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd,
                   s_order_cnt, s_remote_cnt, s_data)
SELECT i, w, tpcc_load_int(10, 100),
       tpcc_load_text(24, 24, %(pool)s), tpcc_load_text(24, 24, %(pool)s),
       tpcc_load_text(24, 24, %(pool)s), tpcc_load_text(24, 24, %(pool)s),
       tpcc_load_text(24, 24, %(pool)s), tpcc_load_text(24, 24, %(pool)s),
       tpcc_load_text(24, 24, %(pool)s), tpcc_load_text(24, 24, %(pool)s),
       tpcc_load_text(24, 24, %(pool)s), tpcc_load_text(24, 24, %(pool)s),
       0, 0, 0, tpcc_load_data(body, original, at)
FROM (SELECT w, i, tpcc_load_text(26, 50, %(pool)s) AS body, random() AS original,
             random() AS at
      FROM generate_series(%(w_lo)s::integer, %(w_hi)s::integer) AS w,
           generate_series(1, 100000) AS i) AS drawn
