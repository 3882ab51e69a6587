"""The settings catalog as a table (data/pg_settings/catalog.csv): read, it is the catalog the
positional JSON files (data/pg_settings/pgN.json, until issue 31) held, value for value."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from pgdyno.postgres.settings import settings_meta_from_json
from pgdyno.postgres.settings_catalog import (
    CATALOG_FILE,
    HEADER,
    _catalog_rows,
    catalog_text,
    parse_catalog,
    recorded_settings,
)

DATA = Path(__file__).parent.parent / "data" / "pg_settings"
VERSIONS = (14, 15, 16, 17, 18)
# sha256 of json.dumps(sorted(rows), separators=(",", ":")) of each pgN.json as it was
# committed before the table replaced it (git show 82453a7:src/pgdyno/data/pg_settings/pgN.json):
# the rows, the boot values included, must not change.
BEFORE = {
    14: "165718575d7c3ddbf73080da5c1368bb65aa852e6db0019e11740f2162ff2f0b",
    15: "d793c5225891fc5a85cd3258b61a6cdb47a2ad53b16fafe0a1b713b7ec4a799e",
    16: "7136a4e512ad702aca09213741bb2f779f5ba06a8fa03b13133b9cf6ee68b098",
    17: "a7148dd8c2f8130e2df1e1cf4f6c307264208df0ae2401947934bb38d5223fe3",
    18: "e10f70851f566ce33dee840c9d1c5ad2a52972a14e774ff01928f96a1a4aa786",
}


@pytest.mark.parametrize("major", VERSIONS)
def test_the_reader_gives_the_catalog_of_before(major: int) -> None:
    rows = [list(row) for row in _catalog_rows(major)]
    digest = hashlib.sha256(json.dumps(sorted(rows), separators=(",", ":")).encode()).hexdigest()
    assert digest == BEFORE[major]


@pytest.mark.parametrize("major", VERSIONS)
def test_the_reader_agrees_with_the_full_recording(major: int) -> None:
    """tests/data/pg_settings/pgN.json: every row of a sandbox's pg_settings, as recorded."""
    recorded = settings_meta_from_json(DATA / f"pg{major}.json")
    ours = recorded_settings(major)
    assert ours.keys() == recorded.keys()
    assert ours == {name: replace(meta, setting=None) for name, meta in recorded.items()}


def test_the_table_is_what_the_writer_writes() -> None:
    """The committed file is exactly catalog_text of its own rows: no hand edit, no order
    other than the writer's (a name, then its versions)."""
    text = CATALOG_FILE.read_text(encoding="utf-8")
    assert catalog_text(parse_catalog(text)) == text


def test_a_row_per_run_of_unchanged_versions() -> None:
    lines = CATALOG_FILE.read_text(encoding="utf-8").splitlines()
    assert tuple(lines[0].split(",")) == HEADER
    assert "autovacuum_max_workers,14,17,integer,,1,262143,postmaster,3," in lines
    assert "autovacuum_max_workers,18,18,integer,,1,262143,sighup,3," in lines
    assert "wal_compression,14,14,bool,,,,superuser,off," in lines
    # the empty string, and an enum offering it, are told from "none"
    assert "archive_command,14,18,string,,,,sighup,''," in lines
    tls = "'' | TLSv1 | TLSv1.1 | TLSv1.2 | TLSv1.3"
    assert f"ssl_max_protocol_version,14,18,enum,,,,sighup,'',{tls}" in lines
    assert "DateStyle,14,18,string,,,,user,," in lines  # no default: initdb's
