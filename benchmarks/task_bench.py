"""Divergences across two sources: what mining finds in the given logs when a task is its source
and its id (corpus_schema/tasks.py), against the same runs grouped by task id alone (every
build before sources were kept).

Prints its figures; asserts nothing. Reads the inputs as `wikitrace build` does (any format it
detects; unlabelled runs are left out) and runs mining's own divergence step
(compiler/mine_divergence.py) on the runs' actions, in memory: no corpus is written.

    python benchmarks/task_bench.py PATH ...
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun
from wikitrace.compiler.mine import run_patterns
from wikitrace.compiler.mine_contrast import MiningReport
from wikitrace.compiler.mine_divergence import Divergence, divergences
from wikitrace.compiler.mine_patterns import Action
from wikitrace.compiler.mine_table import RunPatterns


def read(paths: list[Path]) -> tuple[list[RunPatterns], dict[int, list[Action]]]:
    """Each labelled run's patterns (numbered from 1 in reading order) and actions."""
    runs: list[RunPatterns] = []
    actions: dict[int, list[Action]] = {}
    for item in plan_inputs(paths).items():
        if isinstance(item, SourceRun):
            step = len(runs) + 1
            run, found = run_patterns(step, item.record, judged=False)
            runs.append(run)
            actions[step] = found
    return runs, actions


def across(found: list[Divergence], origin_of: dict[int, str | None]) -> int:
    """How many divergences compare runs of two sources."""
    return sum(origin_of[d.success.step] != origin_of[d.failure.step] for d in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    runs, actions = read(args.paths)
    if not runs:
        sys.exit("no labelled runs in the inputs")
    origin_of = {run.step: run.origin for run in runs}
    sources_of_id: dict[str, set[str | None]] = defaultdict(set)
    for run in runs:
        sources_of_id[run.task_id].add(run.origin)
    shared = sorted(task for task, sources in sources_of_id.items() if len(sources) > 1)
    keyed = divergences(runs, lambda step: actions[step], MiningReport())
    by_id = divergences(
        [replace(run, origin=None) for run in runs], lambda step: actions[step], MiningReport()
    )
    print(f"runs: {len(runs)} of {len({run.task for run in runs})} tasks (source, id)")
    print(f"sources: {', '.join(sorted(str(o) for o in set(origin_of.values())))}")
    print(f"task ids shared by two or more sources: {len(shared)} ({', '.join(shared[:10])})")
    print(
        f"divergences, tasks by source and id: {len(keyed)}, "
        f"{across(keyed, origin_of)} comparing runs of two sources"
    )
    print(
        f"divergences, tasks by id alone (before sources): {len(by_id)}, "
        f"{across(by_id, origin_of)} comparing runs of two sources"
    )


if __name__ == "__main__":
    main()
