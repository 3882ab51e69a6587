"""The import contracts of pyproject.toml ([tool.importlinter], run by `make test` as
`lint-imports`) bite: on a throwaway copy of src/pgdyno with one forbidden import per contract
added, every contract is reported broken, and the tree itself keeps them all.

Each added import is in a new file, so the probes do not depend on which modules exist; some
are written the ways an import hides (inside a function, under ``if TYPE_CHECKING:``), which
count as imports too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# (new file under src/pgdyno, its text, the contracts it alone breaks besides `layers`)
PROBES = [
    ("records/_probe.py", "import pgdyno.cli\n", {"records", "cli"}),
    ("experiment/_probe.py", "from pgdyno import cli\n", {"cli"}),
    ("stats/_probe.py", "def f() -> None:\n    import subprocess\n", {"stats"}),
    (
        "collect/_probe.py",
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from psycopg import sql\n",
        {"psycopg"},
    ),
    ("terminal/_probe.py", "import pgdyno.results\n", {"terminal"}),
    ("experiment/_probe_ssh.py", "import asyncssh\n", {"asyncssh"}),
    ("expressions/_probe.py", "import pgdyno.doctor\n", {"expressions"}),
    ("changes/_probe.py", "import pgdyno.experiment\n", {"changes"}),
    ("postgres/_probe.py", "import pgdyno.host\n", {"systems"}),
    ("results/_probe.py", "import pgdyno.collect\n", {"collect-store"}),
    ("report/_probe.py", "import pgdyno.terminal\n", set()),  # terminal | report: layers only
    # a file cycle between two siblings (the layers contract cannot see it)
    ("plan/_probe_a.py", "from pgdyno.plan import _probe_b\n", {"acyclic"}),
    ("plan/_probe_b.py", "def f() -> None:\n    from pgdyno.plan import _probe_a\n", set()),
]


def contracts() -> dict[str, str]:
    """Contract id -> name, from pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract["name"] for contract in config["contracts"]}


def lint_imports(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}  # the copy, ahead of the installed pgdyno
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)],
        cwd=config.parent, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def copy_tree(target: Path) -> Path:
    """The Python files of src/pgdyno under target/src (data files are not read)."""
    src = ROOT / "src"
    for path in (src / "pgdyno").rglob("*.py"):
        copy = target / "src" / path.relative_to(src)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
    shutil.copyfile(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target / "src"


def test_every_contract_has_a_probe() -> None:
    probed = set().union(*(broken for _, _, broken in PROBES)) | {"layers"}
    assert probed == set(contracts())


def test_the_tree_keeps_every_contract() -> None:
    done = lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in done.stdout


def test_a_forbidden_import_breaks_its_contract(tmp_path: Path) -> None:
    src = copy_tree(tmp_path)
    for file, text, _ in PROBES:
        (src / "pgdyno" / file).write_text(text)
    done = lint_imports(src, tmp_path / "pyproject.toml")
    assert done.returncode == 1, done.stdout + done.stderr
    for name in contracts().values():
        assert f"{name} BROKEN" in done.stdout, done.stdout
    # the report names the importer and the line
    assert "pgdyno.records._probe -> pgdyno.cli (l.1)" in done.stdout, done.stdout
