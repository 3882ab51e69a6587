"""Record `pgdyno tune --out` files for tests/unit/test_tune_files_recorded.py.

Each case directory holds `configuration.json` (a Configuration as data: what render_files
reads) and the files render_files wrote for it. They were first written by files.py before its
text moved into Jinja2 templates, so the test holds the templates to the same bytes. Run again
(`.venv/bin/python tests/data/tune_files/record.py`) only when the files are meant to change,
and review the diff.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
from pathlib import Path

from pgdyno.postgres.settings_catalog import recorded_settings
from pgdyno.records.tune import Disk, TuneFacts
from pgdyno.tune.baselines import BaselineInputs, pgtune
from pgdyno.tune.facts import Given, offline_facts
from pgdyno.tune.files import render_files
from pgdyno.tune.model import Configuration, Setting
from pgdyno.tune.recommend import baseline_configuration, recommend

HERE = Path(__file__).parent
DAY = datetime.date(2026, 5, 1)
BY = "pgdyno tune 0.1.0"
GiB, MiB = 1024**3, 1024**2
FACTS = TuneFacts("oltp", connections=300)  # the files do not read the facts


def pg(name: str, value: str, **kw: object) -> Setting:
    return Setting("postgresql", name, value, f"why {name}", **kw)  # type: ignore[arg-type]


def host(name: str, value: str, **kw: object) -> Setting:
    return Setting("host", name, value, f"why {name}", takes_effect="now", **kw)  # type: ignore[arg-type]


def disk(name: str, value: str, device: str, **kw: object) -> Setting:
    return Setting("device", name, value, f"why {name}", device=device, takes_effect="now", **kw)  # type: ignore[arg-type]


def by_hand() -> dict[str, Configuration]:
    mixed = Configuration("pgdyno", "oltp", (
        pg("shared_buffers", "4GB", current="128MB", takes_effect="restart"),
        pg("huge_pages", "on", takes_effect="restart"),
        pg("work_mem", "16MB"),
        pg("io_method", "worker", takes_effect="restart"),
        pg("io_method", "io_uring", status="measure", takes_effect="restart"),
        pg("application_name", "it's"),
        pg("search_path", "a\\b", status="review"),
        host("vm.nr_hugepages", "2200", current="0"),
        host("vm.dirty_bytes", "536870912", current="0"),
        host("vm.dirty_background_bytes", "134217728", current="67108864"),
        host("vm.swappiness", "1", current="60"),
        host("vm.overcommit_memory", "2", status="review"),
        host("kernel.sched_autogroup_enabled", "0", status="measure"),
        host("transparent_hugepage/enabled", "never", current="always"),
        host("transparent_hugepage/defrag", "never", current="[madvise] never"),
        host("cpu_governor", "performance", current="powersave"),
        disk("scheduler", "mq-deadline", "vda", current="none"),
        disk("read_ahead_kb", "4096", "vda", current="128"),
        disk("scheduler", "kyber", "vda", status="measure"),
        disk("scheduler", "none", "nvme0n1"),
        Setting("postgresql", "checkpoint_timeout", "15min", "a long reason " * 12
                + "\nwith a line break", takes_effect="reload"),
    ), FACTS, unknown={"postgresql:wal_buffers": "needs wal_free (offline)"},
       notes=("pgtune's io_method = io_uring left out: this build has no io_uring",))  # fmt: skip
    pg_only = Configuration("pgtune", "web", (pg("work_mem", "16MB"), pg("jit", "off")), FACTS)
    return {"mixed": mixed, "pg-only": pg_only}


def computed() -> dict[str, Configuration]:
    found: dict[str, Configuration] = {}
    for name, given in {
        "pgdyno-oltp-16g-pg18": Given("oltp", 16 * GiB, 4, None, 18, "ssd"),
        "pgdyno-dw-512g-pg17-hdd": Given("dw", 512 * GiB, 64, 300, 17, "hdd", "greater_ram"),
        "pgdyno-desktop-2g-pg14": Given("desktop", 2 * GiB, 1, None, 14, "ssd"),
    }.items():
        facts = offline_facts(given)
        if name.startswith("pgdyno-dw"):  # a local host with a disk, as from a doctor snapshot
            offered = ("mq-deadline", "kyber", "bfq", "none")
            facts = dataclasses.replace(
                facts, local=True, huge_page=2 * MiB, numa_nodes=2, autogroup=True,
                migration_cost=True, swap_bytes=4 * GiB, wal_free=900 * GiB,
                sources={**facts.sources, "wal_free": "recorded"},
                devices=(Disk("sdb", "data", "bfq", offered, 128),),
            )  # fmt: skip
        major = facts.pg or 0
        current = {"shared_buffers": "128MB", "vm.swappiness": "60", "read_ahead_kb@sdb": "128"}
        found[name] = recommend(facts, recorded_settings(major), current)
    inputs = BaselineInputs(16, "web", 8 * GiB, cpus=2)
    facts = offline_facts(Given("web", 8 * GiB, 2, None, 16, "ssd"))
    found["pgtune-web-8g-pg16"] = baseline_configuration(
        "pgtune", pgtune(inputs), facts, recorded_settings(16), {}
    )
    return found


def as_data(config: Configuration) -> dict[str, object]:
    """What render_files reads of a Configuration (its facts are not written to files)."""
    return {
        "source": config.source,
        "profile": config.profile,
        "settings": [dataclasses.asdict(s) for s in config.settings],
        "unknown": config.unknown,
        "notes": list(config.notes),
    }


def main() -> None:
    import pgdyno

    print("files.py of", Path(pgdyno.__file__).parent)
    for name, config in {**by_hand(), **computed()}.items():
        case = HERE / name
        shutil.rmtree(case, ignore_errors=True)
        case.mkdir()
        text = json.dumps(as_data(config), indent=1, ensure_ascii=False, allow_nan=False)
        (case / "configuration.json").write_text(text + "\n")
        for file, content in render_files(config, generated_by=BY, generated_on=DAY).items():
            (case / file).write_bytes(content.encode())
        print(name, len(config.settings))


if __name__ == "__main__":
    main()
