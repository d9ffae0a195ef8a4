"""Reaching a corpus without a shell: `wikitrace mcp`, `export skill` and `site`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import option
from .options import print_json

CORPUS = click.Path(path_type=Path, file_okay=False, exists=True)
F = TypeVar("F", bound=Callable[..., None])


@click.command("mcp")
@click.argument("corpus", type=CORPUS)
@option(declared("http"))
@option(declared("list"))
def mcp_command(corpus: Path, http_port: int | None, list_only: bool) -> None:
    """Serve CORPUS read-only over the Model Context Protocol, for agents without a shell
    (Claude Desktop, IDE agents, hosted agents).

    \b
    Tools: first_message (the text of `wikitrace prompt`), search (insights, compilations,
    tasks), read_page (a page by its path), actions and turn (the drill-down tools), audit
    (the evidence behind a lesson), check_citations (a citation report).
    Resources: wikitrace://corpus/PATH for every page; the four indexes are listed.

    The server resolves CORPUS's pointer once, at start, and serves that version until it
    stops; it reads only files the corpus's manifest lists. Stdio by default (the client
    starts it); --http PORT binds 127.0.0.1 only. A first message is for the project the
    call names, else for the repository of the folder the server was started in (a client
    starts a stdio server in its working folder).

    \b
    Example (Claude Code; the command is an absolute path, as a client may not have the
    virtualenv on its PATH; in Claude Desktop's mcpServers the same command and args):
      claude mcp add memory -- "$(command -v wikitrace)" mcp /corpus
    """
    from wikitrace.tools import mcp_server

    if list_only:
        print_json(mcp_server.describe(mcp_server.Corpus(corpus)))
        return
    from .settings import user_projects

    # A client starts a stdio server in its working folder: its project is the default.
    mcp_server.serve(corpus, http_port, folder=Path.cwd(), project_aliases=user_projects())


@click.group("export")
def export_group() -> None:
    """Write a corpus in a form another tool loads: an Agent Skill, or a static HTML site."""


def _writes_folder(command: F) -> F:
    """-o/--output, --force and --json of a command that writes a folder from a corpus."""
    made = [
        option(declared("output")),
        option(declared("force")),
        option(declared("json"), help="Print what was written as JSON."),
    ]
    for one in reversed(made):
        command = one(command)
    return command


@export_group.command("skill")
@click.argument("corpus", type=CORPUS)
@_writes_folder
def skill_command(corpus: Path, output: Path, force: bool, as_json: bool) -> None:
    """Export CORPUS as an Agent Skill: a folder a coding agent loads from .claude/skills/NAME/
    (Claude Code), .agents/skills/NAME/ (Codex) or its equivalent.

    \b
    OUTPUT/SKILL.md        name and description, then the drill-down rules (short; it
                           points into the corpus)
    OUTPUT/corpus/         the corpus version CORPUS names, its files copied read-only (never
                           hard-linked: nothing done to the skill reaches the corpus; cloned
                           where the file system can): `wikitrace verify OUTPUT/corpus`
                           checks them
    OUTPUT/scripts/        actions and turn, links to the corpus's drill-down tools

    The folder is written beside OUTPUT and moved into place whole.

    \b
    Example:
      wikitrace export skill corpus -o .claude/skills/airline-memory
    """
    from dataclasses import asdict

    from wikitrace.tools.skill import export_skill

    report = export_skill(corpus, output, force=force)
    click.echo(
        f"skill {report.name}: {report.skill_lines} lines of SKILL.md, {report.files} corpus "
        f"files (read-only copies) of version {report.version or 'unversioned'}",
        err=True,
    )
    if as_json:
        print_json(asdict(report))
    else:
        click.echo(str(output))


@export_group.command("site")
@click.argument("corpus", type=CORPUS)
@_writes_folder
def site_command(corpus: Path, output: Path, force: bool, as_json: bool) -> None:
    """Write CORPUS as a static HTML site for reviewers: open OUTPUT/index.html in a browser
    (file:// is fine: no server, no framework).

    \b
    index.html             insights by task type: status, source run, support; a filter
    runs.html              every run: task, outcome, turns, compilation title; a filter
    insight/insight-N.html a lesson, its claims, each quote linked to the words it cites
    run/step-N.html        the compilation's claims, then every turn as logged, each
                           quoted span highlighted where it stands

    Text from logs and models is escaped: a log holding <script> shows it as text. The site
    is written beside OUTPUT and moved into place whole.

    \b
    Example:
      wikitrace export site corpus -o corpus-site
      xdg-open corpus-site/index.html
    """
    from dataclasses import asdict

    from wikitrace.tools.site import build_site

    report = build_site(corpus, output, force=force)
    click.echo(
        f"site of {report.version or 'an unversioned corpus'}: {report.pages} pages, "
        f"{report.insights} insights, {report.runs} runs; {report.quotes} quotes highlighted"
        + (f", {report.not_found} not found in the turn they cite" if report.not_found else ""),
        err=True,
    )
    if as_json:
        print_json(asdict(report))
    else:
        click.echo(str(output))
