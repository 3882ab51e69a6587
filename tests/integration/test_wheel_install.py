"""pgdyno installs as a wheel into a clean virtual environment, with its data files, as pipx
would install it: the wheel built from this tree, its dependencies at the lock's versions
(requirements/run.txt), nothing from the source tree on the path. Then commands that read the
packaged knowledge (plan policy, recorded pg_settings, the tune knowledge base and the doctor's
rules, SQL files) run from it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900,
                            check=False)  # fmt: skip
    assert result.returncode == 0, (argv, result.stdout[-2000:], result.stderr[-2000:])
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin directory of a fresh venv holding the built wheel."""
    work = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(work), str(ROOT)],
        cwd=work)  # fmt: skip
    wheels = list(work.glob("pgdyno-*.whl"))
    assert len(wheels) == 1, wheels
    run([sys.executable, "-m", "venv", str(work / "venv")], cwd=work)
    # --no-compile: byte-compiling the dependencies took two thirds of the install (13.5 s
    # against 4.9 s alone); Python compiles what the tests import when they import it.
    pip = [str(work / "venv/bin/python"), "-m", "pip", "install", "--quiet", "--no-compile",
           "--disable-pip-version-check"]  # fmt: skip
    run([*pip, "-c", str(ROOT / "requirements/run.txt"), str(wheels[0])], cwd=work)
    return work / "venv/bin"


def test_the_wheel_carries_its_data_files(installed: Path, tmp_path: Path) -> None:
    found = run([str(installed / "python"), "-c", "import pgdyno, pathlib; "
                 "print(pathlib.Path(pgdyno.__file__).parent)"], cwd=tmp_path)  # fmt: skip
    package = Path(found.stdout.strip())
    assert ROOT not in package.parents  # the installed copy, not the source tree
    for data in ("data/host_settings.toml", "data/start_constraints.toml", "data/tune.toml",
                 "data/pg_settings/catalog.csv", "doctor/rules/kernel.toml",
                 "postgres/queries/server_info.sql", "results/migrations",
                 "tune/templates/README.txt.j2", "tpcc/sql/functions.sql", "tpcc/sizes.toml",
                 "tpcc/scripts/_common.j2", "tpcc/scripts/new_order.sql.j2"):  # fmt: skip
        assert (package / data).exists(), data


def test_commands_run_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    pgdyno = str(installed / "pgdyno")
    checked = run([pgdyno, "plan", "check", str(ROOT / "examples/aa.toml"), "--workdir",
                   str(tmp_path / "w")], cwd=tmp_path)  # fmt: skip
    assert "valid" in checked.stdout
    tuned = run([pgdyno, "tune", "--ram", "16GB", "--cpus", "4", "--pg-version", "18",
                 "--profile", "oltp", "--json"], cwd=tmp_path)  # fmt: skip
    assert '"shared_buffers"' in tuned.stdout
    out = tmp_path / "out"
    run([pgdyno, "tune", "--ram", "16GB", "--cpus", "4", "--pg-version", "18", "--profile",
         "oltp", "--out", str(out)], cwd=tmp_path)  # fmt: skip
    assert "shared_buffers = " in (out / "postgresql.pgdyno.conf").read_text()
    assert "Roll back:" in (out / "README.txt").read_text()  # rendered from packaged templates
