"""Benchmark `wikitrace add`: what growing a large corpus by a few runs costs, against a rebuild.

Prints its figures; asserts nothing. Offline (no model), so it measures wikitrace's own work:
checking the parent version against its manifest (through its seal: only files the seal does
not vouch for are hashed), reading its headers back, linking its files into the new version and
writing the indexes. A last add, with the parent's seal removed, shows what hashing every file
of the parent costs, and one more add, made by `wikitrace add` in a process of its own, shows
the add's own peak memory.

    python benchmarks/add_bench.py [--runs 5000] [--add 10] [--turns 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import remove_work, synthetic_runs

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.versions import Store

_PEAK = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
if os.waitstatus_to_exitcode(status):
    sys.exit(f"{sys.argv[1:]} exited with {os.waitstatus_to_exitcode(status)}")
print(usage.ru_maxrss)
"""
"""Runs a command and prints its peak memory in KB (its own: this process is small)."""


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (user and system)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def write_jsonl(path: Path, runs: list[dict[str, object]]) -> Path:
    with path.open("w") as handle:
        for run in runs:
            handle.write(json.dumps(run) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--add", type=int, default=10)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wikitrace-add-bench-"))
    try:
        runs = synthetic_runs(args.runs + 3 * args.add, args.turns)
        first = write_jsonl(work / "first.jsonl", runs[: args.runs])
        more = write_jsonl(work / "more.jsonl", runs[args.runs : args.runs + args.add])
        both = write_jsonl(work / "both.jsonl", runs[: args.runs + args.add])
        last = write_jsonl(work / "last.jsonl", runs[args.runs + args.add : -args.add])
        alone = write_jsonl(work / "alone.jsonl", runs[-args.add :])
        corpus = work / "corpus"

        started = time.perf_counter()
        build_corpus(BuildOptions(inputs=[first], output=corpus))
        built = time.perf_counter() - started

        started = time.perf_counter()
        manifest_io.verify(corpus)
        verified = time.perf_counter() - started

        started, cpu = time.perf_counter(), cpu_seconds()
        report = add_runs(BuildOptions(inputs=[more], output=corpus))
        added, added_cpu = time.perf_counter() - started, cpu_seconds() - cpu

        # The baseline: the same runs built alone, into a corpus of their own.
        started, cpu = time.perf_counter(), cpu_seconds()
        build_corpus(BuildOptions(inputs=[more], output=work / "alone"))
        fresh, fresh_cpu = time.perf_counter() - started, cpu_seconds() - cpu
        files = len(manifest_io.load(corpus).files)

        started = time.perf_counter()
        again = add_runs(BuildOptions(inputs=[both], output=corpus))
        nothing = time.perf_counter() - started

        store = Store(corpus)
        store.seal_path(store.current()).unlink()
        started = time.perf_counter()
        add_runs(BuildOptions(inputs=[last], output=corpus))
        unsealed = time.perf_counter() - started

        # The add's own peak: `wikitrace add` in a fresh process. A small process starts it
        # and reports its peak: a child started by this one (which built the corpora, and is
        # large) would count this one's size as its own (Linux keeps the peak across exec).
        time.sleep(2.5)  # files written within 2 s of a check are hashed, not sealed
        started = time.perf_counter()
        command = [str(Path(sys.executable).parent / "wikitrace"), "-q", "add", str(corpus)]
        done = subprocess.run(
            [sys.executable, "-c", _PEAK, *command, str(alone)],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        in_process = time.perf_counter() - started
        peak_kb = int(done.stdout.split()[-1])

        started = time.perf_counter()
        build_corpus(BuildOptions(inputs=[both], output=work / "rebuilt"))
        rebuilt = time.perf_counter() - started

        size = sum(p.stat().st_size for p in (work / "corpus.versions").rglob("*") if p.is_file())
        print(f"corpus of {args.runs} runs x {args.turns} turns: built in {built:.1f} s")
        print(f"  verify of the parent alone: {verified:.1f} s")
        print(
            f"add {report.runs} new runs -> {report.version} ({files} files): {added:.1f} s; "
            f"a rebuild of all {args.runs + args.add} runs: {rebuilt:.1f} s"
        )
        print(
            f"  add {report.runs} runs: {added:.2f} s wall, {added_cpu:.2f} s CPU; a fresh build "
            f"of those {report.runs} runs alone: {fresh:.2f} s wall, {fresh_cpu:.2f} s CPU"
        )
        print(
            f"add the whole log again ({again.duplicates} runs already there, nothing new): "
            f"{nothing:.1f} s"
        )
        print(f"add {args.add} more runs to a parent without its seal: {unsealed:.1f} s")
        print(
            f"add {args.add} more runs with `wikitrace add`, a process of its own: "
            f"{in_process:.1f} s, its peak memory {peak_kb / 1024:.0f} MiB"
        )
        print(
            f"disk for the versions (hard links counted once per name): {size / 2**20:.1f} MiB; "
            f"this benchmark's peak RSS (it builds the corpora) "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
        )
    finally:
        remove_work(work)


if __name__ == "__main__":
    main()
