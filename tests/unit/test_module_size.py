"""No module of pgdyno is over 450 lines: a longer one holds more than one concern and is split
by concern (docs/design.md, "Layout")."""

from __future__ import annotations

from pathlib import Path

import pgdyno

MAX_LINES = 450
PACKAGE = Path(pgdyno.__file__).parent


def lines_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_the_limit() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100  # the package itself, not an empty or wrong directory
    too_long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in modules
        if (n := lines_of(path)) > MAX_LINES
    }
    assert not too_long, f"modules over {MAX_LINES} lines (split them by concern): {too_long}"


def test_the_count_is_of_lines(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("a = 1\n" * (MAX_LINES + 1))
    assert lines_of(sample) == MAX_LINES + 1 > MAX_LINES
