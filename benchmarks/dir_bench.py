"""Benchmark one folder of N entries against the same entries fanned out into folders of 1,000:
does the corpus layout (`raw/step-N/`, `compilation/step-N.md`, a folder or file per run)
need a fan-out for a million runs on this file system?

For each --entries size, in a flat folder and in a fanned-out one: the time to create the
entries (empty files), to open 10,000 of them by name in random order (what `turn`, `actions`
and `cat` do), and to list them (`os.scandir` of everything, and `ls` of the flat folder).
Prints its figures; asserts nothing.

    python benchmarks/dir_bench.py [--entries 10000 100000 1000000] [--dir PATH]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

BUCKET = 1000


def names(count: int) -> list[str]:
    width = len(str(count))
    return [f"step-{n:0{width}d}.md" for n in range(1, count + 1)]


def place(root: Path, name: str, fanned: bool, index: int) -> str:
    return f"{index // BUCKET:04d}/{name}" if fanned else name


def create(root: Path, entries: list[str], fanned: bool) -> float:
    started = time.perf_counter()
    made: set[str] = set()
    for index, name in enumerate(entries):
        rel = place(root, name, fanned, index)
        if fanned:
            bucket = rel.split("/", 1)[0]
            if bucket not in made:
                os.mkdir(root / bucket)
                made.add(bucket)
        os.close(os.open(root / rel, os.O_CREAT | os.O_WRONLY, 0o644))
    return time.perf_counter() - started


def lookups(root: Path, entries: list[str], fanned: bool, count: int = 10_000) -> float:
    chosen = random.Random(7).sample(range(len(entries)), min(count, len(entries)))
    started = time.perf_counter()
    for index in chosen:
        os.close(os.open(root / place(root, entries[index], fanned, index), os.O_RDONLY))
    return (time.perf_counter() - started) / len(chosen)


def listing(root: Path, fanned: bool) -> float:
    started = time.perf_counter()
    found = 0
    folders = [root]
    if fanned:
        folders = sorted(Path(e.path) for e in os.scandir(root))
    for folder in folders:
        found += len(sorted(e.name for e in os.scandir(folder)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--dir", type=Path, help="where to make the folders (default: a temp)")
    args = parser.parse_args()
    for count in args.entries:
        entries = names(count)
        for fanned in (False, True):
            work = Path(tempfile.mkdtemp(prefix="wikitrace-dir-", dir=args.dir))
            try:
                made = create(work, entries, fanned)
                os.sync()
                opened = lookups(work, entries, fanned)
                listed = listing(work, fanned)
                ls = ""
                if not fanned:
                    started = time.perf_counter()
                    subprocess.run(["ls", str(work)], stdout=subprocess.DEVNULL, check=True)
                    ls = f", `ls` {time.perf_counter() - started:.2f} s"
                kind = f"fanned out by {BUCKET}" if fanned else "one folder"
                print(
                    f"{count} entries, {kind}: created in {made:.1f} s "
                    f"({made / count * 1e6:.0f} us each), opened by name {opened * 1e6:.1f} us "
                    f"each, listed and sorted {listed:.2f} s{ls}",
                    flush=True,
                )
            finally:
                shutil.rmtree(work)


if __name__ == "__main__":
    main()
