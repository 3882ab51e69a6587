"""Read a plan file and turn the first problem in it into one sentence with file, line and key."""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pgdyno.errors import UsageError
from pgdyno.expressions.locate import key_lines, line_of, too_deep
from pgdyno.plan.model import BlockSpec, MatrixSpec, PlanSpec, SetSpec, ThpSpec

MAX_PLAN_BYTES = 1 << 20
# A plan is tables of settings; an inline value nests two or three levels at most. The bound
# keeps tomllib and pydantic (both recursive) far from Python's recursion limit.
MAX_NESTING = 10
_LONG_NUMBER = re.compile(r"[0-9_]{1000,}")


@dataclass(frozen=True)
class Plan:
    path: Path
    text: str
    spec: PlanSpec

    @property
    def name(self) -> str:
        return self.spec.name or self.path.stem

    @property
    def digest(self) -> str:
        """Identifies the plan's content, so --resume never continues a different plan."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def where(self, path: Sequence[str | int]) -> str:
        """`plan.toml line 12 (set 'fast', pg.shared_buffers)` for error messages."""
        return describe_location(self.path, self.text, path)


def describe_location(file: Path, text: str, path: Sequence[str | int]) -> str:
    line = line_of(key_lines(text), path)
    at = f"{file} line {line}" if line is not None else str(file)
    return f"{at} ({_key_name(text, path)})" if path else at


def _is_tag(part: str) -> bool:
    """pydantic's own steps in an error location: validator names and the key marker."""
    return part.startswith("function-") or part == "[key]"


def _part(part: str | int) -> str:
    r"""A key as shown: quoted and escaped when it holds anything but printable text.

    >>> _part("work_mem"), _part("a\x1bb")
    ('work_mem', "'a\\x1bb'")
    """
    text = str(part)
    return text if text.isprintable() else repr(text)


def _key_name(text: str, path: Sequence[str | int]) -> str:
    """`set 'fast', pg.shared_buffers` rather than `set.1.pg.shared_buffers`."""
    if len(path) >= 2 and path[0] == "set" and isinstance(path[1], int):
        try:
            name = tomllib.loads(text)["set"][path[1]]["name"]
        except (ValueError, RecursionError, KeyError, IndexError, TypeError):
            name = None
        label = f"set {name!r}" if isinstance(name, str) else f"set #{path[1] + 1}"
        rest = ".".join(_part(p) for p in path[2:])
        return f"{label}, {rest}" if rest else label
    return ".".join(_part(p) for p in path)


def load_plan(file: Path) -> Plan:
    """Read and validate the plan's form; raises UsageError naming the file, line and key."""
    try:
        if file.stat().st_size > MAX_PLAN_BYTES:
            raise UsageError(f"{file} is larger than 1 MiB: give a plan file (TOML).")
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"plan file {file} does not exist: give the path of a TOML plan."
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"plan file {file} could not be read ({exc}): check the path.") from None
    data = _parse(file, text)
    try:
        spec = PlanSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_validation_message(file, text, exc)) from None
    except RecursionError:  # not reached after _parse's bound; the last line of defence
        raise UsageError(_too_deep_message(file, text, None)) from None
    return Plan(file, text, spec)


def _parse(file: Path, text: str) -> dict[str, object]:
    if (line := too_deep(text, MAX_NESTING)) is not None:
        raise UsageError(_too_deep_message(file, text, line))
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file} is not valid TOML: {exc}; fix that line.") from None
    except RecursionError:
        raise UsageError(_too_deep_message(file, text, None)) from None
    except ValueError:  # tomllib's int() refuses more than sys.get_int_max_str_digits()
        found = _LONG_NUMBER.search(text)
        line = text.count("\n", 0, found.start()) + 1 if found else None
        raise UsageError(
            f"{_at(file, text, line)}: a number this long is beyond any setting's range: "
            "give real values."
        ) from None


def _at(file: Path, text: str, line: int | None) -> str:
    """`plan.toml line 4 (matrix.clients)`: the file, the line and the key defined on it."""
    if line is None:
        return str(file)
    keys = [path for path, n in key_lines(text).items() if n == line]
    key = max(keys, key=len) if keys else None
    return f"{file} line {line}" + (f" ({_key_name(text, key)})" if key else "")


def _too_deep_message(file: Path, text: str, line: int | None) -> str:
    return (
        f"{_at(file, text, line)}: values are nested more than {MAX_NESTING} levels deep, "
        "which no plan needs: write settings as tables of plain values."
    )


def _validation_message(file: Path, text: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    loc = [p for p in error["loc"] if not (isinstance(p, str) and _is_tag(p))]
    kind = error["type"]
    where = describe_location(file, text, loc)
    if kind == "extra_forbidden":
        allowed = ", ".join(_allowed_keys(loc[:-1]))
        return f"{where}: unknown key {loc[-1]!r}; the keys allowed here are {allowed}."
    if kind == "missing":
        return f"{where}: this key is required; add it to the plan."
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    else:
        message = f"{message[0].lower()}{message[1:]} (got {error.get('input')!r})"
    return f"{where}: {message}; fix the plan and check it with `pgdyno plan check`."


_TABLES: dict[str, type[BaseModel]] = {
    "matrix": MatrixSpec,
    "set": SetSpec,
    "block": BlockSpec,
    "thp": ThpSpec,
}


def _allowed_keys(parent: Sequence[str | int]) -> list[str]:
    """The keys the model accepts in the table at `parent`."""
    model: type[BaseModel] = PlanSpec
    for name in parent:
        if isinstance(name, str):
            model = _TABLES.get(name, model)
    return [f.alias or n for n, f in model.model_fields.items()]
