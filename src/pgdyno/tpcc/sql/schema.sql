-- The nine tables of the TPC-C specification v5.11, clause 1.3, without keys: load.py adds the
-- keys and indexes (keys.sql) after the rows, which is faster than maintaining them row by row.
-- Identifiers and counts that the specification writes numeric(N) with no fraction are integers
-- (1.3.1 allows any type that holds the range); money and rates stay numeric with its scale.
-- c_first and c_last sort bytewise (COLLATE "C"): payment and order-status take the middle
-- customer by c_first (2.5.2.2), and the database's own collation must not change which one.
-- warehouse and district are updated by every payment (w_ytd, d_ytd) and new-order
-- (d_next_o_id): fillfactor 10 leaves room for HOT updates on those few, hot rows; customer and
-- stock, updated in place at random, keep a little room as well.
-- w_ytd and d_ytd are wider than the specification's numeric(12, 2): every payment adds up to
-- 5,000.00 to one warehouse, so on one warehouse w_ytd would overflow 10^10 within hours.

CREATE TABLE warehouse (
    w_id integer NOT NULL,
    w_name varchar(10) NOT NULL,
    w_street_1 varchar(20) NOT NULL,
    w_street_2 varchar(20) NOT NULL,
    w_city varchar(20) NOT NULL,
    w_state char(2) NOT NULL,
    w_zip char(9) NOT NULL,
    w_tax numeric(4, 4) NOT NULL,
    w_ytd numeric(18, 2) NOT NULL
) WITH (fillfactor = 10);

CREATE TABLE district (
    d_id smallint NOT NULL,
    d_w_id integer NOT NULL,
    d_name varchar(10) NOT NULL,
    d_street_1 varchar(20) NOT NULL,
    d_street_2 varchar(20) NOT NULL,
    d_city varchar(20) NOT NULL,
    d_state char(2) NOT NULL,
    d_zip char(9) NOT NULL,
    d_tax numeric(4, 4) NOT NULL,
    d_ytd numeric(18, 2) NOT NULL,
    d_next_o_id integer NOT NULL
) WITH (fillfactor = 10);

CREATE TABLE customer (
    c_id integer NOT NULL,
    c_d_id smallint NOT NULL,
    c_w_id integer NOT NULL,
    c_first varchar(16) COLLATE "C" NOT NULL,
    c_middle char(2) NOT NULL,
    c_last varchar(16) COLLATE "C" NOT NULL,
    c_street_1 varchar(20) NOT NULL,
    c_street_2 varchar(20) NOT NULL,
    c_city varchar(20) NOT NULL,
    c_state char(2) NOT NULL,
    c_zip char(9) NOT NULL,
    c_phone char(16) NOT NULL,
    c_since timestamp NOT NULL,
    c_credit char(2) NOT NULL,
    c_credit_lim numeric(12, 2) NOT NULL,
    c_discount numeric(4, 4) NOT NULL,
    c_balance numeric(12, 2) NOT NULL,
    c_ytd_payment numeric(12, 2) NOT NULL,
    c_payment_cnt integer NOT NULL,
    c_delivery_cnt integer NOT NULL,
    c_data varchar(500) NOT NULL
) WITH (fillfactor = 90);

-- No primary key: the specification gives history none (1.3, "Primary Key: none").
CREATE TABLE history (
    h_c_id integer NOT NULL,
    h_c_d_id smallint NOT NULL,
    h_c_w_id integer NOT NULL,
    h_d_id smallint NOT NULL,
    h_w_id integer NOT NULL,
    h_date timestamp NOT NULL,
    h_amount numeric(6, 2) NOT NULL,
    h_data varchar(24) NOT NULL
);

CREATE TABLE new_order (
    no_o_id integer NOT NULL,
    no_d_id smallint NOT NULL,
    no_w_id integer NOT NULL
);

CREATE TABLE orders (
    o_id integer NOT NULL,
    o_d_id smallint NOT NULL,
    o_w_id integer NOT NULL,
    o_c_id integer NOT NULL,
    o_entry_d timestamp NOT NULL,
    o_carrier_id smallint,
    o_ol_cnt smallint NOT NULL,
    o_all_local smallint NOT NULL
);

CREATE TABLE order_line (
    ol_o_id integer NOT NULL,
    ol_d_id smallint NOT NULL,
    ol_w_id integer NOT NULL,
    ol_number smallint NOT NULL,
    ol_i_id integer NOT NULL,
    ol_supply_w_id integer NOT NULL,
    ol_delivery_d timestamp,
    ol_quantity smallint NOT NULL,
    ol_amount numeric(6, 2) NOT NULL,
    ol_dist_info char(24) NOT NULL
);

CREATE TABLE item (
    i_id integer NOT NULL,
    i_im_id integer NOT NULL,
    i_name varchar(24) NOT NULL,
    i_price numeric(5, 2) NOT NULL,
    i_data varchar(50) NOT NULL
);

CREATE TABLE stock (
    s_i_id integer NOT NULL,
    s_w_id integer NOT NULL,
    s_quantity smallint NOT NULL,
    s_dist_01 char(24) NOT NULL,
    s_dist_02 char(24) NOT NULL,
    s_dist_03 char(24) NOT NULL,
    s_dist_04 char(24) NOT NULL,
    s_dist_05 char(24) NOT NULL,
    s_dist_06 char(24) NOT NULL,
    s_dist_07 char(24) NOT NULL,
    s_dist_08 char(24) NOT NULL,
    s_dist_09 char(24) NOT NULL,
    s_dist_10 char(24) NOT NULL,
    s_ytd integer NOT NULL,
    s_order_cnt integer NOT NULL,
    s_remote_cnt integer NOT NULL,
    s_data varchar(50) NOT NULL
) WITH (fillfactor = 90);

-- The customer's last name from a number 0..999: its three digits pick three syllables
-- (4.3.2.3). The loader and the transactions (whose pgbench scripts draw the number) share it.
-- One expression with no FROM, so that the planner inlines it into the loader's INSERT.
CREATE FUNCTION tpcc_last_name(n integer) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('{BAR,OUGHT,ABLE,PRI,PRES,ESE,ANTI,CALLY,ATION,EING}'::text[])[n / 100 + 1]
        || ('{BAR,OUGHT,ABLE,PRI,PRES,ESE,ANTI,CALLY,ATION,EING}'::text[])[mod(n / 10, 10) + 1]
        || ('{BAR,OUGHT,ABLE,PRI,PRES,ESE,ANTI,CALLY,ATION,EING}'::text[])[mod(n, 10) + 1]
$$;
