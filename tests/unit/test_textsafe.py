"""Scrubbing passwords, escaping control characters, strict JSON: the output edge's rules."""

from __future__ import annotations

import io
from dataclasses import replace

import psycopg
import pytest
from psycopg import conninfo
from rich.table import Table

from pgdyno.cli.common import err, out
from pgdyno.environment import Environment
from pgdyno.errors import OutputError
from pgdyno.terminal.tables import stderr_tail
from pgdyno.textsafe import escape_control, safe_text, scrub_secrets, strict_json, strict_loads

SECRET = "S3cr3t-xyz"

# Well-formed and malformed connection strings of both syntaxes, each holding SECRET.
DSNS = [
    f"host=db user=ann password={SECRET} dbname=x",
    f"host=db password = {SECRET}",
    f"host=db password='{SECRET} with spaces' user=ann",
    f"host=db password='it\\'s {SECRET}'",
    f"host=db password='{SECRET} never closed",
    f"password={SECRET}",
    f"PGPASSWORD={SECRET} psql",
    f"postgresql://ann:{SECRET}@db:5433/x",
    f"postgres://ann:{SECRET}@db1:5432,db2:5433/x?sslmode=require",
    f"postgresql://:{SECRET}@db/x",
    f"postgresql://u:{SECRET}@[::1",
    f"postgresql://u:pa/{SECRET}@h/db",
    f"postgresql://db/x?sslmode=require&password={SECRET}",
    f"postgresql://db/x?password={SECRET}&user=ann",
    f"{{'host': 'db', 'password': '{SECRET}'}}",
    f'{{"password": "{SECRET}"}}',
]


@pytest.mark.parametrize("dsn", DSNS)
def test_no_password_survives_scrubbing(dsn: str):
    scrubbed = scrub_secrets(dsn)
    assert SECRET not in scrubbed
    assert "S3cr3t" not in scrubbed  # not even a part of it


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("host=db user=ann password=x dbname=bench", ["host=db", "user=ann", "dbname=bench"]),
        ("postgresql://ann:x@db:5433/bench?sslmode=require", ["ann", "@db:5433/bench", "sslmode"]),
        ("postgresql://db:5432/bench", ["postgresql://db:5432/bench"]),
        ("passfile=/home/ann/.pgpass host=db", ["passfile=/home/ann/.pgpass host=db"]),
        ("bypass=1 compass = north", ["bypass=1 compass = north"]),
    ],
)
def test_scrubbing_keeps_what_is_not_a_password(text: str, kept: list[str]):
    scrubbed = scrub_secrets(text)
    for part in kept:
        assert part in scrubbed


@pytest.mark.parametrize("dsn", DSNS)
def test_driver_errors_about_a_dsn_are_scrubbed(dsn: str):
    """What libpq itself says about a connection string (it may quote all of it)."""
    try:
        conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        assert SECRET not in scrub_secrets(str(exc))


def test_control_characters_are_shown_not_obeyed():
    hostile = "title \x1b]0;PWNED\x07 clear \x1b[2J bell \x07 cr \r del \x7f c1 \x9b rtl \u202e."
    escaped = escape_control(hostile)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in escaped)
    assert "\u202e" not in escaped
    assert "\\x1b]0;PWNED\\x07" in escaped and "\\u202e" in escaped
    assert escape_control("a\nb\tc") == "a\\x0ab\\x09c"
    assert escape_control("a\nb\tc\x1b", multiline=True) == "a\nb\tc\\x1b"
    assert escape_control("naïve · café — ok") == "naïve · café — ok"


def test_safe_text_scrubs_and_escapes():
    assert safe_text(f"postgresql://u:{SECRET}@h \x1b[31m") == "postgresql://u:********@h \\x1b[31m"


def test_strict_json_refuses_non_finite_numbers_naming_where():
    assert strict_loads(strict_json({"a": [1.5, None, "x"]})) == {"a": [1.5, None, "x"]}
    for bad in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(OutputError, match=r"\[1\]\.rate is (inf|-inf|nan)"):
            strict_json([{"rate": 1.0}, {"rate": bad}])
    with pytest.raises(ValueError):
        strict_loads('{"rate": Infinity}')
    with pytest.raises(ValueError):
        strict_loads("[NaN]")


def _render(table: Table) -> str:
    stream = io.StringIO()
    out(replace(Environment.from_os(), stdout=stream)).print(table)
    return stream.getvalue()


def test_console_escapes_cells_titles_and_markup():
    table = Table(title=f"[red]title\x1b]0;T\x07 postgresql://u:{SECRET}@h")
    table.add_column("a")
    table.add_row(f"[bold]x[/] :smile: \x1b[2J password={SECRET}")
    shown = _render(table)
    assert "\x1b" not in shown and "\x07" not in shown
    assert SECRET not in shown
    assert "[red]title" in shown and "[bold]x[/]" in shown and ":smile:" in shown


def test_console_log_lines_are_escaped():
    stream = io.StringIO()
    err(replace(Environment.from_os(), stderr=stream)).print(
        f"server log: FATAL \x1b]0;X\x07 password={SECRET} [/]"
    )
    assert "\x1b" not in stream.getvalue() and SECRET not in stream.getvalue()
    assert "[/]" in stream.getvalue()


def test_a_64_kb_value_is_printed_cut_in_one_line():
    """A 64 KB connection string on pgdyno's consoles (issue 31, item 7): Rich's highlighter
    is quadratic in a word's length (26 s); the word is cut before it is highlighted, and its
    password is hidden before it is cut."""
    value = f"postgresql://ann:{SECRET}@db/{'x' * 65536}"
    for console in (out, err):
        stream = io.StringIO()
        env = replace(Environment.from_os(), stdout=stream, stderr=stream)
        console(env).print(f"target: {value} (pg18)")
        shown = stream.getvalue()
        assert shown.startswith("target: postgresql://ann:********@db/xxx") and SECRET not in shown
        assert "...[65425 characters]..." in shown and shown.endswith("xxx (pg18)\n")
        assert len(shown) < 400 and shown.count("\n") == 1


def test_stderr_tail_keeps_the_last_lines_escaped():
    stderr = "".join(f"line {i}\n" for i in range(50)) + "last \x1b]0;T\x07\n"
    shown = _render(stderr_tail(stderr, lines=5))
    assert "line 46" in shown and "line 45" not in shown
    assert "last \\x1b]0;T\\x07" in shown and "\x1b]" not in shown
    assert "empty" in _render(stderr_tail(""))
