"""What the README tells a newcomer before the first command matches the code (issue 31,
item 6): where `make demo` writes as root, shared by every root user, and how to choose
another work directory; how long `make test` takes, as a figure."""

from __future__ import annotations

import re
from pathlib import Path

from pgdyno.environment import ROOT_DATA_DIR, default_data_dir

README = (Path(__file__).parent.parent.parent / "README.md").read_text()


def test_the_readme_says_make_demo_as_root_shares_the_work_directory_and_how_to_choose() -> None:
    assert default_data_dir({"HOME": "/root"}, is_root=True) == ROOT_DATA_DIR
    chosen = default_data_dir({"HOME": "/root", "PGDYNO_HOME": "/srv/me"}, is_root=True)
    assert chosen == Path("/srv/me")
    said = re.search(r"As root, `make demo` works in `(/[^`]+)`\*\*, the work directory every root "
                     r"user of the\s+machine shares", README)  # fmt: skip
    assert said and Path(said.group(1)) == ROOT_DATA_DIR
    assert re.search(r"`PGDYNO_HOME=\S+\s+make demo`", README)


def test_the_readme_gives_make_tests_duration_as_a_figure() -> None:
    said = re.search(r"`make test` takes about (\d+) minutes", README)
    assert said and int(said.group(1)) >= 10
    assert "`make test` runs in a few minutes" not in README
