"""Benchmark `wikitrace mcp` as a client sees it, on the README's example corpus.

Spawns the real command over stdio with the official SDK's client and prints, as medians of
--repeat starts: the time until the tool list arrives (start-up), and the first
`first_message` and `search` calls after it (the corpus's memory is loaded on first use).
Then, on one server, --calls calls of each of several tools after a first: the median wall
time of a call (target <= 2 ms), and the CPU time a call costs the server and the client;
the same for an echo server made with the same SDK as it comes (one tool that returns its
argument), the floor. Asserts nothing; prints the load average.

    nice -n 10 python benchmarks/mcp_bench.py [--repeat 5] [--calls 300] [--corpus DIR]
        [--wikitrace PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
WIKITRACE = str(Path(sys.executable).parent / "wikitrace")
CALL_TARGET = 0.002
CALLS: dict[str, dict[str, Any]] = {
    "actions": {"step": "step-0001"},
    "read_page": {"path": "_index.md"},
    "search": {"query": "refund"},
    "first_message": {"task": "Cancel my reservation"},
}


async def once(params: StdioServerParameters) -> tuple[float, float, float]:
    started = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        listed = time.perf_counter()
        await client.call_tool("first_message", {"task": "Cancel my reservation"})
        first = time.perf_counter()
        await client.call_tool("search", {"query": "refund"})
        searched = time.perf_counter()
    return listed - started, first - listed, searched - first


def _children_cpu() -> float:
    """CPU seconds of this process's live children (the server), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def calls(
    params: StdioServerParameters, tools: dict[str, dict[str, Any]], count: int
) -> dict[str, tuple[float, float, float]]:
    """Tool -> (median wall seconds of a call, server CPU a call, client CPU a call)."""
    found = {}
    async with Client(params) as client:
        await client.list_tools()
        for name, arguments in tools.items():
            await client.call_tool(name, arguments)  # the memory loaded, the first answer
            walls = []
            client_before, server_before = time.process_time(), _children_cpu()
            for _ in range(count):
                started = time.perf_counter()
                await client.call_tool(name, arguments)
                walls.append(time.perf_counter() - started)
            client_cpu = (time.process_time() - client_before) / count
            server_cpu = (_children_cpu() - server_before) / count
            found[name] = (statistics.median(walls), server_cpu, client_cpu)
    return found


def serve_echo() -> None:
    """The floor: an MCPServer of the same SDK, as it comes, with one tool."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="echo")

    @server.tool()
    def echo(text: str) -> str:
        return text

    server.run("stdio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--corpus", type=Path, help="a corpus (default: the example, built)")
    parser.add_argument("--wikitrace", default=WIKITRACE, help="the command to serve with")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo:
        serve_echo()
        return
    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(scratch) / "example-corpus"
            command = [args.wikitrace, "-q", "build", str(EXAMPLE), "-o", str(corpus)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        params = StdioServerParameters(command=args.wikitrace, args=["mcp", str(corpus)])
        times = [anyio.run(once, params) for _ in range(args.repeat)]
        for name, column in zip(
            ("start-up to tool list", "first first_message", "then search"),
            zip(*times, strict=True),
            strict=True,
        ):
            print(f"{name}: {statistics.median(column):.3f} s (median of {args.repeat})")
        echo = StdioServerParameters(
            command=sys.executable, args=[str(Path(__file__).resolve()), "--serve-echo"]
        )
        rows = anyio.run(calls, params, CALLS, args.calls)
        rows |= {
            "echo (the SDK's floor)": anyio.run(calls, echo, {"echo": {"text": "x"}}, args.calls)[
                "echo"
            ]
        }
    for name, (wall, server, client) in rows.items():
        verdict = "ok" if wall <= CALL_TARGET else "OVER"
        print(
            f"{name} call: {wall * 1000:.2f} ms median of {args.calls} (target <= "
            f"{CALL_TARGET * 1000:g} ms: {verdict}); CPU a call: server {server * 1000:.2f} ms, "
            f"client {client * 1000:.2f} ms"
        )
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
