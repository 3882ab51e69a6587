"""The TPC-C-like workload's SQL, one `.sql` file per step (schema, load steps, keys, functions),
run with `Client.run`; the queries on its tables are in postgres/queries/tpcc_*.sql."""

from functools import cache
from importlib.resources import files


@cache
def load(name: str) -> str:
    """The text of `sql/<name>.sql`."""
    return files(__package__).joinpath(f"{name}.sql").read_text()


def statements(name: str) -> list[str]:
    """The statements of `sql/<name>.sql`, for files of plain DDL that may run in any order
    (each statement ends with `;` at the end of a line; no function bodies)."""
    text = "\n".join(line for line in load(name).splitlines() if not line.lstrip().startswith("--"))
    parts = (part.strip().rstrip(";").strip() for part in f"{text}\n".split(";\n"))
    return [part for part in parts if part]
