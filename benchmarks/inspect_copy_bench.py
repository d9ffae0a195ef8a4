"""Benchmark the copy of a corpus into an inspect_ai sample's sandbox (`integrations/
inspect_sandbox.py`): one tar stream, against a sandbox call or two per file before.

Builds a corpus offline from INPUT (or takes --corpus), then prints: the files and bytes
copied, the sandbox calls one sample's copy makes (a sandbox here that runs each call on this
machine and counts it; Docker's `write_file` is itself 2 `docker exec` calls), and the medians
of --repeat copies: making the tar, and the copy and its removal through that sandbox. Asserts
nothing.

    python benchmarks/inspect_copy_bench.py INPUT [--repeat 5] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from wikitrace.integrations import inspect_sandbox

WIKITRACE = str(Path(sys.executable).parent / "wikitrace")


@dataclass
class Result:
    success: bool
    stdout: str
    stderr: str


class CountingBox:
    """A sandbox that runs each call on this machine, counting them."""

    def __init__(self) -> None:
        self.calls = 0

    async def write_file(self, path: str, data: bytes) -> None:
        self.calls += 1
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)

    async def exec(self, command: list[str]) -> Any:
        self.calls += 1
        if "mount --bind" in " ".join(command):  # never mount over this machine's folders
            return Result(False, "", "not here")
        done = subprocess.run(command, capture_output=True, text=True)
        return Result(done.returncode == 0, done.stdout, done.stderr)

    def as_type(self, cls: type) -> Any:
        raise TypeError("not a local sandbox")  # the bind mount is tried, as in a container


async def copy_once(view: Path, mount: str) -> tuple[int, float, float]:
    box = CountingBox()
    started = time.perf_counter()
    await inspect_sandbox.copy_view(box, view, mount)
    copied = time.perf_counter()
    await inspect_sandbox.remove_copy(box, mount)
    return box.calls, copied - started, time.perf_counter() - copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", nargs="?", type=Path, help="logs to build a corpus from")
    parser.add_argument("--corpus", type=Path, help="a corpus (instead of INPUT)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.corpus
        if corpus is None:
            if args.input is None:
                parser.error("give INPUT or --corpus")
            corpus = Path(scratch) / "corpus"
            command = [WIKITRACE, "-q", "build", str(args.input), "-o", str(corpus)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        view = corpus.resolve()
        tars = []
        for _ in range(args.repeat):
            inspect_sandbox.archive.cache_clear()
            started = time.perf_counter()
            data, files = inspect_sandbox.archive(str(view))
            tars.append(time.perf_counter() - started)
        runs = [anyio.run(copy_once, view, f"{scratch}/box-{n}/corpus") for n in range(args.repeat)]
    print(f"corpus: {files} files, {len(data) / 1e6:.1f} MB as tar")
    print(
        f"sandbox calls per sample: {runs[0][0]} (a write_file and an exec per file: {2 * files})"
    )
    print(f"tar made: {statistics.median(tars):.3f} s (median of {args.repeat})")
    print(f"copy (tar cached): {statistics.median(r[1] for r in runs):.3f} s; removal: "
          f"{statistics.median(r[2] for r in runs):.3f} s (median of {args.repeat})")  # fmt: skip


if __name__ == "__main__":
    main()
