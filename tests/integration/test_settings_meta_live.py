"""pg_settings read from a real PostgreSQL 18 sandbox agrees with the recorded copy."""

from __future__ import annotations

from pathlib import Path

from conftest import make_env
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect
from pgdyno.postgres.settings_meta import check_setting, load_settings_meta, settings_meta_from_json

RECORDED = Path(__file__).parent.parent / "data" / "pg_settings" / "pg18.json"


def test_live_settings_match_the_recording(workdir: Path, cache_dir: Path, binaries: Binaries):
    box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
    box.start({}, owner_pid=None)
    try:
        with connect(box.conninfo()) as client:
            live = load_settings_meta(client)
    finally:
        box.stop()
    recorded = settings_meta_from_json(RECORDED)
    assert live.keys() == recorded.keys()
    for name, entry in live.items():
        old = recorded[name]
        assert (entry.vartype, entry.unit, entry.min_val, entry.max_val, entry.enumvals,
                entry.context) == (old.vartype, old.unit, old.min_val, old.max_val,
                                   old.enumvals, old.context), name  # fmt: skip
    assert live["shared_buffers"].needs_restart and not live["work_mem"].needs_restart
    assert check_setting(live, "shared_buffers", "1GB", "18") == "1GB"
