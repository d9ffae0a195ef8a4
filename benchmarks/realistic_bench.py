"""Realistic model answers on real sessions: does a coding agent's first message score 8 of 10
where its project has runs, and never show another domain's lessons (issue 51)?

Builds one corpus of every log family under DATA (default ../shared/data), as
benchmarks/recall_bench.py converts them, compiled through litellm's real code path
(`wikitrace build --model openai/realistic --api-base ...`) by a local OpenAI-compatible stub
(127.0.0.1, stopped when the build ends) that answers from recorded answers:
benchmarks/data/realistic_answers.jsonl, one a line, keyed by the hash of the run's data as
the compile prompt shows it (`prompt_key`). The answers were written by a model (Claude,
acting as the compiler's model) reading the exact prompt wikitrace sent for each run: every
Claude Code, Codex and Gemini CLI session, and a sample of benchmark runs that could
contaminate a coding task (SWE-bench runs of mini-swe-agent, the two Harbor coding tasks, a
few τ-bench airline runs). A run with no recorded answer gets recall_bench's stand-in answer
(a lesson in the task's own words: every other benchmark run still brings a lesson that could
leak). `--dump-prompts DIR` writes each prompt the stub received, named by its key (how the
answers were written); the report counts recorded answers no prompt asked for (stale keys).

The sessions carry no outcome; they are labelled as their user would label them, from what
the session shows at its end (`LABELS`, each with its reason), passed to `build` with
`--labels` as a user would; any other session by recall_bench's weak signal.

Then for each held-out task (`HELD_OUT`: the task text of a session, asked with that
session's task left out, `--exclude-task`; or a task as a user would type it), `wikitrace
prompt --json` from the CLI, the project named each way that applies (its name, its remote,
its path, nothing from inside a checkout whose remote is the repository's), and each message
scored by the rubric below. The bench computes the mechanical points; the judgment points are
read from benchmarks/data/realistic_scores.json (written by a reader of the messages
`--messages DIR` writes, with a reason each) and matched to the message by its hash: a message
that changed since it was judged is reported unjudged, never scored from an old judgment.

The rubric (written before any message was read), 10 points a message:
  M1 (2) no item (lesson or similar run) from another domain;
  M2 (1) no lesson of another project, when the task's project has runs in view;
  M3 (1) at least one lesson of the task's own project, when its project has lessons in view;
  M4 (1) the past run a reader expects most similar (`HeldOut.expected`: chosen from the
         sessions' content before the messages were read) among the 3 similar runs;
  M5 (1) ... and first of them;
  J1 (2) the lessons shown bear on this task (2: all or nearly all would help or warn an agent
         doing it; 1: some do; 0: none do or none shown while relevant ones exist);
  J2 (1) no noise: no vague, duplicate or empty lesson, no padding an agent must skip;
  J3 (1) what the message says of its scope, ages and staleness is true (the project named
         right, no false "this project's type", no lesson marked stale wrongly);
  J4 (1) the drill-down hint is usable: the commands it names exist and would show the run.
Where the project has no runs (a project seen for the first time), M2, M3 count as met when no
other project's lesson is shown, and J1 counts as met when no lesson is shown (abstaining is
right then).

    python benchmarks/realistic_bench.py [DATA] [--keep DIR] [--dump-prompts DIR]
                                         [--messages DIR] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recall_bench  # a sibling script: its families, conversion and CLI runner

HERE = Path(__file__).resolve().parent
ANSWERS = HERE / "data/realistic_answers.jsonl"
SCORES = HERE / "data/realistic_scores.json"
MODEL = "openai/realistic"

DATA_BLOCK = re.compile(r"(WIKITRACE-DATA-\w+) BEGIN\n(.*?)\n\1 END", re.S)


def prompt_key(prompt: str) -> str:
    """A compile prompt's key: the hash of the run's data as the prompt shows it, between its
    fences, its fence's name left out of the turn markers too (it is a hash of the whole
    record, outcome and metadata included, which a label or a converter's version changes).
    The instructions do not count, but a long run is shown as fits the budget they leave (a
    reworded template or label can show other turns whole): such a run gets a new key, its
    recorded answer goes unused and the report counts it."""
    found = DATA_BLOCK.search(prompt)
    data = found.group(2).replace(found.group(1), "FENCE") if found else prompt
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def load_answers(path: Path = ANSWERS) -> dict[str, dict[str, Any]]:
    """key -> the recorded answer (the compiler's JSON shape), from the answers file."""
    answers: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            answers[entry["key"]] = entry["answer"]
        except (ValueError, KeyError) as error:
            raise SystemExit(f"{path}:{number}: not an answer line ({error})") from None
    return answers


# --- the stub: a local OpenAI-compatible server answering from the recorded answers -----------


@dataclass
class Served:
    """What the stub answered: keys asked for, with and without a recorded answer."""

    recorded: set[str] = field(default_factory=set)
    stand_in: set[str] = field(default_factory=set)
    requests: int = 0


def _completion(model: str, content: str) -> bytes:
    body = {
        "id": "chatcmpl-realistic",
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
        "usage": {"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300},
    }
    return json.dumps(body).encode("utf-8")


@contextmanager
def serving(
    answers: dict[str, dict[str, Any]], dump: Path | None = None
) -> Iterator[tuple[str, Served]]:
    """The stub on a free port of 127.0.0.1, for the `with` block only; yields its --api-base
    and what it answered. `dump`: a folder each prompt is written to, as KEY.txt."""
    served = Served()
    lock = threading.Lock()
    stand_in = recall_bench.TaskWordsModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            prompt = body["messages"][0]["content"]
            key = prompt_key(prompt)
            with lock:
                served.requests += 1
                (served.recorded if key in answers else served.stand_in).add(key)
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{key}.txt").write_text(prompt, encoding="utf-8")
            if key in answers:
                content = json.dumps(answers[key])
            else:
                content = _stand_in_answer(stand_in, body["messages"])
            data = _completion(body["model"], content)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", served
    finally:
        server.shutdown()
        server.server_close()


def _stand_in_answer(model: recall_bench.TaskWordsModel, messages: list[dict[str, str]]) -> str:
    import asyncio

    return asyncio.run(model.complete(messages)).text


# --- the corpus -------------------------------------------------------------------------------

LABELS: dict[str, tuple[bool, str]] = {
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04": (True, "every bead of epic spotter-4te closed"),
    "fa812bfe-b295-4cca-9c2f-fdf01028cb46": (True, "epic spotter-a0y complete and pushed"),
    "491e126e-1e71-469c-ade2-fcc8af567c74": (True, "the beads asked for were created"),
    "55604662-cf2a-4331-851a-ec234028f8ca": (False, "its calls rejected; nothing diagnosed"),
    "d6e0bada-1959-4eec-a9d2-0bfade768d8f": (True, "the server started in the background"),
    "019b04ae-b1c6-7c72-a134-a4c2de66058c": (True, "the file made; python3 printed 2"),
    "0ab84937-9fe7-4284-986a-33c832af0b6a": (True, "GEMINI.md written; a follow-up cancelled"),
}
"""Session id -> (success, why): the outcome its user would give it, read from how the session
ends (the coding sessions a person did real work in; the other sessions are fixtures, labelled
by recall_bench's weak signal). Passed to `build` as a `--labels` file, as a user would."""


@dataclass
class Built:
    """The corpus built, and what the stub answered for it."""

    corpus: Path
    served: Served
    report: dict[str, Any]
    unused: list[str]
    """Recorded answers no prompt asked for (their run is shown otherwise now)."""


def build(data: Path, work: Path, answers: dict[str, dict[str, Any]], dump: Path | None) -> Built:
    """Every family under `data` converted as recall_bench converts it, labelled (`LABELS`
    through `--labels`), and built by `wikitrace build` compiling through the stub; a corpus
    kept from an earlier run (`--keep`) is reused as it is."""
    corpus, kept = work / "corpus", work / "built.json"
    if corpus.exists() and kept.is_file():
        saved = json.loads(kept.read_text(encoding="utf-8"))
        served = Served(set(saved["recorded"]), set(saved["stand_in"]), saved["requests"])
        return Built(corpus, served, saved["report"], saved["unused"])
    inputs = []
    for index, family in enumerate(recall_bench.SHARED):
        out = work / f"runs-{index:02d}.jsonl"
        if recall_bench.convert(family, data, out):
            inputs.append(str(out))
    labels = work / "labels.json"
    labels.write_text(json.dumps({k: ok for k, (ok, _) in LABELS.items()}), encoding="utf-8")
    with serving(answers, dump) as (url, served):
        command = ["-q", "build", *inputs, "-o", str(corpus), "--model", MODEL]
        command += ["--api-base", url, "--no-cache", "--labels", str(labels), "--json"]
        code, printed, error = recall_bench.wikitrace(command)
    if code != 0:
        raise SystemExit(f"build: exit {code}: {error[-2000:]}")
    report = json.loads(printed)
    unused = sorted(set(answers) - served.recorded)
    saved = {
        "recorded": sorted(served.recorded),
        "stand_in": sorted(served.stand_in),
        "requests": served.requests,
        "report": report,
        "unused": unused,
    }
    kept.write_text(json.dumps(saved), encoding="utf-8")
    return Built(corpus, served, report, unused)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=HERE.parent.parent / "shared/data")
    parser.add_argument("--keep", type=Path, help="build here and keep it; reused when run again")
    parser.add_argument("--dump-prompts", type=Path, help="write each compile prompt here")
    parser.add_argument("--messages", type=Path, help="write each first message here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    answers = load_answers() if ANSWERS.is_file() else {}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        built = build(args.data, work, answers, args.dump_prompts)
        print(
            f"built: {built.served.requests} requests, {len(built.served.recorded)} runs answered "
            f"from recorded answers, {len(built.served.stand_in)} by the stand-in; "
            f"{len(built.unused)} recorded answers unused",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
