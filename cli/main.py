"""Entry point: the command group, error handling and logging, shared by every command."""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from .build import build_command
from .common import attach, deprecated_command, set_verbosity
from .convert import convert_command
from .drill import actions_command, turn_command
from .evaluate import attribute_command, drilldowns_command, eval_command
from .gate import gate_command, hypothesize_command, monitor_command, retire_command
from .hooks import hooks_group
from .lift import lift_group, run_inspect_command
from .publish import export_group, mcp_command, site_command
from .search import search_command
from .settings import FILE_NAME, FROM_HOOK, SETTINGS_META, SettingsError, settings
from .trust import trust_command
from .use import audit_command, cite_command, prompt_command, view_command
from .verify import verify_command
from .versions import add_command, deploy_command, update_command, versions_command

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
    --help-all (see common.py)."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(attach(cmd), name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # Resolved before the group's own callback runs: it reads the settings, and a hook
        # (`add --from-hook`) must log a settings file it cannot read rather than stop.
        ctx.meta[COMMAND_ARGS] = list(args)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for _, rows in SECTIONS for name, _ in rows if name in self.commands]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # One blank line before the commands, none between workflows: the list fits a screen.
        formatter.write_paragraph()
        for title, rows in SECTIONS:
            formatter.write_text(f"{title}:")
            with formatter.indentation():
                formatter.write_dl([row for row in rows if row[0] in self.commands])


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


cli.add_command(build_command)
cli.add_command(add_command)
cli.add_command(versions_command)
cli.add_command(update_command)
cli.add_command(gate_command)
cli.add_command(monitor_command)
cli.add_command(retire_command)
cli.add_command(hypothesize_command)
cli.add_command(convert_command)
cli.add_command(verify_command)
cli.add_command(trust_command)
cli.add_command(actions_command)
cli.add_command(turn_command)
cli.add_command(prompt_command)
cli.add_command(hooks_group)
cli.add_command(search_command)
cli.add_command(cite_command)
cli.add_command(audit_command)
cli.add_command(view_command)
cli.add_command(lift_group)
cli.add_command(mcp_command)
cli.add_command(export_group)

DEPRECATED: tuple[tuple[click.Command, str, str], ...] = (
    (eval_command, "eval", "lift eval"),
    (attribute_command, "attribute", "lift attribute"),
    (drilldowns_command, "drilldowns", "lift drilldowns"),
    (run_inspect_command, "run-inspect", "lift run-inspect"),
    (site_command, "site", "export site"),
    (deploy_command, "deploy", "versions CORPUS --deploy VERSION"),
)
"""Old names kept working for a release (hidden, not counted): the command, its old name and
what it is now."""
for command, old, now in DEPRECATED:
    cli.add_command(deprecated_command(command, old, now))


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
            # A --prompts-dir template that fails, or reaches for what the sandbox forbids.
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
