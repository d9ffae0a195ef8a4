"""Benchmark an offline build as the corpus grows: time against a plain write and a `cp -r`
of the same files, and peak memory, each size in a fresh process.

For each --runs size: write synthetic runs (benchmarks/build_bench.py's), build them offline
in a child process once for each --workers count (its peak RSS is the build's process's; its
CPU time counts its worker processes'), then copy the corpus with `cp -r` and write the same
files plainly (open, write, close: no hashing, no rendering) and print the times and ratios.
With --repeat N, the builds and the copy take turns N times, and the medians are printed
(with the load average each time: other work on the machine weighs on each alike). Asserts
nothing. The scratch folder is the system's temporary folder unless --dir.

    python benchmarks/scale_bench.py [--runs 1000 10000 50000 200000] [--turns 12]
        [--workers 1 2] [--repeat 3] [--dir /dev/shm] [--reference CHECKOUT]

With --reference, a checkout of another commit (`git worktree add /tmp/old COMMIT`, or `git
archive COMMIT | tar -x -C /tmp/old`) builds the same runs with each --workers count too, in
each turn after this code's builds, its CPU and its speed with workers are printed beside this
code's (issue 58's floor: at or below the older code's CPU), and the two corpora are compared
file by file, the manifest aside (it holds the build's time): a change that makes the build
faster must not change a page.

Each figure is printed beside its floor (issue 58): the offline build within 4x `cp -r` of its
own output; 2 workers at least 1.7x as fast as 1 at 10,000 runs and never slower at 1,000. The
build's CPU (its workers' included) is the figure a busy machine disturbs least; the wall-clock
ratios hold only as far as the load average printed with them lets them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import plain_write, remove_work, write_runs

FILED_AT, FILED_RATIO = "1e0aebf", 1.78
"""The commit issue 58 measured against the code of three weeks before (whose history this
repository does not hold), and the ratio of their CPU at 10,000 runs with --workers 1: the
floor against a --reference checkout of FILED_AT is 1 / FILED_RATIO."""


def _spin(seconds: float) -> int:
    """Pure Python work for about `seconds` of CPU; the loops it made."""
    loops = 0
    end = time.process_time() + seconds
    while time.process_time() < end:
        total = 0
        for number in range(10_000):
            total += number * number
        loops += 1
    return loops


def parallel_capacity(seconds: float = 1.0) -> float:
    """How much more pure Python work two processes get done at once than one, now: about
    2 on two idle cores, less while other processes use them (what bounds --workers)."""
    started = time.perf_counter()
    alone = _spin(seconds) / (time.perf_counter() - started)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver")) as pool:
        list(pool.map(_spin, [0.01, 0.01]))  # started
        started = time.perf_counter()
        together = sum(pool.map(_spin, [seconds, seconds])) / (time.perf_counter() - started)
    return together / alone


CHILD = """
import sys, time, resource
from multiprocessing import forkserver
from pathlib import Path
from wikitrace.compiler import BuildOptions, build_corpus
started = time.perf_counter()
options = BuildOptions(inputs=[Path(sys.argv[1])], output=Path(sys.argv[2]))
options.workers = int(sys.argv[3])
build_corpus(options)
seconds = time.perf_counter() - started
# VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at its parent's size.
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]
# The workers are the fork server's children: stopping it (it waits for them) counts their CPU
# (a build stops it itself since issue 58; an older one's is stopped here).
forkserver._forkserver._stop()
own = resource.getrusage(resource.RUSAGE_SELF)
others = resource.getrusage(resource.RUSAGE_CHILDREN)
print(seconds, peak, own.ru_utime + own.ru_stime, others.ru_utime + others.ru_stime)
"""


PARTS = (
    "cli",
    "compiler",
    "control",
    "corpus_schema",
    "evaluation",
    "integrations",
    "prompts",
    "search",
    "tools",
    "transport",
    "versions",
)
"""The folders pyproject.toml maps to `wikitrace.NAME`."""


def reference_path(checkout: Path, work: Path) -> str:
    """A folder to put first on PYTHONPATH so that `wikitrace` is imported from `checkout`
    (its folders linked under `wikitrace/`, as pyproject.toml maps them), this install's
    dependencies with it."""
    package = work / "reference" / "wikitrace"
    package.mkdir(parents=True)
    for part in PARTS:
        (package / part).symlink_to((checkout / part).resolve(), target_is_directory=True)
    return str(package.parent)


def _build(
    runs_file: Path, corpus: Path, workers: int, python_path: str | None = None
) -> tuple[float, float, float, float]:
    """An offline build in a child process (of the code on `python_path` when given): its
    seconds, peak memory (KB), its own CPU seconds and its workers'."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(runs_file), str(corpus), str(workers)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    seconds, peak_kb, own_cpu, worker_cpu = map(float, done.stdout.split())
    return seconds, peak_kb, own_cpu, worker_cpu


def _copy(root: Path, copy: Path) -> float:
    """Seconds `cp -r` takes to copy the corpus at `root` to `copy`."""
    started = time.perf_counter()
    subprocess.run(["cp", "-r", str(root), str(copy)], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10_000, 50_000, 200_000])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1],
        help="build each size once with each count of worker processes (the workers setting)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="build with each --workers count and copy, in turn, this many times: medians",
    )
    parser.add_argument("--dir", type=Path, help="the scratch folder's parent (a tmpfs, say)")
    parser.add_argument(
        "--reference",
        type=Path,
        help="a checkout of another commit: built with --workers 1 too, pages compared",
    )
    args = parser.parse_args()
    print(
        f"load average {os.getloadavg()[0]:.2f}; two processes do {parallel_capacity():.2f}x the "
        "work of one (2 on two idle cores)",
        flush=True,
    )
    for count in args.runs:
        work = Path(tempfile.mkdtemp(prefix="wikitrace-scale-", dir=args.dir))
        try:
            runs_file = work / "runs.jsonl"
            write_runs(runs_file, count, args.turns)
            size = runs_file.stat().st_size / 1e6
            # Each build and copy in a folder of its own, all removed at the end: removing
            # files costs as much as writing them on some disks, and would weigh on the next.
            builds: list[list[tuple[float, float, float, float]]] = [[] for _ in args.workers]
            copies: list[float] = []
            references: list[list[tuple[float, float, float, float]]] = [[] for _ in args.workers]
            python_path = reference_path(args.reference, work) if args.reference else None
            for turn in range(args.repeat):
                loads = [os.getloadavg()[0]]
                for attempt, workers in enumerate(args.workers):
                    corpus = work / f"corpus-{turn}-{attempt}"
                    builds[attempt].append(_build(runs_file, corpus, workers))
                    loads.append(os.getloadavg()[0])
                if python_path is not None:  # in turn with this code's, under the same load
                    for attempt, workers in enumerate(args.workers):
                        built = work / f"reference-{turn}-{attempt}"
                        references[attempt].append(_build(runs_file, built, workers, python_path))
                        loads.append(os.getloadavg()[0])
                        print(
                            f"{count} runs, turn {turn + 1}: --workers {workers}: CPU "
                            f"{sum(builds[attempt][-1][2:]):.2f} s, {builds[attempt][-1][0]:.2f}"
                            f" s; --reference {sum(references[attempt][-1][2:]):.2f} s, "
                            f"{references[attempt][-1][0]:.2f} s",
                            flush=True,
                        )
                copies.append(_copy(corpus.resolve(), work / f"copy-{turn}"))
                loads.append(os.getloadavg()[0])
                if args.repeat > 1:
                    print(
                        f"{count} runs, turn {turn + 1}: "
                        + ", ".join(
                            f"--workers {w} {taken[-1][0]:.2f} s"
                            for w, taken in zip(args.workers, builds, strict=True)
                        )
                        + f", cp -r {copies[-1]:.2f} s; load average "
                        + " to ".join(f"{load:.1f}" for load in (min(loads), max(loads))),
                        flush=True,
                    )
            if python_path is not None:
                ours = (work / "corpus-0-0").resolve()
                different = differing_files(ours, (work / "reference-0-0").resolve())
                print(
                    f"{count} runs: the corpus of --reference and this code's "
                    + (
                        "hold the same files, byte for byte (the manifest aside)"
                        if not different
                        else f"DIFFER in {len(different)} files: {', '.join(different[:5])}"
                    ),
                    flush=True,
                )
            root = corpus.resolve()
            copy_s = statistics.median(copies)
            # The files are read a part at a time (about 256 MB), and only their writing is
            # timed: at 200,000 runs all of them at once were 5 GB of this process.
            written = plain_s = 0.0
            part: dict[str, bytes] = {}
            held = 0
            paths = sorted(p for p in root.rglob("*") if p.is_file())
            for index, path in enumerate(paths):
                data = path.read_bytes()
                part[path.relative_to(root).as_posix()] = data
                held += len(data)
                if held >= 256 * 2**20 or index == len(paths) - 1:
                    started = time.perf_counter()
                    plain_write(part, work / "plain")
                    plain_s += time.perf_counter() - started
                    written += held / 1e6
                    part, held = {}, 0
            median = "" if args.repeat == 1 else f"median of {args.repeat}: "
            print(
                f"{count} runs ({size:.0f} MB in, {written:.0f} MB written): {median}cp -r of the "
                f"corpus {copy_s:.2f} s, plain write of the same files {plain_s:.2f} s",
                flush=True,
            )
            first = statistics.median(t[0] for t in builds[0])
            speed_floor = "1.7x at 10,000 runs" if count >= 10_000 else "1x"
            for workers, taken in zip(args.workers, builds, strict=True):
                build_s, peak_kb, own_cpu, worker_cpu = (
                    statistics.median(t[i] for t in taken) for i in range(4)
                )
                print(
                    f"  --workers {workers}: {median}offline build {build_s:.2f} s "
                    f"({build_s / copy_s:.2f}x cp -r, floor <= 4x; {build_s / plain_s:.1f}x the "
                    f"plain write; {first / build_s:.2f}x as fast as --workers "
                    f"{args.workers[0]}"
                    + (f", floor >= {speed_floor}" if workers > args.workers[0] else "")
                    + f"), CPU {own_cpu:.2f} s in the build's process + "
                    f"{worker_cpu:.2f} s in its workers ({(own_cpu + worker_cpu) / count * 1e3:.2f}"
                    f" ms a run); peak memory of the build's process {peak_kb / 1024:.0f} MB "
                    "(target <= 300 MB)",
                    flush=True,
                )
            if references[0]:
                ref_first = statistics.median(t[0] for t in references[0])
                for workers, taken, theirs in zip(args.workers, builds, references, strict=True):
                    ours_cpu = statistics.median(t[2] + t[3] for t in taken)
                    ref_cpu = statistics.median(t[2] + t[3] for t in theirs)
                    ref_s = statistics.median(t[0] for t in theirs)
                    print(
                        f"  --reference, --workers {workers}: {median}{ref_s:.2f} s "
                        f"({ref_first / ref_s:.2f}x as fast as --workers {args.workers[0]}), "
                        f"CPU {ref_cpu:.2f} s ({ref_cpu / count * 1e3:.2f} ms a run); this "
                        f"code's uses {ours_cpu / ref_cpu:.2f}x its CPU (floor <= 1x against "
                        "the code of three weeks before issue 58, which cannot be built: <= "
                        f"{1 / FILED_RATIO:.2f}x against {FILED_AT}, where the issue measured "
                        f"{FILED_RATIO}x the older code's CPU)",
                        flush=True,
                    )
        finally:
            remove_work(work)


def differing_files(one: Path, other: Path) -> list[str]:
    """The files (paths under the roots) that only one corpus holds or that the two hold with
    other bytes; the manifest, which holds the build's time and its options, aside."""

    def files(root: Path) -> dict[str, Path]:
        return {
            p.relative_to(root).as_posix(): p
            for p in root.rglob("*")
            if p.is_file() and p.name != "manifest.json"
        }

    ours, theirs = files(one), files(other)
    return sorted(
        rel
        for rel in ours.keys() | theirs.keys()
        if rel not in ours
        or rel not in theirs
        or ours[rel].read_bytes() != theirs[rel].read_bytes()
    )


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    main()
