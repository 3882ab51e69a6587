"""Settings printed as SHOW prints them (issue 31, item 6): `show_text` against the server's
own `current_setting` for every setting with a unit, at its value here and at values chosen to
fall between units."""

from __future__ import annotations

from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.settings import show_text

# Session values that are not whole in a larger unit, or are reals below their unit.
ODD = {
    "work_mem": "131080kB", "temp_buffers": "1032kB", "statement_timeout": "90s",
    "lock_timeout": "1500ms", "vacuum_cost_delay": "0.5ms", "idle_session_timeout": "61min",
    "maintenance_work_mem": "1025MB", "effective_cache_size": "1000001kB",
}  # fmt: skip


def test_show_text_prints_every_unit_setting_as_the_server_does(box: Sandbox) -> None:
    with connect(box.conninfo()) as client:
        for name, value in ODD.items():
            client.rows(f"SET {name} = '{value}'")
        rows = client.rows(
            "SELECT name, setting, unit, current_setting(name) FROM pg_settings"
            " WHERE unit IS NOT NULL ORDER BY name"
        )
    assert len(rows) > 50 and {r[0] for r in rows} >= set(ODD)
    differ = [(n, s, u, shown, show_text(s, u)) for n, s, u, shown in rows
              if show_text(s, u) != shown]  # fmt: skip
    assert differ == []
