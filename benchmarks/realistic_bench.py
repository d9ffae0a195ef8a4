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
The items add up to 11 points, not the 10 intended (an addition slip found once the first
messages were scored, after the rubric was committed): the score of 10 is the points times
10/11, so that no item's weight was changed after reading the messages; "8 of 10" is then 8.8
points of 11.
Where the project has no runs in view (a project seen for the first time), M2 and M3 count as
met whatever is shown (as `score` computes them, and always has): the project has no lesson to
show, and other projects' lessons of the task's kind of work are what its scope falls back to;
M1 still counts another domain's items, and J1 and J2 judge whether the others' lessons bear.
J1 counts as met when no lesson is shown (abstaining is right then).

`--tasks FILE` asks a second list of held-out tasks instead (JSON: {"tasks": [{name, task,
project, left_out, expected, name_given, remote, domain}]}, as
benchmarks/data/realistic_tasks_second.json, written by a second reader before its messages
were made; realistic_tasks_third.json, a third list written before the change it measures,
not tuned on; realistic_tasks_fourth.json, written by a blind fourth reader, with four tasks
of domains the corpus lacks, `"domain": "none"`, counted apart: a message for one is right
only when it shows no lesson and no run); `--scores FILE` reads the judgments from another
reader's file (same shape as realistic_scores.json), so a second reader scores blind.

    python benchmarks/realistic_bench.py [DATA] [--keep DIR] [--dump-prompts DIR]
                                         [--messages DIR] [--tasks FILE] [--scores FILE] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
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


def build(
    data: Path,
    work: Path,
    answers: dict[str, dict[str, Any]],
    dump: Path | None,
    families: list[recall_bench.Family] = recall_bench.SHARED,
) -> Built:
    """Every family (of recall_bench.SHARED unless given) under `data` converted as
    recall_bench converts it, labelled (`LABELS` through `--labels`), and built by `wikitrace
    build` compiling through the stub; a corpus kept from an earlier run (`--keep`) is reused
    as it is."""
    corpus, kept = work / "corpus", work / "built.json"
    if corpus.exists() and kept.is_file():
        saved = json.loads(kept.read_text(encoding="utf-8"))
        served = Served(set(saved["recorded"]), set(saved["stand_in"]), saved["requests"])
        return Built(corpus, served, saved["report"], saved["unused"])
    inputs = []
    for index, family in enumerate(families):
        out = work / f"runs-{index:02d}.jsonl"
        if recall_bench.convert(family, data, out):
            inputs.append(str(out))
    labels = work / "labels.json"
    labels.write_text(json.dumps({k: ok for k, (ok, _) in LABELS.items()}), encoding="utf-8")
    with serving(answers, dump) as (url, served):
        command = ["-q", "build", *inputs, "-o", str(corpus), "--model", MODEL]
        command += ["--api-base", url, "--labels", str(labels), "--json"]
        code, printed, error = recall_bench.wikitrace(command, env={"WIKITRACE_NO_CACHE": "1"})
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


# --- held-out tasks and their first messages -------------------------------------------------

SPOTTER = "github.com/marot/spotter"


@dataclass(frozen=True)
class HeldOut:
    """A task a user asks for, the project it is in, and the past run a reader expects most
    similar (chosen from the sessions' content before any message was read)."""

    name: str
    task: str
    project: str
    """The project's key as the corpus names it (the repository, else the folder)."""
    left_out: str | None
    """The task id left out (`--exclude-task`): the session whose task text this is."""
    expected: frozenset[str]
    """Task ids of the past runs a reader expects most similar; empty: none expected."""
    name_given: str | None = None
    """What a user types as the project's name (None: the project key)."""
    remote: str | None = None
    """The git remote of the project's repository, when it has one."""
    domain: str = "coding"
    """The task's domain: "coding" for work in these projects; "none" for a task of a domain
    the corpus lacks (a toast, a lease letter), for which every lesson or run shown is
    another domain's item (M1): such a message is right only when it shows nothing."""


def _session_task(task_id: str, data: Path) -> str:
    """The task text of a session of ../shared/data, as `wikitrace convert` reads it."""
    for family in recall_bench.SHARED:
        if not family.session:
            continue
        _, converted, _ = recall_bench.wikitrace(
            ["-q", "convert", str(data / family.path), "--unlabelled", "keep", "--on-error", "skip"]
        )
        for line in converted.splitlines():
            record = json.loads(line)
            if record["task_id"] == task_id:
                return str(record["task"])
    raise SystemExit(f"no session {task_id} under {data}")


def held_out(data: Path) -> list[HeldOut]:
    """The held-out tasks: a session's task text with that session left out (leave one task
    out), or a task as a user would type it in the project (nothing left out)."""
    spotter = {
        "project": SPOTTER,
        "name_given": "spotter",
        "remote": f"git@{SPOTTER.replace('/', ':', 1)}.git",
    }
    four, a0y = "ae4a77f8-aedd-4bc1-888f-c94edc91af04", "fa812bfe-b295-4cca-9c2f-fdf01028cb46"
    beads, server = "491e126e-1e71-469c-ade2-fcc8af567c74", "55604662-cf2a-4331-851a-ec234028f8ca"
    background = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
    synthetic = "11111111-1111-4111-8111-111111111111"
    hello, hello_too = "gemini_stage0_jsonl", "session-2026-01-16T18-34-3739ef95"
    sample = "019b04ae-b1c6-7c72-a134-a4c2de66058c"
    return [
        # The Dialyzer one: set up credo and dialyzer; the session that ran both is 4te.
        HeldOut(
            "spotter: dialyzer beads",
            _session_task(beads, data),
            left_out=beads,
            expected=frozenset([four]),
            **spotter,
        ),
        HeldOut(
            "spotter: bead 4te",
            _session_task(four, data),
            left_out=four,
            expected=frozenset([a0y]),
            **spotter,
        ),
        HeldOut(
            "spotter: bead a0y",
            _session_task(a0y, data),
            left_out=a0y,
            expected=frozenset([four]),
            **spotter,
        ),
        HeldOut(
            "spotter: server won't start",
            _session_task(server, data),
            left_out=server,
            expected=frozenset([background]),
            **spotter,
        ),
        HeldOut(
            "spotter: server in background",
            _session_task(background, data),
            left_out=background,
            expected=frozenset([server]),
            **spotter,
        ),
        HeldOut(
            "spotter: fix a Dialyzer warning",
            "Fix the Dialyzer warning in the spotter web module",
            left_out=None,
            expected=frozenset([four]),
            **spotter,
        ),
        HeldOut(
            "spotter: trace the terminal channel",
            "Add OpenTelemetry spans to the terminal channel's join and input handlers",
            left_out=None,
            expected=frozenset([four]),
            **spotter,
        ),
        HeldOut(
            "codex synthetic: list files",
            _session_task(synthetic, data),
            "synthetic-project",
            synthetic,
            frozenset(
                ["22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"]
            ),
        ),
        HeldOut(
            "gemini: hello and list",
            _session_task(hello, data),
            "gemini:0b7dfb1274ee",
            hello,
            frozenset([hello_too]),
        ),
        HeldOut(
            "gemini discordbot: a new command",
            "Add a /ping slash command to the Discord bot and a test for it",
            "gemini:9da8b3dfb865",
            None,
            frozenset(["0ab84937-9fe7-4284-986a-33c832af0b6a"]),
        ),
        HeldOut(
            "codex agent-sample (no other run)",
            _session_task(sample, data),
            "agent-sample",
            sample,
            frozenset(),
        ),
    ]


def tasks_from(path: Path) -> list[HeldOut]:
    """The held-out tasks of a `--tasks` file (see the module's docstring)."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["tasks"]
    except (OSError, ValueError, KeyError) as error:
        raise SystemExit(f"{path}: not a tasks file with a 'tasks' list ({error})") from None
    items = []
    for number, entry in enumerate(entries):
        try:
            items.append(
                HeldOut(
                    entry["name"],
                    entry["task"],
                    entry["project"],
                    entry.get("left_out"),
                    frozenset(entry.get("expected", [])),
                    entry.get("name_given"),
                    entry.get("remote"),
                    entry.get("domain", "coding"),
                )
            )
        except (KeyError, TypeError) as error:
            raise SystemExit(f"{path}: tasks[{number}]: missing or bad field {error}") from None
    return items


def variants(item: HeldOut, work: Path) -> dict[str, tuple[list[str], Path | None]]:
    """The ways the user names the project: `--project` arguments and the folder `prompt`
    runs in (None: a folder that is no project). Name always; remote, path and nothing from
    inside a checkout when the project is a repository with a remote; path and nothing from
    inside a checkout of the project's name with no remote otherwise (a folder of a Gemini
    CLI project, known by a hash of its path, cannot be made)."""
    ways: dict[str, tuple[list[str], Path | None]] = {
        "name": (["--project", item.name_given or item.project], None)
    }
    if item.remote is not None:
        place = recall_bench.clone(item.project, work)
        ways["remote"] = (["--project", item.remote], None)
        ways["path"] = (["--project", str(place)], None)
        ways["nothing"] = ([], place)
    elif not item.project.startswith("gemini:"):
        # A git checkout with no remote, as most code folders are: a plain folder under the
        # temporary root this bench runs in would be read as a temporary folder, no project.
        place = work / "folders" / item.project
        if not (place / ".git").is_dir():
            place.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "init", "-q", str(place)], check=True)
        ways["path"] = (["--project", str(place)], None)
        ways["nothing"] = ([], place)
    return ways


RUBRIC = ("M1", "M2", "M3", "M4", "M5", "J1", "J2", "J3", "J4")
POINTS = 11
"""The rubric's items' points added up (see the module's docstring)."""


def message_hash(text: str, corpus: str) -> str:
    """A message's identity for its judgment: its text, the corpus's path (where it was built)
    and digits (an age in days changes every day; what is shown does not) aside."""
    text = re.sub(r"\d+", "#", text.replace(corpus, "CORPUS"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class Scored:
    """One held-out task asked one way: what it showed and its points."""

    task: str
    variant: str
    points: dict[str, int | None]
    """Rubric item -> points (None: a judgment not recorded for this message)."""
    hash: str
    foreign_domain: int
    other_project_lessons: int
    own_lessons: int
    similar: list[str]
    """The similar runs' task ids, in order."""
    text: str

    @property
    def total(self) -> float | None:
        """The score of 10: the points (of 11) times 10/11; None when a judgment is missing."""
        if any(value is None for value in self.points.values()):
            return None
        return round(sum(value or 0 for value in self.points.values()) * 10 / POINTS, 1)


def score(corpus: Path, work: Path, items: list[HeldOut], judged: dict[str, Any]) -> list[Scored]:
    """Each held-out task asked each way with `wikitrace prompt --json`, scored."""
    from wikitrace.tools.memory import Memory

    memory = Memory.load(corpus)
    truth = recall_bench.Truth.of(corpus)
    by_step = {run.step: run for run in memory.runs}
    by_id = {item.id: item for item in memory.insights}
    scored: list[Scored] = []
    for item in items:
        task_file = work / "task.txt"
        task_file.write_text(item.task, encoding="utf-8")
        in_view = [run for run in memory.runs if run.task_id != item.left_out]
        own_runs = [run for run in in_view if truth.project(run) == item.project]
        own_lessons_in_view = [
            i
            for i in memory.insights
            if i.source_step in by_step
            and truth.project(by_step[i.source_step]) == item.project
            and by_step[i.source_step].task_id != item.left_out
        ]
        domain = item.domain
        for variant, (given, cwd) in variants(item, work).items():
            # --mount: where a local agent finds the corpus (the hooks pass it; `prompt`'s
            # default is a harness's mount, /work/corpus, which J4 would fail everywhere).
            command = ["-q", "prompt", str(corpus.resolve()), "--json", "--task-file"]
            command += [str(task_file), "--mount", str(corpus.resolve())]
            if item.left_out:
                command += ["--exclude-task", item.left_out]
            code, printed, error = recall_bench.wikitrace(command + given, cwd)
            if code != 0:
                raise SystemExit(f"prompt for {item.name} ({variant}): exit {code}: {error}")
            message = json.loads(printed)
            sources = [by_step[by_id[i].source_step] for i in message["insights"]]
            similar = [by_step[step] for step in message["similar"]]
            foreign = sum(truth.domain[r.step] != domain for r in sources + similar)
            # A project with no runs here may get other projects' lessons of its kind.
            other = sum(truth.project(r) != item.project for r in sources) if own_runs else 0
            own = sum(truth.project(r) == item.project for r in sources)
            tasks = [r.task_id for r in similar]
            points: dict[str, int | None] = {
                "M1": 2 if foreign == 0 else 0,
                "M2": 1 if other == 0 else 0,
                "M3": 1 if own or not own_lessons_in_view else 0,
                "M4": 1 if not item.expected or item.expected & set(tasks) else 0,
                "M5": 1 if not item.expected or (tasks[:1] and tasks[0] in item.expected) else 0,
            }
            text = message["text"]
            key = message_hash(text, str(corpus.resolve()))
            judgment = judged.get(key, {})
            for name in ("J1", "J2", "J3", "J4"):
                points[name] = judgment.get(name)
            scored.append(Scored(item.name, variant, points, key, foreign, other, own, tasks, text))
    return scored


def table(scored: list[Scored]) -> Iterator[str]:
    """The scores as a Markdown table, a row a message."""
    yield "| task | variant | " + " | ".join(RUBRIC) + " | total | similar runs (task ids) |"
    yield "|---|---|" + "---|" * (len(RUBRIC) + 2)
    for row in scored:
        cells = ["?" if row.points[name] is None else str(row.points[name]) for name in RUBRIC]
        total = "unjudged" if row.total is None else str(row.total)
        similar = ", ".join(task[:8] for task in row.similar)
        yield f"| {row.task} | {row.variant} | " + " | ".join(cells) + f" | {total} | {similar} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=HERE.parent.parent / "shared/data")
    parser.add_argument("--keep", type=Path, help="build here and keep it; reused when run again")
    parser.add_argument("--dump-prompts", type=Path, help="write each compile prompt here")
    parser.add_argument("--messages", type=Path, help="write each first message here")
    parser.add_argument("--tasks", type=Path, help="ask these held-out tasks instead (JSON)")
    parser.add_argument("--scores", type=Path, default=SCORES, help="judgments to read (JSON)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    answers = load_answers() if ANSWERS.is_file() else {}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        built = build(args.data, work, answers, args.dump_prompts)
        scores: Path = args.scores
        judged = json.loads(scores.read_text(encoding="utf-8")) if scores.is_file() else {}
        items = tasks_from(args.tasks) if args.tasks else held_out(args.data)
        scored = score(built.corpus, work, items, judged.get("judgments", {}))
    if args.messages:
        args.messages.mkdir(parents=True, exist_ok=True)
        for row in scored:
            name = re.sub(r"[^a-z0-9]+", "-", f"{row.task} {row.variant}".lower()).strip("-")
            (args.messages / f"{name}.{row.hash}.md").write_text(row.text, encoding="utf-8")
    summary = {
        "requests": built.served.requests,
        "answered_from_recordings": len(built.served.recorded),
        "answered_by_stand_in": len(built.served.stand_in),
        "recorded_unused": len(built.unused),
        "unverified_quotes": built.report.get("unverified_quotes"),
        "messages": len(scored),
        "with_foreign_domain_items": sum(row.foreign_domain > 0 for row in scored),
        "totals": {f"{row.task} / {row.variant}": row.total for row in scored},
    }
    if args.json:
        rows = [{**vars(row), "total": row.total} for row in scored]
        print(json.dumps({"summary": summary, "rows": rows}, indent=1))
        return
    print(
        f"built: {summary['requests']} requests, {summary['answered_from_recordings']} runs "
        f"answered from recorded answers, {summary['answered_by_stand_in']} by the stand-in; "
        f"{summary['recorded_unused']} recorded answers unused; "
        f"{summary['unverified_quotes']} unverified quotes"
    )
    print("\n".join(table(scored)))
    totals = [row.total for row in scored if row.total is not None]
    foreign = {item.name for item in items if item.domain != "coding"}
    where = [
        row.total
        for row in scored
        if row.total is not None
        and row.task != "codex agent-sample (no other run)"
        and row.task not in foreign
    ]
    print(
        f"messages: {len(scored)}; with another domain's items: "
        f"{summary['with_foreign_domain_items']}; "
        f"judged: {len(totals)}; at least 8 of 10 where the project has runs: "
        f"{sum(t >= 8 for t in where)} of {len(where)}"
    )
    if foreign:
        asked = [row for row in scored if row.task in foreign]
        print(
            f"tasks of a domain the corpus lacks: {len(asked)} messages, "
            f"{sum(row.foreign_domain == 0 for row in asked)} showing no lesson and no run"
        )


if __name__ == "__main__":
    main()
