"""Compiling the runs of a version: offline one after another, or with a model up to
`concurrency` calls at once, each run's failure recorded without stopping the others."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from wikitrace.corpus_schema import Compilation, Layout, RunRecord

from .compile import CompileLimits, CompileStats, Templates, compile_with_llm
from .llm import LLM, LLMCallError
from .offline import compile_offline
from .report import BuildReport

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]


class Producer:
    """The compilations of one version, by step, and the progress of the whole build."""

    def __init__(
        self, total: int, layout: Layout, report: BuildReport, progress: Progress | None
    ) -> None:
        self.total = total
        self.layout = layout
        self.report = report
        self.progress = progress
        self.done = 0
        self.results: dict[int, Compilation] = {}
        self.stats = CompileStats()
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
                self.results[step] = compile_offline(step, record)
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
            self.results[step] = await compile_with_llm(
                step, record, llm, templates, limits, self.stats
            )
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
