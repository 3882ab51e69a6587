DROP FUNCTION tpcc_load_int(integer, integer);
DROP FUNCTION tpcc_load_text(integer, integer, bytea);
DROP FUNCTION tpcc_load_data(text, double precision, double precision);
DROP FUNCTION tpcc_load_zip();
DROP FUNCTION tpcc_load_state();
