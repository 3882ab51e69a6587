"""The journals of the previous release read by pgdyno.undo's codecs, and written back the same.

tests/data/journals/ holds a journal of each kind as the release before issue 32 wrote it (see
its README). Issue 32 moved every journal into one package with a codec per kind; the on-disk
format must not move, so a journal left by the previous release still rolls back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgdyno.textsafe import strict_json
from pgdyno.undo.filesystems import StorageCodec
from pgdyno.undo.host import HostCodec
from pgdyno.undo.journal import Codec, Identified, decode, parse_lines
from pgdyno.undo.server import PgCodec

DATA = Path(__file__).parent.parent / "data" / "journals"
WORKDIR = Path("/var/lib/pgdyno")
CODECS: dict[str, Codec[Any]] = {
    "host-journal.jsonl": HostCodec(Path("/proc"), Path("/sys")),
    "pg-journal.jsonl": PgCodec(),
    "storage-journal.jsonl": StorageCodec(WORKDIR),
}
PENDING = {
    "host-journal.jsonl": [1, 3, 4],
    "pg-journal.jsonl": [1, 2],
    "storage-journal.jsonl": [1, 2, 3, 4],
}


def written(codec: Codec[Any], change: Identified) -> str:
    record = codec.encode(change)
    record["pid"] = 4242  # the PostgreSQL record takes the writer's pid when it is written
    return strict_json(record, indent=None)


@pytest.mark.parametrize("name", sorted(CODECS))
def test_every_record_of_the_previous_release_reads_and_writes_back_the_same(name: str) -> None:
    path = DATA / name
    data = path.read_bytes()
    found = decode(parse_lines(data), path, CODECS[name])
    assert not found.unreadable
    assert [change.id for change in found.pending] == PENDING[name]
    changes = [line for line in data.decode().splitlines() if json.loads(line)["op"] == "change"]
    assert [written(CODECS[name], change) for change in found.changes] == changes
