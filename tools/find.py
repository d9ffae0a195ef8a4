"""The corpus searched by words: every hit with its score (search/score.py), and none below
the threshold (`wikitrace.search.MIN_SCORE`). The one search behind `wikitrace search`, the MCP
server's `search` tool and the static site's search page (`site_index`: what its script needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.catalog import READ_ONLY_MARK
from wikitrace.corpus_schema.layout import (
    COMPILATION_DIR,
    INSIGHT_DIR,
    RAW_DIR,
    RAW_METADATA_NAME,
)
from wikitrace.corpus_schema.render import shortened
from wikitrace.search import MIN_SCORE

from .first_message import TASK_PREVIEW

if TYPE_CHECKING:
    from wikitrace.corpus_schema.records import Outcome
    from wikitrace.search.rank import Ranker

    from .loaded_memory import LoadedMemory as Memory  # memory.py imports this module

SearchKind = Literal["insights", "compilations", "tasks"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("insights", "compilations", "tasks")

QUERY_LIMIT = 2_000
"""The longest query `search` takes, in characters."""

LIMIT = 10
"""Hits of each kind `search` gives by default, and the site's search page at most."""


@dataclass
class Hit:
    """One search result: what it is, where its page is, a line to recognise it by, and how
    well it matches."""

    kind: SearchKind
    id: str
    path: str
    """The page, relative to the corpus root."""
    title: str
    task_id: str
    task_type: str | None
    outcome: Outcome
    """The outcome of the run it is (a task or compilation) or was drawn from (an insight)."""
    score: float
    """The share of the query's weight the entry matches (search.score.scored): from 0
    to under 1, 0.4 for an entry of average length holding each of the query's words once."""
    read_only: bool = False
    """An insight whose only support is content the agent read (records.READ_ONLY): its line
    says so, as every place that shows the lesson does."""

    def line(self) -> str:
        """The hit in one line, as `search` shows it: score, kind, id, task, outcome, title,
        page."""
        task = f"task {self.task_id}" + (f", {self.task_type}" if self.task_type else "")
        if self.read_only:
            task += f", {READ_ONLY_MARK}"
        title = " ".join(self.title.split())
        kind = self.kind.rstrip("s")
        return f"{self.score:.2f} {kind} {self.id} ({task}, {self.outcome}): {title}  [{self.path}]"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "score": round(self.score, 4)}


def search(
    memory: Memory,
    query: str,
    kinds: Sequence[SearchKind] = SEARCH_KINDS,
    *,
    limit: int = LIMIT,
    exclude_tasks: Sequence[str] = (),
    min_score: float = MIN_SCORE,
) -> list[Hit]:
    """BM25 over insights (title, guideline, applicability), compilations (title, claims and
    their quotes) and past tasks: up to `limit` hits of each kind asked for that score at
    least `min_score`, all of them best first; nothing drawn from `exclude_tasks`. An empty
    list is "no match". Words are matched by their stems, and a snake_case, camelCase or
    dotted name by its parts too."""
    if len(query) > QUERY_LIMIT:
        raise InputError(
            f"the query is {len(query)} characters; at most {QUERY_LIMIT}", field="query"
        )
    excluded = set(exclude_tasks)
    hits: list[Hit] = []
    # With no task left out, every entry may match: no record is read but the hits' (a
    # memory loaded lazily reads no other).
    if "insights" in kinds:
        allowed: Sequence[int] = range(len(memory.insights))
        if excluded:
            allowed = [
                i for i, item in enumerate(memory.insights) if not memory.drawn_from(item, excluded)
            ]
        for i, score in _best(memory.insight_ranker, query, allowed, limit, min_score):
            item = memory.insights[i]
            path = f"{INSIGHT_DIR}/{item.id}.md"
            hits.append(
                Hit(
                    "insights",
                    item.id,
                    path,
                    item.title,
                    item.source_task_id,
                    item.task_type,
                    item.source_outcome,
                    score,
                    item.read_only,
                )
            )
    runs: Sequence[int] = range(len(memory.runs))
    if excluded:
        runs = [i for i, run in enumerate(memory.runs) if not run.task_key.named_in(excluded)]
    if "compilations" in kinds:
        # A run without a compilation ranks an empty text, which no query's word scores.
        for i, score in _best(memory.compilation_ranker, query, runs, limit, min_score):
            run = memory.runs[i]
            path = f"{COMPILATION_DIR}/{run.step}.md"
            hits.append(
                Hit(
                    "compilations",
                    run.step,
                    path,
                    run.title or "",
                    run.task_id,
                    run.task_type,
                    run.outcome,
                    score,
                )
            )
    if "tasks" in kinds:
        for i, score in _best(memory.run_ranker, query, runs, limit, min_score):
            run = memory.runs[i]
            path = f"{RAW_DIR}/{run.step}/{RAW_METADATA_NAME}"
            title = shortened(run.task, TASK_PREVIEW)
            hits.append(
                Hit("tasks", run.step, path, title, run.task_id, run.task_type, run.outcome, score)
            )
    hits.sort(key=lambda hit: -hit.score)  # stable: a tie keeps the order of the kinds
    return hits


def _best(
    ranker: Ranker, query: str, allowed: Sequence[int], limit: int, min_score: float
) -> list[tuple[int, float]]:
    """The `limit` best texts in `allowed` scoring at least `min_score`."""
    from wikitrace.search.score import scored

    return [(i, s) for i, s in scored(ranker, query, allowed) if s >= min_score][:limit]


def no_match(min_score: float) -> str:
    """What `search` says when no entry scores `min_score` or more."""
    return f"no match: no entry scores {min_score:g} or more"


def site_index(memory: Memory) -> dict[str, Any]:
    """What the static site's search script (site_files/search.js) needs to answer a query as
    `search` does with its defaults: each kind's ranker (score.export) and entries (id, page,
    title, task, task type, outcome; None for a run with no compilation), the stop words, the
    threshold and the limit. The script splits and stems a query's words as search.rank does
    and sums the same numbers in the same order, so its scores are these to the last bit."""
    from wikitrace.search.score import export, stop_words

    insights = [
        [i.id, f"insight/{i.id}.html", i.title, i.source_task_id, i.task_type, i.source_outcome]
        for i in memory.insights
    ]
    runs = [
        [r.step, f"run/{r.step}.html", r.title or "", r.task_id, r.task_type, r.outcome]
        for r in memory.runs
    ]
    tasks = [
        [*run[:2], shortened(r.task, TASK_PREVIEW), *run[3:]]
        for run, r in zip(runs, memory.runs, strict=True)
    ]
    return {
        "min_score": MIN_SCORE,
        "limit": LIMIT,
        "stop_words": stop_words(),
        "kinds": {
            "insights": {"index": export(memory.insight_ranker), "entries": insights},
            "compilations": {
                "index": export(memory.compilation_ranker),
                "entries": [
                    entry if r.explanation else None
                    for entry, r in zip(runs, memory.runs, strict=True)
                ],
            },
            "tasks": {"index": export(memory.run_ranker), "entries": tasks},
        },
    }
