"""Where an offline build with workers leaves a core idle: the CPU its own process spends while
no worker is in a call (the serial part, which two cores cannot share), by phase.

Writes synthetic runs (build_bench.py's), then builds them with --workers in this process,
--repeat times. The workers' calls (their two passes over the runs, the new divergences'
pages, the compilation pages, the rankers' pages) are timed in the workers themselves (this
module is what their fork server imports first: its patches reach them) and the build's own
phases in its process; a thread samples the process's CPU and where its main thread is every
10 ms. Prints, per turn: the wall time, the CPU of the build's process and of its workers,
the build's CPU while no worker is in a call (the floor of issue 58's 1.7x is what is left
after it: two cores share the rest), split by the phase its main thread was in, and the
workers' CPU by call. Asserts nothing; figures on a shared machine move with its load, which
is printed with them.

    python benchmarks/serial_bench.py [--runs 10000] [--workers 2] [--repeat 2] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import remove_work, write_runs

import wikitrace.compiler.build as build
import wikitrace.compiler.layers as layers
import wikitrace.compiler.layers_mined as layers_mined
import wikitrace.compiler.workers as workers
import wikitrace.search.saved as saved
import wikitrace.versions.finish as finish
from wikitrace.compiler import BuildOptions, build_corpus

CALLS = os.environ.setdefault(
    "SERIAL_BENCH_CALLS",
    os.path.join(tempfile.gettempdir(), f"wikitrace-serial-calls-{os.getpid()}"),
)
"""Where each worker appends its calls' times (a line each), read by the build at the end:
named in the build's process, whose environment its workers' fork server inherits."""

PHASES = [
    (build, "read_inputs", "reading the input"),
    (build, "build_in_workers", "the runs (the workers' two passes)"),
    (layers, "_add_rows", "the rows"),
    (layers, "mined_pages", "mining"),
    (layers, "_write_mined", "the mined lessons' pages"),
    (finish, "catalog_of", "the catalog"),
    (finish, "search_files", "the rankers"),
    (finish, "_write_indexes", "the indexes"),
    (finish, "_write_manifest", "the manifest"),
    (finish, "freeze", "freezing"),
    (workers.Farm, "close", "the workers' end"),
]
"""The build's phases, each a function whose frames say the main thread is in it (the
innermost wins); anything else is named by its innermost function of wikitrace."""

WORKER_CALLS = [
    (workers, "_check", [workers]),
    (workers, "_make", [workers]),
    (layers_mined, "divergence_pages", [layers_mined, layers]),
    (layers, "_named_pages", [layers]),
    (saved, "_ranker_page", [saved]),
]
"""What the workers are handed (a module's function, pickled by name: each patched where it
is looked up and called)."""


def _timed_call(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.monotonic(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            line = [name, wall, time.monotonic(), time.process_time() - cpu]
            with open(CALLS, "a") as calls:
                calls.write(json.dumps(line) + "\n")

    return timed


for _module, _name, _homes in WORKER_CALLS:
    _patched = _timed_call(_name, getattr(_module, _name))
    for _home in _homes:
        setattr(_home, _name, _patched)


def _phase_of(frame: Any, codes: dict[Any, str]) -> str:
    """The phase the main thread is in (its innermost frame of a PHASES function), else its
    innermost function of wikitrace."""
    innermost = None
    while frame is not None:
        code = frame.f_code
        if code in codes:
            return codes[code]
        if innermost is None and frame.f_globals.get("__name__", "").startswith("wikitrace."):
            innermost = f"{frame.f_globals['__name__']}.{code.co_name}"
        frame = frame.f_back
    return f"other: {innermost}" if innermost else "other"


def _codes() -> dict[Any, str]:
    codes = {}
    for owner, name, label in PHASES:
        function = getattr(owner, name)
        codes[getattr(function, "__wrapped__", function).__code__] = label
    return codes


class _Busy:
    """The workers' calls as intervals of time: how much of a stretch none was in."""

    def __init__(self, calls: list[tuple[str, float, float, float]]) -> None:
        merged: list[list[float]] = []
        for _, start, end, _ in sorted(calls, key=lambda call: call[1]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.merged = merged

    def idle(self, start: float, end: float) -> float:
        covered = sum(max(0.0, min(end, b) - max(start, a)) for a, b in self.merged)
        return max(0.0, (end - start) - covered)


def one_build(runs: Path, corpus: Path, count: int) -> dict[str, Any]:
    """An offline build of `runs` with `count` workers, sampled: its figures."""
    if os.path.exists(CALLS):
        os.remove(CALLS)
    codes = _codes()
    main = threading.main_thread().ident
    samples: list[tuple[float, float, str]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            frame = sys._current_frames().get(main)
            samples.append((time.monotonic(), time.process_time(), _phase_of(frame, codes)))
            time.sleep(0.01)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = threading.Thread(target=sample, daemon=True)
    started, cpu = time.monotonic(), time.process_time()
    sampler.start()
    build_corpus(BuildOptions(inputs=[runs], output=corpus, workers=count))
    stop.set()
    sampler.join()
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    calls: list[tuple[str, float, float, float]] = []
    if os.path.exists(CALLS):
        with open(CALLS) as lines:
            for line in lines:
                name, start, end, spent = json.loads(line)
                calls.append((name, start, end, spent))
        os.remove(CALLS)
    busy = _Busy(calls)
    serial: dict[str, float] = defaultdict(float)
    for (t0, c0, phase), (t1, c1, _) in itertools.pairwise(samples):
        if t1 > t0:
            serial[phase] += (c1 - c0) * busy.idle(t0, t1) / (t1 - t0)
    by_call: dict[str, float] = defaultdict(float)
    for name, _, _, spent in calls:
        by_call[name] += spent
    return {
        "wall": wall,
        "cpu": cpu,
        "workers": children,
        "serial": dict(serial),
        "calls": dict(by_call),
        "load": os.getloadavg()[0],
    }


def _lines(figures: dict[str, Any]) -> Iterator[str]:
    serial = figures["serial"]
    yield (
        f"  {figures['wall']:.2f} s; CPU {figures['cpu']:.2f} s in the build's process (this "
        f"benchmark's sampling thread included), {figures['workers']:.2f} s in its workers; "
        f"load average {figures['load']:.1f}"
    )
    yield f"  the build's CPU while no worker is in a call: {sum(serial.values()):.2f} s"
    for phase, spent in sorted(serial.items(), key=lambda item: -item[1]):
        if spent >= 0.01:
            yield f"    {spent:5.2f} s  {phase}"
    yield "  the workers' CPU in their calls: " + ", ".join(
        f"{name} {spent:.2f} s" for name, spent in figures["calls"].items()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", type=Path, help="the scratch folder's parent (a tmpfs, say)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wikitrace-serial-", dir=args.dir))
    try:
        runs = work / "runs.jsonl"
        write_runs(runs, args.runs, args.turns)
        for turn in range(args.repeat):
            figures = one_build(runs, work / f"corpus-{turn}", args.workers)
            print(f"{args.runs} runs, --workers {args.workers}, turn {turn + 1}:", flush=True)
            for line in _lines(figures):
                print(line, flush=True)
    finally:
        remove_work(work)


if __name__ == "__main__":
    main()
