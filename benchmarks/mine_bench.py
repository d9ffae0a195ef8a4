"""Benchmark mining (compiler/mine.py): what it finds in real logs, whether it holds on tasks it
never saw, and what it adds to an offline build.

Prints its figures; asserts nothing.

    python benchmarks/mine_bench.py findings PATH ...      # lessons mined from each input
    python benchmarks/mine_bench.py truth [--builds 200] [--tasks 50] [--trials 5]
    python benchmarks/mine_bench.py holdout PATH ... [--splits 50]
    python benchmarks/mine_bench.py cost [--runs 10000] [--repeats 3]
    python benchmarks/mine_bench.py contrast-cost [--runs 20000]

`findings` prints, for each input, what the miner keeps now (runs compared within their task,
`compiler/mine_contrast.py`) and what the pooled test it used before issue 54 kept (Fisher's
exact test over all the runs of a type, the same patterns, the same correction), and the
within-task effect (Mantel-Haenszel odds ratio) of the strongest pattern of each type.

`truth` plants effects and confounders with known truth in made-up runs (tasks of varied
difficulty, several trials each) and mines each build: how often a pattern that only marks
harder tasks becomes a lesson (false lessons), how often a planted within-task effect is found
(power), and how many lessons labels shuffled at random yield; each also as the pooled test
would have kept them.

`findings` and `holdout` read logs as `wikitrace build` does (any format it detects); give each
dataset as its own PATH. `holdout` mines on a random half of the tasks and checks, on the other
half, whether each lesson's direction holds (runs with the pattern fail more often, or less
often, than runs without it, as mined). It reports the lessons kept (q <= 0.05) and, since
small logs often keep none, the strongest pattern of each task type before correction.
"""

from __future__ import annotations

import argparse
import math
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
from wikitrace.compiler.mine_contrast import (
    FDR,
    MIN_SUPPORT,
    MIN_TASKS,
    Contrast,
    MiningReport,
    _orders,
    _seen,
    _tried,
    contrasts,
    split,
)
from wikitrace.compiler.mine_exact import benjamini_hochberg, stratified_exact
from wikitrace.compiler.mine_patterns import actions_of, describe, patterns
from wikitrace.compiler.mine_table import RunPatterns, task_of
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
                patterns=patterns(actions_of(record.turns), record.task),
            )
        )
    return runs


def numbers(contrast: Contrast) -> str:
    within = contrast.within
    return (
        f"runs that {describe(contrast.pattern)}, within {within.tasks} tasks, failed "
        f"{within.with_pattern[0]} of {within.with_pattern[1]} (expected "
        f"{within.expected:.1f}); others {within.without_pattern[0]} of "
        f"{within.without_pattern[1]}; over all runs {contrast.with_failed} of "
        f"{len(contrast.present)} against {contrast.without_failed} of {len(contrast.absent)} "
        f"(p = {contrast.p_value:.3g}, q = {contrast.q_value:.3g})"
    )


def strongest(runs: list[RunPatterns]) -> list[Contrast]:
    """The strongest pattern of each task type before correction (what `contrasts` tries)."""
    tried = contrasts(runs, MiningReport(), fdr=1.0)  # keep everything tried
    best: dict[str | None, Contrast] = {}
    for contrast in tried:
        if contrast.task_type not in best or contrast.p_value < best[contrast.task_type].p_value:
            best[contrast.task_type] = contrast
    return list(best.values())


def pooled(runs: list[RunPatterns]) -> list[tuple[str | None, str, tuple[int, ...], float]]:
    """What the miner kept before issue 54: per task type, each pattern seen in and missing
    from 5 runs of 3 tasks each, Fisher's exact test over all the type's runs (the stratified
    test with one stratum), Benjamini-Hochberg over every pattern tried, q <= FDR."""
    by_type: dict[str | None, list[RunPatterns]] = defaultdict(list)
    for run in runs:
        by_type[run.task_type].append(run)
    tried: list[tuple[str | None, str, tuple[int, ...], float]] = []
    for task_type, members in by_type.items():
        failed = sum(not run.success for run in members)
        if min(failed, len(members) - failed) < MIN_SUPPORT:
            continue
        splits = set()
        for pattern, present, population in [*_seen(members), *_orders(members)]:
            shown = set(present)
            absent = [i for i in population if i not in shown]
            sides = (list(present), absent)
            if min(len(side) for side in sides) < MIN_SUPPORT:
                continue
            if min(len({task_of(members[i]) for i in side}) for side in sides) < MIN_TASKS:
                continue
            key = (tuple(present), tuple(absent))
            if key in splits:
                continue
            splits.add(key)
            a = sum(not members[i].success for i in present)
            c = sum(not members[i].success for i in absent)
            p_value, _ = stratified_exact([(len(present) + len(absent), a + c, len(present), a)])
            tried.append((task_type, pattern, (a, len(present), c, len(absent)), p_value))
    q_values = benjamini_hochberg([item[3] for item in tried])
    return [item for item, q in zip(tried, q_values, strict=True) if q <= FDR]


def findings(paths: list[Path]) -> None:
    for path in paths:
        runs = read(path)
        report = MiningReport()
        kept = contrasts(runs, report)
        failed = sum(not run.success for run in runs)
        tasks: dict[str, set[bool]] = defaultdict(set)
        for run in runs:
            tasks[task_of(run)].add(run.success)
        mixed = sum(len(outcomes) == 2 for outcomes in tasks.values())
        print(
            f"\n== {path}: {len(runs)} runs ({failed} failed) of {len(tasks)} tasks, "
            f"{mixed} with both outcomes"
        )
        before = pooled(runs)
        print(
            f"  before (pooled Fisher over all runs of a type): {len(before)} patterns pass "
            "q <= 0.05 (a build kept the 3 strongest of a type)"
        )
        for task_type, pattern, (a, n1, c, n0), p_value in before:
            print(
                f"    {task_type}: runs that {describe(pattern)} failed {a} of {n1}, "
                f"others {c} of {n0} (p = {p_value:.3g})"
            )
        print(f"  now (within tasks): {len(kept)} lessons, {report.patterns_tried} tried")
        for contrast in kept:
            print(f"    LESSON {contrast.task_type}: {numbers(contrast)}")
        for task_type, why in report.task_types.items():
            print(f"    {task_type}: {why}")
        for contrast in strongest(runs):
            within = contrast.within
            print(
                f"    strongest within tasks, {contrast.task_type}: {contrast.pattern}, "
                f"{within.tasks} tasks, failed {within.with_pattern[0]} of "
                f"{within.with_pattern[1]} (expected {within.expected:.1f}), "
                f"Mantel-Haenszel odds ratio {within.odds_ratio:.3g}, p = {within.p_value:.3g}"
            )
        effects = [
            (c.within.with_pattern[0] - c.within.expected) / c.within.with_pattern[1]
            for task_type in {run.task_type for run in runs}
            for c in _tried(task_type, [r for r in runs if r.task_type == task_type], 1.0)
        ]
        if effects:
            print(
                f"    within-task effect of the {len(effects)} patterns that could be tried: "
                "failures a run with the pattern over those expected, median "
                f"{statistics.median(abs(e) for e in effects):+.2f} (absolute), largest "
                f"{max(effects, key=abs):+.2f}"
            )


def _holds(contrast: Contrast, test: list[RunPatterns]) -> bool | None:
    """Whether the pattern splits `test` runs of its type the way it split the mined ones,
    within their tasks: more failures than expected among the runs with it (or fewer) in the
    tasks with runs with and without it and of both outcomes (None when there are none)."""
    members = [run for run in test if run.task_type == contrast.task_type]
    present, absent = split(contrast.pattern, members)
    showing = {run.step for run in present}
    by_task: dict[str, list[RunPatterns]] = defaultdict(list)
    for run in [*present, *absent]:
        by_task[task_of(run)].append(run)
    observed = expected = 0.0
    compared = 0
    for runs in by_task.values():
        failed = sum(not run.success for run in runs)
        shown = sum(run.step in showing for run in runs)
        if 0 < failed < len(runs) and 0 < shown < len(runs):
            compared += 1
            observed += sum(run.step in showing and not run.success for run in runs)
            expected += shown * failed / len(runs)
    if not compared:
        return None
    if observed == expected:
        return False
    return (observed > expected) == contrast.harmful


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


def simulated(
    rng: random.Random, tasks: int, trials: int, odds_ratio: float, noise: int = 8
) -> list[RunPatterns]:
    """Made-up runs with known truth, effects drawn per task. A task needs the tool
    `confound` with chance 0.4 and is then harder (+1.5 on the logit of failure; the logits
    of tasks spread with sd 1.2); its runs use `confound` with chance 0.9 if it needs it, 0.1
    if not, whatever their outcome: it only marks harder tasks. Each run uses `effect` with
    chance 1/2, which multiplies its odds of failure by about `odds_ratio` (the task's own
    log odds ratio drawn around log(`odds_ratio`), sd 0.25). `noise` more tools are used at a
    rate of each task's own (uniform 0.1-0.9) and do nothing. Turns are random, so that
    order patterns are tried too."""
    runs: list[RunPatterns] = []
    beta = math.log(odds_ratio)
    for task in range(tasks):
        needs = rng.random() < 0.4
        base = rng.gauss(-0.5, 1.2) + (1.5 if needs else 0.0)
        own_beta = rng.gauss(beta, 0.25)
        rates = [rng.uniform(0.1, 0.9) for _ in range(noise)]
        for _ in range(trials):
            used: dict[str, int] = {}
            if rng.random() < (0.9 if needs else 0.1):
                used["uses:confound"] = rng.randint(1, 20)
            effect = rng.random() < 0.5
            if effect:
                used["uses:effect"] = rng.randint(1, 20)
            for tool, rate in enumerate(rates):
                if rng.random() < rate:
                    used[f"uses:noise{tool}"] = rng.randint(1, 20)
            logit = base + (own_beta if effect else 0.0)
            failed = rng.random() < 1 / (1 + math.exp(-logit))
            runs.append(
                RunPatterns(
                    step=len(runs) + 1,
                    task_id=f"task-{task}",
                    task_type="sim",
                    success=not failed,
                    judged=False,
                    patterns=used,
                )
            )
    return runs


def truth(builds: int, tasks: int, trials: int, odds_ratio: float, shuffled: int) -> None:
    rng = random.Random(54)
    tally = {key: 0 for key in ("confound", "other_false", "effect", "lessons", "false")}
    before = {key: 0 for key in ("confound", "other_false", "effect")}
    started = time.process_time()
    tried = 0
    excess: list[float] = []  # the planted effect as measured in the real logs
    for _ in range(builds):
        runs = simulated(rng, tasks, trials, odds_ratio)
        report = MiningReport()
        kept = [c.pattern for c in contrasts(runs, report)]
        tried += report.patterns_tried
        planted = next((c for c in _tried("sim", runs, 1.0) if c.pattern == "uses:effect"), None)
        if planted is not None:
            within = planted.within
            excess.append((within.with_pattern[0] - within.expected) / within.with_pattern[1])
        old = [pattern for _, pattern, _, _ in pooled(runs)]
        for found, counts in ((kept, tally), (old, before)):
            counts["confound"] += any("confound" in p and "effect" not in p for p in found)
            counts["other_false"] += any("effect" not in p for p in found)
            counts["effect"] += "uses:effect" in found
        tally["lessons"] += len(kept)
        tally["false"] += sum("effect" not in p for p in kept)
    shuffled_lessons = shuffled_before = shuffled_builds = 0
    per_build: list[int] = []
    for _ in range(shuffled):
        runs = simulated(rng, tasks, trials, odds_ratio)
        outcomes = [run.success for run in runs]
        rng.shuffle(outcomes)
        for run, outcome in zip(runs, outcomes, strict=True):
            run.success = outcome
        found = len(contrasts(runs, MiningReport()))
        shuffled_lessons += found
        shuffled_builds += bool(found)
        per_build.append(found)
        shuffled_before += len(pooled(runs))
    cpu = time.process_time() - started
    print(
        f"{builds} builds of {tasks} tasks x {trials} trials, planted odds ratio {odds_ratio:g} "
        f"(CPU {cpu:.0f} s):"
    )
    print(" " * 58 + "within tasks   pooled (before)")

    def row(label: str, now: int, then: int, total: int) -> None:
        print(f"  {label:<56}{now / total:>8.1%}   {then / total:>10.1%}")

    row(
        "builds where `confound` (marks harder tasks) is a lesson",
        tally["confound"],
        before["confound"],
        builds,
    )
    row("builds with any false lesson", tally["other_false"], before["other_false"], builds)
    row(
        "builds where the planted `effect` is found (power)",
        tally["effect"],
        before["effect"],
        builds,
    )
    if excess:
        print(
            "  the planted effect within tasks, as findings measures real patterns: "
            f"{statistics.median(excess):+.2f} failures a run with it over those expected "
            f"(median of {len(excess)} builds)"
        )
    print(
        f"  lessons in all: {tally['lessons']}, {tally['false']} of them false "
        f"({tally['false'] / max(1, tally['lessons']):.1%}); patterns tried a build: "
        f"{tried / builds:.1f}"
    )
    print(
        f"  labels shuffled at random, {shuffled} builds: {shuffled_lessons} lessons, in "
        f"{shuffled_builds} builds (pooled: {shuffled_before} lessons)"
    )
    tens = [sum(per_build[i : i + 10]) for i in range(0, len(per_build) - 9, 10)]
    if tens:
        print(
            f"  of {len(tens)} runs of 10 shuffled builds, {sum(n <= 1 for n in tens)} yield at "
            f"most 1 lesson (the most: {max(tens)})"
        )


def planted_runs(count: int, seed: int = 3) -> list[dict[str, Any]]:
    """Tool-call runs of 3 task types, 4 trials a task, a tool in each whose use raises the
    failure rate (within every task: the tasks do not differ)."""
    rng = random.Random(seed)
    runs = []
    tools = ["search", "open", "read", "edit", "test", "submit", "ask", "undo"]
    for index in range(count):
        task_type = ["pick", "clean", "heat"][index // 4 % 3]
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
                "task_id": f"task-{index // 4}",
                "task": f"Do task {index // 4}.",
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


def contrast_cost(count: int) -> None:
    """CPU of counting every contrast of `count` planted runs (their patterns made first)."""
    from wikitrace.corpus_schema import RunRecord

    runs = []
    for step, data in enumerate(planted_runs(count), start=1):
        record = RunRecord.model_validate(data)
        found = patterns(actions_of(record.turns), record.task)
        runs.append(
            RunPatterns(step, record.task_id, record.task_type, record.success, False, found)
        )
    started = time.process_time()
    report = MiningReport()
    kept = contrasts(runs, report)
    cpu = time.process_time() - started
    print(
        f"{count} runs, {report.patterns_tried} patterns tried, {len(kept)} kept: "
        f"{cpu:.2f} s of CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("findings", "holdout"):
        command = sub.add_parser(name)
        command.add_argument("paths", nargs="+", type=Path)
        if name == "holdout":
            command.add_argument("--splits", type=int, default=50)
    command = sub.add_parser("truth")
    command.add_argument("--builds", type=int, default=200)
    command.add_argument("--tasks", type=int, default=50)
    command.add_argument("--trials", type=int, default=5)
    command.add_argument("--odds-ratio", type=float, default=4.0)
    command.add_argument("--shuffled", type=int, default=10)
    command = sub.add_parser("contrast-cost")
    command.add_argument("--runs", type=int, default=20000)
    command = sub.add_parser("cost")
    command.add_argument("--runs", type=int, default=10000)
    command.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.command == "findings":
        findings(args.paths)
    elif args.command == "truth":
        truth(args.builds, args.tasks, args.trials, args.odds_ratio, args.shuffled)
    elif args.command == "contrast-cost":
        contrast_cost(args.runs)
    elif args.command == "holdout":
        holdout(args.paths, args.splits)
    else:
        cost(args.runs, args.repeats)


if __name__ == "__main__":
    main()
