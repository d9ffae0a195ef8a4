"""Compiling the runs of a version: offline one after another, or with a model up to
`concurrency` calls at once, each run's failure recorded without stopping the others."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from wikitrace.corpus_schema import Compilation, Layout, RunRecord, render
from wikitrace.corpus_schema.store import CorpusWriter

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

    title: str
    unverified_quotes: int
    drafts: int
    """Insights the model drew: their numbers come once every run is compiled."""
    spilled: tuple[int, int] | None = None
    """Where the compilation waits in the spill file (offset, length), while it has drafts."""


class Compiled:
    """The compilations of a version, kept off the heap: one with no insight drafted is
    written at once (its page links to nothing yet unnumbered); one with drafts waits in a
    spill file inside the staging folder until the insights are numbered in step order."""

    SPILL = ".compiled.spill"

    def __init__(self, writer: CorpusWriter, layout: Layout) -> None:
        self.writer = writer
        self.layout = layout
        self.summaries: dict[int, Summary] = {}
        self._spill_path = writer.root / self.SPILL
        self._spill: Any = None
        self._size = 0

    def add(self, step: int, record: RunRecord, result: Compilation) -> None:
        summary = Summary(result.title, result.unverified_quotes, len(result.insights))
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
            if self._spill is None:
                self._spill = self._spill_path.open("w+b")
            data = orjson.dumps(result.model_dump(mode="json"))
            self._spill.seek(0, io.SEEK_END)
            self._spill.write(data)
            summary.spilled = (self._size, len(data))
            self._size += len(data)
        self.summaries[step] = summary

    def read(self, step: int) -> Compilation:
        """A compilation that waits in the spill file."""
        spilled = self.summaries[step].spilled
        assert spilled is not None, f"step {step} has no drafts"
        assert self._spill is not None
        self._spill.seek(spilled[0])
        return Compilation.model_validate_json(self._spill.read(spilled[1]))

    def close(self) -> None:
        """Remove the spill file (it is no file of the corpus)."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._spill_path.unlink(missing_ok=True)


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
