# The two commands of the README. Both set themselves up from nothing (see scripts/bootstrap).
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench-datasets clean

## demo: install, then benchmark the embedded PostgreSQL (sandbox) and print the results
demo:
	@scripts/bootstrap
	$(BIN)/pgdyno bench --pg-version 18 --workload tpcb-like,select-only --scale small -c 1,2 -T 10
	$(BIN)/pgdyno runs list --limit 4

## test: lint, type-check, check the import layers and run the whole test suite (real PostgreSQL, real pgbench)
test:
	@scripts/bootstrap dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo
	$(BIN)/python -m pytest

## bench-datasets: the dataset preparation benchmark (naive pgbench -i x3 vs template copies)
bench-datasets:
	@scripts/bootstrap
	$(BIN)/python benchmarks/dataset_prep.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
