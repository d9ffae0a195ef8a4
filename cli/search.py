"""`wikitrace search`: the corpus searched by words, as the MCP server's `search` tool does."""

from __future__ import annotations

from pathlib import Path

import click

from .common import TASK_NAMED
from .options import print_json

CORPUS = click.Path(path_type=Path, file_okay=False, exists=True)


@click.command("search")
@click.argument("corpus", type=CORPUS)
@click.argument("query")
@click.option(
    "--kind",
    type=click.Choice(["all", "insights", "compilations", "tasks"]),
    default="all",
    show_default=True,
    help="Which layer to search: lessons, compilations (title and claims) or past tasks.",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="Hits of each kind, at most.",
)
@click.option(
    "--exclude-task",
    "exclude_tasks",
    multiple=True,
    metavar="ID",
    help="Leave out every entry drawn from runs of this task (repeatable)." + TASK_NAMED,
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON array of hits: kind, id, path, title, task_id, task_type, outcome.",
)
def search_command(
    corpus: Path,
    query: str,
    kind: str,
    limit: int,
    exclude_tasks: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search CORPUS for QUERY's words (BM25): insights by title, guideline and applicability,
    compilations by title and claims, past runs by task text; best first, up to --limit of
    each kind. Words match their other forms (refund, refunded, refunds), and a snake_case,
    camelCase or dotted name matches its parts ("transfer to human" finds
    transfer_to_human_agents). One line a hit, with the page to read; "no match" on stderr
    when nothing shares a word with QUERY. The same search as the MCP server's `search`.

    \b
    Example:
      wikitrace search corpus "transfer to human agent"
      wikitrace search corpus "refund" --kind insights --limit 3 --json
    """
    from wikitrace.tools.memory import SEARCH_KINDS, Memory, SearchKind

    kinds: tuple[SearchKind, ...] = (
        SEARCH_KINDS if kind == "all" else tuple(k for k in SEARCH_KINDS if k == kind)
    )
    hits = Memory.load(corpus).search(query, kinds, limit=limit, exclude_tasks=exclude_tasks)
    if as_json:
        print_json([hit.as_dict() for hit in hits])
    elif hits:
        click.echo("\n".join(hit.line() for hit in hits))
    else:
        click.echo("no match", err=True)
