"""Read a plan file and turn the first problem in it into one sentence with file, line and key."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from pgdyno.errors import UsageError
from pgdyno.plan.locate import key_lines, line_of
from pgdyno.plan.model import BlockSpec, MatrixSpec, PlanSpec, SetSpec

MAX_PLAN_BYTES = 1 << 20


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


def _key_name(text: str, path: Sequence[str | int]) -> str:
    """`set 'fast', pg.shared_buffers` rather than `set.1.pg.shared_buffers`."""
    if len(path) >= 2 and path[0] == "set" and isinstance(path[1], int):
        try:
            name = tomllib.loads(text)["set"][path[1]]["name"]
        except (tomllib.TOMLDecodeError, KeyError, IndexError, TypeError):
            name = None
        label = f"set {name!r}" if isinstance(name, str) else f"set #{path[1] + 1}"
        rest = ".".join(str(p) for p in path[2:])
        return f"{label}, {rest}" if rest else label
    return ".".join(str(p) for p in path)


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
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file} is not valid TOML: {exc}; fix that line.") from None
    try:
        spec = PlanSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_validation_message(file, text, exc)) from None
    return Plan(file, text, spec)


def _validation_message(file: Path, text: str, exc: ValidationError) -> str:
    error = exc.errors()[0]
    loc = [p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
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


_TABLES: dict[str, type[BaseModel]] = {"matrix": MatrixSpec, "set": SetSpec, "block": BlockSpec}


def _allowed_keys(parent: Sequence[str | int]) -> list[str]:
    """The keys the model accepts in the table at `parent`."""
    model: type[BaseModel] = PlanSpec
    for name in parent:
        if isinstance(name, str):
            model = _TABLES.get(name, model)
    return [f.alias or n for n, f in model.model_fields.items()]
