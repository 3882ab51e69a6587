-- Primary keys (1.3) and the two secondary indexes the transactions need, built after the load.
-- load.py runs these statements in parallel sessions, largest first; a table's second index
-- waits for its primary key's lock, never for anything that waits for it.
ALTER TABLE order_line ADD PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number);
ALTER TABLE stock ADD PRIMARY KEY (s_w_id, s_i_id);
ALTER TABLE customer ADD PRIMARY KEY (c_w_id, c_d_id, c_id);
ALTER TABLE orders ADD PRIMARY KEY (o_w_id, o_d_id, o_id);
-- Payment and order-status by last name (2.5.2.2, 2.6.2.2): the customers of a district with a
-- name, in c_first order.
CREATE INDEX customer_name ON customer (c_w_id, c_d_id, c_last, c_first);
-- Order-status (2.6.2.2): a customer's most recent order.
CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
ALTER TABLE item ADD PRIMARY KEY (i_id);
ALTER TABLE new_order ADD PRIMARY KEY (no_w_id, no_d_id, no_o_id);
ALTER TABLE district ADD PRIMARY KEY (d_w_id, d_id);
ALTER TABLE warehouse ADD PRIMARY KEY (w_id);
