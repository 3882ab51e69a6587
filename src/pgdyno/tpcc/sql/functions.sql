-- The five transactions of the TPC-C specification v5.11 (clauses 2.4-2.8), each one PL/pgSQL
-- function: one pgbench script calls one of them, so a transaction is one round trip and runs
-- in the transaction pgbench's statement opens (READ COMMITTED, the server's default).
--
-- Lock order, so that the common paths cannot deadlock:
--   payment    warehouse -> district -> one customer (then inserts history);
--   new-order  district -> stock rows in (s_w_id, s_i_id) order (reads warehouse, customer and
--              item without locking them; inserts orders, new_order, order_line);
--   delivery   an advisory lock per warehouse (deliveries of one warehouse take turns), then per
--              district 1..10: its oldest new_order row, that order, its lines, its customer.
-- Every row lock is taken by an UPDATE or DELETE of that row (an UPDATE that changes no key
-- column locks FOR NO KEY UPDATE), never by a SELECT ... FOR UPDATE first. A payment locks its
-- customer (possibly of another warehouse) last and waits for nothing after it; new-order locks
-- no customer; a delivery locks its warehouse's customers in district order. So no wait can
-- close a cycle. A serialization failure or deadlock (40001, 40P01) is left to propagate: pgbench
-- retries the script (--max-tries) and counts the retry.

-- The customer a payment or order-status names by last name: of the n customers of the
-- district with that name, sorted by c_first, the one at position ceil(n / 2) (2.5.2.2).
CREATE FUNCTION tpcc_customer_by_name(p_w_id integer, p_d_id integer, p_last text)
RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT (array_agg(c_id ORDER BY c_first))[(count(*) + 1) / 2]
    FROM customer
    WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = p_last
$$;

-- New-order's work (2.4.2.2), raising SQLSTATE TPC01 at an unused item id (2.4.2.3).
CREATE FUNCTION tpcc_new_order_enter(
    p_w_id integer, p_d_id integer, p_c_id integer,
    p_items integer[], p_supply_w_ids integer[], p_quantities integer[])
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_w_tax numeric;
    v_d_tax numeric;
    v_discount numeric;
    v_o_id integer;
    v_line record;
    v_price numeric;
    v_dist_info char(24);
    v_amount numeric;
    v_total numeric := 0;
BEGIN
    SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w_id;
    SELECT c_discount INTO v_discount
    FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;
    UPDATE district SET d_next_o_id = d_next_o_id + 1
    WHERE d_w_id = p_w_id AND d_id = p_d_id
    RETURNING d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id;
    INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt,
                        o_all_local)
    VALUES (v_o_id, p_d_id, p_w_id, p_c_id, localtimestamp, NULL, cardinality(p_items),
            CASE WHEN p_supply_w_ids <@ ARRAY[p_w_id] THEN 1 ELSE 0 END);
    INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d_id, p_w_id);
    -- The lines in (supply warehouse, item) order, the lock order of stock rows; each keeps its
    -- place in the order as ol_number.
    FOR v_line IN
        SELECT l.i_id, l.w_id, l.quantity, l.n
        FROM unnest(p_items, p_supply_w_ids, p_quantities) WITH ORDINALITY
            AS l(i_id, w_id, quantity, n)
        ORDER BY l.w_id, l.i_id, l.n
    LOOP
        SELECT i_price INTO v_price FROM item WHERE i_id = v_line.i_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'item % is unused: the order rolls back', v_line.i_id
                USING ERRCODE = 'TPC01';
        END IF;
        UPDATE stock
        SET s_quantity = CASE WHEN s_quantity >= v_line.quantity + 10
                              THEN s_quantity - v_line.quantity
                              ELSE s_quantity - v_line.quantity + 91 END,
            s_ytd = s_ytd + v_line.quantity,
            s_order_cnt = s_order_cnt + 1,
            s_remote_cnt = s_remote_cnt + CASE WHEN v_line.w_id = p_w_id THEN 0 ELSE 1 END
        WHERE s_w_id = v_line.w_id AND s_i_id = v_line.i_id
        RETURNING CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
                              WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06
                              WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09
                              ELSE s_dist_10 END
        INTO v_dist_info;
        v_amount := v_line.quantity * v_price;
        v_total := v_total + v_amount;
        INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id,
                                ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)
        VALUES (v_o_id, p_d_id, p_w_id, v_line.n, v_line.i_id, v_line.w_id, NULL,
                v_line.quantity, v_amount, v_dist_info);
    END LOOP;
    -- The order's total (2.4.2.2), which the terminal would display.
    v_total := v_total * (1 - v_discount) * (1 + v_w_tax + v_d_tax);
    RETURN v_o_id;
END
$$;

-- New-order (2.4): enters an order of cardinality(p_items) lines (the three arrays are the
-- lines' item ids, supplying warehouses and quantities) and returns its o_id; NULL when an
-- item id is unused (2.4.1.4: 1% of orders), after undoing everything the order did
-- (2.4.2.3). The undo is an exception raised and caught here rather than an error sent to
-- pgbench: pgbench retries only serialization failures and deadlocks and ends a client at any
-- other error, while a rolled-back order is part of the mix. Catching needs a subtransaction,
-- whose cost every order would pay; so an order whose items all exist skips it (one look at
-- `item`, which the lines read anyway), and only the 1% enter it.
CREATE FUNCTION tpcc_new_order(
    p_w_id integer, p_d_id integer, p_c_id integer,
    p_items integer[], p_supply_w_ids integer[], p_quantities integer[])
RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT count(*) FROM item WHERE i_id = ANY (p_items))
       = (SELECT count(DISTINCT i) FROM unnest(p_items) AS i) THEN
        RETURN tpcc_new_order_enter(p_w_id, p_d_id, p_c_id, p_items, p_supply_w_ids,
                                    p_quantities);
    END IF;
    BEGIN
        RETURN tpcc_new_order_enter(p_w_id, p_d_id, p_c_id, p_items, p_supply_w_ids,
                                    p_quantities);
    EXCEPTION WHEN SQLSTATE 'TPC01' THEN
        RETURN NULL;
    END;
END
$$;

-- Payment (2.5): p_amount paid by the customer p_c_id of district (p_c_w_id, p_c_d_id), or
-- when p_c_id is 0 by the customer of that district named p_last (2.5.2.2), at district
-- (p_w_id, p_d_id); returns the customer's c_id. A bad-credit customer's c_data gets the
-- payment prepended, cut to 500 characters.
CREATE FUNCTION tpcc_payment(
    p_w_id integer, p_d_id integer, p_c_w_id integer, p_c_d_id integer, p_c_id integer,
    p_last text, p_amount numeric)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_w_name text;
    v_d_name text;
    v_c_id integer := p_c_id;
BEGIN
    UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w_id
    RETURNING w_name INTO v_w_name;
    UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w_id AND d_id = p_d_id
    RETURNING d_name INTO v_d_name;
    IF v_c_id = 0 THEN
        v_c_id := tpcc_customer_by_name(p_c_w_id, p_c_d_id, p_last);
    END IF;
    UPDATE customer
    SET c_balance = c_balance - p_amount,
        c_ytd_payment = c_ytd_payment + p_amount,
        c_payment_cnt = c_payment_cnt + 1,
        c_data = CASE WHEN c_credit = 'BC'
                      THEN left(concat_ws(' ', c_id, c_d_id, c_w_id, p_d_id, p_w_id, p_amount)
                                || ' ' || c_data, 500)
                      ELSE c_data END
    WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'payment: no customer % (%) in district % of warehouse %',
            v_c_id, p_last, p_c_d_id, p_c_w_id;
    END IF;
    INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, localtimestamp, p_amount,
            v_w_name || '    ' || v_d_name);
    RETURN v_c_id;
END
$$;

-- Order-status (2.6): the customer p_c_id of district (p_w_id, p_d_id), or when p_c_id is 0
-- the one named p_last (2.6.2.2), its balance, its most recent order and that order's lines
-- (their count and total amount). Reads only.
CREATE FUNCTION tpcc_order_status(
    p_w_id integer, p_d_id integer, p_c_id integer, p_last text,
    OUT customer_id integer, OUT balance numeric, OUT order_id integer,
    OUT carrier_id integer, OUT line_count integer, OUT amount numeric)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    customer_id := p_c_id;
    IF customer_id = 0 THEN
        customer_id := tpcc_customer_by_name(p_w_id, p_d_id, p_last);
    END IF;
    SELECT c_balance INTO balance
    FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = customer_id;
    SELECT o_id, o_carrier_id INTO order_id, carrier_id
    FROM orders WHERE o_w_id = p_w_id AND o_d_id = p_d_id AND o_c_id = customer_id
    ORDER BY o_id DESC LIMIT 1;
    SELECT count(*), sum(ol_amount) INTO line_count, amount
    FROM order_line WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id = order_id;
END
$$;

-- Delivery (2.7): for each district of warehouse p_w_id, its oldest undelivered order (the
-- smallest no_o_id) leaves new_order, gets carrier p_carrier_id, its lines the delivery date,
-- and its customer the order's amount on c_balance; a district with none is skipped (2.7.4.2).
-- Returns the number of orders delivered. The advisory lock (a key pair of this workload's,
-- 0x54504343 "TPCC" and the warehouse) makes two deliveries of one warehouse take turns, as the
-- specification's one deferred queue per warehouse would: else both would pick the same oldest
-- order and one would wait, then find it gone.
CREATE FUNCTION tpcc_delivery(p_w_id integer, p_carrier_id integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_d_id integer;
    v_o_id integer;
    v_c_id integer;
    v_amount numeric;
    v_delivered integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(1414546243, p_w_id);
    FOR v_d_id IN 1..10 LOOP
        DELETE FROM new_order
        WHERE no_w_id = p_w_id AND no_d_id = v_d_id
          AND no_o_id = (SELECT min(no_o_id) FROM new_order
                         WHERE no_w_id = p_w_id AND no_d_id = v_d_id)
        RETURNING no_o_id INTO v_o_id;
        CONTINUE WHEN NOT FOUND;
        UPDATE orders SET o_carrier_id = p_carrier_id
        WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id
        RETURNING o_c_id INTO v_c_id;
        WITH delivered AS (
            UPDATE order_line SET ol_delivery_d = localtimestamp
            WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id
            RETURNING ol_amount
        )
        SELECT coalesce(sum(ol_amount), 0) INTO v_amount FROM delivered;
        UPDATE customer
        SET c_balance = c_balance + v_amount, c_delivery_cnt = c_delivery_cnt + 1
        WHERE c_w_id = p_w_id AND c_d_id = v_d_id AND c_id = v_c_id;
        v_delivered := v_delivered + 1;
    END LOOP;
    RETURN v_delivered;
END
$$;

-- Stock-level (2.8): how many distinct items of the last 20 orders of district (p_w_id,
-- p_d_id) have fewer than p_threshold units in the warehouse's stock. Reads only.
CREATE FUNCTION tpcc_stock_level(p_w_id integer, p_d_id integer, p_threshold integer)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_next integer;
    v_low integer;
BEGIN
    SELECT d_next_o_id INTO v_next FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
    SELECT count(DISTINCT s_i_id) INTO v_low
    FROM order_line
    JOIN stock ON s_w_id = p_w_id AND s_i_id = ol_i_id
    WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id
      AND ol_o_id >= v_next - 20 AND ol_o_id < v_next
      AND s_quantity < p_threshold;
    RETURN v_low;
END
$$;
