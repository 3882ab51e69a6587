-- Consistency condition 2 (3.3.2.2): d_next_o_id - 1 = max(o_id) = max(no_o_id) in every
-- district (a district whose orders are all delivered has no no_o_id to compare). The first
-- district where it fails: warehouse, district, d_next_o_id - 1, max(o_id), max(no_o_id).
SELECT d_w_id, d_id, d_next_o_id - 1, max_o_id, max_no_o_id
FROM district,
     LATERAL (SELECT max(o_id) AS max_o_id FROM orders
              WHERE o_w_id = d_w_id AND o_d_id = d_id) AS o,
     LATERAL (SELECT max(no_o_id) AS max_no_o_id FROM new_order
              WHERE no_w_id = d_w_id AND no_d_id = d_id) AS n
WHERE max_o_id IS DISTINCT FROM d_next_o_id - 1
   OR max_no_o_id <> d_next_o_id - 1
ORDER BY d_w_id, d_id
LIMIT 1
