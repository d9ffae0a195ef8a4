"""Where a model build's own process spends its CPU a run, part by part (issue 58).

Builds synthetic runs against build_bench.py's local OpenAI-compatible stub (fixed latency,
64 in flight by default, the fast path's client) and times each part of the build with
`time.thread_time` around it: reading the inputs, the raw layer (redaction and its files),
the prompt, the answer's parsing and quote check, the compilation's pages, mining (on a
thread while the last calls are in flight), the layers after the last answer (the mined
pages) and the finish (indexes, catalog, manifest). What no part holds ("the rest": the
event loop, the HTTP client's sending and reading, imports) is the process's CPU (getrusage)
less the parts. A build of 256 runs or more hands the raw layer's files, the pages and
mining's patterns to a worker process (compiler/model_farm.py): their CPU is printed as the
children's (--workers 1 keeps that work, and its parts, in the build's process). Prints its
figures; asserts nothing.

    python benchmarks/model_parts_bench.py [--runs 640] [--latency 0.2] [--call-workers 0]
        [--workers N]
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from build_bench import Stub, remove_work, write_runs

from wikitrace.compiler import BuildOptions, build, build_corpus, produce, raw
from wikitrace.compiler import compile as compile_module
from wikitrace.transport import fast_path

PARTS: list[tuple[Any, str, str]] = [
    (build, "read_inputs", "read and check the inputs"),
    (raw.RawLayer, "write", "raw layer (redaction, its files)"),
    (compile_module, "render_prompt", "the prompt"),
    (compile_module, "parse_output", "parse the answer"),
    (compile_module, "_check", "check its quotes"),
    (produce.Compiled, "add", "the compilation's pages"),
    (build, "premine", "mining, while the last calls are in flight"),
    (build, "write_layers", "layers after the last answer (mined pages)"),
    (build, "finish_layers", "finish (indexes, catalog, manifest)"),
    (fast_path.FastClient, "_body", "the client: the request's body"),
    (fast_path.FastClient, "_read", "the client: reading the reply"),
]


def timed_parts() -> dict[str, float]:
    """Wrap each of PARTS so that its CPU seconds (its thread's: mining runs on a thread of
    its own) add up under its label (synchronous functions only: none of them awaits)."""
    spent: dict[str, float] = {}

    def wrap(owner: Any, name: str, label: str) -> None:
        function = getattr(owner, name)

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.thread_time() - started

        setattr(owner, name, timed)

    for owner, name, label in PARTS:
        wrap(owner, name, label)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=640)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.2, help="stub latency in seconds")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--call-workers", type=int, default=0, help="0: the calls in the build's process"
    )
    parser.add_argument(
        "--workers", type=int, help="the workers setting (default: as build's; 1: none)"
    )
    args = parser.parse_args()
    spent = timed_parts()
    work = Path(tempfile.mkdtemp(prefix="wikitrace-bench-"))
    stub = Stub(latency=args.latency)
    try:
        runs_file = work / "runs.jsonl"
        write_runs(runs_file, args.runs, args.turns)
        print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)
        before = resource.getrusage(resource.RUSAGE_SELF)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        build_corpus(
            BuildOptions(
                inputs=[runs_file],
                output=work / "corpus",
                model="openai/stub",
                api_base=stub.url,
                use_cache=False,
                concurrency=args.concurrency,
                call_workers=args.call_workers,
                workers=args.workers,
            )
        )
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        stub.close()
        remove_work(work)
    total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    system = after.ru_stime - before.ru_stime
    children = (children_after.ru_utime + children_after.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    ideal = args.concurrency / args.latency
    print(
        f"{args.runs} runs, latency {args.latency} s, {args.concurrency} in flight, "
        f"{args.call_workers} call workers: {seconds:.2f} s, {args.runs / seconds / ideal:.0%} "
        f"of the ideal; the build's process {total / args.runs * 1e3:.2f} ms of CPU a run "
        f"({system / args.runs * 1e3:.2f} ms of it system time), its children (call workers, "
        f"workers) {children / args.runs * 1e3:.2f} ms; load average "
        f"{os.getloadavg()[0]:.2f} at the end"
    )
    rest = total - sum(spent.values())
    for label, cpu in [*sorted(spent.items(), key=lambda item: -item[1]), ("the rest", rest)]:
        print(f"  {label:44s} {cpu / args.runs * 1e3:6.2f} ms a run  {cpu / total:6.1%}")


if __name__ == "__main__":
    main()
