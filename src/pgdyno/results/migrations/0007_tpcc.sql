-- The TPC-C-like workload (issue 21): a run's NOPM, TPM, per-type figures, mix and consistency.

-- JSON as store/encode.py `tpcc_json` writes it; NULL for other workloads' runs and for runs
-- stored before this column existed.
ALTER TABLE runs ADD COLUMN tpcc TEXT;
