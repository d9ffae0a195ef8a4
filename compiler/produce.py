"""Compiling the runs of a version: offline one after another, or with a model up to
`concurrency` calls at once, each run's failure recorded without stopping the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import orjson

from wikitrace.corpus_schema import Compilation, Layout, RunRecord, render
from wikitrace.corpus_schema.store import CorpusWriter, sorted_lines, spill_file

from .batch import Deferred
from .compile import CompileLimits, CompileStats, Templates, compile_with_llm
from .llm import LLM, LLMCallError
from .offline import compile_offline
from .report import BuildReport

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class Summary:
    """What the indexes need of one compiled run; the compilation itself is on disk."""

    step: int
    title: str
    unverified_quotes: int
    spilled: tuple[int, int] | None = None
    """Where the compilation waits in the spill file (offset, length) when the model drew
    insights from it: their numbers come once every run is compiled."""


class Compiled:
    """The compilations of a version, kept off the heap: one with no insight drafted is
    written at once (its page links to nothing yet unnumbered); one with drafts waits in a
    spill file until the insights are numbered in step order. What the indexes need of each
    (its Summary) waits in a second file, read back in step order (`in_order`). Both are
    unnamed temporary files beside the staging folder, gone with the process."""

    def __init__(self, writer: CorpusWriter, layout: Layout) -> None:
        self.writer = writer
        self.layout = layout
        self.count = 0
        """Runs compiled."""
        self.unverified_quotes = 0
        """Quotes not found in their runs, over every compilation."""
        self._folder = writer.root.parent
        self._spill = spill_file(self._folder, "compiled")
        self._summaries = spill_file(self._folder, "summaries")
        self._size = 0
        self._last_step = 0
        self._in_order = True

    def add(self, step: int, record: RunRecord, result: Compilation) -> None:
        spilled = None
        if not result.insights:
            self.writer.write(
                self.layout.compilation_rel(step),
                render.compilation(
                    self.layout,
                    result,
                    task_id=record.task_id,
                    task_type=record.task_type,
                    insight_numbers=[],
                ),
            )
        else:
            data = orjson.dumps(result.model_dump(mode="json"))
            self._spill.seek(self._size)
            self._spill.write(data)
            spilled = (self._size, len(data))
            self._size += len(data)
        line = [step, result.title, result.unverified_quotes, spilled]
        # The step leads each line, zero-padded, so that sorted lines are in step order.
        self._summaries.write(b"%012d " % step + orjson.dumps(line) + b"\n")
        self._in_order = self._in_order and step > self._last_step
        self._last_step = max(self._last_step, step)
        self.count += 1
        self.unverified_quotes += result.unverified_quotes

    def in_order(self) -> Iterator[Summary]:
        """Each compiled run's summary, in step order (sorted on disk when the runs were
        compiled out of order, as calls at once finish)."""
        self._summaries.flush()
        self._summaries.seek(0)
        lines = self._summaries if self._in_order else sorted_lines(self._summaries, self._folder)
        for line in lines:
            step, title, unverified, spilled = orjson.loads(line[13:])
            yield Summary(step, title, unverified, tuple(spilled) if spilled else None)

    def read(self, spilled: tuple[int, int]) -> Compilation:
        """A compilation that waits in the spill file, at (offset, length)."""
        self._spill.seek(spilled[0])
        return Compilation.model_validate_json(self._spill.read(spilled[1]))

    def close(self) -> None:
        """Remove the spill files (they are no files of the corpus)."""
        self._spill.close()
        self._summaries.close()


class Producer:
    """The compilations of one version, by step, and the progress of the whole build."""

    def __init__(
        self,
        total: int,
        layout: Layout,
        report: BuildReport,
        progress: Progress | None,
        compiled: Compiled,
    ) -> None:
        self.total = total
        self.layout = layout
        self.report = report
        self.progress = progress
        self.done = 0
        self.results = compiled
        self.stats = CompileStats()
        self.deferred = 0
        """Runs whose compilation waits for a provider batch (--batch): built next round."""
        self.fatal: LLMCallError | None = None
        """A model error no other call can escape (bad key, unknown model): ends the build."""

    def advance(self) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total)

    def _record_failure(self, step: int, record: RunRecord, error: Exception) -> None:
        self.report.failed.append(
            {"step": self.layout.step(step), "task_id": record.task_id, "error": str(error)}
        )
        log.warning("%s (task %s): %s", self.layout.step(step), record.task_id, error)

    def offline(self, runs: Iterable[tuple[int, RunRecord]]) -> None:
        # No event loop: Ctrl-C interrupts at once, wherever the build is.
        for step, record in runs:
            try:
                self.results.add(step, record, compile_offline(step, record))
            except Exception as error:  # one run's failure never aborts the others
                log.debug("step %d failed", step, exc_info=True)
                self._record_failure(step, record, error)
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
            self.results.add(step, record, result)
        except Deferred:
            self.deferred += 1
        except LLMCallError as error:
            if error.fatal:
                self.fatal = error
            else:
                self._record_failure(step, record, error)
        except Exception as error:  # one run's failure never aborts the others
            log.debug("step %d failed", step, exc_info=True)
            self._record_failure(step, record, error)
        finally:
            self.advance()

    async def with_model(
        self,
        runs: Iterable[tuple[int, RunRecord]],
        llm: LLM,
        templates: Templates,
        limits: CompileLimits,
        concurrency: int,
    ) -> None:
        """Each run's raw layer is written as it is read; up to `concurrency` compile at once."""
        slots = asyncio.Semaphore(concurrency)
        tasks: set[asyncio.Task[None]] = set()

        async def guarded(step: int, record: RunRecord) -> None:
            try:
                await self._compile_one(step, record, llm, templates, limits)
            finally:
                slots.release()

        for step, record in runs:
            await slots.acquire()
            if self.fatal:
                break
            task = asyncio.create_task(guarded(step, record))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        if self.fatal:
            raise self.fatal
