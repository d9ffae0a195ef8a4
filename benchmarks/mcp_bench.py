"""Benchmark `wikitrace mcp` start-up as a client sees it, on the README's example corpus.

Spawns the real command over stdio with the official SDK's client and prints, as medians of
--repeat runs: the time until the tool list arrives (start-up), and the first `first_message`
and `search` calls after it (the corpus's memory is loaded on first use). Asserts nothing.

    python benchmarks/mcp_bench.py [--repeat 5] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
WIKITRACE = str(Path(sys.executable).parent / "wikitrace")


async def once(corpus: Path) -> tuple[float, float, float]:
    started = time.perf_counter()
    params = StdioServerParameters(command=WIKITRACE, args=["mcp", str(corpus)])
    async with Client(params) as client:
        await client.list_tools()
        listed = time.perf_counter()
        await client.call_tool("first_message", {"task": "Cancel my reservation"})
        first = time.perf_counter()
        await client.call_tool("search", {"query": "refund"})
        searched = time.perf_counter()
    return listed - started, first - listed, searched - first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path, help="a corpus (default: the example, built)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(scratch) / "example-corpus"
            command = [WIKITRACE, "-q", "build", str(EXAMPLE), "-o", str(corpus)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times = [anyio.run(once, corpus) for _ in range(args.repeat)]
    for name, column in zip(
        ("start-up to tool list", "first first_message", "then search"),
        zip(*times, strict=True),
        strict=True,
    ):
        print(f"{name}: {statistics.median(column):.3f} s (median of {args.repeat})")


if __name__ == "__main__":
    main()
