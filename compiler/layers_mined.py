"""A version's mined lessons (compiler/layers.py writes them): mining it, after the last run
or beside a model build's last calls (`premine`), and each new divergence's lesson made, in
the build's process or in its workers (`divergence_pages`)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from wikitrace.corpus_schema import (
    Layout,
    indexes,
    insight_pages,
    render,
)
from wikitrace.corpus_schema.history import VersionInfo
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.spill import RunRows
from wikitrace.corpus_schema.writing import NewFiles
from wikitrace.versions import FrozenVersion

from .mine import MinedPage, Miner, NewDivergence, mine_version, runs_layout
from .mine_divergence import Divergence
from .mine_lessons import LessonWriter, Quotes
from .mine_patterns import Action
from .mine_table import ActionHashes
from .stages import CompiledRuns, Premined


def mined_pages(
    miner: Miner | None,
    layout: Layout,
    runs: CompiledRuns,
    all_rows: RunRows,
    version: VersionInfo,
    base: FrozenVersion | None,
    number: int,
) -> tuple[list[MinedPage], dict[str, Any] | None]:
    """The mined lessons' pages and what mining tried and found, new lessons numbered after
    the model's `number` insights: mined now, or taken from what a model build mined while its
    last calls were in flight (`premine`, which numbered them from 1)."""
    premined = runs.premined
    if premined is None:
        return _mine(miner, layout, task_text_of(all_rows), version, base, number + 1)
    for page in premined.pages:
        page.number += number if page.new else 0
    return premined.pages, premined.mining


PAGES_A_JOB = 64
"""Pages made in one piece of work handed on (`divergence_pages`, `_named_pages`)."""
_Item = TypeVar("_Item")


@dataclass(frozen=True)
class _Divergences:
    """New divergences whose pages are to be written, as a worker process takes them."""

    root: str
    """The staging folder."""
    layout: Layout
    """The version's layout, its insight ids as wide as they are written."""
    parent: tuple[str, int] | None
    """The parent version's folder and runs (their logs are read there)."""
    pages: list[tuple[int, Divergence, str]]
    """Each page's number, its divergence (not `load`ing) and its successful run's task."""
    places: dict[int, array[int]]
    """The places of the actions of the pages' runs the build mined (ActionHashes.places),
    by step: those runs' turns are read only where a page quotes them."""


def in_jobs(items: Iterable[_Item]) -> Iterator[list[_Item]]:
    """`items` PAGES_A_JOB at a time, in order."""
    left = iter(items)
    while job := list(itertools.islice(left, PAGES_A_JOB)):
        yield job


def divergence_jobs(
    root: str,
    layout: Layout,
    base: FrozenVersion | None,
    pages: Iterable[MinedPage],
    task_text: Callable[[int], str],
    actions: ActionHashes | None,
) -> Iterator[_Divergences]:
    """The new divergences among `pages`, PAGES_A_JOB a job (`root`: the staging folder)."""
    parent = (os.fspath(base.root), len(base.rows)) if base else None
    for chunk in in_jobs(_new_divergences(pages, task_text, actions)):
        yield _Divergences(
            root,
            layout,
            parent,
            [(number, found, task) for number, found, task, _ in chunk],
            {step: held for *_, places in chunk for step, held in places.items()},
        )


def task_text_of(rows: Sequence[indexes.RunRow]) -> Callable[[int], str]:
    """The task of run `step` as `rows` (a RunRows, or the parent's rows: steps from 1 with
    no gap) hold it."""
    if isinstance(rows, RunRows):
        return lambda step: rows.by_step(step).task
    return lambda step: rows[step - 1].task


def _new_divergences(
    pages: Iterable[MinedPage], task_text: Callable[[int], str], actions: ActionHashes | None
) -> Iterator[tuple[int, Divergence, str, dict[int, array[int]]]]:
    """The pages of new divergences, in order, each with the places of its runs' actions
    where the build kept them; each divergence's successful run's task read here (the rows
    are this process's)."""
    for page in pages:
        if isinstance(page.lesson, NewDivergence):
            found = dataclasses.replace(page.lesson.divergence, load=_not_loaded)
            places = {}
            for run in (found.success, found.failure):
                held = actions.places(run.step) if actions is not None else None
                if held is not None:
                    places[run.step] = held
            yield page.number, found, task_text(found.success.step), places


def _not_loaded(step: int) -> Sequence[Action]:
    raise AssertionError(f"a divergence's actions of step {step} asked before they are read")


def _divergence_lessons(job: _Divergences) -> list[tuple[InsightHeader, str]]:
    """Each divergence's lesson made (its runs' actions read from their logs): its header
    (its id not set) and guideline."""
    layout, parent = job.layout, job.parent
    parent_root, parent_steps = (Path(parent[0]), parent[1]) if parent else (None, 0)
    quotes = Quotes(runs_layout(layout, parent_root, parent_steps))
    for step, places in job.places.items():
        quotes.know(step, places)
    lessons = LessonWriter(layout, quotes)
    made = []
    for _, found, task in job.pages:
        found.load = quotes.actions
        lesson = lessons.divergence(found, {found.success.step: task}.__getitem__)
        made.append((lesson.header, lesson.guideline))
    return made


def divergence_pages(job: _Divergences) -> list[tuple[InsightHeader, str, list[bytes], str]]:
    """Each divergence's lesson made (`_divergence_lessons`) and its page written: its
    header, guideline, the lines of its files in the build's list, and its guideline as the
    catalog shows it (`render.page_line`, made here, not in the build's process, which takes
    the pages back one by one)."""
    files = NewFiles(job.root)
    made = []
    for (number, _, _), (header, guideline) in zip(
        job.pages, _divergence_lessons(job), strict=True
    ):
        header.id = job.layout.insight(number)
        lines = files.write_files(insight_pages.insight_files(header, guideline))
        made.append((header, guideline, lines, render.page_line(guideline)))
    return made


def premine(
    miner: Miner,
    layout: Layout,
    new_rows: RunRows,
    version: VersionInfo,
    base: FrozenVersion | None,
    stop: threading.Event,
) -> Premined:
    """The version's mining from its runs alone, once every run is read (`new_rows`: the new
    runs' rows), while the last calls are in flight: its lessons, new ones numbered from 1,
    and each new divergence's lesson made. Reads the runs' logs and rows, writes nothing.
    Once `stop` is set (the build stopped) it ends before its next task type's contrast tests or
    piece of divergence work, with `mine.MiningStopped`."""
    parent_steps = len(base.rows) if base else 0
    new_text = task_text_of(new_rows)
    parent_text = task_text_of(base.rows) if base else new_text

    def task_text(step: int) -> str:
        return parent_text(step) if step <= parent_steps else new_text(step)

    miner.stop = stop
    pages, mining = _mine(miner, layout, task_text, version, base, 1)
    assert mining is not None
    made: list[tuple[InsightHeader, str]] = []
    for job in divergence_jobs(
        os.fspath(layout.root), layout, base, pages, task_text, miner.actions
    ):
        miner.check_stopped()
        made += _divergence_lessons(job)
    return Premined(pages, mining, made)


def _mine(
    miner: Miner | None,
    layout: Layout,
    task_text: Callable[[int], str],
    version: VersionInfo,
    base: FrozenVersion | None,
    first_number: int,
) -> tuple[list[MinedPage], dict[str, Any] | None]:
    """The mined lessons of the version (compiler/mine.py), numbered from `first_number` (after
    the model's), and what mining tried and found (None: --no-mine); `task_text`: a run's
    task, by step."""
    if miner is None:
        return [], None
    parent: dict[int, tuple[InsightHeader, str]] = {}
    if base is not None:
        for row in base.insight_rows:
            if row.pattern is None:
                continue  # a lesson a model drew
            if (
                row.pattern == indexes.DIVERGENCE
                and base.rows[row.source_step - 1].task_key not in miner.new_tasks
            ):
                # Its task (its source run's) has no new run: mining neither finds it again
                # nor drops it (mine_version), so its page is not read.
                continue
            page = base.insights[base.layout().insight(row.number)]  # its page alone
            if page.header.mined is not None:
                parent[row.number] = (page.header, row.guideline)
    pages, mining = mine_version(
        miner,
        layout,
        version=version.name,
        first_number=first_number,
        task_text=task_text,
        parent=parent if base is not None else None,
        parent_root=base.root if base else None,
        parent_steps=len(base.rows) if base else 0,
    )
    return pages, mining.as_dict()
