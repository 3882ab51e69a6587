"""Find the line of a TOML file that defines a key path, for error messages (pure).

tomllib reports syntax errors with a line number but keeps no positions for valid documents,
so a validation error on ``set[1].pg.shared_buffers`` is traced back by reading the lines:
table headers set the current path, ``key = value`` lines extend it. Keys inside inline tables
and multi-line arrays map to the line of the enclosing key, which is where a user looks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Path = tuple[str | int, ...]

_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY = rf"(?:{_BARE}|{_QUOTED})(?:\s*\.\s*(?:{_BARE}|{_QUOTED}))*"
_ARRAY_HEADER = re.compile(rf"^\s*\[\[\s*({_KEY})\s*\]\]")
_HEADER = re.compile(rf"^\s*\[\s*({_KEY})\s*\]")
_ASSIGN = re.compile(rf"^\s*({_KEY})\s*=")
_PART = re.compile(rf"{_BARE}|{_QUOTED}")


# What can hold a bracket that is not structure: strings (four kinds) and comments.
_TOKEN = re.compile(
    r'''"""(?:[^"\\]|\\.|"(?!""))*(?:"""|\Z)'''
    r"""|'''(?:[^']|'(?!''))*(?:'''|\Z)"""
    r"""|"(?:[^"\\\n]|\\.)*"?"""
    r"""|'[^'\n]*'?"""
    r"|\#[^\n]*"
    r"|[\[\]{}\n]",
    re.DOTALL,
)


def too_deep(text: str, limit: int) -> int | None:
    r"""The line where brackets ([ and {) outside strings and comments first nest deeper than
    `limit` (the line where that outermost value starts), or None.

    tomllib and pydantic both recurse once per level, so this runs before either sees the text.

    >>> too_deep('a = [[1]]\nb = "[[[[["\nc = {x = [[[1]]]}\n', 3)
    3
    >>> too_deep("a = [1] # [[[[\n", 3) is None
    True
    """
    depth, line, start = 0, 1, 1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            start = line if depth == 0 else start
            depth += 1
            if depth > limit:
                return start
        elif token in ("]", "}"):
            depth = max(0, depth - 1)
        else:
            line += token.count("\n")
    return None


def _parts(key: str) -> tuple[str, ...]:
    """
    >>> _parts('sysctl."vm.dirty_ratio"')
    ('sysctl', 'vm.dirty_ratio')
    """
    return tuple(p[1:-1] if p[0] in "\"'" else p for p in _PART.findall(key))


def key_lines(text: str) -> dict[Path, int]:
    """The first line (1-based) defining each key path; array tables count from 0.

    >>> lines = key_lines('[matrix]\\nclients = [1]\\n[[set]]\\nname = "a"\\n[[set]]\\n'
    ...                   'name = "b"\\n[set.pg]\\nwork_mem = "4MB"\\n')
    >>> lines[("matrix", "clients")], lines[("set", 1, "name")], lines[("set", 1, "pg", "work_mem")]
    (2, 6, 8)
    """
    found: dict[Path, int] = {}
    counts: dict[tuple[str, ...], int] = {}
    current: Path = ()

    def table_path(keys: tuple[str, ...]) -> Path:
        # `[set.pg]` after `[[set]]` belongs to the latest element of the `set` array.
        path: list[str | int] = []
        for i, key in enumerate(keys):
            path.append(key)
            prefix = keys[: i + 1]
            if prefix in counts and i < len(keys) - 1:
                path.append(counts[prefix] - 1)
        return tuple(path)

    for number, line in enumerate(text.splitlines(), start=1):
        if match := _ARRAY_HEADER.match(line):
            keys = _parts(match.group(1))
            counts[keys] = counts.get(keys, 0) + 1
            current = (*table_path(keys), counts[keys] - 1)
        elif match := _HEADER.match(line):
            current = table_path(_parts(match.group(1)))
        elif match := _ASSIGN.match(line):
            found.setdefault((*current, *_parts(match.group(1))), number)
            continue
        else:
            continue
        found.setdefault(current, number)
    return found


def line_of(lines: dict[Path, int], path: Sequence[str | int]) -> int | None:
    """The line of `path`, or of its nearest enclosing key that has one.

    >>> line_of({("set", 0): 3, ("set", 0, "pg"): 5}, ("set", 0, "pg", "work_mem"))
    5
    >>> line_of({}, ("matrix",)) is None
    True
    """
    for end in range(len(path), 0, -1):
        if (line := lines.get(tuple(path[:end]))) is not None:
            return line
    return None
