"""Benchmark an offline build as the corpus grows: time against a plain write of the same
files, and peak memory, each size in a fresh process.

For each --runs size: write synthetic runs (benchmarks/build_bench.py's), build them offline
in a child process (its peak RSS is the build's), then write the same files plainly (open,
write, close: no hashing, no rendering) and print both times and their ratio. Asserts nothing.

    python benchmarks/scale_bench.py [--runs 1000 10000 50000 200000] [--turns 12]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import plain_write, remove_work, write_runs

CHILD = """
import sys, time
from pathlib import Path
from wikitrace.compiler import BuildOptions, build_corpus
started = time.perf_counter()
build_corpus(BuildOptions(inputs=[Path(sys.argv[1])], output=Path(sys.argv[2])))
seconds = time.perf_counter() - started
# VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at its parent's size.
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]
print(seconds, peak)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10_000, 50_000, 200_000])
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    for count in args.runs:
        work = Path(tempfile.mkdtemp(prefix="wikitrace-scale-"))
        try:
            runs_file = work / "runs.jsonl"
            write_runs(runs_file, count, args.turns)
            size = runs_file.stat().st_size / 1e6
            corpus = work / "corpus"
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(runs_file), str(corpus)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
            )
            build_s, peak_kb = done.stdout.split()
            root = corpus.resolve()
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
            print(
                f"{count} runs ({size:.0f} MB in, {written:.0f} MB written): offline build "
                f"{float(build_s):.2f} s, plain write of the same files {plain_s:.2f} s, ratio "
                f"{float(build_s) / plain_s:.1f}x (target <= 2x); peak memory of the build "
                f"{int(peak_kb) / 1024:.0f} MB (target <= 300 MB)",
                flush=True,
            )
        finally:
            remove_work(work)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
    main()
