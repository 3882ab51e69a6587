"""The import layers of src/pgdyno hold: every module's imports, read from its AST.

Bottom up: records (src/pgdyno/records/) depend on nothing; stats/ are pure functions of records;
renderers take records (and the pure verdicts and audits computed from them) and return text;
one package per external system above them; cli/ on top, and nothing in the library imports it.
Imports inside functions and under ``if TYPE_CHECKING:`` count too: a layer is a design
dependency, not only a runtime one. Nothing under src/ is imported or run here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(frozen=True)
class Import:
    importer: str  # dotted name of the importing module
    file: str  # path from the repository root, for the report
    line: int
    target: str  # dotted absolute name of the imported module (or of the module a name is from)


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    broken_by: Callable[[Import], bool]


def within(name: str, *prefixes: str) -> bool:
    """
    >>> within("pgdyno.stats.steady", "pgdyno.stats"), within("pgdyno.statsx", "pgdyno.stats")
    (True, False)
    """
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _top(name: str) -> str:
    return name.partition(".")[0]


# What a renderer may import from pgdyno: the bottom layer, pure statistics, other renderers,
# the metric catalog (knowledge as data), and the pure doctor audit whose findings they draw
# (a comparison's verdicts are statistics: stats.analysis).
RENDER_MAY_IMPORT = (
    "pgdyno.records",
    "pgdyno.errors",
    "pgdyno.textsafe",
    "pgdyno.stats",
    "pgdyno.render",
    "pgdyno.metrics",  # labels, units and digits of each series
    "pgdyno.doctor.evaluate",  # Audit, Finding, Unchecked
    "pgdyno.doctor.rules",  # LAYERS, and the Rule a finding carries
    "pgdyno.tune.model",  # the configuration `pgdyno tune` computed, and what --apply did
)
STATS_MAY_IMPORT = ("pgdyno.stats", "pgdyno.records", "pgdyno.errors")
# Standard and third-party modules that reach files, processes, sockets, databases or threads.
IO_MODULES = frozenset(
    {
        "asyncio", "ctypes", "fcntl", "glob", "http", "io", "multiprocessing", "os", "pathlib",
        "psycopg", "psycopg_pool", "select", "selectors", "shutil", "signal", "socket", "sqlite3",
        "subprocess", "tempfile", "threading", "urllib",
    }
)  # fmt: skip


def _records_reach_up(imp: Import) -> bool:
    return (
        within(imp.importer, "pgdyno.records")
        and within(imp.target, "pgdyno")
        and not within(imp.target, "pgdyno.records")
    )


def _renderer_reaches_past_records(imp: Import) -> bool:
    return (
        within(imp.importer, "pgdyno.render")
        and within(imp.target, "pgdyno")
        and not within(imp.target, *RENDER_MAY_IMPORT)
    )


def _library_imports_cli(imp: Import) -> bool:
    in_cli = within(imp.importer, "pgdyno.cli") or imp.importer == "pgdyno.__main__"
    return not in_cli and within(imp.target, "pgdyno.cli")


def _driver_outside_postgres(imp: Import) -> bool:
    return _top(imp.target).startswith("psycopg") and not within(imp.importer, "pgdyno.postgres")


def _stats_do_io(imp: Import) -> bool:
    if not within(imp.importer, "pgdyno.stats"):
        return False
    if within(imp.target, "pgdyno"):
        return not within(imp.target, *STATS_MAY_IMPORT)
    return _top(imp.target) in IO_MODULES or _top(imp.target).startswith("psycopg")


def _server_changes_reach_up(imp: Import) -> bool:
    """changes/ (one owner of server changes) and the one journal sit below tune/ and
    experiment/: they import neither, and neither imports the other's way of changing a server."""
    low = within(imp.importer, "pgdyno.changes", "pgdyno.journal", "pgdyno.host")
    if low and within(imp.target, "pgdyno.tune", "pgdyno.experiment", "pgdyno.cli"):
        return True
    return within(imp.importer, "pgdyno.experiment") and within(imp.target, "pgdyno.tune")


def _knowledge_reaches_up(imp: Import) -> bool:
    """knowledge/ (the expression language, the locator, the loader) sits below doctor/, tune/,
    changes/ and plan/, which all read knowledge files through it."""
    return (
        within(imp.importer, "pgdyno.knowledge")
        and within(imp.target, "pgdyno")
        and not within(imp.target, "pgdyno.knowledge", "pgdyno.errors")
    )


RULES = (
    Rule(
        "records", "records are the bottom layer and import nothing from pgdyno", _records_reach_up
    ),
    Rule(
        "render",
        "renderers take records only: they import " + ", ".join(RENDER_MAY_IMPORT),
        _renderer_reaches_past_records,
    ),
    Rule(
        "cli",
        "the library never imports pgdyno.cli (only cli/ and __main__ do)",
        _library_imports_cli,
    ),
    Rule(
        "psycopg",
        "only src/pgdyno/postgres/ imports the PostgreSQL driver",
        _driver_outside_postgres,
    ),
    Rule(
        "changes",
        "changes/, journal.py and host/ are below tune/ and experiment/, and experiment/ does "
        "not import tune/",
        _server_changes_reach_up,
    ),
    Rule(
        "knowledge",
        "knowledge/ imports nothing of pgdyno but itself and errors.py",
        _knowledge_reaches_up,
    ),
    Rule(
        "stats",
        "stats/ are pure: no I/O module and nothing from pgdyno but " + ", ".join(STATS_MAY_IMPORT),
        _stats_do_io,
    ),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted((SRC / "pgdyno").rglob("*.py"))}


def _from_base(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` reads from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    package = importer if is_package else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports_in(source: str, importer: str, file: str, is_package: bool = False) -> Iterator[Import]:
    for node in ast.walk(ast.parse(source, filename=file)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(importer, file, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(importer, is_package, node)
            # `from pgdyno import cli` imports the module pgdyno.cli, not a name of pgdyno
            members = {f"{base}.{alias.name}" for alias in node.names}
            targets = {member if member in modules() else base for member in members}
            for target in sorted(targets):
                yield Import(importer, file, node.lineno, target)


@cache
def tree_imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for name, path in modules().items():
        file = str(path.relative_to(SRC.parent))
        found.extend(imports_in(path.read_text(), name, file, path.name == "__init__.py"))
    return tuple(found)


def violations(rule: Rule, imports: tuple[Import, ...]) -> list[str]:
    return [
        f"{imp.file}:{imp.line}: {imp.importer} imports {imp.target} ({rule.name}: {rule.why})"
        for imp in imports
        if rule.broken_by(imp)
    ]


def test_the_whole_tree_is_read() -> None:
    # A walker that found no module would let every rule below pass.
    names = set(modules())
    assert {
        "pgdyno.records",
        "pgdyno.render.terminal",
        "pgdyno.cli.app",
        "pgdyno.postgres.client",
    } <= names
    assert any(
        imp.importer == "pgdyno.render.terminal" and imp.target == "pgdyno.records"
        for imp in tree_imports()
    )


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_layer_rule_holds(rule: Rule) -> None:
    broken = violations(rule, tree_imports())
    assert not broken, "\n".join(broken)


# Each rule against an import that breaks it and one that does not: a rule that cannot fire, or
# fires on everything, is caught here. (importer, source)
BREAKS = {
    "records": [
        ("pgdyno.records.run", "from pgdyno.pgbench.output import Summary"),
        ("pgdyno.records.postgres", "from pgdyno import errors"),
        ("pgdyno.records.run", "from ..postgres import cluster"),
    ],
    "render": [
        ("pgdyno.render.terminal", "from pgdyno.postgres.cluster import Status"),
        ("pgdyno.render.terminal", "from ..postgres import binaries"),
        ("pgdyno.render.doctor", "from pgdyno.store.results import ResultsStore"),
    ],
    "cli": [
        ("pgdyno.report.html", "from pgdyno.cli.common import console"),
        ("pgdyno.store.results", "from pgdyno import cli"),
        ("pgdyno.experiment.bench", "def f():\n    import pgdyno.cli.progress"),
    ],
    "psycopg": [
        ("pgdyno.collect.pgstats", "import psycopg"),
        ("pgdyno.pgbench.dataset", "from psycopg import sql"),
        ("pgdyno.collect.pgstats", "if TYPE_CHECKING:\n    from psycopg.rows import dict_row"),
    ],
    "changes": [
        ("pgdyno.experiment.server_sets", "from pgdyno.tune.apply import alter_system"),
        ("pgdyno.changes.restore", "from pgdyno.tune.apply import ServerHandle"),
        ("pgdyno.journal", "from pgdyno.experiment import target"),
    ],
    "knowledge": [
        ("pgdyno.knowledge.load", "from pgdyno.doctor.snapshot import NAMESPACES"),
        ("pgdyno.knowledge.expr", "from ..tune import model"),
    ],
    "stats": [
        ("pgdyno.stats.steady", "import subprocess"),
        ("pgdyno.stats.steady", "from pathlib import Path"),
        ("pgdyno.stats.steady", "from pgdyno.store.results import ResultsStore"),
        ("pgdyno.stats.histogram", "def f():\n    import sqlite3"),
    ],
}
KEEPS = {
    "records": [
        ("pgdyno.records", "from pgdyno.records.run import RunRecord\nfrom pathlib import Path")
    ],
    "render": [
        (
            "pgdyno.render.terminal",
            "from pgdyno.records import Status\nfrom rich.table import Table",
        ),
        ("pgdyno.render.doctor", "from ..doctor.evaluate import Audit"),
    ],
    "cli": [
        ("pgdyno.__main__", "from pgdyno.cli import run"),
        ("pgdyno.cli.app", "from pgdyno import cli"),
    ],
    "psycopg": [("pgdyno.postgres.client", "import psycopg\nfrom psycopg import sql")],
    "changes": [
        ("pgdyno.tune.apply", "from pgdyno.changes.changer import ServerChanger"),
        ("pgdyno.experiment.server_sets", "from pgdyno.changes.handles import ServerHandle"),
    ],
    "knowledge": [("pgdyno.knowledge.load", "from pgdyno.errors import PgdynoError\nimport ast")],
    "stats": [("pgdyno.stats.steady", "import math\nfrom pgdyno.records import Sample")],
}
RULE = {rule.name: rule for rule in RULES}


def _check(rule: str, importer: str, source: str) -> list[str]:
    return violations(RULE[rule], tuple(imports_in(source, importer, "<example>")))


@pytest.mark.parametrize(
    ("rule", "importer", "source"), [(r, *c) for r, cs in BREAKS.items() for c in cs]
)
def test_rule_fires_on_a_bad_import(rule: str, importer: str, source: str) -> None:
    assert _check(rule, importer, source)


@pytest.mark.parametrize(
    ("rule", "importer", "source"), [(r, *c) for r, cs in KEEPS.items() for c in cs]
)
def test_rule_lets_an_allowed_import_pass(rule: str, importer: str, source: str) -> None:
    assert _check(rule, importer, source) == []


def test_a_violation_names_file_line_and_rule() -> None:
    broken = _check(
        "render", "pgdyno.render.terminal", "import os\nfrom pgdyno.postgres.cluster import Status"
    )
    assert broken == [
        "<example>:2: pgdyno.render.terminal imports pgdyno.postgres.cluster (render: "
        + RULE["render"].why
        + ")"
    ]
