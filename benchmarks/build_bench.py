"""Benchmark `wikitrace build`: offline overhead, LLM calls on build and rebuild, concurrency.

Prints its figures; asserts nothing. Runs against a local OpenAI-compatible stub through
the fast path's client (or litellm's real code path, --no-fast-path), so no key and no
network are needed.

    python benchmarks/build_bench.py [--runs 3000] [--latency 0.2] [--concurrency 16]
        [--workers N] [--skip-offline] [--skip-zero-latency]

CPU is each process's: the build's own, and its children's once they end (its call workers,
and the worker processes a model build of 256 runs or more writes its runs' files and pages
with: compiler/model_farm.py; --workers 1 keeps that work in the build's process).

The issue-58 figures (a model build at 64 in flight, 0.2 s and 1 s):

    python benchmarks/build_bench.py --runs 640 --skip-offline --skip-zero-latency \
        --concurrency 64 --latency 0.2 --latency-runs 640 --call-workers 1 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import resource
import shutil
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from wikitrace.compiler import BuildOptions, build_corpus

WORDS = [
    "agent",
    "opens",
    "cabinet",
    "mug",
    "table",
    "error",
    "found",
    "the",
    "with",
    "not",
    "go",
    "to",
    "take",
    "put",
]


def synthetic_runs(count: int, turns: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    runs = []
    for index in range(count):
        trajectory: list[dict[str, Any]] = [{"role": "user", "content": text(40)}]
        for _ in range(turns - 1):
            trajectory.append(
                {
                    "role": "assistant",
                    "reasoning": text(30),
                    "action": text(6),
                    "observation": text(rng.randint(20, 200)),
                }
            )
        runs.append(
            {
                "task_id": f"task-{index % (count // 3 or 1)}",
                "task": text(25),
                "task_type": rng.choice(["pick", "clean", "heat"]),
                "success": rng.random() < 0.4,
                "turns": trajectory,
                "metadata": {"reward": 1.0, "attempt": index // (count // 3 or 1) + 1},
            }
        )
    return runs


def write_runs(path: Path, count: int, turns: int) -> None:
    """`synthetic_runs` as a JSON Lines file."""
    with path.open("w") as handle:
        for run in synthetic_runs(count, turns):
            handle.write(json.dumps(run) + "\n")


def remove_work(work: Path) -> None:
    """A benchmark's scratch folder, frozen corpora in it included (their folders are made
    writable again first)."""
    for path in [work, *work.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(work, ignore_errors=True)


# --- a local OpenAI-compatible stub ------------------------------------------------------

_TURN = re.compile(
    r"--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=\n--- WIKITRACE-DATA-\w+ TURN|\nWIKITRACE-DATA-)",
    re.S,
)


def answer_for(prompt: str) -> str:
    """A valid answer quoting the last line of the last turn, as a good model would."""
    last = list(_TURN.finditer(prompt))[-1]
    number = int(last.group(1))
    line = last.group(2).splitlines()[-1]
    quote = line.split(": ", 1)[-1][:50]
    return json.dumps(
        {
            "title": "stub diagnosis",
            "description": "The stub read the run.",
            "claims": [
                {"statement": "The last turn.", "evidence": [{"turn": number, "quote": quote}]}
            ],
            "insights": [
                {
                    "title": "stub lesson",
                    "guideline": "Look first.",
                    "applicability": "Always.",
                    "supporting_claims": [1],
                }
            ],
        }
    )


def serve(latency: float, ready: Any, record: str | None = None) -> None:
    """The stub server; runs in its own process so it does not share the builder's GIL.
    `record`: a file to which each request's body is appended, a line each (for replaying
    the same requests with other clients)."""
    requests = 0
    recording = open(record, "ab") if record else None  # noqa: SIM115 (open while it serves)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes: without this, Nagle's algorithm meets the
        # client's delayed ACK and every reply waits some 40 ms.
        disable_nagle_algorithm = True

        def _send(self, payload: bytes) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # the request count, for the benchmark
            self._send(json.dumps({"requests": requests}).encode())

        def do_POST(self) -> None:
            nonlocal requests
            started = time.monotonic()
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with lock:
                requests += 1
                if recording is not None:
                    recording.write(json.dumps(body).encode() + b"\n")
                    recording.flush()
            message = {"role": "assistant", "content": answer_for(body["messages"][0]["content"])}
            # The latency counts from the request's arrival, the stub's own work included.
            time.sleep(max(0.0, latency - (time.monotonic() - started)))
            self._send(
                json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
            )

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that hung up (an interrupted build) is not the stub's concern

    server = Server(("127.0.0.1", 0), Handler)
    ready.put(server.server_port)
    server.serve_forever()


class Stub:
    """A local OpenAI-compatible server in a child process."""

    def __init__(self, latency: float, record: Path | None = None) -> None:
        queue: multiprocessing.Queue[int] = multiprocessing.Queue()
        self.process = multiprocessing.Process(
            target=serve, args=(latency, queue, str(record) if record else None), daemon=True
        )
        self.process.start()
        port = queue.get(timeout=30)
        self.url = f"http://127.0.0.1:{port}/v1"

    @property
    def requests(self) -> int:
        with urllib.request.urlopen(self.url + "/count") as response:
            return int(json.load(response)["requests"])

    def cpu_seconds(self) -> float:
        """The stub's CPU seconds so far (Linux: its /proc stat; 0 elsewhere)."""
        stat = Path(f"/proc/{self.process.pid}/stat")
        if not stat.exists():
            return 0.0
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.process.terminate()
        self.process.join()


# --- measurements -------------------------------------------------------------------------


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds so far: this process's, and its children's that were waited for (a build's
    call worker, waited for when the build ends; not the stub's until it is closed)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def cpu_since(before: tuple[float, float]) -> tuple[float, float]:
    """`cpu_seconds` spent since `before` (an earlier `cpu_seconds`)."""
    own, children = cpu_seconds()
    return own - before[0], children - before[1]


async def _each(bodies: list[bytes], concurrency: int, one: Any) -> None:
    """`one(body)` for each of `bodies`, `concurrency` at a time."""
    slots = asyncio.Semaphore(concurrency)

    async def limited(body: bytes) -> None:
        async with slots:
            await one(body)

    await asyncio.gather(*(limited(body) for body in bodies))


async def bare_client(url: str, bodies: list[bytes], concurrency: int) -> None:
    """A bare aiohttp session (the fast path's library) posting `bodies` (JSON, as the stub
    received them), `concurrency` at a time, and reading each answer's text: the floor any
    client can reach."""
    import aiohttp

    headers = {"content-type": "application/json", "authorization": "Bearer no-key"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: bytes) -> None:
            async with session.post(f"{url}/chat/completions", data=body, headers=headers) as r:
                r.raise_for_status()
                json.loads(await r.read())["choices"][0]["message"]["content"]

        await _each(bodies, concurrency, one)


def replay(url: str, bodies: list[bytes], concurrency: int, rounds: int) -> dict[str, float]:
    """This process's CPU seconds to make the requests `bodies`, `concurrency` at a time, and
    read each answer: by a bare aiohttp session, by the fast path's client (`FastClient`) and by
    litellm's (`LiteLLMClient`), as the call worker runs them (litellm imported and one call
    made before the clock starts). The least of `rounds` rounds, the three taking turns, so
    that a busy machine weighs on each alike."""
    from wikitrace.transport.fast_path import FastClient
    from wikitrace.transport.llm import LiteLLMClient, LLMSettings

    settings = LLMSettings(model="openai/stub", api_base=url)
    clients = {
        "the fast path (FastClient)": FastClient(settings),
        "litellm (LiteLLMClient)": (LiteLLMClient(settings)),
    }

    def through(client: Any) -> Any:
        async def run() -> None:
            async def one(body: bytes) -> None:
                await client.complete(json.loads(body)["messages"])

            await _each(bodies, concurrency, one)

        return run

    runs = {"a bare aiohttp session": lambda: bare_client(url, bodies, concurrency)}
    runs.update({name: through(client) for name, client in clients.items()})
    for client in clients.values():
        asyncio.run(client.complete(json.loads(bodies[0])["messages"]))  # litellm imported
    spent: dict[str, float] = {}
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.process_time()
            asyncio.run(run())
            spent[name] = min(spent.get(name, float("inf")), time.process_time() - started)
    return spent


def plain_write(files: dict[str, bytes], root: Path) -> None:
    """The floor: the same bytes written with open/write, no parsing, rendering or hashing."""
    made: set[Path] = set()
    for rel, data in files.items():
        path = root / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        with open(path, "wb") as handle:
            handle.write(data)


def bare_figures(
    url: str, requests_file: Path, count: int, concurrency: int
) -> tuple[float, float]:
    """A bare client's calls a second and CPU seconds a call, making the first `count`
    requests `requests_file` recorded, `concurrency` at a time."""
    bodies = requests_file.read_bytes().splitlines()[:count]
    started = time.process_time()
    seconds, _ = timed(lambda: asyncio.run(bare_client(url, bodies, concurrency)))
    return len(bodies) / seconds, (time.process_time() - started) / len(bodies)


def zero_latency(args: Any, runs_file: Path, requests_file: Path, work: Path) -> None:
    """A model build against a stub that answers at once (its requests recorded), then the
    same build again, which its cache answers."""
    stub = Stub(latency=0.0, record=requests_file)
    cache = work / "cache"

    def llm_build(output: Path, **options: Any) -> Any:
        return build_corpus(
            BuildOptions(
                inputs=[runs_file],
                output=output,
                model="openai/stub",
                api_base=stub.url,
                cache_dir=cache,
                concurrency=args.concurrency,
                fast_path=not args.no_fast_path,
                **options,
            )
        )

    before = cpu_seconds()
    seconds, report = timed(lambda: llm_build(work / "llm-1"))
    own, worker = cpu_since(before)
    first_calls = stub.requests
    print(
        f"LLM build, zero latency: {seconds:.2f} s ({args.runs / seconds:.0f} runs/s); "
        f"CPU per run: {own / args.runs * 1e3:.2f} ms in the build's process, "
        f"{worker / args.runs * 1e3:.2f} ms in its call worker (litellm's import "
        f"included); {first_calls} calls for {args.runs} runs (target: exactly one per "
        f"run); {report.unverified_quotes} unverified quotes"
    )
    seconds, report = timed(lambda: llm_build(work / "llm-2"))
    print(
        f"rebuild: {seconds:.2f} s, {stub.requests - first_calls} calls (target 0), "
        f"{report.cache_hits} cache hits"
    )
    stub.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=3000, help="runs for the offline and zero-latency builds"
    )
    parser.add_argument("--turns", type=int, default=12, help="turns per run")
    parser.add_argument("--latency", type=float, default=1.0, help="stub latency in seconds")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-runs", type=int, default=320, help="runs for the latency build")
    parser.add_argument(
        "--workers",
        type=int,
        help="worker processes of every build (the workers setting; default: as build's; 1: "
        "none, the work in the build's process)",
    )
    parser.add_argument(
        "--call-workers",
        type=int,
        nargs="+",
        default=[1, 0],
        help="the latency build once with each count of call workers (0: in the build process)",
    )
    parser.add_argument(
        "--no-fast-path",
        action="store_true",
        help="every build's calls through litellm, not the fast path (transport/fast_path.py)",
    )
    parser.add_argument(
        "--replay-rounds", type=int, default=3, help="rounds of the CPU replay (the least kept)"
    )
    parser.add_argument(
        "--skip-offline", action="store_true", help="no offline build (scale_bench.py has them)"
    )
    parser.add_argument(
        "--skip-zero-latency",
        action="store_true",
        help="no zero-latency build, rebuild or replay: only the latency builds",
    )
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start", flush=True)

    work = Path(tempfile.mkdtemp(prefix="wikitrace-bench-"))
    try:
        runs_file = work / "runs.jsonl"
        write_runs(runs_file, args.runs, args.turns)
        size_mb = runs_file.stat().st_size / 1e6
        print(f"input: {args.runs} runs x {args.turns} turns, {size_mb:.1f} MB")

        # 1. Offline build against writing the same files plainly (best of 3 each).
        builds, plains = [], []
        for attempt in range(0 if args.skip_offline else 3):
            corpus = work / f"offline-{attempt}"
            seconds, _ = timed(
                lambda c=corpus: build_corpus(
                    BuildOptions(inputs=[runs_file], output=c, workers=args.workers)
                )
            )
            builds.append(seconds)
        if builds:
            files = {
                p.relative_to(corpus).as_posix(): p.read_bytes()
                for p in corpus.rglob("*")
                if p.is_file()
            }
            for attempt in range(3):
                seconds, _ = timed(lambda a=attempt: plain_write(files, work / f"plain-{a}"))
                plains.append(seconds)
            build_s, plain_s = min(builds), min(plains)
            print(
                f"offline build: {build_s:.2f} s ({args.runs / build_s:.0f} runs/s); plain write "
                f"of the same {len(files)} files: {plain_s:.2f} s; ratio "
                f"{build_s / plain_s:.2f}x (target < 2x); overhead "
                f"{(build_s - plain_s) / args.runs * 1e3:.2f} ms per run"
            )

        # 2. LLM build through litellm against a zero-latency stub, then a rebuild.
        requests_file = work / "requests.jsonl"
        if not args.skip_zero_latency:
            zero_latency(args, runs_file, requests_file, work)

        # 3. Fixed latency: throughput against the ideal concurrency / latency.
        slow_runs = work / "slow.jsonl"
        slow_count = 0  # --latency-runs, or every run when --runs is fewer
        with runs_file.open() as source, slow_runs.open("w") as target:
            for _, line in zip(range(args.latency_runs), source, strict=False):
                target.write(line)
                slow_count += 1
        # Without the zero-latency build, the latency builds' requests are the bare client's.
        stub = Stub(latency=args.latency, record=requests_file if args.skip_zero_latency else None)
        ideal = args.concurrency / args.latency
        # The same number of requests by a bare client: the figure a build is held to.
        bare: tuple[float, float] | None = None
        for workers in args.call_workers:
            answered: list[float] = []  # when each run was done, for the calls' own rate

            def done(count: int, total: int, answered: list[float] = answered) -> None:
                answered.append(time.perf_counter())

            before = cpu_seconds()
            stub_before = stub.cpu_seconds()
            began = time.perf_counter()
            seconds, _ = timed(
                lambda w=workers, d=done: build_corpus(
                    BuildOptions(
                        inputs=[slow_runs],
                        output=work / f"llm-slow-{w}",
                        model="openai/stub",
                        api_base=stub.url,
                        use_cache=False,
                        concurrency=args.concurrency,
                        call_workers=w,
                        workers=args.workers,
                        fast_path=not args.no_fast_path,
                    ),
                    progress=d,
                )
            )
            own, worker = cpu_since(before)
            stub_cpu = stub.cpu_seconds() - stub_before
            if bare is None:
                bare = bare_figures(stub.url, requests_file, slow_count, args.concurrency)
                print(
                    f"latency {args.latency:.2f} s, concurrency {args.concurrency}: a bare "
                    f"aiohttp session making {slow_count} of the build's requests: "
                    f"{bare[0]:.1f} calls/s, {bare[0] / ideal:.0%} of ideal; "
                    f"{bare[1] * 1e3:.2f} ms of CPU a call; load average "
                    f"{os.getloadavg()[0]:.2f}",
                    flush=True,
                )
            actual = slow_count / seconds
            # From the first answer to the last, plus the first call's own latency.
            flowing = slow_count / (answered[-1] - answered[0] + args.latency)
            where = f"in {workers} worker process(es)" if workers else "in the build process"
            floor = 0.9 if args.latency >= 1 else 0.7
            per_run = (own + worker) / slow_count
            # What no call overlaps: before the first answer (less one latency), after the last.
            before_calls = answered[0] - began - args.latency
            after_calls = began + seconds - answered[-1]
            print(
                f"latency {args.latency:.2f} s, concurrency {args.concurrency}, {slow_count} "
                f"runs, calls {where}: "
                f"{actual:.1f} runs/s against an ideal {ideal:.1f}: {actual / ideal:.0%} of "
                f"ideal (floor >= {floor:.0%} at this latency: >= 90% at 1 s, >= 70% at 0.2 s);"
                f" while the calls flow {flowing / ideal:.0%}"
                + f"; CPU per run {own / slow_count * 1e3:.2f} ms in the build's process"
                + (
                    f", {worker / slow_count * 1e3:.2f} ms in its other processes (call workers, "
                    "workers: model_farm.py)"
                    if worker
                    else ""
                )
                + f"; the stub {stub_cpu / slow_count * 1e3:.2f} ms a call"
                + f"; {(per_run - bare[1]) * 1e3:.2f} ms a run above the bare client in all "
                f"the build's processes, {(own / slow_count - bare[1]) * 1e3:.2f} ms in its own "
                f"(floor <= 3 ms); the build's process had {own / seconds:.0%} of a core; no call "
                f"overlaps {before_calls:.2f} s before the first answer (its latency aside) "
                f"and {after_calls:.2f} s after the last; load average "
                + f"{os.getloadavg()[0]:.2f}",
                flush=True,
            )
        stub.close()

        # 4. The same requests by a bare client: what litellm costs a call.
        if not args.skip_zero_latency:
            bodies = requests_file.read_bytes().splitlines()
            stub = Stub(latency=0.0)
            rounds = args.replay_rounds
            for client, cpu in replay(stub.url, bodies, args.concurrency, rounds).items():
                print(
                    f"the zero-latency build's {len(bodies)} requests replayed, "
                    f"{args.concurrency} in flight: {cpu / len(bodies) * 1e3:.2f} ms of CPU a "
                    f"call with {client}"
                )
            stub.close()
    finally:
        remove_work(work)


if __name__ == "__main__":
    main()
