"""Every command documents itself with help text and an example."""

from __future__ import annotations

import click
import pytest

from pgdyno.cli.app import cli


def commands(group: click.Group, prefix: tuple[str, ...] = ()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        yield (*prefix, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*prefix, name))


ALL = list(commands(cli))


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_command_has_help_and_example(run_cli, workdir, path, command):
    result = run_cli(workdir, *path, "--help")
    assert result.code == 0
    assert command.help and len(command.help.split()) >= 4
    assert "Example" in result.stdout
    assert "pgdyno " in result.stdout.split("Example", 1)[1]


def test_version(run_cli, workdir):
    result = run_cli(workdir, "--version")
    assert result.code == 0 and "pgdyno" in result.stdout


def test_cli_reference_is_in_sync():
    from pathlib import Path

    from pgdyno.cli.reference import render

    doc = Path(__file__).parent.parent.parent / "docs" / "cli.md"
    assert doc.read_text() == render(), "run: python -m pgdyno.cli.reference > docs/cli.md"


@pytest.mark.parametrize(("path", "command"), ALL, ids=[" ".join(p) for p, _ in ALL])
def test_help_shows_percent_signs_once(run_cli, workdir, path, command):
    """Click does not %-format help strings: a doubled %% would be shown as typed."""
    result = run_cli(workdir, *path, "--help")
    assert "%%" not in result.stdout


def test_traceback_is_documented_on_the_group(run_cli, workdir):
    from pathlib import Path

    result = run_cli(workdir, "--help")
    assert "--traceback" in result.stdout
    doc = (Path(__file__).parent.parent.parent / "docs" / "cli.md").read_text()
    assert "--traceback" in doc and "%%" not in doc
