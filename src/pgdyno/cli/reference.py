"""The CLI reference (docs/cli.md), generated from the commands' own help texts.

    python -m pgdyno.cli.reference > docs/cli.md

A test fails when docs/cli.md and the help texts drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

from pgdyno.cli.app import cli


def _walk(
    command: click.Command, path: tuple[str, ...], parent: click.Context | None
) -> Iterator[tuple[tuple[str, ...], click.Context]]:
    settings = dict(command.context_settings) if parent is None else {}
    ctx = click.Context(command, info_name=path[-1], parent=parent, **settings)
    yield path, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            yield from _walk(sub, (*path, name), ctx)


def render() -> str:
    parts = [
        "# pgdyno command reference\n",
        "Generated from `--help` by `python -m pgdyno.cli.reference > docs/cli.md`; "
        "do not edit by hand.\n",
    ]
    for path, ctx in _walk(cli, ("pgdyno",), None):
        formatter = ctx.make_formatter()
        formatter.width = 100
        ctx.command.format_help(ctx, formatter)
        parts.append(f"## `{' '.join(path)}`\n\n```text\n{formatter.getvalue().rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
