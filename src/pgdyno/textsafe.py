"""Text that is safe to show or keep: passwords scrubbed, control characters escaped, strict JSON.

pgdyno echoes text it does not control: connection strings, pgbench's stderr, server-log lines,
script names. Three rules hold at every output edge (the CLI's error printer, its log lines and
the renderers), so no single message can break them:

- a password never appears (`scrub_secrets`), whatever the syntax of the connection string and
  even when it is malformed;
- a control character never reaches the terminal raw (`escape_control`): an escape sequence in
  a script file must not retitle, recolour or clear the user's terminal;
- JSON output is strict (`strict_json`): no bare NaN or Infinity that strict parsers reject.

A user's value can be any length (a 64 KB connection string): `shorten_words` cuts a word longer
than any path or option a person reads, so a message stays one readable sentence and Rich's
highlighter, whose regular expressions take time quadratic in a word's length, never sees one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from pgdyno.errors import OutputError

MASK = "********"

# key=value syntax (libpq conninfo, PGPASSWORD=...): a quoted value runs to its closing quote
# (backslash escapes allowed) or, when unterminated, to the end of the text; an unquoted value
# runs to whitespace. `(?<![?&])` leaves URI query parameters to _QUERY.
_KEYWORD = re.compile(
    r"""(?ix)
    (?<![?&\w])((?:pg)?pass(?:word|wd)?\s*=\s*)
    ('(?:[^'\\]|\\.)*(?:'|\\?$)|"(?:[^"\\]|\\.)*(?:"|\\?$)|[^\s'"]+)
    """
)
# URI query parameter: ?password=... or &password=... up to the next & or #.
_QUERY = re.compile(r"(?i)([?&](?:pg)?pass(?:word|wd)?=)[^&#\s]*")
# URI credentials: scheme://user:password@ -- the password runs to the first @ (libpq's own
# reading); `/` is allowed in it so that a malformed URI still has its password hidden.
_URI = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/?#@]*:)[^\s@]*(@)")
# A mapping printed by repr() or JSON: 'password': 'x' or "password": "x".
_MAPPING = re.compile(
    r"""(?i)(['"](?:pg)?password['"]\s*:\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
)


def scrub_secrets(text: str) -> str:
    """The text with every password replaced by a mask.

    >>> scrub_secrets("host=db password=s3cret dbname=x")
    'host=db password=******** dbname=x'
    >>> scrub_secrets("host=db password='it\\\\'s a secret' user=u")
    'host=db password=******** user=u'
    >>> scrub_secrets("postgresql://ann:s3cret@db:5433/x?sslmode=require&password=two")
    'postgresql://ann:********@db:5433/x?sslmode=require&password=********'
    >>> scrub_secrets('bad URI: "postgresql://u:SECRET@[::1"')
    'bad URI: "postgresql://u:********@[::1"'
    >>> scrub_secrets("postgresql://db:5432/x and host=/tmp port=5")  # nothing to hide
    'postgresql://db:5432/x and host=/tmp port=5'
    """
    text = _URI.sub(rf"\1{MASK}\2", text)
    text = _QUERY.sub(rf"\1{MASK}", text)
    text = _MAPPING.sub(rf"\1'{MASK}'", text)
    return _KEYWORD.sub(rf"\1{MASK}", text)


def scrub_argv(argv: Sequence[str]) -> list[str]:
    """A command line as kept in the results database: any password masked (any syntax, any
    option).

    >>> scrub_argv(["pgdyno", "bench", "--dsn", "host=db password=pw", "--dsn=postgres://u:pw@h"])
    ['pgdyno', 'bench', '--dsn', 'host=db password=********', '--dsn=postgres://u:********@h']
    """
    return [scrub_secrets(arg) for arg in argv]


# C0 controls and DEL, C1 controls, and the Unicode format characters that reorder or hide text
# (zero-width characters, line/paragraph separators, bidirectional overrides and isolates).
_FORMAT = r"\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff"
_CONTROL = re.compile(rf"[\x00-\x1f\x7f-\x9f{_FORMAT}]")
_CONTROL_KEEP_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: str, *, multiline: bool = False) -> str:
    """Control characters written out as `\\xNN` / `\\uNNNN`, so a terminal shows, not obeys.

    Newline and tab are kept only when `multiline` (a stderr tail shown as lines).

    >>> escape_control("title \\x1b]0;PWNED\\x07 done")
    'title \\\\x1b]0;PWNED\\\\x07 done'
    >>> escape_control("a\\nb\\tc\\r"), escape_control("a\\nb\\tc\\r", multiline=True)
    ('a\\\\x0ab\\\\x09c\\\\x0d', 'a\\nb\\tc\\\\x0d')
    """
    pattern = _CONTROL_KEEP_LINES if multiline else _CONTROL
    return pattern.sub(_escaped, text)


# PATH_MAX is 4096, but no path or option a person reads runs past a few hundred characters.
LONGEST_WORD = 240
_LONG_WORD = re.compile(rf"\S{{{LONGEST_WORD + 1},}}")


def _shortened(match: re.Match[str]) -> str:
    word = match.group()
    kept = LONGEST_WORD // 2
    return f"{word[:kept]}...[{len(word) - kept - 20} characters]...{word[-20:]}"


def shorten_words(text: str) -> str:
    """The text with every word longer than LONGEST_WORD characters cut in its middle, saying
    how much was left out.

    >>> cut = shorten_words("dbname=" + "x" * 1000 + "yz end")
    >>> len(cut), cut[-45:]
    (166, '..[869 characters]...xxxxxxxxxxxxxxxxxxyz end')
    >>> shorten_words("short words stay")
    'short words stay'
    """
    return _LONG_WORD.sub(_shortened, text)


def safe_text(value: object, *, multiline: bool = False) -> str:
    """Any value as text fit for a terminal or a log: no password, no raw control character.

    >>> safe_text("dsn postgresql://u:pw@h\\x1b[2J")
    'dsn postgresql://u:********@h\\\\x1b[2J'
    """
    return escape_control(scrub_secrets(str(value)), multiline=multiline)


def _first_non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """Where the first NaN or infinity sits in nested data, e.g. `[0].rate`, and its value."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "the value", value
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    for sub_path, item in items:
        found = _first_non_finite(item, sub_path)
        if found is not None:
            return found
    return None


def strict_json(data: Any, *, indent: int | None = 2, compact: bool = False) -> str:
    """JSON that strict parsers accept: NaN and infinities are refused, not written bare.

    Values JSON has no type for (paths, dates) are written as their text.

    >>> strict_json({"rate": 1.5}, indent=None)
    '{"rate": 1.5}'
    >>> strict_json([{"rate": float("inf")}])
    Traceback (most recent call last):
    ...
    pgdyno.errors.OutputError: cannot write JSON: [0].rate is inf, which JSON has no number for; \
leave out the run it comes from (older results may hold one), or report it if the run is new.
    """
    separators = (",", ":") if compact else None
    try:
        return json.dumps(data, indent=indent, separators=separators, allow_nan=False, default=str)
    except ValueError:
        where, value = _first_non_finite(data) or ("a value", math.nan)
        raise OutputError(
            f"cannot write JSON: {where} is {value}, which JSON has no number for; leave out "
            "the run it comes from (older results may hold one), or report it if the run is new."
        ) from None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def strict_loads(text: str) -> Any:
    """Parse JSON refusing NaN and Infinity (which Python's json module accepts by default).

    >>> strict_loads('{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> strict_loads('[Infinity]')
    Traceback (most recent call last):
    ...
    ValueError: Infinity is not valid JSON
    """
    return json.loads(text, parse_constant=_refuse_constant)
