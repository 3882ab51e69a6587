-- Helpers of the load only (dropped by load_cleanup.sql). Each is one expression with no FROM,
-- VOLATILE like the random() it calls, so that the planner inlines it into the INSERTs.

-- A random integer in lo..hi, uniform (the specification's "random within [x .. y]", 2.1.4).
CREATE FUNCTION tpcc_load_int(lo integer, hi integer) RETURNS integer
LANGUAGE sql VOLATILE AS $$
    SELECT lo + floor(random() * (hi - lo + 1))::integer
$$;

-- A random a-string of lo..hi characters (4.3.2.2): a window of `pool`, random lowercase
-- letters and digits that load.py passes (no upper case, so "ORIGINAL" is in a row only where
-- the loader puts it). The pool is bytea: cutting a window of text in a multibyte encoding
-- walks it from its start, of bytea not.
CREATE FUNCTION tpcc_load_text(lo integer, hi integer, pool bytea) RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT encode(substring(pool FROM 1 + floor(random() * (length(pool) - hi + 1))::integer
                                 FOR lo + floor(random() * (hi - lo + 1))::integer), 'escape')
$$;

-- An a-string of 26..50 characters for i_data and s_data: in 10% of rows "ORIGINAL" replaces
-- eight of its characters at a random position (4.3.3.1). `original` and `at` are uniform
-- random numbers in [0, 1), and `body` a random a-string, drawn once for the row in a subquery of
-- the INSERT (whose volatile output the planner does not flatten into several calls).
CREATE FUNCTION tpcc_load_data(body text, original double precision, at double precision)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN original < 0.1
        THEN overlay(body PLACING 'ORIGINAL' FROM 1 + floor(at * (length(body) - 7))::integer)
        ELSE body END
$$;

-- A zip code: four random digits, then 11111 (4.3.2.7).
CREATE FUNCTION tpcc_load_zip() RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT lpad(floor(random() * 10000)::integer::text, 4, '0') || '11111'
$$;

-- A state: two random letters (4.3.3.1).
CREATE FUNCTION tpcc_load_state() RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT chr(65 + floor(random() * 26)::integer) || chr(65 + floor(random() * 26)::integer)
$$;
