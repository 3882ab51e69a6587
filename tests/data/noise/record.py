"""Record the runs of one real `pgdyno noise` session for tests/unit/test_noise_stats.py.

    pgdyno noise --budget 2m -T 5 --pg-version 18 --json > out.json
    python3 record.py RESULTS.sqlite SESSION_ID "what the host was doing" > NAME.json

Writes each run's start (epoch seconds, from started_at), TPS and interference record as
`runs show --json` has them, in run order, with the wall seconds per run from out.json when
given as a fourth argument.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from datetime import datetime
from pathlib import Path


def main(db: str, session_id: int, note: str, out_json: str | None) -> None:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT id, started_at, tps, interference FROM runs WHERE session_id = ? "
            "AND status = 'ok' ORDER BY id",
            (session_id,),
        ).fetchall()
    runs = [
        {
            "id": run_id,
            "started_s": datetime.fromisoformat(started).timestamp(),
            "tps": tps,
            "interference": json.loads(blob) if blob else None,
        }
        for run_id, started, tps, blob in rows
    ]
    walls = json.loads(Path(out_json).read_text())["wall_seconds"] if out_json else None
    json.dump({"note": note, "wall_seconds": walls, "runs": runs}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
