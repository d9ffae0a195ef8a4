"""Reaching a corpus without a shell: `wikitrace mcp`, `export skill` and `site`."""

from __future__ import annotations

from pathlib import Path

import click

from .options import print_json

CORPUS = click.Path(path_type=Path, file_okay=False, exists=True)


@click.command("mcp")
@click.argument("corpus", type=CORPUS)
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve streamable HTTP on http://127.0.0.1:PORT/mcp instead of stdio (loopback only).",
)
@click.option(
    "--list",
    "list_only",
    is_flag=True,
    help="Print the tools and resources a client would see, as JSON, and exit.",
)
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
    starts it); --http PORT binds 127.0.0.1 only.

    \b
    Example (an mcpServers entry of Claude Desktop, Claude Code or Codex):
      {"mcpServers": {"memory": {"command": "wikitrace", "args": ["mcp", "/abs/corpus"]}}}
    """
    from wikitrace.tools import mcp_server

    if list_only:
        print_json(mcp_server.describe(mcp_server.Corpus(corpus)))
        return
    mcp_server.serve(corpus, http_port)
