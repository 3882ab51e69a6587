-- Consistency condition 1 (3.3.2.1): w_ytd = sum(d_ytd) in every warehouse. The first
-- warehouse where it fails: its id, w_ytd and the sum.
SELECT w_id, w_ytd, sum(d_ytd)
FROM warehouse JOIN district ON d_w_id = w_id
GROUP BY w_id, w_ytd
HAVING w_ytd <> sum(d_ytd)
ORDER BY w_id
LIMIT 1
