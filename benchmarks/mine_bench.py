"""Benchmark mining (compiler/mine.py): what it finds in real logs, whether it holds on tasks it
never saw, and what it adds to an offline build.

Prints its figures; asserts nothing.

    python benchmarks/mine_bench.py findings PATH ...      # lessons mined from each input
    python benchmarks/mine_bench.py holdout PATH ... [--splits 50]
    python benchmarks/mine_bench.py cost [--runs 10000] [--repeats 3]

`findings` and `holdout` read logs as `wikitrace build` does (any format it detects); give each
dataset as its own PATH. `holdout` mines on a random half of the tasks and checks, on the other
half, whether each lesson's direction holds (runs with the pattern fail more often, or less
often, than runs without it, as mined). It reports the lessons kept (q <= 0.05) and, since
small logs often keep none, the strongest pattern of each task type before correction.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import AUTO, DEFAULT_THRESHOLD, plan_inputs
from wikitrace.compiler.importers.runs import SourceRun
from wikitrace.compiler.mine_contrast import FDR, Contrast, MiningReport, contrasts, split
from wikitrace.compiler.mine_patterns import actions_of, describe, patterns
from wikitrace.compiler.mine_table import RunPatterns
from wikitrace.corpus_schema import is_judged


def read(path: Path) -> list[RunPatterns]:
    """The runs of `path` as mining sees them; `planted` is 3,000 made-up runs in which one
    tool raises the failure rate from 30% to 70% (a positive control)."""
    if str(path) == "planted":
        from wikitrace.corpus_schema import RunRecord

        records = [RunRecord.model_validate(r) for r in planted_runs(3000)]
    else:
        plan = plan_inputs([path], AUTO, [], DEFAULT_THRESHOLD)
        records = [item.record for item in plan.items() if isinstance(item, SourceRun)]
    runs: list[RunPatterns] = []
    for record in records:
        runs.append(
            RunPatterns(
                step=len(runs) + 1,
                task_id=record.task_id,
                task_type=record.task_type,
                success=record.success,
                judged=is_judged(record.metadata),
                patterns=patterns(actions_of(record.turns)),
            )
        )
    return runs


def numbers(contrast: Contrast) -> str:
    return (
        f"runs that {describe(contrast.pattern)} failed {contrast.with_failed} of "
        f"{len(contrast.present)}; runs that did not, {contrast.without_failed} of "
        f"{len(contrast.absent)} (p = {contrast.p_value:.3g}, q = {contrast.q_value:.3g})"
    )


def strongest(runs: list[RunPatterns]) -> list[Contrast]:
    """The strongest pattern of each task type before correction (what `contrasts` tries)."""
    tried = contrasts(runs, MiningReport(), fdr=1.0)  # keep everything tried
    best: dict[str | None, Contrast] = {}
    for contrast in tried:
        if contrast.task_type not in best or contrast.p_value < best[contrast.task_type].p_value:
            best[contrast.task_type] = contrast
    return list(best.values())


def findings(paths: list[Path]) -> None:
    for path in paths:
        runs = read(path)
        report = MiningReport()
        kept = contrasts(runs, report)
        failed = sum(not run.success for run in runs)
        print(f"\n== {path}: {len(runs)} runs ({failed} failed), {report.patterns_tried} tried")
        for contrast in kept:
            print(f"  LESSON {contrast.task_type}: {numbers(contrast)}")
        for task_type, why in report.task_types.items():
            print(f"  {task_type}: {why}")
        tasks: dict[str, set[bool]] = defaultdict(set)
        for run in runs:
            tasks[run.task_id].add(run.success)
        mixed = sum(len(outcomes) == 2 for outcomes in tasks.values())
        print(f"  tasks with both outcomes (divergence lessons): {mixed} of {len(tasks)}")


def _holds(contrast: Contrast, test: list[RunPatterns]) -> bool | None:
    """Whether the pattern splits `test` runs of its type the way it split the mined ones
    (None when one side is empty there)."""
    members = [run for run in test if run.task_type == contrast.task_type]
    present, absent = split(contrast.pattern, members)
    if not present or not absent:
        return None
    rate_with = sum(not r.success for r in present) / len(present)
    rate_without = sum(not r.success for r in absent) / len(absent)
    if rate_with == rate_without:
        return False
    return (rate_with > rate_without) == contrast.harmful


def holdout(paths: list[Path], splits: int) -> None:
    for path in paths:
        runs = read(path)
        tasks = sorted({run.task_id for run in runs})
        rng = random.Random(1)
        kept_tally = [0, 0, 0]  # held, reversed, untestable
        top_tally = [0, 0, 0]
        kept_lessons = 0
        for _ in range(splits):
            half = set(rng.sample(tasks, len(tasks) // 2))
            train = [r for r in runs if r.task_id in half]
            test = [r for r in runs if r.task_id not in half]
            kept = contrasts(train, MiningReport())
            kept_lessons += len(kept)
            for contrast in kept:
                verdict = _holds(contrast, test)
                kept_tally[0 if verdict else 2 if verdict is None else 1] += 1
            for contrast in strongest(train):
                verdict = _holds(contrast, test)
                top_tally[0 if verdict else 2 if verdict is None else 1] += 1

        def said(tally: list[int]) -> str:
            tested = tally[0] + tally[1]
            share = f"{tally[0] / tested:.0%}" if tested else "n/a"
            return f"held {tally[0]}, reversed {tally[1]}, untestable {tally[2]} (held {share})"

        print(f"\n== {path}: {len(runs)} runs, {len(tasks)} tasks, {splits} random halves")
        print(f"  lessons kept (q <= {FDR}): {kept_lessons} in all; {said(kept_tally)}")
        print(f"  strongest pattern per type, uncorrected: {said(top_tally)}")


def planted_runs(count: int, seed: int = 3) -> list[dict[str, Any]]:
    """Tool-call runs of 3 task types, a tool in each whose use raises the failure rate."""
    rng = random.Random(seed)
    runs = []
    tools = ["search", "open", "read", "edit", "test", "submit", "ask", "undo"]
    for index in range(count):
        task_type = ["pick", "clean", "heat"][index % 3]
        turns: list[dict[str, Any]] = [{"role": "user", "content": f"task {index}"}]
        used = rng.sample(tools, 4)
        for step, tool in enumerate(used):
            turns.append(
                {
                    "role": "assistant",
                    "reasoning": "thinking about the next step " * 3,
                    "tool_calls": [
                        {
                            "name": tool,
                            "arguments": {"target": f"item {step}", "run": index},
                            "result": "ok " * rng.randint(5, 60),
                        }
                    ],
                }
            )
        bad = "undo" in used
        failed = rng.random() < (0.7 if bad else 0.3)
        runs.append(
            {
                "task_id": f"task-{index // 2}",
                "task": f"Do task {index // 2}.",
                "task_type": task_type,
                "success": not failed,
                "turns": turns,
            }
        )
    return runs


def cost(count: int, repeats: int) -> None:
    import orjson

    workdir = Path(tempfile.mkdtemp(prefix="mine-bench-"))
    try:
        source = workdir / "runs.jsonl"
        source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in planted_runs(count)))
        times: dict[bool, list[float]] = {True: [], False: []}
        found = None
        for repeat in range(repeats):
            for mine in (False, True) if repeat % 2 == 0 else (True, False):
                output = workdir / f"c-{repeat}-{mine}"
                started = time.perf_counter()
                report = build_corpus(BuildOptions(inputs=[source], output=output, mine=mine))
                times[mine].append(time.perf_counter() - started)
                if mine:
                    found = report.mining
                output.unlink()  # the pointer; the versions beside it
                shutil.rmtree(output.with_name(output.name + ".versions"))
        without, with_ = statistics.median(times[False]), statistics.median(times[True])
        size = source.stat().st_size / 1e6
        print(f"{count} runs ({size:.1f} MB), median of {repeats} interleaved builds each:")
        print(f"  offline build --no-mine: {without:.2f} s")
        print(f"  offline build, mining:   {with_:.2f} s  (+{(with_ / without - 1):.1%})")
        print(f"  found: {found}")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  peak RSS of this process: {peak:.0f} MB")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("findings", "holdout"):
        command = sub.add_parser(name)
        command.add_argument("paths", nargs="+", type=Path)
        if name == "holdout":
            command.add_argument("--splits", type=int, default=50)
    command = sub.add_parser("cost")
    command.add_argument("--runs", type=int, default=10000)
    command.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.command == "findings":
        findings(args.paths)
    elif args.command == "holdout":
        holdout(args.paths, args.splits)
    else:
        cost(args.runs, args.repeats)


if __name__ == "__main__":
    main()
