"""SQL text, one `.sql` file per query (and per server-version range where they differ)."""

from functools import cache
from importlib.resources import files


@cache
def load(name: str) -> str:
    """The text of `queries/<name>.sql`."""
    return files(__package__).joinpath(f"{name}.sql").read_text()
