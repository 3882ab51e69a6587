-- After the load: visibility map, hint bits and planner statistics of every table, largest
-- first (load.py runs these in parallel sessions).
VACUUM (ANALYZE) order_line;
VACUUM (ANALYZE) stock;
VACUUM (ANALYZE) customer;
VACUUM (ANALYZE) history;
VACUUM (ANALYZE) orders;
VACUUM (ANALYZE) item;
VACUUM (ANALYZE) new_order;
VACUUM (ANALYZE) district;
VACUUM (ANALYZE) warehouse;
