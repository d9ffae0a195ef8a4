"""Benchmark the drill-down tools on a long run against bare interpreter start-up.

Builds a corpus with one run of --turns turns (a turn log of tens of MB), then prints the
median wall time of `actions` and `turn` against `python3 -c pass`. Asserts nothing.

    python benchmarks/tools_bench.py [--turns 5000] [--observation 10000] [--repeat 21]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wikitrace.compiler import BuildOptions, build_corpus


def median_seconds(command: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument(
        "--observation", type=int, default=10_000, help="characters per observation"
    )
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wikitrace-tools-bench-"))
    try:
        body = ("ls -la /srv/app && cat config.yaml | grep timeout\n" * 200)[: args.observation]
        turns = [
            {
                "role": "assistant",
                "reasoning": f"step {n}",
                "action": f"cmd {n}",
                "observation": body,
            }
            for n in range(args.turns)
        ]
        run = {"task_id": "long", "task": "a long run", "success": False, "turns": turns}
        (work / "runs.jsonl").write_text(json.dumps(run) + "\n")
        corpus = work / "corpus"
        build_corpus(BuildOptions(inputs=[work / "runs.jsonl"], output=corpus))
        log_mb = (corpus / "raw/step-0001/solver.full.jsonl").stat().st_size / 1e6
        print(f"one run: {args.turns} turns, turn log {log_mb:.1f} MB; python {sys.executable}")
        python = [sys.executable]
        baseline = median_seconds([*python, "-c", "pass"], args.repeat)
        print(f"python3 -c pass: {baseline * 1e3:.1f} ms (median of {args.repeat})")
        tools = corpus / "tools"
        middle = str(args.turns // 2)
        for label, command in [
            ("actions 1", [*python, str(tools / "actions"), "1"]),
            (f"turn 1 {middle}", [*python, str(tools / "turn"), "1", middle]),
            (f"turn 1 {args.turns}", [*python, str(tools / "turn"), "1", str(args.turns)]),
            ("turn 1 1-10", [*python, str(tools / "turn"), "1", "1-10"]),
        ]:
            seconds = median_seconds(command, args.repeat)
            print(
                f"{label}: {seconds * 1e3:.1f} ms, {seconds / baseline:.2f}x start-up (target < 2x)"
            )
    finally:
        for path in [work, *work.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                os.chmod(path, 0o755)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
