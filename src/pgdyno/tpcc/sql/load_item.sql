-- The 100,000 items (4.3.3.1), once for the whole database.
INSERT INTO item (i_id, i_im_id, i_name, i_price, i_data)
SELECT i, tpcc_load_int(1, 10000), tpcc_load_text(14, 24, %(pool)s),
       tpcc_load_int(100, 10000) / 100.0, tpcc_load_data(body, original, at)
FROM (SELECT i, tpcc_load_text(26, 50, %(pool)s) AS body, random() AS original, random() AS at
      FROM generate_series(1, 100000) AS i) AS drawn
