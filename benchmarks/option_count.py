"""Count the CLI's commands and option instances (issue 57: at most 22 and 220).

An option instance is one option of one command: `--concurrency` of build, add and update is
three. Counted over every command `wikitrace --help` lists and every subcommand of a group
(hidden tuning options and deprecated spellings included), without what every command has
(-v, -q, --help-all, --help). The old command names kept for a release share their command's
options and are not counted again. A declared setting with no flag (a settings file's key or
its environment variable only, cli/common.py `FileSetting`) is no option: the command line
cannot give it; it is counted apart, as `file_settings`. Prints one line per command, then the
totals:

    python benchmarks/option_count.py [--json]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import click

from wikitrace.cli.common import COMMON, file_settings
from wikitrace.cli.main import cli
from wikitrace.corpus_schema.setting_fields import SETTINGS


@dataclass(frozen=True)
class Counted:
    command: str
    options: int
    hidden: int
    declared: int
    """Options made from a declaration (corpus_schema/setting_fields.py)."""
    file_settings: int
    """Declared settings with no flag (a file's key or a variable only)."""


def commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, click.Command]]:
    """Every command `group --help` lists, subcommands of groups included, depth first."""
    ctx = click.Context(group)
    found: list[tuple[str, click.Command]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None:
            continue
        if isinstance(command, click.Group):
            found.extend(commands(command, (*path, name)))
        else:
            found.append((" ".join((*path, name)), command))
    return found


def own_options(command: click.Command) -> list[click.Option]:
    """A command's options, less those every command has."""
    return [
        p
        for p in command.params
        if isinstance(p, click.Option) and p.name not in COMMON and p.name != "help"
    ]


def count() -> list[Counted]:
    """One row per command."""
    rows = []
    for name, command in commands(cli):
        options = own_options(command)
        declared = {setting.flags for setting in SETTINGS if name in setting.commands}
        rows.append(
            Counted(
                name,
                len(options),
                sum(1 for o in options if o.hidden),
                sum(1 for o in options if flags(o) in declared),
                len(file_settings(command)),
            )
        )
    return rows


def flags(option: click.Option) -> tuple[str, ...]:
    """An option's flags as a declaration writes them (`--x/--no-x` for a switch)."""
    if option.secondary_opts:
        return tuple(f"{a}/{b}" for a, b in zip(option.opts, option.secondary_opts, strict=True))
    return tuple(option.opts)


def main() -> int:
    rows = count()
    top = {row.command.split()[0] for row in rows}
    totals = {
        "commands": len(top),
        "commands_and_subcommands": len(rows),
        "option_instances": sum(row.options for row in rows),
        "hidden": sum(row.hidden for row in rows),
        "declared": sum(row.declared for row in rows),
        "file_settings": sum(row.file_settings for row in rows),
        "distinct_options": len({o.opts[-1] for _, c in commands(cli) for o in own_options(c)}),
        "declared_settings": len(SETTINGS),
    }
    if "--json" in sys.argv[1:]:
        print(json.dumps({"commands": [row.__dict__ for row in rows], "totals": totals}))
        return 0
    for row in rows:
        print(
            f"{row.command:20} {row.options:3} options, {row.hidden:3} hidden, "
            f"{row.declared:3} declared, {row.file_settings:3} with no flag"
        )
    print(" ".join(f"{key}={value}" for key, value in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
