"""Lessons without a model: what the runs themselves say about which behaviour goes with failure.

Two kinds of lesson are mined, both from the actions a run took (tool calls, `action` lines),
never from what the environment said about the outcome:

- **contrast**: within a task type, a pattern of action (a tool used, one tool used before
  another, an action repeated unchanged, an action repeated after it failed, a file edited
  unread, tests run after the last edit, ...) whose presence separates failed from
  successful runs of the same task. Each pattern is tested with an exact test stratified by
  task (`mine_contrast.stratified_exact`), over the tasks with runs with and without it and
  runs of both outcomes, so that a pattern that only marks harder tasks is no lesson; the
  p-values of every pattern tried in the build are adjusted together (Benjamini-Hochberg),
  and a pattern is kept when its adjusted value is at most `FDR`, at least `MIN_TASKS` tasks
  are compared and at least `MIN_SUPPORT` of their runs show it and do not.
- **divergence**: for a task with both a failed and a successful run, the first action where
  the two (the pair that agree longest) went different ways.

A run is reduced to its patterns as it streams through the build (`Miner.observe`); what is
kept is a row of pattern -> turn per run in a table of arrays (`PatternTable`), also written
in pages (`raw/_patterns-NNNN.jsonl`, `mine_table.patterns_pages`) so that `add` mines
across the whole corpus without reading every run again. Quotes are cut from the raw turn
logs as written (redacted) and checked like any compilation's.
"""

from __future__ import annotations

import functools
import sys
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import Layout, RunRecord
from wikitrace.corpus_schema.contrast_tests import ContrastTests
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.tasks import TaskKey

from .mine_contrast import Contrast, MiningReport, contrasts_of_types
from .mine_divergence import Divergence, divergence_key, divergences
from .mine_lessons import LessonWriter, MinedLesson, Quotes
from .mine_patterns import Action, action_places, actions_of, patterns
from .mine_table import (
    ActionHashes,
    PatternTable,
    RunPatterns,
    action_hashes,
    signature_hashes,
    task_of,
)

__all__ = [
    "MinedPage",
    "Miner",
    "NewDivergence",
    "mine_version",
    "patterns_of_written",
    "run_patterns",
    "runs_layout",
]

Found = tuple[RunPatterns, list[str], "array[int]"]
"""What mining keeps of a run found in a worker process (`found_in`): its patterns, its
actions' signatures (hashed by the build, `Miner.add_found`: Python's hash of a text is the
process's own) and their places (mine_patterns.action_places)."""


def run_patterns(step: int, record: RunRecord, judged: bool) -> tuple[RunPatterns, list[Action]]:
    """What mining keeps of a run, and the actions they were found in."""
    actions = actions_of(record.turns)
    run = RunPatterns(
        step=step,
        task_id=record.task_id,
        task_type=record.task_type,  # interned by the raw layer
        success=record.success,
        judged=judged,
        patterns=patterns(actions, record.task),
        origin=record.origin,
    )
    return run, actions


def found_in(step: int, record: RunRecord, judged: bool) -> Found:
    """What mining keeps of a run, found in a worker process for the build's
    `Miner.add_found`."""
    run, actions = run_patterns(step, record, judged)
    return run, [action.signature for action in actions], action_places(actions)


class MiningStopped(Exception):
    """Mining ended early: the build it ran beside stopped (`Miner.stop`)."""


class Miner:
    """Reduces each run of a build to its patterns as it streams past (and, given a folder
    for them, keeps its actions' hashes on disk for the divergences)."""

    def __init__(
        self,
        base: Iterable[RunPatterns] = (),
        folder: Path | None = None,
        tests: ContrastTests | None = None,
        pages_kept: int = 0,
    ) -> None:
        self.runs = base if isinstance(base, PatternTable) else PatternTable(base)
        self.pages_kept = pages_kept
        """How many full pages of the parent's mined patterns the version keeps as they are
        (the table's first runs)."""
        self.new_tasks: set[TaskKey] = set()
        self.new_types: set[str | None] = set()
        self.kept_tests = tests
        """What the parent's mining tested of each task type (`raw/_contrast_tests.json`)."""
        self.tests: ContrastTests | None = None
        """What this version's mining tested, once it has mined (`mine_version`)."""
        self.actions = ActionHashes(folder) if folder is not None else None
        self.stop: threading.Event | None = None
        """Set when the build this mining runs beside has stopped (`layers_mined.premine`):
        mining then ends before its next task type's tests or its divergences, with
        `MiningStopped`."""

    def check_stopped(self) -> None:
        """Raises `MiningStopped` once the build this mining runs beside has stopped."""
        if self.stop is not None and self.stop.is_set():
            raise MiningStopped("the build stopped while its mining ran")

    def observe(self, step: int, record: RunRecord, judged: bool) -> None:
        run, actions = run_patterns(step, record, judged)
        self.add(run, action_hashes(actions), action_places(actions))

    def add_found(self, found: Found) -> None:
        """A run observed by a worker process (`found_in`), in step order."""
        run, signatures, places = found
        if run.task_type:  # unpickled: the build's one copy of each type's name
            run.task_type = sys.intern(run.task_type)
        self.add(run, signature_hashes(signatures), places)

    def add(self, run: RunPatterns, hashes: array[int], places: array[int]) -> None:
        """A run observed (`run_patterns`), in step order, with its actions' hashes and
        places (`action_places`)."""
        if self.actions is not None:
            self.actions.add_hashes(run.step, hashes, places)
        self.runs.append(run)
        self.new_tasks.add(task_of(run))
        self.new_types.add(run.task_type)

    def release(self) -> None:
        """Let go of every run's patterns, once the version's lessons are mined and its patterns
        table is written: the catalog and rankers made after them reuse that memory. The
        actions' file stays until `close`: the new divergences' pages read it."""
        self.runs = PatternTable()
        self.new_tasks = set()
        self.new_types = set()

    def close(self) -> None:
        """Remove the file of actions' hashes (no file of the corpus)."""
        if self.actions is not None:
            self.actions.close()
            self.actions = None

    def watch(
        self, runs: Iterable[tuple[int, RunRecord]], judged: Any
    ) -> Iterator[tuple[int, RunRecord]]:
        """`runs`, each observed on its way through."""
        for step, record in runs:
            self.observe(step, record, judged(record.metadata))
            yield step, record


# --- one version's mined lessons ---------------------------------------------------------------


@dataclass
class MinedPage:
    """A mined insight page of the new version: new, or a parent's page written anew. A new
    divergence's header is made only when the page is written (`content`): a corpus with
    a task in four with both outcomes holds one for every fourth run."""

    number: int
    new: bool
    lesson: MinedLesson | Callable[[], MinedLesson]

    def content(self) -> tuple[InsightHeader, str]:
        """The page's header (its id not yet set) and guideline; made anew at each call when
        the page is lazy."""
        lesson = _made(self.lesson)
        return lesson.header, lesson.guideline


@dataclass
class NewDivergence:
    """A new divergence's lesson, made when its page is written (`LessonWriter.divergence`
    called then: here, or in a build's worker process, which has the `divergence`)."""

    divergence: Divergence
    make: Callable[[], MinedLesson]

    def __call__(self) -> MinedLesson:
        return self.make()


def _made(lesson: MinedLesson | Callable[[], MinedLesson]) -> MinedLesson:
    return lesson if isinstance(lesson, MinedLesson) else lesson()


def _key(header: InsightHeader) -> str | None:
    finding = header.mined
    if finding is None:
        return None
    if finding.kind == "divergence" and finding.task is not None:
        return divergence_key(finding.task)
    return f"contrast {header.task_type} {finding.pattern}"


def _same(old: InsightHeader, new: InsightHeader) -> bool:
    """Whether a parent's mined page says what the new one would (the version aside)."""
    if old.mined is None or new.mined is None or not old.mined.holds:
        return False
    keep = {"version"}
    return old.mined.model_dump(exclude=keep) == new.mined.model_dump(exclude=keep) and (
        old.title == new.title and old.evidence == new.evidence
    )


def runs_layout(
    layout: Layout, parent_root: Path | None, parent_steps: int
) -> Callable[[int], Layout]:
    """Where each run's files are read (`Quotes`): runs up to `parent_steps` in the parent
    version at `parent_root` (laid out as `layout`), the rest in `layout`'s version."""

    def layout_of(step: int) -> Layout:
        if parent_root is not None and step <= parent_steps:
            return Layout(parent_root, layout.step_width, layout.insight_width)
        return layout

    return layout_of


def mine_version(
    miner: Miner,
    layout: Layout,
    *,
    version: str,
    first_number: int,
    task_text: Callable[[int], str],
    parent: dict[int, tuple[InsightHeader, str]] | None = None,
    parent_root: Path | None = None,
    parent_steps: int = 0,
) -> tuple[list[MinedPage], MiningReport]:
    """The mined insight pages a version writes (their ids are set by the caller, once the
    width of insight ids is known): lessons found anew get numbers from `first_number`; a
    parent's mined lesson found again keeps its number (and status) and is written anew when
    its numbers changed; one no longer found is written anew as no longer holding. Runs up
    to `parent_steps` are read from `parent_root`, the rest from `layout`."""
    report = MiningReport()
    quotes = Quotes(runs_layout(layout, parent_root, parent_steps))
    lessons = _found(miner, quotes, layout, report, task_text, parent is not None)
    by_key = {
        key: (number, header, guideline)
        for number, (header, guideline) in (parent or {}).items()
        if (key := _key(header)) is not None
    }
    pages: list[MinedPage] = []
    number = first_number - 1
    matched: set[str] = set()
    for key, made in lessons:
        old = by_key.get(key)
        if old is None:
            number += 1
            pages.append(MinedPage(number, new=True, lesson=made))
            continue
        lesson = _made(made)
        assert lesson.key == key, f"mined lesson {lesson.key} listed as {key}"
        matched.add(lesson.key)
        old_number, old_header, _ = old
        lesson.header.id = old_header.id
        lesson.header.status = old_header.status
        lesson.header.decisions = list(old_header.decisions)
        lesson.header.hypothesis = old_header.hypothesis
        if (
            not _same(old_header, lesson.header)
            or not old_header.mined
            or not old_header.mined.holds
        ):
            pages.append(MinedPage(old_number, new=False, lesson=lesson))
    for key, (old_number, old_header, guideline) in by_key.items():
        finding = old_header.mined
        if key in matched or finding is None or not finding.holds:
            continue
        if finding.kind == "divergence" and finding.task not in miner.new_tasks:
            continue
        gone = old_header.model_copy(
            update={"mined": finding.model_copy(update={"holds": False, "version": version})}
        )
        pages.append(MinedPage(old_number, new=False, lesson=MinedLesson(gone, guideline, key)))
    return pages, report


def _found(
    miner: Miner,
    quotes: Quotes,
    layout: Layout,
    report: MiningReport,
    task_text: Callable[[int], str],
    added: bool,
) -> list[tuple[str, MinedLesson | Callable[[], MinedLesson]]]:
    """The lessons mining finds in the miner's runs, by key, in the order new ones are
    numbered. `added`: the version is made from a parent (an add)."""
    writer = LessonWriter(layout, quotes)
    table = miner.runs

    # Only the task types the version's runs touch are recounted (and those whose patterns
    # the adjustment then makes significant): the others' tests are the parent's.
    def members_of(task_type: str | None) -> Sequence[RunPatterns]:
        miner.check_stopped()  # between two types' tests, each up to a few tenths of a second
        return table.type_runs(task_type)

    found, miner.tests = contrasts_of_types(
        table.task_types(),
        members_of,
        report,
        kept=miner.kept_tests if added else None,
        touched=miner.new_types,
    )
    # New lessons are numbered contrasts first (by key), then divergences in the order runs
    # in step order found them: a chain of adds numbers them as one build of its runs does.
    lessons: list[tuple[str, MinedLesson | Callable[[], MinedLesson]]] = sorted(
        _contrast_lessons(writer, found, report.patterns_tried), key=lambda keyed: keyed[0]
    )
    # A divergence of a parent's task is kept unless this version added runs of that task:
    # only those tasks' runs are read back.
    only = miner.new_tasks if added else None
    miner.check_stopped()
    runs = list(table) if only is None else table.of_tasks(only)
    for divergence in divergences(runs, quotes.actions, report, only, miner.actions):
        # Its task's text is read when its page is made, not held until then.
        make = functools.partial(writer.divergence, divergence, task_text)
        lessons.append((divergence_key(divergence.task), NewDivergence(divergence, make)))
    return lessons


def _contrast_lessons(
    writer: LessonWriter, found: list[Contrast], patterns_tried: int
) -> Iterator[tuple[str, MinedLesson]]:
    """Each contrast found as a lesson, by its key."""
    for contrast in found:
        lesson = writer.contrast(contrast, patterns_tried)
        yield lesson.key, lesson


def patterns_of_written(rows: Iterable[Any], layout_of: Any) -> PatternTable:
    """Patterns of runs already written (a parent built before mining): read from their logs."""
    quotes = Quotes(layout_of)
    found = PatternTable()
    for row in rows:
        found.append(
            RunPatterns(
                step=row.step,
                task_id=row.task_id,
                task_type=row.task_type,
                success=row.outcome == "success",
                judged=row.judged,
                patterns=patterns(quotes.actions(row.step), row.task),
                origin=row.origin,
            )
        )
    return found
