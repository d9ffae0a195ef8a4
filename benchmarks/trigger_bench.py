"""Benchmark the update trigger: how often a sequence of updates would be compared, by encoding.

A corpus is grown by offline `add`s of a log's runs in chunks (each a version); for each update
the direction is computed as `wikitrace update` computes it (kind by kind: lessons, runs,
task types; the lowest cosine over the kinds an update changes), with the insight set alone
and with the corpus, and the momentum average is kept as if every update were deployed.
Prints, per encoding, the share of updates the trigger would compare, why, and the cosines.
No agent runs.

    python benchmarks/trigger_bench.py PATH [--chunk 5] [--momentum 0.9] [--threshold 0.5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from itertools import pairwise
from pathlib import Path

import numpy as np
import orjson

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.compiler.importers import AUTO, DEFAULT_THRESHOLD, plan_inputs
from wikitrace.compiler.importers.runs import SourceRun
from wikitrace.control.embed import HashingEmbedder, memory_texts, turning, update_parts
from wikitrace.versions import Store


def chunks(path: Path, size: int) -> list[list[bytes]]:
    plan = plan_inputs([path], AUTO, [], DEFAULT_THRESHOLD)
    lines = [
        orjson.dumps(item.record.model_dump(mode="json"))
        for item in plan.items()
        if isinstance(item, SourceRun)
    ]
    return [lines[i : i + size] for i in range(0, len(lines), size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--chunk", type=int, default=5)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--threshold", type=float, default=0.5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trigger-bench-"))
    try:
        parts = chunks(args.path, args.chunk)
        corpus = work / "corpus"
        for number, part in enumerate(parts):
            source = work / f"part-{number}.jsonl"
            source.write_bytes(b"".join(line + b"\n" for line in part))
            if number == 0:
                build_corpus(BuildOptions(inputs=[source], output=corpus))
            else:
                add_runs(BuildOptions(inputs=[source], output=corpus))
        store = Store(corpus)
        versions = [store.version_path(name) for name in store.versions()]
        embedder = HashingEmbedder()
        print(f"{args.path}: {len(versions) - 1} updates of {args.chunk} runs each")
        for encoded in ("insights", "corpus"):
            average = None
            compared, unchanged, cosines = 0, 0, []
            for old, new in pairwise(versions):
                direction, _, _ = update_parts(
                    memory_texts(old, encoded), memory_texts(new, encoded), embedder
                )
                if direction is None:
                    unchanged += 1
                    continue
                if average is None:
                    compared += 1
                else:
                    value = turning(direction, average)
                    cosines.append(value)
                    compared += value < args.threshold
                average = (
                    direction
                    if average is None
                    else args.momentum * np.asarray(average) + (1 - args.momentum) * direction
                )
            updates = len(versions) - 1
            spread = (
                f"cosines median {statistics.median(cosines):.3f}, "
                f"min {min(cosines):.3f}, max {max(cosines):.3f}"
                if cosines
                else "no cosine"
            )
            print(
                f"  --encode {encoded}: compared {compared} of {updates} "
                f"({compared / updates:.0%}), deployed unexamined as unchanged {unchanged}; "
                f"{spread}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
