"""Entry point: the command group, error handling and logging, shared by every command."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from .common import attach, deprecated_command, set_verbosity
from .settings import FILE_NAME, FROM_HOOK, SETTINGS_META, SettingsError, settings

TRACEBACK_ENV = "WIKITRACE_TRACEBACK"
COMMAND_ARGS = "wikitrace.command_args"


SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Build a corpus from logs",
        (
            ("build", "Build a frozen evidence corpus from agent logs."),
            ("convert", "Convert agent logs to wikitrace's JSON Lines, on stdout."),
            ("verify", "Check every file of CORPUS against its manifest's sha256."),
            ("trust", "Trust this folder's settings file (its safe keys)."),
        ),
    ),
    (
        "Use it at test time",
        (
            ("prompt", "The first message for an agent about to solve TASK."),
            ("hooks", "Recall and capture through a coding agent's hooks."),
            ("view", "Write CORPUS without the given tasks (leave-one-out)."),
            ("search", "Search CORPUS for QUERY's words (BM25), best first."),
            ("actions", "One line per turn of run STEP: the action and its result."),
            ("turn", "Turn N (or N to M) of run STEP in full, as logged."),
            ("cite", "Check citation REPORTS and count the entries used."),
            ("audit", "The evidence behind insights, and what deserves a look."),
        ),
    ),
    (
        "Grow it safely",
        (
            ("add", "Add runs to CORPUS as a new version."),
            ("versions", "List CORPUS's versions; --deploy points CORPUS at one."),
            ("update", "Add runs as a candidate; deploy it only if it does better."),
        ),
    ),
    (
        "Let only tested lessons in, and measure what memory does",
        (
            ("gate", "Test INSIGHTS before letting them into CORPUS."),
            ("monitor", "Track committed insights in later REPORTS; retire failing ones."),
            ("retire", "Retire an insight by hand, or as superseded by a newer one."),
            ("hypothesize", "State INSIGHTS as falsifiable hypotheses, in a new version."),
            ("lift", "What memory did: Gain, Regression, causes; its parts alone."),
        ),
    ),
    (
        "Reach it without a shell",
        (
            ("mcp", "Serve CORPUS read-only over the Model Context Protocol."),
            ("export", "Write CORPUS as an Agent Skill, or a static HTML site."),
        ),
    ),
)
"""The root --help: each command under its workflow, with a summary that fits one line at 80
columns (the command's own help says the rest)."""


class _Sections(click.Group):
    """`wikitrace --help` lists the commands by workflow; every command added takes -v, -q and
    --help-all (see common.py). A command registered with `lazy` is imported when it is run
    or looked up (the root --help needs only SECTIONS), so a command loads its own modules
    alone; reading `commands` imports them all (the settings files and the docs need that)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lazy: dict[str, tuple[str, str | None]] = {}
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        for name in list(self._lazy):
            self._load(name)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = dict(value)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._lazy.pop(name, None)
        self._commands[name] = attach(cmd)

    def lazy(self, name: str, target: str, now: str | None = None) -> None:
        """Register `target` ("module:attribute" of wikitrace.cli) as command `name`, imported
        when first needed; with `now`, as a deprecated name of what `now` says."""
        self._lazy[name] = (target, now)

    def _load(self, name: str) -> None:
        target, now = self._lazy.pop(name)
        command = _command(target)
        self.add_command(deprecated_command(command, name, now) if now else command, name)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            self._load(cmd_name)
        return self._commands.get(cmd_name)

    def _known(self) -> set[str]:
        return set(self._commands) | set(self._lazy)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # Resolved before the group's own callback runs: it reads the settings, and a hook
        # (`add --from-hook`) must log a settings file it cannot read rather than stop.
        ctx.meta[COMMAND_ARGS] = list(args)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        known = self._known()
        return [name for _, rows in SECTIONS for name, _ in rows if name in known]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # One blank line before the commands, none between workflows: the list fits a screen.
        known = self._known()
        formatter.write_paragraph()
        for title, rows in SECTIONS:
            formatter.write_text(f"{title}:")
            with formatter.indentation():
                formatter.write_dl([row for row in rows if row[0] in known])


def _command(target: str) -> click.Command:
    """The command `target` ("module:attribute" of wikitrace.cli) names, imported."""
    module, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(f"wikitrace.cli.{module}"), attribute)
    assert isinstance(command, click.Command), target
    return command


@click.group(
    cls=_Sections,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="wikitrace")
@click.option("-v", "--verbose", count=True, help="More detail on stderr (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help=f"Read settings from FILE, not ./{FILE_NAME}, as your own.",
)
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: bool, config: Path | None) -> None:
    """wikitrace: a memory for LLM agents, every lesson linked to its evidence.

    `wikitrace COMMAND --help-all` shows every option of a command.
    \f

    Build a frozen, read-only corpus from past agent runs (raw turns, compilations that cite
    them, insights that name their source run), then mount it where your agent can grep it.

    Errors go to stderr with exit code 2 for bad input or usage, 1 for a failure at run time
    and 130 on Ctrl-C. Set WIKITRACE_TRACEBACK=1 to see the full traceback of an error.

    Options can be kept in your ~/.config/wikitrace/wikitrace.toml and, once you run
    `wikitrace trust` there, a project's ./wikitrace.toml (or [tool.wikitrace] in
    ./pyproject.toml; its safe keys only): a top-level key for every command that has the
    option, a table such as [build] for one. The command line wins over the files, the
    project's over yours, the files over --profile, --profile over the defaults. --config
    FILE is read instead of the project's file (a pyproject.toml: its [tool.wikitrace]
    table), as your own: every key. See docs/settings.md.
    """
    set_verbosity(verbose, quiet)
    try:
        ctx.default_map, sources = settings(cli, config, Path.cwd())
    except SettingsError as error:
        if not _run_by_agent(ctx.meta.get(COMMAND_ARGS, [])):
            raise
        # A hook must not lose the session (or hold up the agent) over a settings file: it
        # logs why and goes on with the built-in settings.
        ctx.meta[SETTINGS_META] = f"settings not read, the built-in ones used: {error.message}"
        return
    line = sources.line()
    ctx.meta[SETTINGS_META] = line
    quiet = quiet or bool({"-q", "--quiet"} & set(ctx.meta.get(COMMAND_ARGS, ())))
    if line is not None and not quiet:
        click.echo(line, err=True)


def _run_by_agent(args: list[str]) -> bool:
    """Whether the command is an agent's hook: `add --from-hook` or `hooks recall`."""
    return FROM_HOOK in args or any(
        args[i : i + 2] == ["hooks", "recall"] for i in range(len(args))
    )


COMMANDS: dict[str, str] = {
    "build": "build:build_command",
    "add": "versions:add_command",
    "versions": "versions:versions_command",
    "update": "versions:update_command",
    "gate": "gate:gate_command",
    "monitor": "gate:monitor_command",
    "retire": "gate:retire_command",
    "hypothesize": "gate:hypothesize_command",
    "convert": "convert:convert_command",
    "verify": "verify:verify_command",
    "trust": "trust:trust_command",
    "actions": "drill:actions_command",
    "turn": "drill:turn_command",
    "prompt": "use:prompt_command",
    "hooks": "hooks:hooks_group",
    "search": "search:search_command",
    "cite": "use:cite_command",
    "audit": "use:audit_command",
    "view": "use:view_command",
    "lift": "lift:lift_group",
    "mcp": "publish:mcp_command",
    "export": "publish:export_group",
}
"""Each command's name and where it lives ("module:attribute" of wikitrace.cli), imported
only when it is run or looked up (see _Sections)."""
assert isinstance(cli, _Sections)
for name, target in COMMANDS.items():
    cli.lazy(name, target)

DEPRECATED: tuple[tuple[str, str, str], ...] = (
    ("evaluate:eval_command", "eval", "lift eval"),
    ("evaluate:attribute_command", "attribute", "lift attribute"),
    ("evaluate:drilldowns_command", "drilldowns", "lift drilldowns"),
    ("lift:run_inspect_command", "run-inspect", "lift run-inspect"),
    ("publish:site_command", "site", "export site"),
    ("versions:deploy_command", "deploy", "versions CORPUS --deploy VERSION"),
)
"""Old names kept working for a release (hidden, not counted): the command ("module:attribute"
of wikitrace.cli), its old name and what it is now."""
for target, old, now in DEPRECATED:
    cli.lazy(old, target, now)


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI, turning wikitrace's own errors into one line and an exit code."""
    try:
        return cli.main(args=argv, prog_name="wikitrace", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("\ninterrupted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Exit as error:
        sys.exit(error.exit_code)
    except OSError as error:
        # The disk is full, the destination read-only, a file vanished: one line, exit 1. A
        # build has removed its partial work by now (see `wikitrace build --help`).
        if os.environ.get(TRACEBACK_ENV):
            traceback.print_exc()
        where = f"{error.filename}: " if error.filename else ""
        click.echo(f"error: {where}{error.strerror or error}", err=True)
        sys.exit(1)
    except Exception as error:
        # Our errors are raised only once a command has imported the core, so looking the
        # class up here keeps `wikitrace --help` from importing it.
        errors = sys.modules.get("wikitrace.corpus_schema.errors")
        jinja = sys.modules.get("jinja2.exceptions")
        if jinja is not None and isinstance(error, jinja.TemplateError):
            # A prompts-dir template that fails, or reaches for what the sandbox forbids.
            if os.environ.get(TRACEBACK_ENV):
                traceback.print_exc()
            name = getattr(error, "name", None) or "a template"
            click.echo(f"error: {name}: {type(error).__name__}: {error}", err=True)
            sys.exit(2)
        if errors is None or not isinstance(error, errors.WikitraceError):
            raise
        if os.environ.get(TRACEBACK_ENV):
            traceback.print_exc()
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()
