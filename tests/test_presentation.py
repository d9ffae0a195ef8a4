"""What the model is shown of a long session: failures read from the log's structure, the budget
spent on them, sub-agents and compaction summaries marked, the agent's text beside its call."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.compiler import BuildOptions, CompileLimits, build_corpus
from wikitrace.compiler.compile import Prompt, Templates, render_prompt
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun
from wikitrace.compiler.offline import compile_offline
from wikitrace.compiler.signals import (
    _TOOL_SAYS_FAILED,
    _tool_says_failed,
    failures,
    marks_failures,
    turn_failure,
)
from wikitrace.compiler.view import SUMMARY_MARK, view_fields
from wikitrace.corpus_schema import RunRecord, Turn
from wikitrace.corpus_schema.drilldown import format_turn
from wikitrace.corpus_schema.read import read_page
from wikitrace.corpus_schema.records import CompilationHeader

from helpers import DATA, FakeLLM, make_run, turns_in_prompt, write_runs

BUDGET = CompileLimits().prompt_tokens
"""The default prompt budget (a 32K context less the answer and one repair round)."""


def call_turn(
    name: str,
    arguments: dict[str, Any],
    result: Any,
    *,
    text: str | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """An assistant turn with one tool call and its result, as the session importers write it."""
    call: dict[str, Any] = {"id": f"call-{name}", "name": name, "arguments": arguments}
    call["result"] = result
    if metadata:
        call["metadata"] = metadata
    turn: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
    if text is not None:
        turn["content"] = text
    return turn


def failed(turn: dict[str, Any], *, structured: bool = True) -> bool:
    return turn_failure(Turn.model_validate(turn), keywords=not structured) is not None


# --- the rule: structure first, keywords only where the log has none -------------------------

LISTING = "\n".join(f"{n:>6}→{line}" for n, line in enumerate(["x = 1"] * 5, start=1))

NOT_FAILURES = {
    "a file read that mentions errors": call_turn(
        "Read",
        {"file_path": "lib/sync.ex"},
        '    29→        {:error, reason} ->\n    30→          Logger.error("sync failed")',
    ),
    "a test run with none failed": call_turn(
        "Bash",
        {"command": "cargo test 2>&1 | tail -3"},
        "running 29 tests\n\ntest result: ok. 29 passed; 0 failed; 0 ignored; finished in 0.4s",
    ),
    "a docstring that says cannot": call_turn(
        "Read",
        {"file_path": "app/models.py"},
        '     1→class Job:\n     2→    """Cannot be modified directly: use Job.update."""',
    ),
    "an enum member FAILED, read with line numbers": call_turn(
        "Read",
        {"file_path": "/app/worker_queue.py"},
        '    16→    COMPLETED = "completed"\n    17→    FAILED = "failed"\n',
    ),
    "an enum member FAILED, printed by cat": call_turn(
        "Bash",
        {"command": "cat /app/worker_queue.py"},
        'class JobStatus(str, Enum):\n    PENDING = "pending"\n    FAILED = "failed"\n',
    ),
    "an ExUnit run with no failure": call_turn(
        "Bash",
        {"command": "mix test"},
        "16:58:53.059 [warning] Failed to parse /nonexistent/path.jsonl\n13 tests, 0 failures",
    ),
}

FAILURES = {
    "a non-zero exit the log marks": call_turn(
        "Bash",
        {"command": "mix credo --strict"},
        "Exit code 2\nChecking 3 source files ...",
        is_error=True,
    ),
    "a non-zero exit code in a structured result": call_turn(
        "shell",
        {"command": ["git", "add", "lib/a.ex"]},
        '{"output":"fatal: pathspec did not match","metadata":{"exit_code":128}}',
    ),
    "a non-zero exit code in Claude Code's toolUseResult": call_turn(
        "Bash",
        {"command": "make"},
        "Makefile:3: recipe failed",
        tool_use_result={"stdout": "", "stderr": "", "exitCode": 2},
    ),
    "a failing pytest run, its exit code hidden by a pipe": call_turn(
        "Bash",
        {"command": "pytest -q 2>&1 | tail -3"},
        "FAILED tests/test_sync.py::test_idempotent - assert 2 == 1\n1 failed, 12 passed in 0.31s",
    ),
    "a pytest summary line": call_turn(
        "Bash",
        {"command": "pytest | tail -1"},
        "=================== 2 failed, 40 passed in 1.02s ===================",
    ),
    "a pre-commit hook rejecting the commit": call_turn(
        "Bash",
        {"command": "git commit -m 'feat: sync'"},
        "ruff.....................................................................Failed\n"
        "- hook id: ruff\n- exit code: 1\n\nlib/a.py:3:1: F401 unused import",
    ),
    "a custom pre-commit check": call_turn(
        "Bash",
        {"command": "git commit -m x"},
        "Pre-commit validation failed:\n\n[FORMAT] Code is not formatted.",
    ),
    "a push with no upstream": call_turn(
        "Bash",
        {"command": "git push 2>&1; true"},
        "fatal: The current branch feature has no upstream branch.\n"
        "To push the current branch and set the remote as upstream, use",
    ),
    "a Python traceback": call_turn(
        "Bash",
        {"command": "python sync.py"},
        "Traceback (most recent call last):\n  File \"sync.py\", line 3\nKeyError: 'id'",
    ),
    "a tool reply that is an error": call_turn(
        "book_reservation",
        {"user_id": "u1"},
        "Error: payment amount does not add up, total price is 305, but paid 255",
    ),
    "an ExUnit run with a failure": call_turn(
        "Bash", {"command": "mix test"}, "Finished in 0.7 seconds\n31 tests, 1 failure"
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_FAILURES))
def test_what_only_mentions_an_error_is_no_failure(name: str) -> None:
    assert not failed(NOT_FAILURES[name])


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_failure_the_log_shows_is_one(name: str) -> None:
    assert failed(FAILURES[name])


def test_error_words_count_only_in_a_log_that_marks_nothing() -> None:
    free_text = [
        {"role": "user", "content": "Put the mug in the cabinet."},
        {"role": "assistant", "action": "open cabinet 3", "observation": "Nothing happens."},
    ]
    paired = [*free_text, call_turn("Read", {"path": "a.py"}, "x = 1")]
    assert not marks_failures([Turn.model_validate(t) for t in free_text])
    assert list(failures([Turn.model_validate(t) for t in free_text])) == [2]
    assert marks_failures([Turn.model_validate(t) for t in paired])
    assert failures([Turn.model_validate(t) for t in paired]) == {}


def test_the_quote_of_a_failure_is_the_line_that_shows_it() -> None:
    (failure,) = failures([Turn.model_validate(FAILURES["a non-zero exit the log marks"])]).values()
    assert failure.quote == "Exit code 2\nChecking 3 source files ..." and failure.marked
    push = failures([Turn.model_validate(FAILURES["a push with no upstream"])])[1]
    assert push.quote == "fatal: The current branch feature has no upstream branch."
    assert push.why == "git or a commit hook refused"


@given(
    st.lists(
        st.sampled_from(
            [
                "Traceback (most recent call last):",
                "FAILED a.py::t",
                "=== 2 failed in 1s ===",
                "1 failed in 0.1s",
                "31 tests, 1 failure",
                "fatal: ",
                "Exit code 2",
                "Tests: ",
                "npm ERR! ",
                "ValueError: ",
                "ruff....Failed",
                "error",
                "ok",
                "  ",
                "\n",
                "x",
                "İ",
                "ß",
                "\u212a",
            ]
        ),
        max_size=10,
    ).map("".join)
)
@settings(max_examples=400, deadline=None)
def test_only_reading_lines_with_a_failure_word_finds_what_the_pattern_finds(text: str) -> None:
    fast, slow = _tool_says_failed(text), _TOOL_SAYS_FAILED.search(text)
    assert (fast and fast.span()) == (slow and slow.span())


# --- a long session: the budget spent on the turns that matter -------------------------------

FAILED_AT = (33, 43, 53, 100, 106)
SUMMARY_AT = 80


def _read(n: int) -> dict[str, Any]:
    """A file read whose listing holds error words: never a failure."""
    words = [
        '{:error, reason} -> Logger.error("sync failed")',
        '"""Cannot be modified directly: use Job.update."""',
        'FAILED = "failed"',
        "raise InvalidState, 'not found'",
    ][n % 4]
    listing = "\n".join(
        f"{i:>6}→    {words if i == 7 else f'value_{n}_{i} = compute({i})'}" for i in range(1, 31)
    )
    return call_turn(
        "Read", {"file_path": f"lib/module_{n}.py"}, listing, text=f"Reading module {n}."
    )


def _ordinary(n: int) -> dict[str, Any]:
    output = "\n".join(f"step {n}.{i}: ok" for i in range(40))
    return call_turn("Bash", {"command": f"make step-{n}"}, output, text=f"Running step {n} now.")


LONG_FAILURES = {
    33: call_turn(
        "Bash",
        {"command": "git commit -m 'feat: registry'"},
        "Exit code 1\nruff.........Failed\n- hook id: ruff\n- exit code: 1\nF401 unused import",
        text="Committing the registry.",
        is_error=True,
    ),
    43: call_turn(
        "Bash",
        {"command": "git add lib/registry.py lib/missing.py"},
        {"output": "fatal: pathspec 'lib/missing.py' did not match any files", "exit_code": 128},
        text="Adding the files to the commit.",
    ),
    53: call_turn(
        "Bash",
        {"command": "git push 2>&1 | cat"},
        "fatal: The current branch feature has no upstream branch.",
        text="Pushing the branch.",
    ),
    100: call_turn(
        "Bash",
        {"command": "pytest -q 2>&1 | tail -2"},
        "FAILED tests/test_sync.py::test_idempotent - assert 2 == 1\n1 failed, 12 passed in 0.3s",
        text="Running the sync tests.",
    ),
    106: call_turn(
        "Bash",
        {"command": "python -m sync"},
        "Traceback (most recent call last):\n  File \"sync.py\", line 9, in run\nKeyError: 'id'",
        text="Running the sync by hand.",
    ),
}


def long_session() -> dict[str, Any]:
    """184 turns: 5 real failures among 40 file reads that only mention errors, a compaction
    summary, and ordinary commands; about twice the default budget in all."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": "Add the sync registry."}]
    reads = 0
    for number in range(2, 185):
        if number in LONG_FAILURES:
            turns.append(LONG_FAILURES[number])
        elif number == SUMMARY_AT:
            summary = "This session is being continued from a previous conversation.\n" + "\n".join(
                f"- point {i}: the registry keeps session {i} until its pane closes"
                for i in range(80)
            )
            turns.append(
                {"role": "user", "content": summary, "metadata": {"isCompactSummary": True}}
            )
        elif number % 4 == 0 and reads < 40:
            turns.append(_read(number))
            reads += 1
        else:
            turns.append(_ordinary(number))
    assert reads == 40 and len(turns) == 184
    return make_run("sync", task="Add the sync registry.", task_type="coding", turns=turns)


def prompt_of(run: dict[str, Any], budget: int = BUDGET) -> tuple[RunRecord, Prompt]:
    record = RunRecord.model_validate(run)
    return record, render_prompt(Templates.load(), record, FakeLLM(), budget)


def whole_text(record: RunRecord, number: int) -> str:
    turn = record.turns[number - 1]
    return format_turn(view_fields(turn, record.task))


def test_the_failures_of_a_long_session_are_shown_in_full_and_the_budget_used() -> None:
    record, prompt = prompt_of(long_session())
    assert sorted(failures(record.turns)) == list(FAILED_AT)  # none of the 40 reads
    assert prompt.view.mode == "skeleton"
    shown = turns_in_prompt(prompt.text)
    for number in (*FAILED_AT, *(n - 1 for n in FAILED_AT), 1, 184):
        assert prompt.view.shown[number - 1] == whole_text(record, number), number
        assert shown[number].rstrip("\n") == whole_text(record, number)
    used = FakeLLM().count_tokens(prompt.text)
    assert 0.9 * BUDGET <= used <= BUDGET
    # The compaction summary is kept, marked; the other turns are one line each at least.
    assert shown[SUMMARY_AT].startswith(SUMMARY_MARK + "\nrole: user\ncontent: This session")
    assert all(shown[n] for n in range(1, 185))


def test_when_long_fields_are_cut_a_failure_keeps_more() -> None:
    def output(n: int, middle: str = "line ok") -> str:
        lines = [f"step {n} line {i}: ok" for i in range(400)]
        lines[200] = middle
        return "\n".join(lines)

    turns = [{"role": "user", "content": "Make the tests pass."}]
    for n in range(2, 13):
        failing = "FAILED tests/test_a.py::test_b - assert 1 == 2" if n == 7 else "all fine"
        turns.append(call_turn("Bash", {"command": f"make {n}"}, output(n, failing)))
    record, prompt = prompt_of(make_run("cut", turns=turns), 12_000)
    assert prompt.view.mode == "cut" and prompt.view.cap is not None
    assert sorted(failures(record.turns)) == [7]
    for number in (6, 7):  # the failure and the turn before it: whole
        assert prompt.view.shown[number - 1] == whole_text(record, number)
    assert "FAILED tests/test_a.py::test_b" in prompt.view.shown[6]
    assert "[... wikitrace cut " in prompt.view.shown[9]


def test_a_one_line_turn_keeps_the_agents_text_beside_its_call() -> None:
    _, prompt = prompt_of(long_session())
    shown = turns_in_prompt(prompt.text)
    lines = [text for text in shown.values() if text.startswith("[one line]")]
    assert lines
    assert any(line.startswith("[one line] assistant: Reading module") for line in lines)
    read = next(line for line in lines if "Reading module" in line)
    assert " | Read({" in read and " => " in read


def test_a_compaction_summary_too_long_for_the_budget_is_shortened_not_one_line() -> None:
    run = long_session()
    summary = run["turns"][SUMMARY_AT - 1]
    summary["content"] = summary["content"] * 8  # about 40 KB, a third of the prompt's room
    _, prompt = prompt_of(run)
    shown = turns_in_prompt(prompt.text)[SUMMARY_AT]
    assert shown.startswith(SUMMARY_MARK) and "[... wikitrace cut " in shown


def test_the_offline_compilation_reads_the_same_failures() -> None:
    record = RunRecord.model_validate(long_session())
    compilation = compile_offline(1, record)
    failed_claims = compilation.claims[:-1]
    assert [claim.evidence[0].turn for claim in failed_claims] == list(FAILED_AT)
    assert all(claim.evidence[0].verified for claim in failed_claims)
    assert "(5 with an error signal)" in compilation.title
    statements = [claim.statement for claim in failed_claims]
    assert statements[0] == "Turn 33: the log marks a tool call failed."
    assert statements[1] == "Turn 43: a command exited with code 128."


def test_a_quote_from_a_turn_shown_in_full_verifies(tmp_path: Path) -> None:
    quotes = [
        (53, "fatal: The current branch feature has no upstream branch."),
        (100, "FAILED tests/test_sync.py::test_idempotent - assert 2 == 1"),
        (SUMMARY_AT, "the registry keeps session 42 until its pane closes"),
    ]

    def answer(messages: list[Any]) -> str:
        return json.dumps(
            {
                "title": "The push failed",
                "description": "The branch had no upstream.",
                "claims": [
                    {"statement": "It failed.", "evidence": [{"turn": t, "quote": q}]}
                    for t, q in quotes
                ],
                "insights": [],
            }
        )

    path = write_runs(tmp_path / "runs.jsonl", [long_session()])
    build_corpus(
        BuildOptions(inputs=[path], output=tmp_path / "c", model="fake", use_cache=False),
        llm=FakeLLM(answer=answer),
    )
    page = read_page(tmp_path / "c", "compilation/step-0001.md", CompilationHeader)
    evidence = [e for claim in page.header.claims for e in claim.evidence]
    assert [(e.turn, e.verified, e.note) for e in evidence] == [(t, True, None) for t, _ in quotes]


# --- sub-agents ----------------------------------------------------------------------------


def _with_subagent(pad: int) -> dict[str, Any]:
    explore = {"id": "a93ccab", "type": "Explore", "call": "call-Task", "source": "subagents"}
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Find where sessions are registered."},
        call_turn("Task", {"subagent_type": "Explore", "prompt": "Find the registry."}, "Done."),
        {"role": "user", "content": "Find the registry module.", "metadata": {"subagent": explore}},
        {
            "role": "assistant",
            "content": "The registry lives in lib/registry.ex and is started by the app.",
            "metadata": {"subagent": explore},
        },
        *(_ordinary(n) for n in range(pad)),
        {"role": "assistant", "content": "I changed the registry as the sub-agent found it."},
    ]
    return make_run("sub", turns=turns)


@pytest.mark.parametrize(("pad", "budget"), [(0, BUDGET), (120, 6000)])
def test_sub_agent_turns_are_marked_with_their_sub_agent(pad: int, budget: int) -> None:
    _, prompt = prompt_of(_with_subagent(pad), budget)
    shown = turns_in_prompt(prompt.text)
    marked = {n for n, text in shown.items() if "[sub-agent Explore]" in text}
    assert marked == {3, 4}
    assert shown[3].startswith(
        ("[sub-agent Explore]\nrole: user", "[one line] [sub-agent Explore] user")
    )
    assert '"[sub-agent NAME]" is a turn of a sub-agent' in " ".join(prompt.text.split())
    assert not shown[max(shown)].startswith("[sub-agent")


def test_a_session_without_marks_is_not_told_about_them() -> None:
    _, prompt = prompt_of(make_run("plain"))
    assert "[sub-agent NAME]" not in prompt.text


# --- the real 184-turn session -----------------------------------------------------------------

SPOTTER = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"


@pytest.fixture(scope="module")
def spotter(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    """The real Claude Code session of tests/data/sessions (184 turns, two sub-agents, a
    compaction summary), labelled failed."""
    folder = tmp_path_factory.mktemp("claude") / "-home-user-projects-spotter"
    with tarfile.open(DATA / "sessions/claude-code/spotter-project.tar.gz") as archive:
        archive.extractall(folder, filter="data")
    labels = folder.parent / "labels.json"
    labels.write_text(json.dumps({SPOTTER: False}))
    (item,) = plan_inputs([folder], labels=[labels]).items()
    assert isinstance(item, SourceRun)
    return item.record


def test_the_real_session_is_shown_by_its_failures(spotter: RunRecord) -> None:
    # The calls the log marks failed (credo, a push with no upstream, a path left out of a
    # commit, failing tests, a pre-commit hook); not the 34 reads that only say "error".
    assert sorted(failures(spotter.turns)) == [33, 40, 43, 53, 100, 106, 127, 169]
    prompt = render_prompt(Templates.load(), spotter, FakeLLM(), BUDGET)
    shown = turns_in_prompt(prompt.text)
    for number in (33, 43, 53, 100, 106):
        assert prompt.view.shown[number - 1] == whole_text(spotter, number), number
    assert FakeLLM().count_tokens(prompt.text) >= 0.9 * BUDGET
    assert shown[6].startswith("[one line] [sub-agent Explore] user: ")
    summary = next(i for i, t in enumerate(spotter.turns, 1) if t.metadata.get("isCompactSummary"))
    assert shown[summary].startswith(SUMMARY_MARK + "\nrole: user")
