"""A corpus loaded once (its catalog and saved rankers), to render first messages and search.

memory = Memory.load(Path("corpus"))
message = memory.first_message("Book a flight ...", exclude_tasks=["12"])
print(message.text)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, overload

from wikitrace.corpus_schema.catalog import InsightEntry, LazyCatalog, PastRun, read_catalog
from wikitrace.corpus_schema.catalog_index import IndexedCatalog
from wikitrace.corpus_schema.errors import CorpusError
from wikitrace.corpus_schema.layout import CATALOG, SEARCH_DIR
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.search import MIN_SCORE, consolidate
from wikitrace.search.rank import Ranker, SearchName, search_texts

from . import find
from .first_message import FirstMessage, render_first_message
from .message_options import MessageOptions
from .task_scope import repeated_sentences, task_words


class Memory:
    """A corpus loaded once, to render first messages for many tasks."""

    def __init__(
        self,
        root: Path,
        runs: Sequence[PastRun],
        insights: Sequence[InsightEntry],
        offline: bool,
        withheld: int = 0,
        grouping: consolidate.Grouping = consolidate.group,
        leaders: Sequence[int] | None = None,
        from_catalog: bool = False,
        index: IndexedCatalog | None = None,
    ):
        self.root = root
        self.runs = runs
        self.insights = insights
        self.offline = offline
        self.withheld = withheld
        """Insights on record that the gate rejected or monitoring retired: never shown."""
        self._leaders = leaders
        self._grouping = grouping
        self._lexical = grouping is consolidate.group
        """Whether lessons are grouped by their words (the default), which one project's
        runs' lessons are also grouped by (`groups`)."""
        self._by_step: dict[str, PastRun] | None = None
        """Run step -> its run, made when a message is scoped by project or kind."""
        self._from_catalog = from_catalog
        self._index = index
        """The catalog's index, when the memory reads each record when first asked for: what
        is said of a project (its runs, its lessons) is then read from it, not from every
        record (a hook's recall, which reads one project's)."""
        self._scoped: dict[int, str] = {}
        """Indexed: each lesson of the projects asked for (`insights_of`) -> its project."""
        self._scoped_runs: dict[str, dict[str, PastRun]] = {}
        """Indexed: a project asked for -> its runs by step (the last of a step)."""

    @functools.cached_property
    def project_keys(self) -> frozenset[str]:
        """The projects of the runs (their keys: corpus_schema/projects.py)."""
        if self._index is not None:
            return frozenset(self._index.projects)
        return frozenset(run.project for run in self.runs if run.project)

    @functools.cached_property
    def task_types(self) -> list[str]:
        """The runs' task types, sorted."""
        if self._index is not None:
            return list(self._index.task_types)
        return sorted({run.task_type for run in self.runs if run.task_type})

    @functools.cached_property
    def gated(self) -> bool:
        """Whether any lesson passed the admission gate (status committed)."""
        if self._index is not None:
            return self._index.committed
        return any(item.status == "committed" for item in self.insights)

    def runs_of(self, projects: Collection[str]) -> list[int]:
        """The runs of `projects` (keys), in corpus order."""
        if self._index is not None:
            return self._index.runs_of(projects)
        return [i for i, run in enumerate(self.runs) if run.project in projects]

    def insights_of(self, projects: Collection[str]) -> list[int] | None:
        """The lessons whose source runs (`run_of`) are of `projects`, in corpus order, when
        the catalog's index says so without reading every lesson; else None."""
        if self._index is None:
            return None
        for key in projects:
            if key in self._index.projects and key not in self._scoped_runs:
                rows = self._index.projects[key]
                self._scoped_runs[key] = {self.runs[i].step: self.runs[i] for i in rows.runs}
                self._scoped.update(dict.fromkeys(rows.insights, key))
        return self._index.insights_of(projects)

    def insights_of_types(
        self, types: Collection[str] | None
    ) -> Iterable[tuple[int, InsightEntry]]:
        """Each insight of one of `types` (None: every one), with its place, in order: in a
        memory that reads each record when first asked for, only theirs are made."""
        if types is None:
            return enumerate(self.insights)
        if self._index is not None:
            return self._index.insights_of_types(types)
        return ((i, item) for i, item in enumerate(self.insights) if item.task_type in types)

    @functools.cached_property
    def _leader(self) -> Sequence[int]:
        """Near-duplicate lessons (search/consolidate.py): each insight's group's first (the
        message lists one of each group), as the catalog says or found now."""
        if self._leaders is not None:
            return self._leaders
        return consolidate.of_lessons(self.insights, self._grouping)

    @functools.cached_property
    def task_of(self) -> dict[str, TaskKey]:
        """Run step -> its task (source and id)."""
        return {run.step: run.task_key for run in self.runs}

    def drawn_from(self, item: InsightEntry, excluded: Collection[str]) -> bool:
        """Whether `item` rests on a run of a task `excluded` names (TaskKey.named_in): its
        source run's, or one a mined lesson quotes."""
        if not excluded:  # nothing left out: no task key made (a search reads every item)
            return False
        if item.source_task.named_in(excluded):
            return True
        return any(
            (task := self.task_of.get(step)) is not None and task.named_in(excluded)
            for step in item.cited_steps
        )

    @functools.cached_property
    def groups(self) -> Sequence[int]:
        """Each insight's group's first: the near-duplicates (`_leader`), with the groups of
        one project's runs whose titles say the same joined (consolidate.within_projects),
        each project's when first asked for."""
        if not self._lexical or not self.project_keys:
            return self._leader
        if self._index is not None:  # each project's lessons as the index says, read if asked
            return consolidate.ProjectGroups(
                self._leader,
                _Column(self.insights, "title"),
                _Column(self.insights, "source_step"),
                lambda step: None,
                lessons=_IndexedLessons(self._index, self._scoped),
            )
        by_step = {run.step: run.project for run in self.runs}
        return consolidate.ProjectGroups(
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
    def runs_by_task(self) -> dict[str, list[int]]:
        """The runs of each task, by its words (task_scope.task_words): a task's identical
        runs looked up once, not compared run by run."""
        found: dict[str, list[int]] = {}
        for i, run in enumerate(self.runs):
            found.setdefault(task_words(run.task), []).append(i)
        return found

    def identical_runs(self, task: str, among: Sequence[int]) -> set[int]:
        """The runs `among` those given whose task is `task` (task_scope.identical_task): from
        `runs_by_task`, or, in an indexed memory, from those runs alone."""
        words = task_words(task)
        if self._index is not None:
            return {i for i in among if task_words(self.runs[i].task) == words}
        return set(self.runs_by_task.get(words, ())) & set(among)

    @functools.cached_property
    def repeated_sentences(self) -> dict[tuple[str, int], int]:
        """The sentences two or more task texts of a domain hold (task_scope's templates),
        counted once, when a domain is first voted on."""
        return repeated_sentences(self.runs[ids[0]] for ids in self.runs_by_task.values())

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
    def load(
        cls,
        root: Path,
        grouping: consolidate.Grouping = consolidate.group,
        *,
        lazy: bool = False,
        indexed: bool = False,
    ) -> Memory:
        """The corpus at `root`; `grouping` says which lessons are near-duplicates (lexical
        by default, see search/consolidate.py). Read from its catalog (one file, written when
        the version was made), or from its pages when it has none (made before catalogs).
        `lazy`: each record made when first read (a single search, which reads its hits'
        alone), not all at once (what a first message reads, and a server that answers many).
        `indexed`: so too, through the catalog's index (corpus_schema/catalog_index.py), when
        the corpus has one that matches its catalog: a message for a task of a project with
        runs here (a hook's recall) then reads its runs' and lessons' lines alone."""
        if (read := _from_catalog(root, lazy=lazy, indexed=indexed)) is not None:
            runs, insights, offline, withheld, leaders, index = read
            # The catalog's groups are the lexical ones; any other grouping is made anew.
            kept = leaders if grouping is consolidate.group else None
            return cls(root, runs, insights, offline, withheld, grouping, kept, True, index=index)
        if not root.is_dir():  # said before the manifest's models are imported
            raise CorpusError.no_folder(root)
        from wikitrace.corpus_schema import manifest
        from wikitrace.corpus_schema.catalog_build import from_pages

        offline = manifest.load(root).compiled_by == "offline"
        runs, insights, withheld = from_pages(root)
        return cls(root, runs, insights, offline, withheld, grouping)

    def first_message(
        self, task: str, options: MessageOptions | None = None, **fields: Any
    ) -> FirstMessage:
        """The first message for `task` (tools/first_message.py): as `options` say, or a
        record of `fields` (`max_tokens=None`, ...), or `options` with `fields` changed. An
        unknown field is a TypeError."""
        if options is None:
            options = MessageOptions(**fields)
        elif fields:
            options = replace(options, **fields)
        return render_first_message(self, task, options)

    def run_of(self, insight: int) -> PastRun | None:
        """The run an insight was drawn from."""
        project = self._scoped.get(insight)
        if project is not None:  # the last run of its step, which is of this project
            return self._scoped_runs[project].get(self.insights[insight].source_step)
        if self._by_step is None:
            self._by_step = {run.step: run for run in self.runs}
        return self._by_step.get(self.insights[insight].source_step)

    def search(
        self,
        query: str,
        kinds: Sequence[find.SearchKind] = find.SEARCH_KINDS,
        *,
        limit: int = find.LIMIT,
        exclude_tasks: Sequence[str] = (),
        min_score: float = MIN_SCORE,
    ) -> list[find.Hit]:
        """The corpus searched by words, each hit with its score (tools/find.py)."""
        return find.search(
            self, query, kinds, limit=limit, exclude_tasks=exclude_tasks, min_score=min_score
        )


_Read = tuple[
    Sequence[PastRun], Sequence[InsightEntry], bool, int, Sequence[int], IndexedCatalog | None
]
"""A memory's records as read from its catalog: runs, insights, whether compiled offline, the
insights withheld, each insight's group's first, and the index they were read through."""


def _from_catalog(root: Path, *, lazy: bool, indexed: bool) -> _Read | None:
    """A memory's records read from the corpus's catalog (Memory.load says how), with their
    groups' leaders and the index read through; None when the corpus has no catalog."""
    index = IndexedCatalog.read(root) if indexed else None
    lines = index or (LazyCatalog.read(root) if lazy and (root / CATALOG).is_file() else None)
    if lines is not None:
        return lines.runs, lines.insights, lines.offline, lines.withheld, lines.leaders, index
    if (root / CATALOG).is_file():
        return (*read_catalog(root), None)
    return None


class _Column(Sequence[str]):
    """One text field of each insight, read when asked for (an indexed memory's records are
    made from their lines when first read)."""

    def __init__(self, insights: Sequence[InsightEntry], name: str) -> None:
        self._insights = insights
        self._name = name

    def __len__(self) -> int:
        return len(self._insights)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        return str(getattr(self._insights[index], self._name))


class _IndexedLessons:
    """Each project's lessons as a catalog's index says (consolidate.ProjectLessons)."""

    def __init__(self, index: IndexedCatalog, scoped: dict[int, str]) -> None:
        self._index = index
        self._scoped = scoped
        self._every: dict[int, str] | None = None

    def project_of(self, lesson: int) -> str | None:
        found = self._scoped.get(lesson)
        if found is not None:
            return found
        if self._every is None:  # a lesson of a project not asked for: every one's, once
            self._every = {
                i: key for key, rows in self._index.projects.items() for i in rows.insights
            }
        return self._every.get(lesson)

    def lessons(self, project: str) -> Sequence[int]:
        rows = self._index.projects.get(project)
        return rows.insights if rows is not None else []


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
