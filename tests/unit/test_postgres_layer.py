"""Only postgres/ speaks SQL to a server: every other module calls its typed functions, which
return frozen records. Checked on the source tree: outside src/pgdyno/postgres no module calls
a client's `rows` or `records`, imports the SQL files (`pgdyno.postgres.queries`) or composes a
statement (`compose`, `identifier`, `literal`); and each rule catches a probe that breaks it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pgdyno"
POSTGRES = PACKAGE / "postgres"
PRIVATE_CALLS = frozenset({"rows", "records"})  # Client's positional and record readers
COMPOSING = frozenset({"compose", "identifier", "literal"})  # pgdyno.postgres.client's


def _imported_modules(tree: ast.Module) -> set[str]:
    """Names bound to a module by `import x` or `from pgdyno.pkg import module`:
    `ladders.rows(...)` in report/ is a module's function, not a client's."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pgdyno"):
            target = PACKAGE.parent.joinpath(*node.module.split("."))
            names.update(
                a.asname or a.name for a in node.names if (target / f"{a.name}.py").is_file()
            )
    return names


def violations(source: str, where: str) -> list[str]:
    """What in a module outside postgres/ talks to PostgreSQL past the typed layer."""
    tree = ast.parse(source)
    modules = _imported_modules(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PRIVATE_CALLS
            and not (isinstance(node.func.value, ast.Name) and node.func.value.id in modules)
        ):
            found.append(f"{where}:{node.lineno} calls .{node.func.attr}()")
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "pgdyno.postgres.queries" or (
                node.module == "pgdyno.postgres" and any(a.name == "queries" for a in node.names)
            ):
                found.append(f"{where}:{node.lineno} imports postgres/queries")
            if node.module == "pgdyno.postgres.client":
                names = {a.name for a in node.names} & COMPOSING
                found.extend(f"{where}:{node.lineno} imports {n}" for n in sorted(names))
    return found


def test_no_module_outside_postgres_talks_sql_to_a_server():
    found = [
        problem
        for path in sorted(PACKAGE.rglob("*.py"))
        if POSTGRES not in path.parents
        for problem in violations(path.read_text(), str(path.relative_to(PACKAGE)))
    ]
    assert found == []


def test_each_rule_catches_its_probe():
    probes = {
        "client.rows('SELECT 1')": "calls .rows()",
        "bench.records(q, R)": "calls .records()",
        "from pgdyno.postgres.queries import load": "imports postgres/queries",
        "from pgdyno.postgres import queries": "imports postgres/queries",
        "from pgdyno.postgres.client import Client, compose": "imports compose",
    }
    for source, expected in probes.items():
        assert violations(source, "probe.py") == [f"probe.py:1 {expected}"], source


def test_a_modules_own_rows_function_is_not_a_client():
    assert violations("from pgdyno.report import ladders\nladders.rows(a, b)\n", "p.py") == []
