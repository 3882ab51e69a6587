"""Values as the results database keeps them: timestamps and JSON columns."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pgdyno.errors import StoreError


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def dumps(value: object, what: str) -> str:
    """JSON for a column; a non-finite number is refused (strict JSON readers reject it).

    >>> dumps({"tps": 1.5}, "summary")
    '{"tps": 1.5}'
    """
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError as exc:  # input checks refuse inf/nan first: reaching here is a bug
        raise StoreError(
            f"refused to store {what} holding a non-finite number ({exc}); this is a bug in "
            "pgdyno: please report it."
        ) from exc
