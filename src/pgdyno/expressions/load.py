"""The one loader of knowledge files: TOML -> pydantic -> vetted expressions, errors at a line.

The doctor's rules (doctor/rules/*.toml), tune's knowledge (data/tune.toml) and the start
constraints (data/start_constraints.toml) are read here. A file is parsed with tomllib,
checked with a pydantic model, and every expression in it is parsed and vetted by the
expression language (expr.py) before anything evaluates it: names and facts it may use are
given by the caller, so a typo in a fact's name is refused when the file is read, not skipped
as "unknown" when a rule runs. Every problem is one sentence that names the file, the line,
the entry and the key, what is wrong, and where the format is described.
"""

from __future__ import annotations

import ast
import string
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

from pgdyno.errors import PgdynoError
from pgdyno.expressions import expr
from pgdyno.expressions.locate import key_lines, line_of

KeyPath = Sequence[str | int]
# Namespace -> the facts an expression may ask of it; None: any (PostgreSQL's settings).
FactNames = Mapping[str, frozenset[str] | None]


class KnowledgeFileError(PgdynoError):
    """A knowledge file is malformed: the message names the file, the line and the key."""


@dataclass(frozen=True)
class Source:
    """A knowledge file as read: where it is, its text, and the line of every key."""

    path: Path
    text: str
    data: Mapping[str, Any]
    guide: str  # where its format is described, for the messages
    error: type[KnowledgeFileError]
    entry_key: str  # the field that names an entry of an array table: `id`, `key`, `name`

    def where(self, key: KeyPath) -> str:
        """`rules/memory.toml line 12: rule 'thp-always', when` for error messages."""
        line = line_of(key_lines(self.text), key)
        at = f"{self.path} line {line}" if line is not None else str(self.path)
        named = self.describe(key)
        return f"{at}: {named}" if named else at

    def describe(self, key: KeyPath) -> str:
        """`rule 'thp-always', values.pages` rather than `rule.3.values.pages`."""
        if len(key) >= 2 and isinstance(key[0], str) and isinstance(key[1], int):
            label = f"{key[0]} #{key[1] + 1}"
            entries = self.data.get(key[0])
            if isinstance(entries, list) and key[1] < len(entries):
                entry = entries[key[1]]
                name = entry.get(self.entry_key) if isinstance(entry, dict) else None
                if isinstance(name, str) and name.isprintable():
                    label = f"{key[0]} {name!r}"
            rest = ".".join(_part(part) for part in key[2:])
            return f"{label}, {rest}" if rest else label
        return ".".join(_part(part) for part in key)

    def fail(self, key: KeyPath, problem: str) -> NoReturn:
        raise self.error(f"{self.where(key)}: {problem}; see {self.guide}.")

    def expression(
        self, key: KeyPath, text: str, names: Iterable[str], facts: FactNames
    ) -> ast.expr:
        """`text` parsed and vetted: only `names` (and the language's own) may be used, and of
        a namespace in `facts` only the facts it lists."""
        try:
            node = expr.parse(text, frozenset(names))
        except expr.ExprError as exc:
            self.fail(key, str(exc))
        for found in ast.walk(node):
            if (
                isinstance(found, ast.Attribute)
                and isinstance(found.value, ast.Name)
                and (known := facts.get(found.value.id)) is not None
                and found.attr not in known
            ):
                self.fail(key, f"no fact {found.value.id}.{found.attr} is known")
        return node


def read[M: BaseModel](
    path: Path,
    model: type[M],
    *,
    guide: str,
    error: type[KnowledgeFileError] = KnowledgeFileError,
    entry_key: str = "id",
) -> tuple[M, Source]:
    """The file read and checked against `model`; `error` (one sentence) on the first problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path} cannot be read ({exc}); reinstall pgdyno or fix the file.") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path} is not valid TOML ({exc}); fix the syntax there.") from None
    source = Source(path, text, data, guide, error, entry_key)
    try:
        return model.model_validate(data), source
    except ValidationError as exc:
        first = exc.errors()[0]
        key = [part for part in first["loc"] if not _is_tag(part)]
        source.fail(key, _message(first["msg"]))


def check_names(
    source: Source, key: KeyPath, template: str, known: Iterable[str], what: str
) -> None:
    """Every `{name}` in a text template is one of `known` (fix lines, persist lines)."""
    allowed = set(known)
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(template)]
    except ValueError as exc:  # a lone brace
        source.fail(key, f"not a text template ({exc}; write {{{{ for a brace)")
    for field in fields:
        if field is not None and field not in allowed:
            source.fail(key, f"{{{field}}} is neither {what}")


def _is_tag(part: str | int) -> bool:
    """pydantic's own steps in an error location: validator names and the key marker."""
    return isinstance(part, str) and (part.startswith("function-") or part == "[key]")


def _part(part: str | int) -> str:
    text = str(part)
    return text if text.isprintable() else repr(text)


def _message(msg: str) -> str:
    """pydantic's message as the middle of a sentence.

    >>> _message("Value error, evidence 'x' does not say where it comes from")
    "evidence 'x' does not say where it comes from"
    >>> _message("Input should be 'info', 'warning' or 'critical'")
    "input should be 'info', 'warning' or 'critical'"
    """
    msg = msg.removeprefix("Value error, ")
    return msg[:1].lower() + msg[1:]
