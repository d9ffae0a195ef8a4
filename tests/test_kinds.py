"""The kind of work of a coding session (issue 40): inferred from its task and the files it
changed, stored on its record, shown in the index, and the key the first message scopes by
after the project: the project's lessons, then the same kind's elsewhere, no other kind's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler.importers.repository import changed_files
from wikitrace.corpus_schema import RunRecord
from wikitrace.corpus_schema.records import RawHeader
from wikitrace.corpus_schema.work import KINDS, file_class, infer_kind
from wikitrace.search import consolidate
from wikitrace.tools.memory import Memory

from helpers import DATA, build_lessons, make_run, run

CWD = "/home/dev/projects/shop"


def claude_session(path: Path, task: str, calls: list[tuple[str, dict[str, Any]]]) -> Path:
    """A Claude Code session file as the client writes it (records trimmed to the fields the
    real ones in tests/data have): the user's task, then one assistant tool call a line, each
    answered by a tool_result line."""
    session = path.stem
    lines: list[dict[str, Any]] = []
    parent = None

    def add(record: dict[str, Any]) -> None:
        nonlocal parent
        uuid = f"u{len(lines):04d}"
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": CWD,
                "sessionId": session,
                "version": "2.1.38",
                "gitBranch": "master",
                "uuid": uuid,
                "timestamp": f"2026-02-10T21:{len(lines):02d}:00.000Z",
                **record,
            }
        )
        parent = uuid

    add({"type": "user", "message": {"role": "user", "content": task}})
    for number, (name, arguments) in enumerate(calls):
        call_id = f"toolu_{number:02d}"
        add(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{number:02d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-4-6",
                    "content": [
                        {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
                    ],
                },
            }
        )
        add(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}],
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def converted(*paths: Path) -> list[dict[str, Any]]:
    code, out, err = run(["convert", *map(str, paths), "--unlabelled", "keep"])
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


SESSIONS = {
    "docs": (
        "Update the install instructions for the new CLI",
        [
            ("Read", {"file_path": f"{CWD}/README.md"}),
            ("Edit", {"file_path": f"{CWD}/README.md", "old_string": "a", "new_string": "b"}),
            ("Write", {"file_path": f"{CWD}/docs/install.md", "content": "# Install"}),
        ],
    ),
    "build-ci-deps": (
        "Make the pipeline green again",
        [
            ("Bash", {"command": "gh run view --log-failed"}),
            ("Edit", {"file_path": f"{CWD}/.github/workflows/ci.yml", "old_string": "3.10"}),
            ("Edit", {"file_path": f"{CWD}/pyproject.toml", "old_string": "requires-python"}),
        ],
    ),
    "tests": (
        "Cover the cart's edge cases",
        [
            ("Read", {"file_path": f"{CWD}/shop/cart.py"}),
            ("Write", {"file_path": f"{CWD}/tests/test_cart.py", "content": "def test_x(): ..."}),
        ],
    ),
    "fix-bug": (
        "Checkout crashes with a TypeError when the cart is empty",
        [
            ("Bash", {"command": "pytest -x tests/test_checkout.py"}),
            ("Edit", {"file_path": f"{CWD}/shop/checkout.py", "old_string": "cart[0]"}),
        ],
    ),
    "investigate": (
        "Explain how the order queue retries failed payments",
        [
            ("Grep", {"pattern": "retry", "path": f"{CWD}/shop"}),
            ("Read", {"file_path": f"{CWD}/shop/queue.py"}),
        ],
    ),
}


@pytest.mark.parametrize("kind", sorted(SESSIONS))
def test_a_session_s_kind_comes_from_the_files_it_changed_then_its_words(
    tmp_path: Path, kind: str
) -> None:
    task, calls = SESSIONS[kind]
    (record,) = converted(claude_session(tmp_path / "0000-session.jsonl", task, calls))
    assert (record["project"], record["kind"]) == ("shop", kind)
    if kind in ("docs", "build-ci-deps", "tests"):  # what it changed decides
        assert record["kind_basis"].startswith(f"changed only {kind} files (")
    else:
        assert record["kind_basis"].startswith("the task's words (")


def test_a_session_whose_kind_cannot_be_told_says_why(tmp_path: Path) -> None:
    task = (
        "Work on bead spotter-4te. Run bd show spotter-4te to see the issue details and bd "
        "ready to find available subtasks. Start with the first ready task."
    )
    calls = [
        ("Edit", {"file_path": f"{CWD}/lib/spotter/telemetry/otel.ex", "old_string": "x"}),
        ("Edit", {"file_path": f"{CWD}/README.md", "old_string": "y"}),
    ]
    (record,) = converted(claude_session(tmp_path / "s.jsonl", task, calls))
    assert record["kind"] is None
    assert record["kind_basis"] == (
        "unsure: no word of the task names one; the files changed are of several kinds (code, docs)"
    )
    tie = infer_kind("The login fix needs a new test", ["src/login.py"])
    assert tie.kind is None and tie.votes == {"add-feature": 1, "fix-bug": 1, "tests": 1}
    assert tie.basis.startswith("unsure: the task's words are a tie (1 add-feature, 1 fix-bug")
    assert tie.basis.endswith(
        "the files changed are code (src/login.py), which any kind may change"
    )


@pytest.mark.parametrize(
    ("task", "kind"),
    [
        # A making verb's object names the kind, whatever the later words count.
        (
            "Write tests for SpotterWeb.OtelTraceHelpers.with_span: the span gets the given "
            "attributes, and an exception inside the block marks the span as error and is "
            "re-raised",
            "tests",
        ),
        ("Add a README.md to myapp that says how to run hoge.py and what it prints", "docs"),
        ("Please add a GitHub Actions workflow that runs the tests with pytest", "build-ci-deps"),
        # The object is what the verb opens, not what a preposition adds.
        ("Add a /ping slash command to the Discord bot and a test for it", "add-feature"),
        # A verb that is a kind's own cue.
        ("Document the plugin hook scripts: which endpoint each posts to", "docs"),
        ("Fix the test that times out on the new checkout page", "fix-bug"),
        # A tracker's items made: planning work, which no kind covers, whatever the planned
        # work's words say (the realistic bench's fourth reader counted add-feature untrue).
        (
            "Create beads for an epic that adds a commit review page: one task for the "
            "LiveView, one for its tests, one for the migration",
            None,
        ),
        ("Add a ticket for the login bug", None),
        # No clear lead: the words count; a warning is a fault, and an add after "when I"
        # ties with it rather than making the task a feature.
        (
            "mix credo --strict wants an alias for Spotter.Services.Tmux, but when I add it the "
            "compiler warns the alias is unused. Make both quiet without disabling the check",
            None,
        ),
    ],
)
def test_a_task_s_lead_decides_its_kind_where_it_is_clear(task: str, kind: str | None) -> None:
    assert infer_kind(task).kind == kind


def test_real_sessions_get_their_kind() -> None:
    """A real Codex rollout that added a file by apply_patch, and a Claude Code session that
    toured a repository and changed nothing."""
    codex, tour = converted(
        DATA / "sessions/codex/codex_session.jsonl",
        DATA / "sessions/claude-code/minimal_showcase/55550000-0000-4000-8000-000000000001.jsonl",
    )
    assert (codex["project"], codex["kind"]) == ("agent-sample", "add-feature")
    assert (tour["project"], tour["kind"]) == ("example-app", "investigate")


def test_the_files_a_session_changed() -> None:
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** Add File: NEWS.md\n"
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": ["apply_patch", patch]}}]},
        {"tool_calls": [{"name": "apply_patch", "arguments": patch}]},
        {
            "tool_calls": [
                {
                    "name": "str_replace_based_edit_tool",
                    "arguments": {"command": "view", "path": "x"},
                },
                {"name": "Read", "arguments": {"file_path": "/w/app/README.md"}},
                {"name": "Edit", "arguments": {"file_path": "/w/app/tests/test_a.py"}},
                {"name": "write_file", "arguments": {"file_path": "/elsewhere/b.py"}},
            ]
        },
    ]
    assert changed_files(turns, "/w/app") == [
        "src/app.py",
        "NEWS.md",
        "tests/test_a.py",
        "/elsewhere/b.py",
    ]
    classes = {
        path: file_class(path)
        for path in (
            "docs/index.rst",
            "CHANGELOG.md",
            "requirements-dev.txt",
            "web/package.json",
            ".github/workflows/ci.yml",
            "Dockerfile.prod",
            "src/foo_test.go",
            "web/cart.spec.ts",
            "notes.txt",
        )
    }
    assert classes == {
        "docs/index.rst": "docs",
        "CHANGELOG.md": "docs",
        "requirements-dev.txt": "build-ci-deps",
        "web/package.json": "build-ci-deps",
        ".github/workflows/ci.yml": "build-ci-deps",
        "Dockerfile.prod": "build-ci-deps",
        "src/foo_test.go": "tests",
        "web/cart.spec.ts": "tests",
        "notes.txt": "code",
    }


def test_records_and_pages_without_a_kind_still_read() -> None:
    record = RunRecord.model_validate(make_run())
    assert record.kind is None and record.kind_basis is None
    assert RunRecord.model_validate(make_run(kind="Fix_Bug")).kind == "fix-bug"
    with pytest.raises(ValueError, match="no kind of work 'frontend'; the kinds are: fix-bug"):
        RunRecord.model_validate(make_run(kind="frontend"))
    header = RawHeader.model_validate(
        {
            "step": "step-0001",
            "task_id": "t",
            "task_type": "coding",
            "attempt": 1,
            "outcome": "failure",
            "turns": 1,
            "source": "a.jsonl:1",
            "turns_file": "raw/step-0001/solver.full.jsonl",
        }
    )
    assert header.kind is None


# --- the first message ----------------------------------------------------------------------

LESSONS = {
    # task id: (project, kind, lesson title)
    "s1": ("github.com/acme/shop", "fix-bug", "Reproduce the checkout crash with pytest -x"),
    "s2": ("github.com/acme/shop", "docs", "Build the docs locally before pushing"),
    "w1": ("github.com/acme/web", "fix-bug", "Read the server log before restarting it"),
    "w2": ("github.com/acme/web", "docs", "Keep the API reference generated"),
    "w3": ("github.com/acme/web", None, "Ask which bead to work on first"),
    "a1": (None, None, "Confirm the fare class before booking"),
}


TASKS = {
    "s1": "Fix the crash in checkout when the cart is empty",
    "s2": "Write the docs for the cart page",
    "w1": "Fix the flaky server test",
    "w2": "Document the API of the web server",
    "w3": "Tidy up the flaky test helpers",
}
"""Each session's task: a shop task shares "cart" with the other, a web one "server" or
"flaky test"."""

DOCS_TASK = "Build the docs locally and keep the API reference generated"
"""A docs task both docs lessons bear on."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("kinds")
    runs = []
    for task_id, (project, kind, _) in LESSONS.items():
        if project is None:
            runs.append(make_run(task_id, task="Book a flight to Seattle", task_type="airline"))
            continue
        runs.append(
            make_run(
                task_id,
                task=TASKS[task_id],
                task_type="coding",
                project=project,
                kind=kind,
                kind_basis=None if kind else "unsure: no word of the task names one",
            )
        )

    def fields(task_id: str) -> dict[str, str]:
        return {"title": LESSONS[task_id][2], "guideline": f"Lesson of {task_id}."}

    return build_lessons(runs, base, fields)


def listed(text: str) -> list[str]:
    return [
        line.split(": ", 1)[1].split("**")[0] for line in text.splitlines() if "**insight-" in line
    ]


def test_a_project_s_lessons_alone_or_the_same_kind_s_and_no_other_kind_s(corpus: Path) -> None:
    memory = Memory.load(corpus)
    message = memory.first_message(
        "Fix the crash when the cart is empty", project="github.com/acme/shop"
    )
    assert (message.task_type, message.kind, message.kind_inferred) == ("coding", "fix-bug", True)
    # The project has runs: its own lessons, whatever their kind, and no other project's
    # (the docs one, which shares no word with the task, counted rather than listed).
    assert listed(message.text) == [LESSONS["s1"][2]] and message.unlisted == 1
    assert message.other_kinds == 0 and message.project_has_runs
    assert "## Insights for coding in github.com/acme/shop" in message.text
    assert "other projects" not in message.text
    assert (
        "This task is in the project **github.com/acme/shop**: this message lists only the "
        "lessons and runs of its past runs (its words say **fix-bug** work"
    ) in message.text
    steps = {run.task_id: run.step for run in memory.runs}
    assert sorted(message.similar) == sorted([steps["s1"], steps["s2"]])
    # A project with no runs here: fix-bug work in other projects, and no other kind's.
    new = memory.first_message(
        "Fix the crash when the cart is empty", project="github.com/acme/new"
    )
    assert not new.project_has_runs and new.kind == "fix-bug"
    # Of those, the one that bears on the task; the other counted.
    assert listed(new.text) == [LESSONS["s1"][2]] and new.unlisted == 1
    assert new.other_kinds == 3  # the docs lessons and web's unsure one
    assert "## Insights for coding: fix-bug, other projects" in new.text
    assert (
        "This task is **fix-bug** work (as its words say): this project "
        "(**github.com/acme/new**) has no past runs here, so this message lists the lessons "
        "and runs of fix-bug work in other projects, not the 3 lessons of other kinds of work"
    ) in new.text
    assert steps["w2"] not in new.similar and steps["w3"] not in new.similar
    # Given, the kind is not inferred; without a project, only that kind's are listed.
    docs = memory.first_message(DOCS_TASK, kind="docs")
    assert listed(docs.text) == [LESSONS["s2"][2], LESSONS["w2"][2]]
    assert not docs.kind_inferred and "## Insights for coding: docs" in docs.text


def test_an_unsure_kind_lists_every_kind_and_says_so(corpus: Path) -> None:
    memory = Memory.load(corpus)
    # In a project with runs the kind does not matter: its three lessons, none of which
    # bears on the task (counted, and said), and nothing said of the kind.
    own = memory.first_message("The flaky test needs a tidy up", project="github.com/acme/web")
    assert listed(own.text) == [] and (own.unlisted, own.none_bear) == (3, True)
    assert "could not be inferred" not in own.text
    message = memory.first_message("The flaky test needs a tidy up", project="github.com/acme/new")
    assert message.kind is None and message.kind_unsure == {"fix-bug": 1, "refactor": 1, "tests": 1}
    # Lessons of every kind, of which none bears on the task: counted, none listed.
    assert listed(message.text) == [] and (message.unlisted, message.none_bear) == (5, True)
    assert LESSONS["a1"][2] not in message.text
    assert "could not be inferred from its words (they name several kinds as often" in (
        message.text
    )
    code, out, err = run(
        [
            "prompt",
            str(corpus),
            "The flaky test needs a tidy up",
            "--project",
            "github.com/acme/new",
        ]
    )
    assert code == 0 and out == message.text
    assert "warning: the task's kind of work could not be inferred (its words name several " in err
    code, out, err = run(
        ["prompt", str(corpus), "The flaky test needs a tidy up", "--kind", "Tests"]
    )
    assert code == 0 and "No insights apply here." in out  # no tests lesson in this corpus
    code, out, err = run(["prompt", str(corpus), "x", "--kind", "frontend"])
    assert code == 2 and "'frontend' is not one of 'fix-bug', 'add-feature'" in err


def test_a_kind_is_refused_where_runs_have_none(corpus: Path) -> None:
    code, out, err = run(
        ["prompt", str(corpus), "Book a flight", "--task-type", "airline", "--kind", "docs"]
    )
    assert code == 2 and out == ""
    assert "no run of this corpus that the task may be shown has a kind of work" in err
    # An airline task is never scoped by kind, nor shown a coding lesson.
    airline = Memory.load(corpus).first_message("Book a flight to Seattle")
    assert airline.kind is None and airline.kind_unsure is None
    assert listed(airline.text) == [LESSONS["a1"][2]]


def test_the_index_shows_each_session_s_kind(corpus: Path) -> None:
    index = (corpus / "raw/_index.md").read_text()
    assert index.count("| coding: fix-bug |") == 2 and index.count("| coding: docs |") == 2
    assert index.count("| coding |") == 1 and "| airline |" in index
    assert set(KINDS) >= {"fix-bug", "docs"}


def test_one_project_s_same_lesson_from_two_runs_is_listed_once(tmp_path: Path) -> None:
    from wikitrace.corpus_schema.catalog import InsightEntry, PastRun

    title = "Start the Phoenix server in the background with its log redirected"
    runs = [
        PastRun(f"step-000{n}", f"t{n}", "coding", "success", task, project="spotter", kind=kind)
        for n, task, kind in (
            (1, "mix phx.server doesnt seem to start", "fix-bug"),
            (2, "start phoenix in background", None),
        )
    ]
    insights = [
        InsightEntry(
            f"insight-000{n}",
            title,
            "coding",
            guideline,
            "Starting a Phoenix dev server from an agent's shell.",
            f"step-000{n}",
            "success",
            f"t{n}",
        )
        for n, guideline in (
            (
                1,
                "Run `mix phx.server > /tmp/phx.log 2>&1 &` and read /tmp/phx.log before "
                "assuming it failed; port 4000 may already be taken by a stale beam process.",
            ),
            (
                2,
                "Background it with `nohup iex -S mix phx.server &> log/dev.log &`, then poll "
                "http://localhost:4000 until it answers instead of sleeping a fixed time.",
            ),
        )
    ]
    assert consolidate.group([(i.title, i.guideline) for i in insights]) == [0, 1]
    message = Memory(tmp_path, runs, insights, offline=False).first_message(
        "Fix: the server does not start", project="spotter"
    )
    assert message.insights == ["insight-0001"] and message.alike == {
        "insight-0001": ["insight-0002"]
    }
    assert "the same lesson: insight-0002" in message.text


def test_mcp_s_first_message_takes_the_kind_and_refuses_an_unknown_one(corpus: Path) -> None:
    import anyio
    from mcp import Client

    from wikitrace.tools.mcp_server import Corpus, build_server

    async def main() -> list[tuple[bool, str]]:
        async with Client(build_server(Corpus(corpus))) as client:
            found = []
            for kind in ("docs", "poetry"):
                arguments = {"task": DOCS_TASK, "kind": kind}
                result = await client.call_tool("first_message", arguments)
                found.append((result.is_error, result.content[0].text))  # type: ignore[union-attr]
            return found

    (docs_error, docs), (bad_error, bad) = anyio.run(main)
    assert not docs_error and listed(docs) == [LESSONS["s2"][2], LESSONS["w2"][2]]
    assert bad_error and "no kind of work 'poetry'" in bad
