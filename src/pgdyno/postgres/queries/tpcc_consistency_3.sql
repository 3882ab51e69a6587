-- Consistency condition 3 (3.3.2.3): max(no_o_id) - min(no_o_id) + 1 = the number of new_order
-- rows in every district. The first district where it fails: warehouse, district, the id span
-- and the row count.
SELECT no_w_id, no_d_id, max(no_o_id) - min(no_o_id) + 1, count(*)
FROM new_order
GROUP BY no_w_id, no_d_id
HAVING max(no_o_id) - min(no_o_id) + 1 <> count(*)
ORDER BY no_w_id, no_d_id
LIMIT 1
