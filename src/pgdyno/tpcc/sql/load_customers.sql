-- 3,000 customers per district of warehouses w_lo..w_hi (4.3.3.1). c_last: customers 1..1000
-- take the syllables of c_id - 1, so that every name exists in every district; the others
-- NURand(255, 0, 999) with the load's constant C (2.1.6, 4.3.2.3). a tenth have bad credit.
INSERT INTO customer (c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, c_street_2,
                      c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim,
                      c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt,
                      c_data)
SELECT c, d, w, tpcc_load_text(8, 16, %(pool)s), 'OE',
       tpcc_last_name(CASE WHEN c <= 1000 THEN c - 1
           ELSE mod((tpcc_load_int(0, 255) | tpcc_load_int(0, 999)) + %(c_last)s::integer, 1000)
       END),
       tpcc_load_text(10, 20, %(pool)s), tpcc_load_text(10, 20, %(pool)s),
       tpcc_load_text(10, 20, %(pool)s), tpcc_load_state(), tpcc_load_zip(),
       lpad(floor(random() * 1e16)::bigint::text, 16, '0'), localtimestamp,
       CASE WHEN random() < 0.1 THEN 'BC' ELSE 'GC' END, 50000.00,
       tpcc_load_int(0, 5000) / 10000.0, -10.00, 10.00, 1, 0,
       tpcc_load_text(300, 500, %(pool)s)
FROM generate_series(%(w_lo)s::integer, %(w_hi)s::integer) AS w,
     generate_series(1, 10) AS d, generate_series(1, 3000) AS c
