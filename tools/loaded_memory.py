"""What the first message, its scope and the search read of a loaded corpus (`memory.Memory`).

first_message.py, task_scope.py and find.py are typed against this, not against the class,
because memory.py imports them (a cycle, even if only the type checker followed it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Protocol

from wikitrace.corpus_schema.catalog import InsightEntry, PastRun
from wikitrace.search.rank import Ranker


class LoadedMemory(Protocol):
    """A corpus loaded once (tools/memory.py, `Memory`), as a first message or a search reads it."""

    runs: Sequence[PastRun]
    insights: Sequence[InsightEntry]
    offline: bool
    withheld: int

    @property
    def groups(self) -> Sequence[int]:
        """Each insight's group's first: one lesson is listed of each group."""

    @property
    def run_ranker(self) -> Ranker:
        """BM25 over the runs' tasks."""

    @property
    def insight_ranker(self) -> Ranker:
        """BM25 over the insights."""

    @property
    def compilation_ranker(self) -> Ranker:
        """BM25 over the compilations' titles and claims."""

    @property
    def runs_by_task(self) -> dict[str, list[int]]:
        """The runs of each task, by its words (task_scope.task_words)."""

    @property
    def repeated_sentences(self) -> dict[tuple[str, int], int]:
        """The sentences two or more task texts of a domain hold (task_scope's templates)."""

    def drawn_from(self, item: InsightEntry, excluded: Collection[str]) -> bool:
        """Whether `item` rests on a run of a task `excluded` names."""

    def insights_of_types(
        self, types: Collection[str] | None
    ) -> Iterable[tuple[int, InsightEntry]]:
        """Each insight of one of `types` (None: every one), with its place, in order."""

    def run_of(self, insight: int) -> PastRun | None:
        """The run an insight was drawn from."""

    def identical_runs(self, task: str, among: Sequence[int]) -> set[int]:
        """The runs `among` those given whose task is `task` (task_scope.identical_task)."""

    @property
    def project_keys(self) -> frozenset[str]:
        """The projects of the runs."""

    @property
    def task_types(self) -> list[str]:
        """The runs' task types, sorted."""

    @property
    def gated(self) -> bool:
        """Whether any lesson passed the admission gate."""

    def runs_of(self, projects: Collection[str]) -> list[int]:
        """The runs of `projects`, in corpus order."""

    def insights_of(self, projects: Collection[str]) -> list[int] | None:
        """The lessons drawn from runs of `projects`, in corpus order, when known without
        reading every lesson; else None."""
