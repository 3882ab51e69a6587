"""What a user copies from pgdyno's output is never wrapped mid-value when the output is not a
terminal: `pgdyno sandbox start` with a long work directory, its output captured (a pipe, not a
tty), prints its `psql "..."` command on one line."""

from __future__ import annotations

from conftest import make_env, new_workdir, remove_workdir
from pgdyno.experiment.target import open_sandbox

WIDTH = 160  # what the output console lays tables out to when it is not a terminal


def test_sandbox_start_prints_its_psql_command_on_one_line(run_cli, cache_dir, binaries):
    root = new_workdir()
    # Long enough that the line passes the console width, short enough for the socket path.
    workdir = root / ("a-long-work-directory-" + "w" * 4)
    workdir.mkdir(mode=0o755)
    try:
        started = run_cli(workdir, "sandbox", "start", "--pg-version", "18")
        assert started.code == 0, started.stderr
        box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
        command = f'psql "{box.conninfo()}"'
        lines = [line for line in started.stdout.splitlines() if "connect with:" in line]
        assert len(lines) == 1, started.stdout
        assert lines[0].endswith(command), started.stdout
        assert len(lines[0]) > WIDTH  # the case that was split in two before
    finally:
        assert run_cli(workdir, "sandbox", "stop").code == 0
        remove_workdir(root)
