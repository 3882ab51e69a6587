"""The five pgbench scripts of the TPC-C-like workload, rendered from Jinja2 templates.

Each script draws its transaction's inputs with pgbench expressions (NURand written out with the
constants of nurand.py) and makes one round trip: `SELECT tpcc_<name>(...)`. pgbench picks a
script per transaction by weight (`-f new_order.sql@45 ...`), gives each client its home
warehouse through :client_id and the warehouse count through :scale (`-s W`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Final

import jinja2

from pgdyno.process import same_process, start_time
from pgdyno.records.tpcc import TpccOptions
from pgdyno.templating import template_environment
from pgdyno.tpcc import nurand

# The mix (5.2.3): payment at least 43%, order-status, delivery and stock-level at least 4%
# each, new-order the rest. These weights meet the minimums exactly.
TRANSACTIONS: Final = (
    ("new_order", 45),
    ("payment", 43),
    ("order_status", 4),
    ("delivery", 4),
    ("stock_level", 4),
)

# 5.2.5.7 keying times and 5.2.5.4 mean think times, in seconds. With them on, a terminal
# completes a transaction every 23 s on average, and a warehouse's ten terminals cannot exceed
# about 12.86 new orders per minute: a higher NOPM per warehouse means they were off.
KEYING_S: Final = {
    "new_order": 18, "payment": 3, "order_status": 2, "delivery": 2, "stock_level": 2,
}  # fmt: skip
THINK_MEAN_S: Final = {
    "new_order": 12, "payment": 12, "order_status": 10, "delivery": 5, "stock_level": 5,
}  # fmt: skip


# `tpcc-scripts-<pid>-<start time>-<random>`: the process that owns the directory, so a later
# pgdyno can tell one left by a killed process (SIGKILL runs no clean-up) from one in use.
SCRIPTS_PREFIX: Final = "tpcc-scripts-"
_OWNED = re.compile(rf"^{SCRIPTS_PREFIX}(\d+)-(\d+)-")


def scripts_directory(runs_dir: Path) -> Path:
    """A new directory under `runs_dir` for this process's scripts, named after it; directories
    there whose owner process is gone are removed first."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_scripts(runs_dir)
    me = os.getpid()
    return Path(tempfile.mkdtemp(prefix=f"{SCRIPTS_PREFIX}{me}-{start_time(me) or 0}-",
                                 dir=runs_dir))  # fmt: skip


def remove_stale_scripts(runs_dir: Path) -> list[Path]:
    """Remove the script directories whose owner process has ended; the ones removed."""
    removed = []
    for path in runs_dir.glob(f"{SCRIPTS_PREFIX}*"):
        owner = _OWNED.match(path.name)
        if owner is None or same_process(int(owner[1]), int(owner[2]) or None):
            continue  # in use, or not named by an owner (left as it is)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def write_scripts(directory: Path, options: TpccOptions) -> list[tuple[str, int, Path]]:
    """Render the five scripts into `directory` (created if missing) as `tpcc_<name>.sql`;
    (name, weight, path) in TRANSACTIONS order."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, weight in TRANSACTIONS:
        path = directory / f"tpcc_{name}.sql"
        path.write_text(render(name, options))
        written.append((name, weight, path))
    return written


def render(name: str, options: TpccOptions) -> str:
    """The text of one transaction's script."""
    template = _environment().get_template(f"{name}.sql.j2")
    return template.render(
        all_warehouses=options.all_warehouses,
        keying_thinking=options.keying_thinking,
        keying_s=KEYING_S,
        think_ms={key: seconds * 1000 for key, seconds in THINK_MEAN_S.items()},
        c_id=nurand.C_ID,
        c_item=nurand.C_ITEM,
        c_last=nurand.C_LAST_RUN,
    )


@cache
def _environment() -> jinja2.Environment:
    """pgbench scripts, not HTML: no autoescaping; every value is a number pgdyno chose."""
    return template_environment("pgdyno.tpcc", "scripts")
