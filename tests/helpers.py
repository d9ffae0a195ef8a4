"""Helpers for tests: runs to build, and a fake at our LLM boundary."""

from __future__ import annotations

import contextlib
import json
import random
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import click
import frontmatter
from click.testing import CliRunner

from wikitrace.cli.main import main
from wikitrace.transport.llm import LLMReply, Message

DATA = Path(__file__).parent / "data"

TIERS = ("integration", "slow", "browser")
"""The markers of the tests the default tier leaves out (pyproject.toml says what each means;
conftest.py leaves them out). `pytest` runs the default tier; `pytest --tier all` every test;
`pytest --tier rest` the tests the default leaves out (CI runs the default, timed, then the
rest: .ci/run)."""


# --- runs ---------------------------------------------------------------------------------


def make_run(
    task_id: str = "t1",
    *,
    success: bool = False,
    turns: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    run: dict[str, Any] = {
        "task_id": task_id,
        "task": f"Put the {task_id} mug in the cabinet.",
        "task_type": "pick_and_place",
        "success": success,
        "turns": turns
        or [
            {"role": "user", "content": f"Task {task_id}: put the mug in the cabinet."},
            {"role": "assistant", "action": "go to countertop 1", "observation": "You see a mug."},
            {"role": "assistant", "action": "open cabinet 3", "observation": "Nothing happens."},
            {"role": "assistant", "content": "I put the mug in cabinet 1. Done."},
        ],
    }
    run.update(extra)
    return run


def read_runs(paths: list[Path]) -> Iterator[Any]:
    """Every run of native JSON Lines files, as a build reads them (the importers' pipeline)."""
    from wikitrace.compiler.importers import plan_inputs
    from wikitrace.corpus_schema import InputError

    for path in paths:
        if path.is_dir():
            raise InputError("is a folder; give the .jsonl files in it", path=path)
    yield from plan_inputs(paths, "native").items()


def write_runs(path: Path, runs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(run) + "\n" for run in runs))
    return path


# --- a fake at our LLM boundary -------------------------------------------------------------

_TURN_BLOCK = re.compile(
    r"--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=\n--- WIKITRACE-DATA-\w+ TURN|\nWIKITRACE-DATA-)",
    re.S,
)


def turns_in_prompt(prompt: str) -> dict[int, str]:
    """Turn number -> the text the prompt shows for it."""
    return {int(m.group(1)): m.group(2) for m in _TURN_BLOCK.finditer(prompt)}


def attribution_answer(prompt: str, *, wrong_quote: bool = False) -> str:
    """A valid attribution: A (the entry it followed was wrong) when the agent reported using
    an insight, naming it; E (no link to memory) otherwise. Quotes the last turn's longest line."""
    turns = turns_in_prompt(prompt)
    last = max(turns)
    quote = max(turns[last].splitlines(), key=len).strip()[:60]
    used = re.search(r"REPORTED AS USED:\n- (insight-\d+)", prompt)
    return json.dumps(
        {
            "cause": "A" if used else "E",
            "entry": used.group(1) if used else None,
            "reason": "It followed the entry." if used else "Memory played no part.",
            "evidence": [
                {
                    "turn": last,
                    "quote": "this sentence appears in no turn at all" if wrong_quote else quote,
                }
            ],
        }
    )


def drilldown_answer(prompt: str) -> str:
    """Labels every drill-down the prompt lists: "blocked" when the turn before it shows an
    error, "routine" otherwise; effect "detail". Quotes the drill-down turn's first line."""
    turns = turns_in_prompt(prompt)
    listed = [int(n) for n in re.findall(r"^- turn (\d+): ", prompt, re.M)]
    labels = [
        {
            "turn": n,
            "trigger": "blocked" if "Error" in turns.get(n - 1, "") else "routine",
            "effect": "detail",
        }
        for n in listed
    ]
    first = listed[0]
    quote = max(turns[first].splitlines(), key=len).strip()[:60]
    return json.dumps({"labels": labels, "evidence": [{"turn": first, "quote": quote}]})


def judge_answer(prompt: str, *, verdict: str = "success", wrong_quote: bool = False) -> str:
    """A valid judge's verdict that quotes the longest line of the last turn shown."""
    turns = turns_in_prompt(prompt)
    last = max(turns)
    quote = max(turns[last].splitlines(), key=len).strip()[:60]
    if wrong_quote:
        quote = "this sentence appears in no turn at all"
    return json.dumps(
        {
            "verdict": verdict,
            "reason": f"The last turn shows the run's {verdict}.",
            "evidence": [{"turn": last, "quote": quote}],
        }
    )


def good_answer(prompt: str, *, insights: int = 1, wrong_quote: bool = False) -> str:
    """A valid compiler answer that quotes the first line of the last turn verbatim (for a
    judge's prompt, a verdict)."""
    if prompt.startswith("You are judging"):
        return judge_answer(prompt)
    if prompt.startswith("You are comparing two lessons"):
        return json.dumps({"relation": "neither", "reason": "They advise different things."})
    if prompt.startswith("You are finding out why"):
        return attribution_answer(prompt)
    if prompt.startswith("You are labelling how"):
        return drilldown_answer(prompt)
    turns = turns_in_prompt(prompt)
    last = max(turns)
    line = turns[last].splitlines()[-1]
    quote = line.split(": ", 1)[-1][:60]
    if wrong_quote:
        quote = "this sentence appears in no turn at all"
    answer = {
        "title": "The agent opened the wrong cabinet",
        "description": "It looked in cabinet 3, which was closed for good.",
        "claims": [
            {
                "statement": "The agent acted on the last turn.",
                "evidence": [{"turn": last, "quote": quote}],
            }
        ],
        "insights": [
            {
                "title": f"Lesson {n}",
                "guideline": "Check the receptacle before acting.",
                "applicability": "Pick-and-place tasks with closed receptacles.",
                "supporting_claims": [1],
            }
            for n in range(1, insights + 1)
        ],
    }
    return json.dumps(answer)


def task_id_of(prompt: str) -> str:
    """The id of the run a compile prompt is about."""
    return prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]


def lesson_answer(fields: Callable[[str], dict[str, str]]) -> Callable[[list[Message]], str]:
    """A FakeLLM answer: good_answer's, with its first insight's fields as `fields` gives them
    for the id of the run compiled (none changed where it gives none)."""

    def answer(messages: list[Message]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        data["insights"][0].update(fields(task_id_of(prompt)))
        return json.dumps(data)

    return answer


def build_lessons(
    runs: list[dict[str, Any]], folder: Path, fields: Callable[[str], dict[str, str]]
) -> Path:
    """`folder/corpus`, built unmined from `runs` (written to `folder/runs.jsonl`) by a
    FakeLLM whose first lesson of each run has the `fields` that `lesson_answer` gives it."""
    from wikitrace.compiler import BuildOptions, build_corpus

    llm = FakeLLM(answer=lesson_answer(fields))
    out = folder / "corpus"
    build_corpus(
        BuildOptions(
            inputs=[write_runs(folder / "runs.jsonl", runs)],
            output=out,
            model=llm.model,
            cache_dir=folder / "cache",
            mine=False,
        ),
        llm=llm,
    )
    return out


def chat_completion(
    model: str, content: str, completion_id: str = "chatcmpl-stub"
) -> dict[str, Any]:
    """An OpenAI chat completion answering `content`, as the local stubs send it."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


Answer = Callable[[list[Message]], str]


@dataclass
class FakeLLM:
    """Answers from a function of the messages; records every call."""

    answer: Answer = field(default=lambda messages: good_answer(messages[0]["content"]))
    model: str = "fake/compiler"
    calls: list[list[Message]] = field(default_factory=list)
    fail_after: int | None = None
    """Raise KeyboardInterrupt on the call after this many (a build killed mid-way)."""

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model}

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    async def complete(self, messages: list[Message]) -> LLMReply:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt
        self.calls.append([dict(m) for m in messages])
        return LLMReply(
            text=self.answer(messages), prompt_tokens=100, completion_tokens=20, cost_usd=0.001
        )


# --- checking a corpus ----------------------------------------------------------------------

_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def broken_links(root: Path) -> list[str]:
    """Markdown links whose target (from the file) or whose path text (from the root) is missing."""
    broken = []
    for page in sorted(root.rglob("*.md")):
        body = frontmatter.loads(page.read_text()).content  # quotes in headers are not links
        for text, href in _LINK.findall(body):
            target = (page.parent / href).resolve()
            if not target.is_relative_to(root.resolve()) or not target.exists():
                broken.append(f"{page.relative_to(root)}: {href}")
            if "/" in text and not (root / text).exists():
                broken.append(f"{page.relative_to(root)}: text {text}")
    return broken


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def free_port() -> int:
    """A port of 127.0.0.1 free now, for a server that another process starts a moment later
    (one that cannot take port 0 and say which it got): from below the kernel's ephemeral
    range, which no bind to port 0 (of another test or xdist worker) is given, and drawn at
    random, so that two such servers starting at once pick different ones."""
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ephemeral.read_text().split()[0]) if ephemeral.exists() else 32768
    draw = random.SystemRandom()
    while True:
        port = draw.randrange(10_000, max(low, 10_001))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


@dataclass
class Stub:
    url: str
    requests: list[dict[str, Any]]
    script: list[tuple[int, str]]
    """Responses to give first, in order: (HTTP status, body text); then good answers."""


def build_with_stub(runs_file: Path, corpus: Path, stub: Stub, **options: Any) -> Any:
    """A build of `runs_file` compiled by `stub` through litellm, its replies cached beside
    `corpus` (unless `use_cache=False`), retrying at once."""
    from wikitrace.compiler import BuildOptions, build_corpus

    return build_corpus(
        BuildOptions(
            **{
                "inputs": [runs_file],
                "output": corpus,
                "model": "openai/stub-model",
                "api_base": stub.url,
                "cache_dir": corpus.parent / "cache",
                "backoff_seconds": 0.01,
                **options,
            }
        )
    )


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(ctx: click.Context) -> None:
    main(list(ctx.args))


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run through main() as the console script does, capturing exit code, stdout, stderr;
    `env` adds environment variables (a setting with no flag: `{"WIKITRACE_CACHE_DIR": ...}`)."""
    result = CliRunner().invoke(_entry, args, env=env)
    return result.exit_code, result.stdout, result.stderr


# --- runs with a lesson planted within their tasks (mining) ---------------------------------


def call(name: str, result: str = "ok", **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [{"name": name, "arguments": arguments, "result": result}],
    }


def shop_run(task: int, trial: int, success: bool, *, refund: bool) -> dict[str, Any]:
    """A support run: look the order up, maybe refund at once, answer."""
    turns = [
        {"role": "user", "content": f"Order {task} arrived broken."},
        call("get_order", order_id=f"O{task}"),
    ]
    if refund:
        turns.append(call("issue_refund", order_id=f"O{task}", amount=10 + task))
    turns.append(call("check_policy", topic="damage", note=f"trial {trial}"))
    turns.append({"role": "assistant", "content": "Done."})
    return make_run(
        f"order-{task}",
        success=success,
        turns=turns,
        task=f"Order {task} arrived broken; help the customer.",
        task_type="shop",
        metadata={"attempt": trial},
    )


def planted() -> list[dict[str, Any]]:
    """40 runs of 10 tasks, 4 trials each: trials 1 and 2 refund at once, 3 and 4 do not. In
    tasks 0-5 both runs that refund fail, in tasks 6 and 7 the first does, and in task 0 the
    third trial fails too: within 8 tasks, runs that refund failed 14 of 16, those that did
    not 1 of 16 (over all 40 runs: 14 of 20 against 1 of 20)."""
    runs = []
    for index in range(40):
        task, trial = index // 4, index % 4 + 1
        refund = trial <= 2
        failed = (refund and (task <= 5 or (task <= 7 and trial == 1))) or (task, trial) == (0, 3)
        runs.append(shop_run(task, trial, not failed, refund=refund))
    return runs


# --- two lessons that apply alike, from runs that ended apart -------------------------------


CONFLICT_TASK = "A customer asks for a refund of a damaged order."
CONFLICT_PAIR = "- insight-0001 (from a successful run) and insight-0002 (from a FAILED run)"
"""How the first message names the pair with `flag_conflicts` (prompts/first-message.j2)."""


def conflicting_lessons(root: Path) -> Path:
    """A corpus at `root`/corpus of two runs, t1 succeeded and t2 failed, whose lessons (a
    fake model's) say opposite things of the same situation."""
    from wikitrace.compiler import BuildOptions, build_corpus

    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        data["insights"][0].update(
            title="Refund first" if "t1" in prompt else "Ask before refunding",
            guideline="Refund at once." if "t1" in prompt else "Ask the customer first.",
            applicability=CONFLICT_TASK,
        )
        return json.dumps(data)

    runs = [make_run("t1", success=True), make_run("t2", success=False)]
    llm = FakeLLM(answer=answer)
    options = BuildOptions(
        inputs=[write_runs(root / "runs.jsonl", runs)],
        output=root / "corpus",
        model=llm.model,
        cache_dir=root / "cache",
        mine=False,
    )
    build_corpus(options, llm=llm)
    return root / "corpus"


class _LocalServer(ThreadingHTTPServer):
    """A test server whose listen queue holds a build's burst of connections: socketserver's
    default of 5 makes the kernel drop connections when 16 calls start at once (two call
    workers), which a client with no retries reports as a failed call."""

    request_queue_size = 128


@contextlib.contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """`handler` served on a free port of 127.0.0.1, in a thread, until the block ends;
    yields the port."""
    server = _LocalServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def unpaged_catalog(root: Path) -> list[bytes]:
    """The lines of the catalog of the corpus copy at `root` as a version 2 catalog held them
    (every line in catalog.jsonl, none in pages): its pages of runs are removed, and the
    caller writes the lines (changed as an older wikitrace wrote them) to catalog.jsonl."""
    import shutil

    from wikitrace.corpus_schema.catalog import catalog_lines
    from wikitrace.corpus_schema.layout import CATALOG, CATALOG_RUNS

    head, *lines = catalog_lines(root)
    names = json.loads(head)
    del names["runs"], names["page_runs"]
    root.chmod(0o755)
    (root / CATALOG_RUNS).chmod(0o755)
    shutil.rmtree(root / CATALOG_RUNS)
    (root / CATALOG).chmod(0o644)
    return [json.dumps({**names, "catalog": 2}).encode(), *lines]


def version_1_index(catalog: Path) -> bytes:
    """The index (version 1) of the catalog (version 2) at `catalog`, as wikitrace wrote it
    before the catalog's runs were paged: its size, where each line after the first starts
    (and where the last ends), its runs' task types, whether any lesson is committed, and
    each project's runs and lessons, by position."""
    import orjson

    from wikitrace.corpus_schema.catalog import PastRun, records_of

    with catalog.open("rb") as lines:
        first = next(lines)
        head = orjson.loads(first)
        if head.get("catalog") != 2:
            raise ValueError(f"catalog version {head.get('catalog')!r}: no index is written")
        offsets = [len(first)]
        project_of_step: dict[str, str | None] = {}
        projects: dict[str, tuple[list[int], list[int]]] = {}
        task_types: set[str] = set()
        committed = False
        runs = insights = 0
        for line in lines:
            offsets.append(offsets[-1] + len(line))
            record = next(records_of(head, [line]))
            if isinstance(record, PastRun):
                project_of_step[record.step] = record.project
                if record.task_type:
                    task_types.add(record.task_type)
                if record.project:
                    projects.setdefault(record.project, ([], []))[0].append(runs)
                runs += 1
            else:
                item = record[1]
                committed = committed or item.status == "committed"
                project = project_of_step.get(item.source_step)
                if project:
                    projects[project][1].append(insights)
                insights += 1
    index = {
        "catalog_index": 1,
        "bytes": offsets[-1],
        "runs": runs,
        "insights": insights,
        "task_types": sorted(task_types),
        "committed": committed,
        "offsets": offsets,
        "projects": {key: [mine, lessons] for key, (mine, lessons) in sorted(projects.items())},
    }
    return orjson.dumps(index) + b"\n"


def heavy_modules_of_a_query(ranker: Path, size: int, query: str) -> str:
    """Which of bm25s and numpy a new process imports to load the ranker saved in `ranker`
    (`size` texts) and score `query` over it, as a printed list (a query imports neither:
    search/rank.py)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from wikitrace.search.rank import Ranker\n"
        "from wikitrace.search.score import scored\n"
        f"ranker = Ranker.load(Path({str(ranker)!r}), {size})\n"
        f"assert scored(ranker, {query!r}, range({size}), within=True)\n"
        "print(sorted({'bm25s', 'numpy'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def ctrl_c_at_its_default() -> None:
    """A child's `preexec_fn`, before it runs: SIGINT as a terminal leaves it. pytest run in the
    background (`pytest &` in a script, nohup) ignores SIGINT, a child inherits that across
    exec, and Python then installs no handler: the child never hears its Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
