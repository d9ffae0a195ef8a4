"""Benchmark `wikitrace lift eval` metrics: 8 suites x 5 methods x 500 tasks x 3 trials.

Prints the time to read the rows and to compute every metric with 10,000 bootstrap resamples,
and the process's peak memory. Asserts nothing.

    python benchmarks/eval_bench.py [--suites 8] [--methods 5] [--tasks 500] [--trials 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from wikitrace.evaluation import EvalOptions, evaluate, read_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=int, default=8)
    parser.add_argument("--methods", type=int, default=5, help="no-memory and the rerun included")
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    methods = ["no-memory", "no-memory-rerun"] + [f"memory-{n}" for n in range(args.methods - 2)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.jsonl"
        with path.open("w") as handle:
            for suite in range(args.suites):
                for task in range(args.tasks):
                    p = rng.random()
                    for method in methods:
                        for trial in range(args.trials):
                            row = {
                                "suite": f"suite-{suite}",
                                "method": method,
                                "task_id": str(task),
                                "trial": trial,
                                "success": bool(rng.random() < p),
                            }
                            handle.write(json.dumps(row) + "\n")
        started = time.perf_counter()
        rows = read_rows([path])
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        report = evaluate(rows, EvalOptions(resamples=args.resamples))
        metrics_s = time.perf_counter() - started
    cells = args.suites * args.methods
    print(
        f"{len(rows)} rows ({args.suites} suites x {args.methods} methods x {args.tasks} tasks x "
        f"{args.trials} trials): read in {read_s:.2f} s; metrics with {args.resamples} resamples "
        f"for {cells} method-suite cells and {args.methods} averages in {metrics_s:.2f} s "
        f"({metrics_s / cells * 1e3:.0f} ms per method and suite; target well under 1 s); "
        f"{len(report.results)} result rows"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS) of the whole process: {peak:.0f} MB (target <= 300 MB)")


if __name__ == "__main__":
    main()
