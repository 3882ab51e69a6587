"""The TPC-C-like pgbench scripts as rendered: weights, one round trip each, the options."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pgdyno.tpcc import nurand
from pgdyno.tpcc.scripts import (
    KEYING_S,
    THINK_MEAN_S,
    TRANSACTIONS,
    TpccOptions,
    render,
    scripts_directory,
    write_scripts,
)

NAMES = [name for name, _ in TRANSACTIONS]


def statements(text: str) -> list[str]:
    """The SQL of a script: every line that is neither a meta-command nor a comment."""
    return [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith("\\") and not line.startswith("--")
    ]


def test_weights_meet_the_specifications_minimums():
    weights = dict(TRANSACTIONS)
    assert NAMES == ["new_order", "payment", "order_status", "delivery", "stock_level"]
    assert sum(weights.values()) == 100
    # 5.2.3: payment >= 43%, order-status, delivery, stock-level >= 4% each.
    assert weights["payment"] >= 43
    assert all(weights[name] >= 4 for name in ("order_status", "delivery", "stock_level"))


def test_write_scripts_renders_the_five_in_order(tmp_path: Path):
    written = write_scripts(tmp_path / "new", TpccOptions())
    assert [(name, weight) for name, weight, _ in written] == list(TRANSACTIONS)
    for name, _, path in written:
        assert path == tmp_path / "new" / f"tpcc_{name}.sql"
        assert path.read_text() == render(name, TpccOptions())


def test_each_script_is_one_round_trip_calling_its_function():
    for name in NAMES:
        for options in (TpccOptions(), TpccOptions(all_warehouses=True, keying_thinking=True)):
            sql = statements(render(name, options))
            assert len(sql) == 1, (name, sql)
            assert re.match(rf"SELECT (\* FROM )?tpcc_{name}\(", sql[0]), sql


def test_home_warehouse_by_default_any_warehouse_as_an_option():
    for name in NAMES:
        home = render(name, TpccOptions())
        anywhere = render(name, TpccOptions(all_warehouses=True))
        assert "\\set w_id mod(:client_id, :scale) + 1\n" in home
        assert "\\set w_id random(1, :scale)\n" in anywhere
        assert ":client_id, :scale" not in anywhere.split("\\set w_id")[1].split("\n")[0]


def test_keying_and_think_times_only_when_asked():
    for name in NAMES:
        plain = render(name, TpccOptions())
        assert "\\sleep" not in plain
        timed = render(name, TpccOptions(keying_thinking=True))
        lines = timed.splitlines()
        select = next(i for i, line in enumerate(lines) if line.startswith("SELECT"))
        # Keying before the transaction, thinking after it (5.2.5.7, 5.2.5.4).
        assert lines[select - 1] == f"\\sleep {KEYING_S[name]} s"
        mean_ms = THINK_MEAN_S[name] * 1000
        assert f"* {mean_ms}, {10 * mean_ms}))" in lines[select + 2]
        assert lines[select + 3] == "\\sleep :think_ms ms"


def test_rendering_is_deterministic_and_uses_the_run_constants():
    assert render("payment", TpccOptions()) == render("payment", TpccOptions())
    assert nurand.valid_last_name_delta(nurand.C_LAST_LOAD, nurand.C_LAST_RUN)
    payment = render("payment", TpccOptions())
    assert f"mod((random(0, 255) | random(0, 999)) + {nurand.C_LAST_RUN}, 1000)" in payment
    assert f"mod((random(0, 1023) | random(1, 3000)) + {nurand.C_ID}, 3000) + 1" in payment
    new_order = render("new_order", TpccOptions())
    assert f"mod((random(0, 8191) | random(1, 100000)) + {nurand.C_ITEM}, 100000) + 1" in (
        new_order
    )
    # Fifteen lines drawn, the first ol_cnt - 1 sent with the last (unused 1% of the time).
    assert new_order.count("\\set i") == 15
    assert "then 100001 else :i15 end" in new_order


def test_script_directories_of_ended_processes_are_removed_at_the_next_start(tmp_path: Path):
    """A child process makes its directory and ends without removing it, as a SIGKILLed bench
    does: the next `scripts_directory` removes it, and keeps this process's own and any
    directory named otherwise."""
    made = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from pgdyno.tpcc.scripts import scripts_directory; "
         "print(scripts_directory(Path(sys.argv[1])))", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    ended = Path(made.stdout.strip())
    assert ended.is_dir() and ended.name.startswith(f"tpcc-scripts-{made_pid(ended)}-")
    mine = scripts_directory(tmp_path)
    foreign = tmp_path / "tpcc-scripts-unnamed"
    foreign.mkdir()
    again = scripts_directory(tmp_path)
    assert not ended.exists()
    assert mine.is_dir() and again.is_dir() and foreign.is_dir()


def made_pid(path: Path) -> int:
    return int(path.name.split("-")[2])
