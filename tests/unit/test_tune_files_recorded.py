"""The `--out` files, byte for byte, for recorded configurations (tests/data/tune_files/).

The files of each case were written by files.py before its text moved into Jinja2 templates
(tests/data/tune_files/record.py); the templates must give the same bytes.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from pgdyno.records.tune import TuneFacts
from pgdyno.tune.files import render_files
from pgdyno.tune.model import Configuration, Setting

RECORDED = Path(__file__).parent.parent / "data" / "tune_files"
CASES = sorted(path.name for path in RECORDED.iterdir() if path.is_dir())


def configuration(data: dict[str, Any]) -> Configuration:
    settings = tuple(
        Setting(**{**row, "evidence": tuple(row["evidence"]), "rules": tuple(row["rules"])})
        for row in data["settings"]
    )
    facts = TuneFacts(data["profile"], connections=100)  # the files do not read the facts
    return Configuration(data["source"], data["profile"], settings, facts,
                         unknown=data["unknown"], notes=tuple(data["notes"]))  # fmt: skip


def recorded(case: str) -> Configuration:
    return configuration(json.loads((RECORDED / case / "configuration.json").read_text()))


def test_the_cases_cover_every_file_and_status() -> None:
    assert len(CASES) >= 6
    written = {path.name for case in CASES for path in (RECORDED / case).iterdir()}
    assert {"postgresql.pgdyno.conf", "alter-system.sql", "99-pgdyno.conf",
            "60-pgdyno-block.rules", "pgdyno-thp.conf", "README.txt"} <= written  # fmt: skip
    shown = {(s.layer, s.status) for case in CASES for s in recorded(case).settings}
    statuses = ("apply", "measure", "review")
    assert {(layer, status) for layer in ("postgresql", "host") for status in statuses} <= shown
    assert {("device", "apply"), ("device", "measure")} <= shown


@pytest.mark.parametrize("case", CASES)
def test_the_files_are_what_was_recorded(case: str) -> None:
    files = render_files(recorded(case), generated_by="pgdyno tune 0.1.0",
                         generated_on=datetime.date(2026, 5, 1))  # fmt: skip
    folder = RECORDED / case
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "configuration.json"}
    assert sorted(files) == sorted(before)
    for name, text in files.items():
        assert text.encode() == before[name], name
