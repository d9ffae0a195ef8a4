"""Compiling the runs of a version: offline one after another, or with a model up to
`concurrency` calls at once, each run's failure recorded without stopping the others."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import itertools
import logging
import pickle
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from wikitrace.corpus_schema import (
    Compilation,
    Layout,
    RunRecord,
    compilation_pages,
    id_width,
    indexes,
    insight_pages,
    read,
    render,
)
from wikitrace.corpus_schema.catalog import claim_texts
from wikitrace.corpus_schema.catalog_build import WrittenInsights
from wikitrace.corpus_schema.records import READ_ONLY, Outcome, is_judged, support_of
from wikitrace.corpus_schema.spill import InsightRows
from wikitrace.corpus_schema.writing import CorpusWriter, spill_file
from wikitrace.transport.batch import Deferred
from wikitrace.transport.llm import LLM, LLMCallError

from .compile import CompileLimits, CompileStats, Templates, compile_with_llm
from .offline import compile_offline

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
_Meanwhile = TypeVar("_Meanwhile")


class OffLoop(Protocol):
    """Where a model build's worker processes render and write the compiled runs' pages
    while its calls flow, and the raw layer's files (model_farm.OffLoop)."""

    def pages(
        self,
        result: Compilation,
        task_id: str,
        task_type: str | None,
        numbers: list[int],
        width: int,
        then: Callable[[bytes], None] | None = None,
    ) -> None: ...

    async def room(self) -> None:
        """Wait until the workers have room for more."""

    async def drain(self) -> None:
        """Take back all that was handed over."""


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Take a stopped thread's outcome, so that no "exception never retrieved" is logged."""
    if not future.cancelled():
        future.exception()


@dataclass(slots=True)
class Summary:
    """What the indexes need of one compiled run, and where its compilation waits when the
    model drew insights from it; the compilation itself is on disk."""

    step: int
    title: str
    unverified_quotes: int
    insights: list[int]
    """The numbers of the insights drawn from it."""
    task_id: str
    task_type: str | None
    spilled: tuple[int, int] | None
    """(offset, length) of the compilation in the spill file, when it has insights."""
    statements: list[str]
    """Its claims' statements, each followed by its quotes (catalog.claim_texts: search
    reads them with its title)."""
    backing: list[bool]
    """Whether a verified quote backs each claim (read.claim_backing)."""


@dataclass(slots=True)
class _Finished:
    """A run compiled, waiting for every earlier one to be done before its insights are
    numbered."""

    summary: Summary
    outcome: Outcome
    judged: bool
    result: Compilation | None
    """Kept when the run was next in step order as it was compiled; read back otherwise."""


DECIDE_AFTER = 256
"""Runs numbered before a new corpus's insight id width is chosen (see Compiled)."""
BACKLOG_STEP = 4
"""Pages of runs numbered before the width was chosen written with each run numbered after
it (see Compiled), besides that run's own."""


def guess_width(drawn: int, done: int, total: int) -> int:
    """The id width a new corpus's insights will likely need, when `done` of its `total`
    runs have drawn `drawn`: as many for every run, and a mined lesson for every fourth."""
    return id_width(drawn * total // done + total // 4)


def summarize(
    step: int, record: RunRecord, result: Compilation, spilled: tuple[int, int] | None = None
) -> Summary:
    """What the indexes need of a compiled run (its insights not numbered yet)."""
    return Summary(
        step,
        result.title,
        result.unverified_quotes,
        [],
        record.task_id,
        record.task_type,
        spilled,
        claim_texts(result.claims),
        read.claim_backing(result.claims),
    )


def plain_compilation(layout: Layout, record: RunRecord, result: Compilation) -> render.PageFiles:
    """The page (and data file) of a compilation with no insight drafted: it links to nothing
    unnumbered, so it is written as soon as it is compiled."""
    return compilation_pages.compilation(
        layout, result, task_id=record.task_id, task_type=record.task_type, insight_numbers=[]
    )


def pickled_page(files: render.PageFiles) -> bytes:
    """A page and its data file as WaitingPages keeps them (and worker processes send them:
    the build passes the bytes on, never reading them)."""
    return pickle.dumps(files, protocol=pickle.HIGHEST_PROTOCOL)


def unpickled_page(data: bytes) -> render.PageFiles:
    """The page and data file `pickled_page` made `data` of."""
    files: render.PageFiles = pickle.loads(data)
    return files


class WaitingPages:
    """The pages (and data files) of compilations with no insight drafted, rendered as their
    runs are compiled, waiting in an unnamed file beside the staging folder until mining has
    counted the lessons that rest on their runs (layers.py names them): each page is written
    once, and none is read back. About 4 KB of disk a run, gone with the process."""

    def __init__(self, folder: Path) -> None:
        self._file = spill_file(folder, "pages")
        self._steps = array("q")
        self._ends = array("q")
        self._size = 0

    def add(self, step: int, files: render.PageFiles) -> None:
        self.add_pickled(step, pickled_page(files))

    def add_pickled(self, step: int, data: bytes) -> None:
        """`add` of a page pickled (`pickled_page`: by a worker process)."""
        self._file.seek(self._size)
        self._file.write(data)
        self._size += len(data)
        self._steps.append(step)
        self._ends.append(self._size)

    def __len__(self) -> int:
        return len(self._steps)

    def in_order(self) -> Iterator[tuple[int, bytes]]:
        """Each page's step and files, pickled (`unpickled_page` reads them), in step order
        (runs compiled with a model come in the order their answers did)."""
        self._file.flush()
        steps = self._steps
        # An offline build adds them in step order: no index of them all is made to sort.
        in_step_order = all(a < b for a, b in itertools.pairwise(steps))
        order = (
            range(len(steps)) if in_step_order else sorted(range(len(steps)), key=steps.__getitem__)
        )
        for index in order:
            start = self._ends[index - 1] if index else 0
            self._file.seek(start)
            yield self._steps[index], self._file.read(self._ends[index] - start)

    def close(self) -> None:
        self._file.close()


class Compiled:
    """The compilations of a version, kept off the heap, and its model's insights numbered in
    step order while later runs still compile.

    A compilation with no insight drafted waits, rendered, in `waiting` (its page links to
    nothing unnumbered; the mined lessons that rest on its run are named in it when it is
    written, at the end). One with drafts waits in a spill file until every earlier run is done
    (compiled or not); then its insights are numbered and, once their ids' width is known,
    its compilation and insight pages are written while later calls are in flight. A version
    made from another keeps its parent's width. A new corpus's ids are sized to fit every
    insight, mined ones too, whose count is known only at the end: the width is guessed after
    DECIDE_AFTER runs, and `finish` writes those pages again in the rare build whose final
    count needs another. The pages waiting for the width are then written BACKLOG_STEP with
    each run numbered after (in number order, the later runs' after them), not all at once:
    that would stop the event loop, and the calls it keeps in flight, for a few tenths of a
    second. What the indexes need of each run (its Summary) waits in a second
    file, in step order. Both are unnamed temporary files beside the staging folder, gone
    with the process."""

    def __init__(
        self,
        writer: CorpusWriter,
        layout: Layout,
        *,
        first_step: int = 1,
        parent_rows: Iterable[indexes.InsightRow] = (),
        total: int = 0,
        fixed_width: bool = False,
    ) -> None:
        self.writer = writer
        self.layout = layout
        self.count = 0
        """Runs compiled."""
        self.unverified_quotes = 0
        """Quotes not found in their runs, over every compilation."""
        self.read_only_insights = 0
        """The model's lessons whose only support is content the agent read (records.READ_ONLY)."""
        self.insight_rows = InsightRows(writer.root.parent, parent_rows)
        """The index rows of the parent's insights, then of the model's numbered so far, on
        disk: the version's insight rows, once its mined lessons are added."""
        self.first_number = len(self.insight_rows) + 1
        """The first insight of this version."""
        self.number = self.first_number - 1
        """The last insight numbered."""
        self._total = total
        self._width: int | None = layout.insight_width if fixed_width else None
        """The width the numbered insights' pages are written with; None: not chosen yet."""
        self._next = first_step
        self._done = 0
        self._finished: dict[int, _Finished | None] = {}
        self._unwritten: collections.deque[Summary] = collections.deque()
        """Numbered, their pages not written, in number order: every run while the width is
        not chosen, then those left of them and the runs numbered after them."""
        self._folder = writer.root.parent
        self._spill = spill_file(self._folder, "compiled")
        self._summaries = spill_file(self._folder, "summaries")
        self._size = 0
        self.written_insights = WrittenInsights(self._folder)
        """The insights written, as the catalog takes them: the model's, then (added by
        the caller) the new mined lessons."""
        self.waiting = WaitingPages(self._folder)
        """The pages of compilations with no insight drafted, to write (layers.py)."""
        self.off_loop: OffLoop | None = None
        """Where a model build's worker processes render and write the pages while the
        calls flow (model_farm.py); None: here."""

    def add(self, step: int, record: RunRecord, result: Compilation) -> None:
        spilled = None
        if not result.insights and self.off_loop is not None:
            self.off_loop.pages(
                result,
                record.task_id,
                record.task_type,
                [],
                self.layout.insight_width,
                functools.partial(self.waiting.add_pickled, step),
            )
        elif not result.insights:
            self.waiting.add(step, plain_compilation(self.layout, record, result))
        else:
            data = orjson.dumps(result.model_dump(mode="json"))
            self._spill.seek(self._size)
            self._spill.write(data)
            spilled = (self._size, len(data))
            self._size += len(data)
        summary = summarize(step, record, result, spilled)
        kept = result if step == self._next and spilled else None
        self._done_with(summary, record.outcome, is_judged(record.metadata), kept)

    def rendered(self, summary: Summary, outcome: Outcome, judged: bool, page: bytes) -> None:
        """A run compiled with no insight drafted, its `page` rendered (`plain_compilation`)
        and pickled (`pickled_page`) by the caller: an offline build's worker processes."""
        assert summary.spilled is None, "a compilation with insights is added with add()"
        self.waiting.add_pickled(summary.step, page)
        self._done_with(summary, outcome, judged, None)

    def _done_with(
        self, summary: Summary, outcome: Outcome, judged: bool, kept: Compilation | None
    ) -> None:
        self.count += 1
        self.unverified_quotes += summary.unverified_quotes
        self._finished[summary.step] = _Finished(summary, outcome, judged, kept)
        self._number_ready()

    def failed(self, step: int) -> None:
        """A run not compiled (it failed, or waits for a batch): later runs are numbered
        past it."""
        self._finished[step] = None
        self._number_ready()

    def _number_ready(self) -> None:
        """Number the insights of each run whose earlier runs are all done, in step order,
        and write their pages once the width is known."""
        numbered = 0  # runs with insights numbered now
        while self._next in self._finished:
            done = self._finished.pop(self._next)
            self._next += 1
            self._done += 1
            if done is None:
                continue
            summary = done.summary
            if summary.spilled is not None:
                result = done.result or self.read(summary.spilled)
                for draft in result.insights:
                    self.number += 1
                    summary.insights.append(self.number)
                    self.insight_rows.append(
                        indexes.InsightRow(
                            number=self.number,
                            title=draft.title,
                            task_type=summary.task_type,
                            source_step=summary.step,
                            source_outcome=done.outcome,
                            source_judged=done.judged,
                            verified=read.backed_by(summary.backing, draft.supporting_claims),
                            guideline=draft.guideline,
                            read_only=support_of(insight_pages.supporting_claims(draft, result))
                            == READ_ONLY,
                        )
                    )
                numbered += 1
                if self._width is None or self._unwritten:
                    self._unwritten.append(summary)
                else:
                    self._write_pages(summary, self._width, result)
            line = [getattr(summary, name) for name in Summary.__slots__]
            self._summaries.write(orjson.dumps(line) + b"\n")
        if self._width is None and self._done >= min(DECIDE_AFTER, self._total) > 0:
            self._width = guess_width(self.number - self.first_number + 1, self._done, self._total)
        if self._width is not None:
            self._write_unwritten(self._width, BACKLOG_STEP + numbered)

    def _write_unwritten(self, width: int, most: int | None = None) -> None:
        """The pages of the first `most` runs waiting (all of them when None)."""
        left = len(self._unwritten) if most is None else min(most, len(self._unwritten))
        for _ in range(left):
            self._write_pages(self._unwritten.popleft(), width)

    def _write_pages(
        self,
        summary: Summary,
        width: int,
        result: Compilation | None = None,
        *,
        again: bool = False,
    ) -> None:
        """The pages of a compilation with insights, their ids `width` digits wide; the
        compilation is read back from the spill file unless given. `again`: written before,
        with another width."""
        assert summary.spilled is not None
        layout = dataclasses.replace(self.layout, insight_width=width)
        result = result or self.read(summary.spilled)
        # Written by a model build's workers while the calls flow: their headers are made
        # here too, for the catalog.
        off_loop = None if again else self.off_loop
        if off_loop is not None:
            off_loop.pages(result, summary.task_id, summary.task_type, summary.insights, width)
        else:
            self.writer.write_files(
                compilation_pages.compilation(
                    layout,
                    result,
                    task_id=summary.task_id,
                    task_type=summary.task_type,
                    insight_numbers=summary.insights,
                ),
            )
        for number, draft in zip(summary.insights, result.insights, strict=True):
            header = insight_pages.insight_header(
                layout, number, draft, source=result, task_type=summary.task_type
            )
            if off_loop is None:
                self.writer.write_files(insight_pages.insight_files(header, draft.guideline))
            if not again:
                self.written_insights.add(number, header, draft.guideline)
                self.read_only_insights += header.support == READ_ONLY

    def finish(self, width: int) -> None:
        """Every compilation with insights written with ids `width` digits wide (the pages
        written with a width guessed otherwise are written again)."""
        self._write_unwritten(self._width or width)
        if self._width is not None and self._width != width:
            guessed = dataclasses.replace(self.layout, insight_width=self._width)
            log.info(
                "insight ids need %d digits, not %d: writing their pages again", width, self._width
            )
            for summary in self.in_order():
                if summary.insights:
                    self.writer.remove(guessed.compilation_rel(summary.step))
                    self.writer.remove(guessed.compilation_data_rel(summary.step))
                    for number in summary.insights:
                        self.writer.remove(guessed.insight_rel(number))
                        self.writer.remove(guessed.insight_data_rel(number))
                    self._write_pages(summary, width, again=True)
        self._width = width

    def in_order(self) -> Iterator[Summary]:
        """Each compiled run's summary, in step order, as far as runs are numbered."""
        self._summaries.flush()
        self._summaries.seek(0)
        for line in self._summaries:
            summary = Summary(*orjson.loads(line))
            if summary.spilled is not None:
                summary.spilled = (summary.spilled[0], summary.spilled[1])  # a list in JSON
            yield summary

    def read(self, spilled: tuple[int, int]) -> Compilation:
        """A compilation that waits in the spill file, at (offset, length)."""
        self._spill.seek(spilled[0])
        return Compilation.model_validate_json(self._spill.read(spilled[1]))

    def close(self) -> None:
        """Remove the spill files (they are no files of the corpus)."""
        self._spill.close()
        self._summaries.close()
        self.insight_rows.close()
        self.written_insights.close()
        self.waiting.close()


class Producer:
    """The compilations of one version, by step, and the progress of the whole build."""

    def __init__(
        self,
        total: int,
        layout: Layout,
        progress: Progress | None,
        compiled: Compiled,
    ) -> None:
        self.total = total
        self.layout = layout
        self.progress = progress
        self.done = 0
        self.results = compiled
        self.stats = CompileStats()
        self.failed: list[dict[str, str]] = []
        """Runs not compiled: step, task_id, error, kind (`call`: the model gave no reply)."""
        self.deferred = 0
        """Runs whose compilation waits for a provider batch (--batch): built next round."""
        self.fatal: LLMCallError | None = None
        """A model error no other call can escape (bad key, unknown model): ends the build."""

    def advance(self) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total)

    def _record_failure(self, step: int, record: RunRecord, error: Exception) -> None:
        # The model could not be reached or gave no reply (call), or replied with an answer
        # that could not be used (answer): only the first says it is down.
        kind = "call" if isinstance(error, LLMCallError) else "answer"
        self.record_failure(step, record.task_id, str(error), kind)

    def record_failure(self, step: int, task_id: str, error: str, kind: str = "answer") -> None:
        """A run not compiled (`error` says why), listed in `failed`."""
        self.results.failed(step)
        self.failed.append(
            {"step": self.layout.step(step), "task_id": task_id, "error": error, "kind": kind}
        )
        log.warning("%s (task %s): %s", self.layout.step(step), task_id, error)

    def offline(self, runs: Iterable[tuple[int, RunRecord]]) -> None:
        # No event loop: Ctrl-C interrupts at once, wherever the build is.
        for step, record in runs:
            try:
                result = compile_offline(step, record)
            except Exception as error:  # one run's failure never aborts the others
                log.debug("step %d failed", step, exc_info=True)
                self._record_failure(step, record, error)
            else:
                self.results.add(step, record, result)  # see _compile_one
            self.advance()

    async def _compile_one(
        self,
        step: int,
        record: RunRecord,
        llm: LLM,
        templates: Templates,
        limits: CompileLimits,
    ) -> None:
        try:
            result = await compile_with_llm(step, record, llm, templates, limits, self.stats)
        except Deferred:
            self.deferred += 1
            self.results.failed(step)
        except LLMCallError as error:
            if error.fatal:
                self.fatal = error
            else:
                self._record_failure(step, record, error)
        except Exception as error:  # one run's failure never aborts the others
            log.debug("step %d failed", step, exc_info=True)
            self._record_failure(step, record, error)
        else:
            # Writing it, and the pages of the earlier runs it lets through, is the build's
            # (a full disk ends it), not this run's: what is numbered must add up.
            self.results.add(step, record, result)
        finally:
            self.advance()

    async def with_model(
        self,
        runs: Iterable[tuple[int, RunRecord]],
        llm: LLM,
        templates: Templates,
        limits: CompileLimits,
        concurrency: int,
        meanwhile: Callable[[threading.Event], _Meanwhile] | None = None,
    ) -> _Meanwhile | None:
        """Each run's raw layer is written as it is read (by the worker processes of the
        compilations' `off_loop`, when it has one); up to `concurrency` compile at once.
        `meanwhile`: work that needs the runs alone (mining), done in a thread once every run
        is read, while the last calls are in flight; what it returns is returned (None
        without it). It must write nothing: a build stopped leaves no half-written file. It is
        given an event set when the build stops (Ctrl-C, a fatal error) and should end soon
        after: the build waits for it before it removes what the thread reads."""
        slots = asyncio.Semaphore(concurrency)
        tasks: set[asyncio.Task[None]] = set()
        failed: list[asyncio.Task[None]] = []

        def settled(task: asyncio.Task[None]) -> None:
            # A task that raised stays in `tasks`, its error raised by the gather below: a
            # run's pages or a chunk of the workers' results failed to be written.
            if task.cancelled() or task.exception() is None:
                tasks.discard(task)
            else:
                failed.append(task)

        async def guarded(step: int, record: RunRecord) -> None:
            try:
                await self._compile_one(step, record, llm, templates, limits)
            finally:
                slots.release()

        off_loop = self.results.off_loop
        for step, record in runs:
            if off_loop is not None:
                await off_loop.room()
            await slots.acquire()
            if self.fatal or failed:
                break
            task = asyncio.create_task(guarded(step, record))
            tasks.add(task)
            task.add_done_callback(settled)
            # The run's prompt is rendered and its call sent now, before the next run is read
            # and written: else the first `concurrency` runs' raw layers are all written
            # before the first call leaves, and the calls in flight wait for the next ones'.
            await asyncio.sleep(0)
        # The loop takes the answers between the thread's bytecodes (the GIL passes every 5
        # ms) and waits for the network the rest of the time: the thread has those waits.
        early = None
        stop = threading.Event()
        if failed:
            await asyncio.gather(*failed)  # raises the first one's error
        if off_loop is not None and not self.fatal:  # mining reads the runs' raw files
            await off_loop.drain()
        if meanwhile is not None and not self.fatal:
            early = asyncio.get_running_loop().run_in_executor(None, meanwhile, stop)
        try:
            if tasks:
                await asyncio.gather(*tasks)
            if self.fatal:
                raise self.fatal
            if off_loop is not None:  # the pages the last answers gave
                await off_loop.drain()
                self.results.off_loop = None
        except BaseException:
            stop.set()
            if early is not None:  # what it raised, once stopped, is the build's error's
                early.add_done_callback(_retrieved)
            raise
        return await early if early is not None else None
