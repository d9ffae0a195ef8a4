"""Benchmark `wikitrace add` of a few runs against its floor: linking every file of the parent.

Prints its figures; asserts nothing. A version stays one self-contained folder, so an add
links each file of its parent: an `os.link` loop over those files (into a scratch folder
whose subfolders are made beforehand, timed apart) is the floor; what the add costs above it
should not grow with the corpus (issue 58: at 20,000 runs at most 2x what it is at 1,000).
The floor's folders are timed apart and printed beside it, and each add's CPU above links
and folders too: the layout keeps each run's files in a folder of its own (`raw/step-NNNN/`),
which cannot be linked and which `cp -al` of the parent makes as well, and making 20,000 of
them costs the kernel 0.6 to 4.5 s, as noisy as it is large. So is a stat of each link,
the check an add makes of each parent file (its key against the seal's), and the add's CPU
above all three. Issue 58's figure stays the first (above the links alone).

The corpus is built once into `--keep` (under nice, it takes long at 20,000 runs) and kept:
each invocation adds `--repeat` batches of `--add` new runs to it, a version each, and prints
each add's CPU time (this process's, and its finished children's) beside the floor, with the
load average. The floors' links are removed once every add is timed (removing them just
before an add made its own links cost more system time). The runs are
`build_bench.synthetic_runs` of the corpus size plus room for 100 batches, so a kept corpus
always receives runs it lacks.

    python benchmarks/add_floor_bench.py --runs 1000 --keep /tmp/addspeed_corpora/1k
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import remove_work, synthetic_runs

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.versions import Store

BATCHES = 100
"""Batches of new runs a kept corpus has room for."""


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (user and system)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class Floor:
    """What the kernel's part of an add costs, timed apart on the parent's files."""

    files: int
    links: float
    """CPU of an os.link loop over the parent's files: issue 58's floor."""
    folders: int
    made: float
    """CPU of making the folders the links go in (which the floor leaves out)."""
    stats: float
    """CPU of an os.lstat of each link: the check an add makes of each parent file through
    its link (its key against the seal's)."""


def link_floor(parent: Path, scratch: Path) -> Floor:
    """The parent version's files linked into `scratch` (their folders made first), each
    part timed."""
    files = list(manifest_io.load(parent).files)
    source = os.fspath(parent)
    target = os.fspath(scratch)
    folders = sorted({os.path.dirname(rel) for rel in files})
    started = cpu_seconds()
    for folder in folders:
        os.makedirs(os.path.join(target, folder), exist_ok=True)
    made = cpu_seconds() - started
    started = cpu_seconds()
    for rel in files:
        os.link(os.path.join(source, rel), os.path.join(target, rel))
    links = cpu_seconds() - started
    started = cpu_seconds()
    for rel in files:
        os.lstat(os.path.join(target, rel))
    return Floor(len(files), links, len(folders), made, cpu_seconds() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--add", type=int, default=10)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, required=True, help="where the corpus is kept")
    args = parser.parse_args()
    keep: Path = args.keep
    keep.mkdir(parents=True, exist_ok=True)
    runs = synthetic_runs(args.runs + BATCHES * args.add, args.turns)
    corpus = keep / "corpus"
    if not corpus.exists():
        first = keep / "first.jsonl"
        first.write_text("".join(json.dumps(run) + "\n" for run in runs[: args.runs]))
        started, cpu = time.perf_counter(), cpu_seconds()
        build_corpus(BuildOptions(inputs=[first], output=corpus))
        print(
            f"built {args.runs} runs x {args.turns} turns into {corpus}: "
            f"{time.perf_counter() - started:.1f} s wall, {cpu_seconds() - cpu:.1f} s CPU "
            f"(this process; its workers' not counted)",
            flush=True,
        )
    added, floors, above, above_both, above_all = [], [], [], [], []
    scratches: list[Path] = []
    try:
        for _ in range(args.repeat):
            scratches.append(Path(tempfile.mkdtemp(prefix="add-floor-", dir=keep)))
            spent, floor = added_one(args, corpus, runs, scratches[-1])
            added.append(spent)
            floors.append(floor.links)
            above.append(spent - floor.links)
            above_both.append(spent - floor.links - floor.made)
            above_all.append(spent - floor.links - floor.made - floor.stats)
    finally:
        # Removed once every add is timed: removing 110,000 links just before an add made
        # its own links cost some 3.5 s more of system time at 20,000 runs.
        for scratch in scratches:
            remove_work(scratch)
    print(
        f"median of {args.repeat} adds to {args.runs}+ runs: {statistics.median(added):.2f} s "
        f"CPU; floor {statistics.median(floors):.2f} s; above the floor "
        f"{statistics.median(above):.2f} s; above the floor and its folders "
        f"{statistics.median(above_both):.2f} s; above those and a stat of each file "
        f"{statistics.median(above_all):.2f} s"
    )


def added_one(
    args: argparse.Namespace,
    corpus: Path,
    runs: list[dict[str, Any]],
    scratch: Path,
) -> tuple[float, Floor]:
    """Time the floor (links into `scratch`) and one add of the next batch to `corpus`; print
    both. The add's CPU, and the floor's parts."""
    store, keep = Store(corpus), corpus.parent
    batch = len(store.versions()) - 1
    if batch >= BATCHES:
        sys.exit(f"{corpus} has had its {BATCHES} batches: build it anew")
    more = keep / f"more-{batch:03d}.jsonl"
    chosen = runs[args.runs + batch * args.add : args.runs + (batch + 1) * args.add]
    more.write_text("".join(json.dumps(run) + "\n" for run in chosen))
    parent = store.version_path(store.current())
    floor = link_floor(parent, scratch)
    files, made, stats = floor.files, floor.made, floor.stats
    time.sleep(2.5)  # files written within 2 s of a check are hashed, not sealed
    load = os.getloadavg()[0]
    started, cpu = time.perf_counter(), cpu_seconds()
    report = add_runs(BuildOptions(inputs=[more], output=corpus))
    wall, spent = time.perf_counter() - started, cpu_seconds() - cpu
    print(
        f"add {report.runs} runs to {parent.name} ({files} files): {spent:.2f} s CPU "
        f"({wall:.2f} s wall); floor, os.link of its {files} files: {floor.links:.2f} s "
        f"CPU; above the floor: {spent - floor.links:.2f} s (making its {floor.folders} "
        f"folders, which the floor leaves out: {made:.2f} s; above both: "
        f"{spent - floor.links - made:.2f} s; a stat of each link, as an add checks the "
        f"parent's files: {stats:.2f} s; above all three: "
        f"{spent - floor.links - made - stats:.2f} s) (load {load:.1f})",
        flush=True,
    )
    return spent, floor


if __name__ == "__main__":
    main()
