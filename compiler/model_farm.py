"""A model build's per-run work in worker processes while its calls flow (`build`'s `workers`
setting): each new run's raw files rendered, written into the staging folder and hashed, and
what mining keeps of it found; each compiled run's compilation and insight pages rendered and
written (or, with no insight drafted, rendered to wait: produce.WaitingPages). The build's
event loop keeps reading, redaction, numbering, the prompt, the HTTP client and the
bookkeeping: insight numbers and their width, the list of files, mining's table, each taken
in the order it is today, so the corpus is the same, byte for byte, with or without workers.

The workers are a workers.Farm's, started once the input is read (forked from the build:
`start_method`) and stopped with the build (Ctrl-C, a kill: see compiler/workers.py). Work
goes to them in chunks; what each chunk gives back is taken in the order the chunks were
sent, between the loop's other work, never by waiting on the loop while calls are in flight
(`OffLoop.room` and `drain` await it)."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import (
    Compilation,
    Layout,
    compilation_pages,
    insight_pages,
    is_judged,
)
from wikitrace.corpus_schema.identity import turn_log
from wikitrace.corpus_schema.writing import CorpusWriter, NewFiles

from .mine import Found, Miner, found_in
from .produce import pickled_page
from .raw import raw_files
from .workers import START_METHOD, sent_run

MIN_RUNS = 256
"""A model build of fewer runs does its per-run work in its own process (the `workers`
setting unset). At 128 runs (0.2 s, 64 in flight, load 4 to 5.6, three turns each) a worker
gave 14% of the ideal with a call worker and 18 to 36% with the calls in the build's process,
none 10 to 20% and 17 to 28%: no gain the turns resolve, for 2 to 3 ms more CPU a run in all
the build's processes (a worker started from a fork server, not forked, costs 0.6 s more)."""
CHUNK = 16
"""Runs (or compiled runs' pages) a worker takes at once: a few milliseconds of its work,
against some tenths of a millisecond of the build's to send a chunk and take its result."""
LAST_CHUNK = 4
"""Compiled runs a chunk holds once every run is read: the last answers' pages go as they
come, while the last calls are in flight, not after the last answer."""
CHUNKS_PER_WORKER = 8
"""Chunks sent and not taken back, for each worker, before the build reads its next run."""


def start_method() -> str:
    """How a model build's workers start: forked from the build itself where that is safe
    (on Linux, while the build has one thread, a library's own threads counted: a fork copies
    only the thread that forks), with every module it imported, in a few milliseconds of CPU;
    else from a fork server, which imports wikitrace for them (some 0.6 s of CPU,
    workers.START_METHOD)."""
    if sys.platform == "linux" and _threads() == 1:
        return "fork"
    return START_METHOD


def _threads() -> int:
    """This process's threads as the system counts them: those a library started in C
    (numpy's BLAS pool, say) too, which Python's `threading` does not list."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0  # not known: never forked


def pool_size(workers: int | None, runs: int) -> int:
    """The worker processes a model build of `runs` runs uses: `workers` as given, 1 for
    none (the build's own process does the work); else one from MIN_RUNS runs on (the loop's
    own process and the model's HTTP client take a core). None where no worker can be
    started so (Windows)."""
    if START_METHOD not in multiprocessing.get_all_start_methods():
        return 0
    if workers is not None:
        return workers if workers > 1 else 0
    return 1 if runs >= MIN_RUNS else 0


# --- in a worker --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RawRun:
    """A new run, numbered: what its raw files are made of."""

    step: int
    attempt: int
    source: str
    """Where it came from, as its metadata page names it (raw.SourceNames)."""
    data: bytes
    """Its JSON redacted, pickled; or, when redaction changed nothing, the run as
    stages.CheckedRuns keeps it."""
    redacted: bool


def write_raw(job: tuple[str, Layout, bool, list[RawRun]]) -> list[tuple[list[bytes], Any]]:
    """Each run of `job` (the staging folder, the layout, whether to mine, the runs): its raw
    files written (raw.raw_files), their lines in the build's list of files, and what mining
    keeps of it (None when not mining)."""
    root, layout, mine, runs = job
    files = NewFiles(root)
    made: list[tuple[list[bytes], Any]] = []
    for run in runs:
        data, record = sent_run(run.data, run.redacted)
        log_bytes, offsets = turn_log(data["turns"])
        lines = files.write_files(
            raw_files(layout, run.step, run.attempt, run.source, data, record, log_bytes, offsets)
        )
        mined = found_in(run.step, record, is_judged(record.metadata)) if mine else None
        made.append((lines, mined))
    return made


@dataclass(frozen=True, slots=True)
class PagesOf:
    """A compiled run whose pages to render: with its insights' numbers and their ids' width,
    written; with no insight drafted, rendered and pickled to wait (produce.WaitingPages)."""

    result: Compilation
    task_id: str
    task_type: str | None
    numbers: list[int]
    width: int


def write_pages(job: tuple[str, Layout, bool, list[PagesOf]]) -> list[list[bytes] | bytes]:
    """Each compiled run of `job` (the staging folder, the layout, unused, the runs): the
    lines of the files it wrote (its compilation and insight pages: produce.Compiled's), or,
    with no insight, its page pickled (produce.pickled_page)."""
    root, layout, _, runs = job
    files = NewFiles(root)
    made: list[list[bytes] | bytes] = []
    for run in runs:
        result = run.result
        sized = dataclasses.replace(layout, insight_width=run.width)
        page = compilation_pages.compilation(
            sized, result, task_id=run.task_id, task_type=run.task_type, insight_numbers=run.numbers
        )
        if not result.insights:  # as produce.plain_compilation renders it
            made.append(pickled_page(page))
            continue
        lines = files.write_files(page)
        for number, draft in zip(run.numbers, result.insights, strict=True):
            header = insight_pages.insight_header(
                sized, number, draft, source=result, task_type=run.task_type
            )
            lines += files.write_files(insight_pages.insight_files(header, draft.guideline))
        made.append(lines)
    return made


# --- in the build -------------------------------------------------------------------------

Then = Callable[[Any], None]
Job = Callable[[tuple[str, Layout, bool, list[Any]]], list[Any]]


class OffLoop:
    """The per-run work a model build hands to its worker processes (`pool`), and what the
    build does with each result, in the order the work was handed over."""

    def __init__(
        self,
        pool: ProcessPoolExecutor,
        workers: int,
        root: Path,
        layout: Layout,
        writer: CorpusWriter,
        miner: Miner | None,
    ) -> None:
        self._pool = pool
        self._limit = CHUNKS_PER_WORKER * workers
        self._root = os.fspath(root)
        self._layout = layout
        self._writer = writer
        self._miner = miner
        self._gathering: dict[Job, tuple[list[Any], list[Then]]] = {}
        self._held: list[tuple[Job, list[Any], list[Then]]] = []
        """Chunks made while the workers start, sent once they are up, in order."""
        self._sent: deque[tuple[Future[list[Any]], list[Then]]] = deque()
        self._chunks_made = self._chunks_taken = 0
        self._chunk_size = CHUNK
        self._ready: Future[None] = Future()
        self._failed: BaseException | None = None
        """A chunk's error, once taken: raised again to whoever asks next, as the task that
        took it first may be one whose error the loop does not see at once."""
        # Starting a worker waits for the fork server to import wikitrace (some tenths of a
        # second): on a thread, not the loop's, which makes the first calls meanwhile.
        threading.Thread(target=self._start, args=(workers,), daemon=True).start()

    def _start(self, workers: int) -> None:
        try:
            for started in [self._pool.submit(os.getpid) for _ in range(workers)]:
                started.result()
        except BaseException as error:  # raised by the next chunk's sending
            if not self._ready.cancelled():
                self._ready.set_exception(error)
        else:
            if not self._ready.cancelled():
                self._ready.set_result(None)

    def raw(self, step: int, attempt: int, source: str, data: bytes, redacted: bool) -> None:
        """Write a new run's raw files (`RawRun`; numbered in step order: mining takes them so)."""
        self._add(write_raw, RawRun(step, attempt, source, data, redacted), self._raw_written)

    def _raw_written(self, made: tuple[list[bytes], Found | None]) -> None:
        lines, mined = made
        self._writer.listed(lines)
        if self._miner is not None and mined is not None:
            self._miner.add_found(mined)

    def pages(
        self,
        result: Compilation,
        task_id: str,
        task_type: str | None,
        numbers: list[int],
        width: int,
        then: Then | None = None,
    ) -> None:
        """Write a compiled run's pages (`PagesOf`); `then` takes its page pickled when it has
        no insight (`write_pages`)."""
        run = PagesOf(result, task_id, task_type, numbers, width)
        self._add(write_pages, run, then or self._listed)

    def _listed(self, lines: list[bytes]) -> None:
        self._writer.listed(lines)

    def _add(self, job: Job, item: Any, then: Then) -> None:
        items, thens = self._gathering.setdefault(job, ([], []))
        items.append(item)
        thens.append(then)
        if len(items) >= self._chunk_size:
            self._chunk(job)
        self.take_done()

    def _chunk(self, job: Job) -> None:
        items, thens = self._gathering.pop(job)
        self._held.append((job, items, thens))
        self._chunks_made += 1

    def _send_held(self) -> None:
        if not self._held or not self._ready.done():
            return
        self._ready.result()  # the workers' start failed: raised here
        mine = self._miner is not None
        for job, items, thens in self._held:
            self._sent.append(
                (self._pool.submit(job, (self._root, self._layout, mine, items)), thens)
            )
        self._held.clear()

    def take_done(self) -> None:
        """Send the chunks made, once the workers are up, and take what they are done with,
        as far as every chunk before it is done."""
        if self._failed is not None:
            raise self._failed
        self._send_held()
        while self._sent and self._sent[0][0].done():
            future, thens = self._sent.popleft()
            self._chunks_taken += 1
            try:
                results = future.result()  # a worker's error
            except BaseException as error:
                self._failed = error
                raise
            for then, made in zip(thens, results, strict=True):
                then(made)

    async def room(self) -> None:
        """Wait (on the loop) until the workers have at most their share of chunks, those
        made while they start counted (what each holds is a run's data)."""
        self.take_done()
        while len(self._sent) + len(self._held) > self._limit:
            if self._held:  # the workers are starting
                await self._started()
            else:
                await self._first_done()

    async def _started(self) -> None:
        """Wait for the workers to be up (shielded: a Ctrl-C that cancels the wait leaves the
        starting thread's future as it is), and send what waited for them."""
        await asyncio.shield(asyncio.wrap_future(self._ready))
        self._send_held()

    async def drain(self) -> None:
        """Send what is gathered, and take the result of all that is sent by then (on the
        loop: what is handed over meanwhile may wait); from now on, chunks of LAST_CHUNK."""
        for job in list(self._gathering):
            self._chunk(job)
        self._chunk_size = LAST_CHUNK  # every run is read: what comes now is the last
        last = self._chunks_made
        while self._chunks_taken < last:
            if self._failed is not None:
                raise self._failed
            if self._held:
                await self._started()
            else:
                await self._first_done()

    async def _first_done(self) -> None:
        """Wait for the first chunk sent and not taken, then take it and those after it that
        are done. Never taken out of order: other tasks of the loop take chunks too."""
        await asyncio.wrap_future(self._sent[0][0])
        self.take_done()
