"""A corpus loaded once (its catalog and saved rankers), to render first messages and search.

memory = Memory.load(Path("corpus"))
message = memory.first_message("Book a flight ...", exclude_task="12")
print(message.text)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.catalog import InsightEntry, PastRun, read_catalog
from wikitrace.corpus_schema.catalog_build import from_pages
from wikitrace.corpus_schema.layout import (
    CATALOG,
    COMPILATION_DIR,
    INSIGHT_DIR,
    RAW_DIR,
    RAW_METADATA_NAME,
    SEARCH_DIR,
)
from wikitrace.corpus_schema.records import READ_ONLY_MARK, Outcome
from wikitrace.corpus_schema.render import shortened
from wikitrace.search import consolidate
from wikitrace.search.rank import Ranker, SearchName, search_texts

from .first_message import TASK_PREVIEW, render_first_message

SearchKind = Literal["insights", "compilations", "tasks"]
SEARCH_KINDS: tuple[SearchKind, ...] = ("insights", "compilations", "tasks")


@dataclass
class Hit:
    """One search result: what it is, where its page is, and a line to recognise it by."""

    kind: SearchKind
    id: str
    path: str
    """The page, relative to the corpus root."""
    title: str
    task_id: str
    task_type: str | None
    outcome: Outcome
    """The outcome of the run it is (a task or compilation) or was drawn from (an insight)."""
    read_only: bool = False
    """An insight whose only support is content the agent read (records.READ_ONLY): its line
    says so, as every place that shows the lesson does."""

    def line(self) -> str:
        """The hit in one line, as `search` shows it: kind, id, task, outcome, title, page."""
        task = f"task {self.task_id}" + (f", {self.task_type}" if self.task_type else "")
        if self.read_only:
            task += f", {READ_ONLY_MARK}"
        title = " ".join(self.title.split())
        return f"{self.kind.rstrip('s')} {self.id} ({task}, {self.outcome}): {title}  [{self.path}]"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


QUERY_LIMIT = 2_000
"""The longest query `search` takes, in characters."""


class Memory:
    """A corpus loaded once, to render first messages for many tasks."""

    def __init__(
        self,
        root: Path,
        runs: list[PastRun],
        insights: list[InsightEntry],
        offline: bool,
        withheld: int = 0,
        grouping: consolidate.Grouping = consolidate.group,
        leaders: list[int] | None = None,
        from_catalog: bool = False,
    ):
        self.root = root
        self.runs = runs
        self.insights = insights
        self.offline = offline
        self.withheld = withheld
        """Insights on record that the gate rejected or monitoring retired: never shown."""
        # Near-duplicate lessons (search/consolidate.py): the message lists one of each group.
        self._leader = (
            leaders if leaders is not None else consolidate.of_lessons(insights, grouping)
        )
        self._lexical = grouping is consolidate.group
        """Whether lessons are grouped by their words (the default), which one project's
        runs' lessons are also grouped by (`groups`)."""
        self.task_of = {run.step: run.task_key for run in runs}
        """Run step -> its task (source and id)."""
        self._by_step: dict[str, PastRun] | None = None
        """Run step -> its run, made when a message is scoped by project or kind."""
        self._from_catalog = from_catalog

    def drawn_from(self, item: InsightEntry, excluded: Collection[str]) -> bool:
        """Whether `item` rests on a run of a task `excluded` names (TaskKey.named_in): its
        source run's, or one a mined lesson quotes."""
        if item.source_task.named_in(excluded):
            return True
        return any(
            (task := self.task_of.get(step)) is not None and task.named_in(excluded)
            for step in item.cited_steps
        )

    @functools.cached_property
    def groups(self) -> list[int]:
        """Each insight's group's first: the near-duplicates (`_leader`), with the groups of
        one project's runs whose titles say the same joined (consolidate.within_projects)."""
        if not self._lexical or not any(run.project for run in self.runs):
            return self._leader
        by_step = {run.step: run.project for run in self.runs}
        return consolidate.within_projects(
            self._leader,
            [item.title for item in self.insights],
            [item.source_step for item in self.insights],
            by_step.get,
        )

    # The rankers are loaded, or built, when first needed: a message that fits its budget
    # needs none.
    @functools.cached_property
    def run_ranker(self) -> Ranker:
        """BM25 over the runs' tasks, less the lines most tasks share."""
        return self._ranker("tasks")

    @functools.cached_property
    def insight_ranker(self) -> Ranker:
        """BM25 over the insights (a budget, a search)."""
        return self._ranker("insights")

    @functools.cached_property
    def compilation_ranker(self) -> Ranker:
        """BM25 over the compilations' titles and claims (a search)."""
        return self._ranker("compilations")

    def _ranker(self, name: SearchName) -> Ranker:
        """The ranker saved with the catalog the memory was read from, or one built now (a
        corpus made before rankers were saved, or a memory made from its pages)."""
        saved = self.root / SEARCH_DIR / name
        if self._from_catalog and saved.is_dir():
            return Ranker.load(saved, len(self.insights if name == "insights" else self.runs))
        return Ranker.of(search_texts(name, lambda: self.runs, lambda: self.insights))

    @classmethod
    def load(cls, root: Path, grouping: consolidate.Grouping = consolidate.group) -> Memory:
        """The corpus at `root`; `grouping` says which lessons are near-duplicates (lexical
        by default, see search/consolidate.py). Read from its catalog (one file, written when
        the version was made), or from its pages when it has none (made before catalogs)."""
        if (root / CATALOG).is_file():
            runs, insights, offline, withheld, leaders = read_catalog(root)
            # The catalog's groups are the lexical ones; any other grouping is made anew.
            kept = leaders if grouping is consolidate.group else None
            return cls(root, runs, insights, offline, withheld, grouping, kept, from_catalog=True)
        from wikitrace.corpus_schema import manifest

        offline = manifest.load(root).compiled_by == "offline"
        runs, insights, withheld = from_pages(root)
        return cls(root, runs, insights, offline, withheld, grouping)

    first_message = render_first_message
    """The first message for a task (tools/first_message.py)."""

    def run_of(self, insight: int) -> PastRun | None:
        """The run an insight was drawn from."""
        if self._by_step is None:
            self._by_step = {run.step: run for run in self.runs}
        return self._by_step.get(self.insights[insight].source_step)

    def search(
        self,
        query: str,
        kinds: Sequence[SearchKind] = SEARCH_KINDS,
        *,
        limit: int = 10,
        exclude_tasks: Sequence[str] = (),
    ) -> list[Hit]:
        """BM25 over insights (title, guideline, applicability), compilations (title and
        claims) and past tasks: up to `limit` hits of each kind asked for, best first, only
        those sharing a word with the query; nothing drawn from `exclude_tasks`. Words are
        matched by their stems, and a snake_case, camelCase or dotted name by its parts too."""
        if len(query) > QUERY_LIMIT:
            raise InputError(
                f"the query is {len(query)} characters; at most {QUERY_LIMIT}", field="query"
            )
        excluded = set(exclude_tasks)
        hits: list[Hit] = []
        if "insights" in kinds:
            allowed = [
                i for i, item in enumerate(self.insights) if not self.drawn_from(item, excluded)
            ]
            for i in self.insight_ranker.rank(query, allowed, matched_only=True)[:limit]:
                item = self.insights[i]
                hits.append(
                    Hit(
                        "insights",
                        item.id,
                        f"{INSIGHT_DIR}/{item.id}.md",
                        item.title,
                        item.source_task_id,
                        item.task_type,
                        item.source_outcome,
                        item.read_only,
                    )
                )
        allowed = [i for i, run in enumerate(self.runs) if not run.task_key.named_in(excluded)]
        if "compilations" in kinds:
            compiled = [i for i in allowed if self.runs[i].explanation]
            for i in self.compilation_ranker.rank(query, compiled, matched_only=True)[:limit]:
                run = self.runs[i]
                hits.append(
                    Hit(
                        "compilations",
                        run.step,
                        f"{COMPILATION_DIR}/{run.step}.md",
                        run.title or "",
                        run.task_id,
                        run.task_type,
                        run.outcome,
                    )
                )
        if "tasks" in kinds:
            for i in self.run_ranker.rank(query, allowed, matched_only=True)[:limit]:
                run = self.runs[i]
                hits.append(
                    Hit(
                        "tasks",
                        run.step,
                        f"{RAW_DIR}/{run.step}/{RAW_METADATA_NAME}",
                        shortened(run.task, TASK_PREVIEW),
                        run.task_id,
                        run.task_type,
                        run.outcome,
                    )
                )
        return hits


def insights_shown(corpus: Path) -> Callable[[str], list[InsightEntry]]:
    """A task -> the insights the first message for it lists with no budget, in its order,
    from the corpus at `corpus`, loaded when first asked (once, for every task)."""

    @functools.cache
    def loaded() -> Memory:
        return Memory.load(corpus)

    def shown(task: str) -> list[InsightEntry]:
        memory = loaded()
        by_id = {entry.id: entry for entry in memory.insights}
        return [by_id[i] for i in memory.first_message(task, max_tokens=None).insights]

    return shown
