-- Consistency condition 4 (3.3.2.4): sum(o_ol_cnt) = the number of order_line rows in every
-- district. The first district where it fails: warehouse, district, the sum and the row count.
SELECT d_w_id, d_id, coalesce(o.lines, 0), coalesce(l.lines, 0)
FROM district
LEFT JOIN (SELECT o_w_id, o_d_id, sum(o_ol_cnt) AS lines FROM orders GROUP BY o_w_id, o_d_id)
    AS o ON o.o_w_id = d_w_id AND o.o_d_id = d_id
LEFT JOIN (SELECT ol_w_id, ol_d_id, count(*) AS lines FROM order_line GROUP BY ol_w_id, ol_d_id)
    AS l ON l.ol_w_id = d_w_id AND l.ol_d_id = d_id
WHERE coalesce(o.lines, 0) <> coalesce(l.lines, 0)
ORDER BY d_w_id, d_id
LIMIT 1
