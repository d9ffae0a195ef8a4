"""`wikitrace search`: the corpus searched by words, as the MCP server's `search` tool does."""

from __future__ import annotations

from pathlib import Path

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import option
from .options import print_json

CORPUS = click.Path(path_type=Path, file_okay=False, exists=True)


@click.command("search")
@click.argument("corpus", type=CORPUS)
@click.argument("query")
@option(declared("layer"))
@option(declared("limit"))
@option(declared("min-score"))
@option(declared("exclude-task"))
@option(
    declared("json"),
    help="One JSON array of hits, best first: kind, id, path, title, task_id, task_type, "
    "outcome, score ([] for no match).",
)
def search_command(
    corpus: Path,
    query: str,
    kind: str,
    limit: int,
    min_score: float,
    exclude_tasks: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search CORPUS for QUERY's words (BM25): insights by title, guideline and applicability,
    compilations by title, claims and their quotes, past runs by task text; up to --limit of
    each kind, all best first. Words match their other forms (refund, refunded, refunds), and
    a snake_case, camelCase or dotted name matches its parts ("transfer to human" finds
    transfer_to_human_agents). Each hit has a score from 0 to 1: the share of the query's
    weight it matches (rare words weigh more, words no entry holds too). Hits under
    --min-score are left out; when none is left, "no match" on stderr (and [] with --json).
    One line a hit: score, kind, id, task, outcome, title, the page to read. The same search
    as the MCP server's `search` and the static site's search page.

    \b
    Example:
      wikitrace search corpus "transfer to human agent"
      wikitrace search corpus "refund" --layer insights --limit 3 --json
    """
    from wikitrace.tools.find import SEARCH_KINDS, SearchKind, no_match
    from wikitrace.tools.memory import Memory

    kinds: tuple[SearchKind, ...] = (
        SEARCH_KINDS if kind == "all" else tuple(k for k in SEARCH_KINDS if k == kind)
    )
    memory = Memory.load(corpus, lazy=True)  # one search: its hits' records alone are read
    hits = memory.search(
        query, kinds, limit=limit, exclude_tasks=exclude_tasks, min_score=min_score
    )
    if as_json:
        print_json([hit.as_dict() for hit in hits])
    if not hits:
        click.echo(no_match(min_score), err=True)
    elif not as_json:
        click.echo("\n".join(hit.line() for hit in hits))
