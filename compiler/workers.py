"""An offline build's per-run work in worker processes, on every core (`build`'s `workers` setting).

The build takes the runs it checked (stages.CheckedRuns: the input, read once) a chunk at a
time, and hands each chunk to a process pool twice. First each run is redacted and
fingerprinted; the build, taking the chunks back in input order, drops the duplicates and
numbers the rest, exactly as it does in its own process (raw.RawLayer.number). Then each
numbered run is compiled (offline.py), its raw files are written into the staging folder
(their paths are known once it is numbered) and hashed, and the worker gives back each
file's line in the build's list of files (writing.NewFiles), its compilation page rendered
(it waits to name the mined lessons that rest on its run: produce.WaitingPages) and what
mining keeps of the run. The build lists those, in step order, and mines. The same pool
(`Farm`) stays for the finish, whose pages it hands on through `Farm.map` (results in
order, as `map` gives them without workers): the new divergences' pages, the compilation
pages, each written once naming its mined lessons (compiler/layers.py), the rankers' word
counts (search/saved.py). The build's process keeps the rest (mining's counts, indexes, catalog,
manifest): the corpus is the same, byte for byte, with any number of workers.

Workers ignore Ctrl-C: the build stops them (each ends its chunk, a fraction of a second)
before it removes its staging folder, as it does for any failure, so nothing they wrote
survives. A worker whose build is gone, even killed, ends by itself; the staging folder a
killed build leaves is the next build's to clear, as it is without workers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from wikitrace.corpus_schema import Layout, RunRecord, indexes, is_judged, raw_pages
from wikitrace.corpus_schema.identity import turn_log
from wikitrace.corpus_schema.records import Outcome
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.corpus_schema.writing import NewFiles

from .mine import Found, Miner, found_in
from .offline import compile_offline
from .produce import Producer, Summary, pickled_page, plain_compilation, summarize
from .raw import RawLayer, SourceNames, raw_files, run_key, run_row
from .redact import Redactor
from .report import BuildOptions
from .stages import kept_run, record_head

CHUNK_RUNS = 64
"""Runs a worker takes at once: about 0.1 s of work, against a few hundred microseconds to
send it and take its result back."""
CHUNKS_PER_WORKER = 4
"""Chunks in flight for each worker: enough that none waits while the build writes."""
AUTO_MIN_RUNS = 5000
"""Without the workers setting, a build of fewer runs works in its own process. Measured side
by side on a quiet machine (issue 58), two workers made a build of 1,000 runs slower (0.85x:
starting them and the finish, which they do not share, cost more than they save) and one of
10,000 faster (1.34x); this is where they start to pay, with room to spare."""
PRELOAD = ["__main__", __name__, "wikitrace.compiler.worker_start"]
"""What the fork server imports once for every worker (compiler/worker_start.py)."""
T = TypeVar("T")
R = TypeVar("R")
START_METHOD = "forkserver"
"""How the workers start: forked from a server process that multiprocessing starts afresh
(not from the build, which may run threads), which imports the program and this module once
for every worker: on this project's machine the first chunk is taken about 0.4 s after the
pool is made, against 1.4 s for workers started as new interpreters (`spawn`)."""


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the system tells it)."""
    counted = getattr(os, "process_cpu_count", None)  # Python 3.13
    if counted is not None:
        return int(counted() or 1)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def idle_cores(cores: int, load: float | None = None) -> int:
    """The cores a build may use that other work leaves it: `cores` less the system's load
    average over the last minute (`load`; read when None), the build's own process counted
    as one of them; at least 1."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average here (Windows)
            return cores
    return max(1, min(cores, int(cores - load + 1)))


def worker_count(workers: int | None, runs: int, load: float | None = None) -> int:
    """The worker processes an offline build of `runs` runs uses: `workers` as given; else,
    from AUTO_MIN_RUNS runs on, one for each core available that other work leaves idle
    (`idle_cores`; `load`: the load average, read when None): a worker on a busy core makes
    the build slower, not faster. 1: none, the build's own process does the work."""
    if workers is not None:
        return workers
    return idle_cores(available_cores(), load) if runs >= AUTO_MIN_RUNS else 1


# --- in a worker --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    """What every worker holds for the whole build."""

    layout: Layout
    root: str
    """The staging folder, which the workers write their runs' files into."""
    inputs: list[Path]
    redact: bool
    redact_patterns: tuple[str, ...]
    redact_keep: tuple[str, ...]
    mine: bool


_setup: _Setup | None = None
_redactor: Redactor | None = None
_files: NewFiles | None = None
_source_names: SourceNames


def _start(setup: _Setup) -> None:
    """A worker's start: its settings, and Ctrl-C left to the build (which stops the pool)."""
    global _setup, _redactor, _files, _source_names
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _setup = setup
    _source_names = SourceNames(setup.inputs)
    _files = NewFiles(setup.root)
    _redactor = Redactor(setup.redact_patterns, setup.redact_keep) if setup.redact else None
    threading.Thread(target=_end_with_build, daemon=True).start()


def _end_with_build() -> None:
    """End this worker once the build is gone (killed: nothing else would tell a worker
    waiting for its next chunk, and the fork server lives as long as its workers do)."""
    build = multiprocessing.parent_process()  # the build, though the fork server forked us
    if build is not None:
        multiprocessing.connection.wait([build.sentinel])
        os._exit(1)


@dataclass(frozen=True, slots=True)
class _Checked:
    """A run redacted and fingerprinted, and where it came from."""

    key: str
    task: TaskKey
    """Its task (source and id): attempts are counted per task."""
    attempt: Any
    """Its metadata's `attempt`, as given."""
    redacted: bytes | None
    """Its JSON redacted, pickled; None when redaction changed nothing."""
    path: str
    line: int | None
    at: str | None
    format: str


def _check(runs: list[bytes]) -> tuple[list[_Checked], dict[str, int], dict[tuple[str, str], int]]:
    """Pass one: each run (as stages.CheckedRuns keeps it) redacted and fingerprinted; and the
    secrets redacted, by kind and by place."""
    checked = []
    for blob in runs:
        item = kept_run(blob, head_only=True)  # pass two validates the turns
        data = item.data
        clean = _redactor.value(data) if _redactor is not None else data
        log_bytes, _ = turn_log(clean["turns"])
        record = item.record if clean is data else record_head(clean)
        checked.append(
            _Checked(
                run_key(record, log_bytes),
                record.task_key,
                record.metadata.get("attempt"),
                None if clean is data else _pickled(clean),
                item.path,
                item.line,
                item.at,
                item.format,
            )
        )
    counts: dict[str, int] = {}
    places: dict[tuple[str, str], int] = {}
    if _redactor is not None:
        counts, places = dict(_redactor.counts), dict(_redactor.places)
        _redactor.counts.clear()
        _redactor.places.clear()
    return checked, counts, places


@dataclass(frozen=True, slots=True)
class _Numbered:
    """A new run, numbered: what pass two needs."""

    data: bytes
    """Its JSON redacted, pickled; or, when redaction changed nothing, the run as
    stages.CheckedRuns keeps it."""
    redacted: bool
    path: str
    line: int | None
    at: str | None
    step: int
    attempt: int


@dataclass(slots=True)
class _Made:
    """A run whose files are written: their lines in the build's list of files, and what the
    build keeps of it."""

    listed: list[bytes]
    row: indexes.RunRow
    task: str
    success: bool
    outcome: Outcome
    judged: bool
    compiled: Summary | str
    """Its compilation's summary, or why it failed."""
    page: bytes | None
    """Its compilation's page and data file, rendered and pickled (produce.pickled_page),
    written at the end (Compiled.waiting)."""
    mined: Found | None
    """What mining keeps of it (mine.found_in)."""


def sent_run(data: bytes, redacted: bool) -> tuple[dict[str, Any], RunRecord]:
    """A run as a worker is sent it: its JSON, redacted and pickled, or, when redaction
    changed nothing, the run as read, its record with it (as raw.RawLayer.runs takes it)."""
    if redacted:
        parsed = pickle.loads(data)
        return parsed, RunRecord.model_validate(parsed)
    item = kept_run(data)
    return item.data, item.record


def _make(runs: list[_Numbered]) -> list[_Made]:
    """Pass two: each numbered run compiled, its raw files written into the staging folder
    (its compilation page rendered, written at the end), and observed for mining."""
    assert _setup is not None and _files is not None
    layout = _setup.layout
    made = []
    for run in runs:
        data, record = sent_run(run.data, run.redacted)
        log_bytes, offsets = turn_log(data["turns"])
        source = _source_names(run.path, run.line, run.at)
        files = raw_files(layout, run.step, run.attempt, source, data, record, log_bytes, offsets)
        judged = is_judged(record.metadata)
        compiled: Summary | str
        page = None
        try:
            result = compile_offline(run.step, record)
        except Exception as error:  # one run's failure never aborts the others
            compiled = str(error)
        else:
            page = pickled_page(plain_compilation(layout, record, result))
            compiled = summarize(run.step, record, result)
        mined = found_in(run.step, record, judged) if _setup.mine else None
        made.append(
            _Made(
                _files.write_files(files),
                run_row(run.step, record),
                raw_pages.page_task(record.task),
                record.success,
                record.outcome,
                judged,
                compiled,
                page,
                mined,
            )
        )
    return made


def _pickled(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


# --- in the build -------------------------------------------------------------------------


def _context(method: str = START_METHOD) -> Any:
    """The workers' start method, told what its fork server imports (PRELOAD: heeded only
    before the server first starts)."""
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(PRELOAD)
    return context


@contextlib.contextmanager
def fork_server(workers: int | None) -> Iterator[None]:
    """With more than one worker asked for, their fork server started at once, so that it
    imports wikitrace while the build reads its input (the `Farm` made then forks from it);
    stopped when the block ends, if no Farm stopped it before."""
    if workers is None or workers <= 1 or START_METHOD != "forkserver":
        yield
        return
    from multiprocessing import forkserver

    _context()
    forkserver.ensure_running()
    try:
        yield
    finally:
        _stop_fork_server()


class Farm:
    """The build's worker processes, kept from its first run to its last page: the runs'
    work (`build_in_workers`), then the finish's pages (`map`). Close it before the staging
    folder is removed (the workers write into it)."""

    def __init__(
        self,
        options: BuildOptions,
        layout: Layout,
        root: Path,
        workers: int,
        *,
        mine: bool,
        start_method: str = START_METHOD,
    ) -> None:
        setup = _Setup(
            layout=layout,
            root=os.fspath(root),
            inputs=list(options.inputs),
            redact=options.redact,
            redact_patterns=tuple(options.redact_patterns),
            redact_keep=tuple(options.redact_keep),
            mine=mine,
        )
        self.workers = workers
        self.pool = ProcessPoolExecutor(
            workers, mp_context=_context(start_method), initializer=_start, initargs=(setup,)
        )
        self._ending: threading.Thread | None = None

    def map(self, function: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """`function` of each item, in the items' order, done by the workers (`function` and
        the items pickled: a module's function, each item a chunk of work worth sending)."""
        pending: deque[Future[R]] = deque()
        for item in items:
            if len(pending) >= CHUNKS_PER_WORKER * self.workers:
                yield pending.popleft().result()
            pending.append(self.pool.submit(function, item))
        while pending:
            yield pending.popleft().result()

    def release(self) -> None:
        """Let the workers end, the build handing them nothing more: they end while it writes
        its last files (`close` waits for them)."""
        if self._ending is None:
            self._ending = threading.Thread(
                target=self.pool.shutdown, name="wikitrace-workers-end", daemon=True
            )
            self._ending.start()

    def close(self, failed: bool = False) -> None:
        """Stop the workers (a `failed` build's at the end of their chunk, the rest of its
        work dropped) and their fork server."""
        if self._ending is not None:  # released: nothing was left to drop
            self._ending.join()
        else:
            self.pool.shutdown(wait=True, cancel_futures=failed)
        _stop_fork_server()


def build_in_workers(raw: RawLayer, producer: Producer, miner: Miner | None, farm: Farm) -> None:
    """What `producer.offline(raw.runs())` does (through `miner.watch` when mining), the
    per-run work done by the `farm`'s workers."""
    pipeline = _Pipeline(farm.pool, raw, producer, miner, CHUNKS_PER_WORKER * farm.workers)
    pipeline.run(meanwhile=_import_mining if miner is not None else None)


def _import_mining() -> None:
    """What mining imports (numpy, about 0.1 s of CPU), imported while the workers compile
    rather than once the last run is back, when nothing else runs."""
    import numpy  # noqa: F401


def _stop_fork_server() -> None:
    """End the fork server the workers were forked from, now that they have ended: no process
    of the build outlives it, and, the server waited for, the workers' CPU time counts as the
    build's (`time`, RUSAGE_CHILDREN) as it would for workers of its own. multiprocessing has
    no public call for it; `ForkServer._stop` is what its own tests call (the next build that
    needs a server starts one)."""
    if START_METHOD != "forkserver":
        return
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        stop()


class _Pipeline:
    """The chunks in flight, each taken back in input order: pass one's to number their runs
    and send them to pass two, pass two's to write them."""

    def __init__(
        self,
        pool: ProcessPoolExecutor,
        raw: RawLayer,
        producer: Producer,
        miner: Miner | None,
        limit: int,
    ) -> None:
        self.pool = pool
        self.raw = raw
        self.producer = producer
        self.miner = miner
        self.limit = limit
        self.checking: deque[tuple[list[bytes], Future[Any]]] = deque()
        self.meanwhile: Callable[[], None] | None = None
        self.making: deque[tuple[list[str], Future[list[_Made]]]] = deque()

    def run(self, meanwhile: Callable[[], None] | None = None) -> None:
        """Every run built; `meanwhile`: this process's work to do once the first chunk is
        back (the workers started, and busy with the next ones)."""
        self.meanwhile = meanwhile
        chunk: list[bytes] = []
        for blob in self.raw.pickled_sources():
            chunk.append(blob)
            if len(chunk) == CHUNK_RUNS:
                self._check(chunk)
                chunk = []
        if chunk:
            self._check(chunk)
        while self.checking or self.making:
            self._take_one()

    def _check(self, chunk: list[bytes]) -> None:
        while len(self.checking) + len(self.making) >= self.limit:
            self._take_one()
        self.checking.append((chunk, self.pool.submit(_check, chunk)))

    def _take_one(self) -> None:
        """Take back the first chunk of either pass that is done, waiting for one."""
        heads = [queue[0][-1] for queue in (self.checking, self.making) if queue]
        concurrent.futures.wait(heads, return_when=concurrent.futures.FIRST_COMPLETED)
        if self.checking and self.checking[0][-1].done():
            self._number(*self.checking.popleft())
        else:
            self._write(*self.making.popleft())
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()

    def _number(self, chunk: list[bytes], future: Future[Any]) -> None:
        checked, counts, places = future.result()
        redactor = self.raw.redactor
        if redactor is not None:
            redactor.counts.update(counts)
            redactor.places.update(places)
        numbered, formats = [], []
        for blob, run in zip(chunk, checked, strict=True):
            step = self.raw.number(run.key)
            if step is None:
                continue
            attempt = self.raw.attempt(run.task, run.attempt)
            numbered.append(
                _Numbered(
                    run.redacted or blob,
                    run.redacted is not None,
                    run.path,
                    run.line,
                    run.at,
                    step,
                    attempt,
                )
            )
            formats.append(run.format)
        if numbered:
            self.making.append((formats, self.pool.submit(_make, numbered)))

    def _write(self, formats: Iterable[str], future: Future[list[_Made]]) -> None:
        writer = self.raw.writer
        for input_format, made in zip(formats, future.result(), strict=True):
            writer.listed(made.listed)
            self.raw.add(made.row, made.task, input_format, made.success)
            step = made.row.step
            if self.miner is not None and made.mined is not None:
                self.miner.add_found(made.mined)
            if isinstance(made.compiled, str) or made.page is None:
                self.producer.record_failure(step, made.row.task_id, str(made.compiled))
            else:
                self.producer.results.rendered(made.compiled, made.outcome, made.judged, made.page)
            self.producer.advance()
