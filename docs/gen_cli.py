"""Write docs/cli.md, the command reference, from the click commands themselves.

Run `python docs/gen_cli.py` after changing a command, an option or a help text;
tests/test_cli_reference.py fails while docs/cli.md differs from what this prints.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import click

from wikitrace.cli.common import DetailedOption
from wikitrace.cli.main import cli

OUT = Path(__file__).resolve().parent / "cli.md"
WIDTH = 100
"""Fixed, so that the page does not depend on the terminal it was made in."""
REGENERATE = "python docs/gen_cli.py"

HEADER = f"""# Command reference

Every `wikitrace` command with its help and all its options, as `wikitrace COMMAND --help-all`
prints them; the tuning options `--help` leaves out are listed apart, under "Hidden options".
Generated from the code by `docs/gen_cli.py`; do not edit by hand: run `{REGENERATE}` (a test
fails while this page is out of date).
"""


def _commands(
    group: click.Group, ctx: click.Context, path: tuple[str, ...]
) -> list[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Each command under `group`, depth first, in the order `--help` lists them."""
    found: list[tuple[tuple[str, ...], click.Command, click.Context]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None:
            continue
        sub = click.Context(command, info_name=name, parent=ctx, max_content_width=WIDTH)
        found.append(((*path, name), command, sub))
        if isinstance(command, click.Group):
            found.extend(_commands(command, sub, (*path, name)))
    return found


def _help(command: click.Command, ctx: click.Context) -> str:
    """What `--help` prints, with the whole description and each option's longer help (what
    `--help-all` adds), and then the options `--help` hides."""
    shown = copy.copy(command)
    shown.help = (command.help or "").replace("\f", "", 1)
    params = []
    for param in command.params:
        if isinstance(param, DetailedOption) and param.more:
            param = copy.copy(param)
            param.help = f"{param.help} {param.more}"
        params.append(param)
    shown.params = params
    formatter = click.HelpFormatter(width=WIDTH, max_width=WIDTH)
    shown.format_help(ctx, formatter)
    hidden = []
    for param in shown.get_params(ctx):
        if getattr(param, "hidden", False):
            shown = copy.copy(param)
            shown.hidden = False  # type: ignore[attr-defined]
            record = shown.get_help_record(ctx)
            if record is not None:
                hidden.append(record)
    if hidden:
        with formatter.section("Hidden options"):
            formatter.write_dl(hidden)
    return formatter.getvalue().rstrip() + "\n"


def render() -> str:
    """The whole page."""
    # The group's own settings (-h as well as --help), as when the command runs: click keeps
    # each command's help option once made, so a context without them would make the page
    # depend on what ran before it in the same process.
    root = click.Context(
        cli, info_name="wikitrace", **{**cli.context_settings, "max_content_width": WIDTH}
    )
    commands = [(("wikitrace",), cli, root)] + [
        (("wikitrace", *path), command, ctx) for path, command, ctx in _commands(cli, root, ())
    ]
    parts = [HEADER]
    for path, command, ctx in commands:
        parts.append(f"\n## {' '.join(path)}\n\n```text\n{_help(command, ctx)}```\n")
    return "".join(parts)


def main() -> int:
    text = render()
    if OUT.exists() and OUT.read_text() == text:
        print(f"{OUT}: up to date", file=sys.stderr)
        return 0
    staging = OUT.with_name(f".{OUT.name}.tmp")
    staging.write_text(text)
    os.replace(staging, OUT)
    print(f"{OUT}: written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
