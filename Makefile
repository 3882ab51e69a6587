# The two commands of the README. Both set themselves up from nothing (see scripts/bootstrap).
VENV := .venv
BIN := $(VENV)/bin
# The suite mostly waits (on PostgreSQL, pgbench, child processes): 6 workers on 2 CPUs
# (docs/design.md, "Keeping the suite fast"). `make test TEST_WORKERS=0` runs it serially.
TEST_WORKERS ?= 6

.PHONY: demo test lint bench-datasets clean

## demo: install, then benchmark the embedded PostgreSQL (sandbox) and print the results
demo:
	@scripts/bootstrap
	$(BIN)/pgdyno bench --pg-version 18 --workload tpcb-like,select-only --scale small -c 1,2 -T 10
	$(BIN)/pgdyno runs list --limit 4

## test: lint, type-check, check the import layers and run the whole test suite (real PostgreSQL, real pgbench)
## on TEST_WORKERS workers (pytest-xdist; tests/parallel.py keeps host changes apart), then print the 15 slowest
test:
	@scripts/bootstrap dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=15

## bench-datasets: the dataset preparation benchmark (naive pgbench -i x3 vs template copies)
bench-datasets:
	@scripts/bootstrap
	$(BIN)/python benchmarks/dataset_prep.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
