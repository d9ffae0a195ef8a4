"""Pages worth reading without a model (issue 54): offline quotes that say what failed, every
call on a turn's line, cuts that keep what failed, warm-ups left out, on excerpts of real logs
(tests/data/pages/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.evidence import QuoteChecker
from wikitrace.compiler.failure_quotes import failure_quotes
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import Unlabelled
from wikitrace.compiler.offline import compile_offline
from wikitrace.compiler.signals import failed_calls, failures
from wikitrace.compiler.view import Budget, fit_view
from wikitrace.corpus_schema import RunRecord, Turn, read
from wikitrace.corpus_schema.drilldown import CUT_MARKER, actions_text, cut_middle, format_turn
from wikitrace.corpus_schema.records import CompilationHeader
from wikitrace.corpus_schema.render import LINE_LIMIT
from wikitrace.corpus_schema.turns import FAILED_MARK, TURN_FAILED, raw_pieces, summarize
from wikitrace.tools.audit import audit_corpus, passage
from wikitrace.versions.frozen import FrozenVersion

from helpers import DATA, make_run, run, write_runs

PAGES = DATA / "pages"
OUTPUTS = json.loads((PAGES / "failure-outputs.json").read_text())


def bash(command: str, result: str, **metadata: Any) -> dict[str, Any]:
    call = {"id": "c1", "name": "Bash", "arguments": {"command": command}, "result": result}
    return {"role": "assistant", "tool_calls": [{**call, "metadata": metadata}]}


def record(turns: list[dict[str, Any]], success: bool = False) -> RunRecord:
    return RunRecord.model_validate(
        {"task_id": "t", "task": "fix it", "success": success, "turns": turns}
    )


# --- what is quoted of a failure --------------------------------------------------------------


@pytest.mark.parametrize("case", OUTPUTS, ids=[case["source"] for case in OUTPUTS])
def test_the_lines_that_say_what_failed_are_quoted(case: dict[str, Any]) -> None:
    assert failure_quotes(case["text"]) == case["quotes"]
    for quote in case["quotes"]:
        assert quote in case["text"]  # verbatim: a passage of what came back


@pytest.mark.parametrize("case", OUTPUTS, ids=[case["source"] for case in OUTPUTS])
def test_the_offline_compilation_quotes_them_verified(case: dict[str, Any]) -> None:
    """As a failed call's result (is_error) and as a mini-swe-agent observation: the quotes of
    the compilation are the passages above, each found in its turn."""
    for turn in (
        bash("make check", case["text"], is_error=True),
        {"role": "assistant", "action": "make check", "observation": case["text"]},
    ):
        compiled = compile_offline(1, record([turn]))
        claim = compiled.claims[0]
        assert claim.statement.startswith("Turn 1: ")
        assert [e.quote for e in claim.evidence[: len(case["quotes"])]] == case["quotes"]
        assert all(e.verified for e in claim.evidence)


def test_a_result_logged_as_json_is_quoted_as_the_turn_renders_it() -> None:
    text = OUTPUTS[1]["text"]  # a traceback, its lines escaped inside the JSON of the result
    turn = bash("python repro.py", "")
    turn["tool_calls"][0]["result"] = {"stdout": text, "exit_code": 1}
    run = record([turn])
    (failure,) = failures(run.turns).values()
    assert failure.why == "a command exited with code 1"
    assert failure.quotes[0] == "ValueError: not enough values to unpack (expected 3, got 0)"
    assert failure.quotes[-1] == '"command":"python repro.py"'  # the command that ran
    checker = QuoteChecker(run.turns)
    assert all(checker.found(1, quote) for quote in failure.quotes)


def test_json_logged_as_text_is_quoted_from_its_values() -> None:
    logged = '{"output":"fatal: pathspec \'lib/a.ex\' did not match any files","metadata":'
    logged += '{"exit_code":128,"duration_seconds":0.1}}'
    call = {"name": "shell", "arguments": {"command": ["git", "add", "lib/a.ex"]}, "result": logged}
    turns = [Turn.model_validate({"role": "assistant", "tool_calls": [call]})]
    (failure,) = failures(turns).values()
    assert failure.why == "a command exited with code 128"
    assert failure.quotes == (
        "fatal: pathspec 'lib/a.ex' did not match any files",
        '"command":["git","add","lib/a.ex"]',
    )
    assert all(QuoteChecker(turns).found(1, quote) for quote in failure.quotes)


def test_a_bare_code_is_quoted_only_when_nothing_else_came_back() -> None:
    alone = {"role": "assistant", "action": "false", "observation": "<returncode>1</returncode>"}
    (failure,) = failures([Turn.model_validate(alone)]).values()
    assert failure.quotes == ("false",)  # the command: the only passage that says anything
    traceback = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
    traceback += '  File "a.py", line 1, in <module>\n    import b\n'
    traceback += "ModuleNotFoundError: No module named 'b'\n</output>"
    turn = {"role": "assistant", "action": "python a.py", "observation": traceback}
    (failure,) = failures([Turn.model_validate(turn)]).values()
    assert failure.quotes == ("ModuleNotFoundError: No module named 'b'", "python a.py")


@pytest.mark.parametrize(
    ("command", "output", "code", "failed"),
    [
        ("grep -rn 'standard_duration_re' django/", "", 1, False),  # found nothing
        ("cd /testbed && grep -c foo a.py", "0", 1, True),  # a count of 0 says more
        ("grep foo missing.txt", "grep: missing.txt: No such file or directory", 2, True),
        ("ls src | grep '.py$'", "", 1, False),
        ("rg TODO", "", 1, False),
        ("grep foo a.txt; make", "", 1, True),  # the last step is not a search
        ("pytest -q", "", 1, True),
    ],
)
def test_a_search_that_found_nothing_is_no_failure(
    command: str, output: str, code: int, failed: bool
) -> None:
    observation = f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"
    text_action = {"role": "assistant", "action": command, "observation": observation}
    claude = bash(command, f"Exit code {code}\n{output}".strip(), is_error=True)
    codex = bash(command, output, exit_code=code)
    logged = json.dumps({"output": output, "metadata": {"exit_code": code}})
    shell = {"name": "shell", "arguments": {"command": ["bash", "-lc", command]}, "result": logged}
    codex_text = {"role": "assistant", "tool_calls": [shell]}  # Codex 0.66: JSON as text
    for turn in (text_action, claude, codex, codex_text):
        assert bool(failures([Turn.model_validate(turn)])) is failed, turn


# --- actions: every call, and which failed -----------------------------------------------------


def test_actions_names_every_call_of_a_turn_and_marks_the_one_that_failed(
    tmp_path: Path,
) -> None:
    """A real turn that ran `mix test` and `mix credo` at once: the second failed."""
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"fa812bfe-b295-4cca-9c2f-fdf01028cb46": False}))
    corpus = tmp_path / "corpus"
    source = PAGES / "claude-code-two-calls.jsonl"
    build_corpus(BuildOptions(inputs=[source], output=corpus, labels=[labels]))
    line = actions_text(str(corpus.resolve()), "1").splitlines()[-1]
    action, came_back = line.split("  => ")
    assert action.count("Bash(") == 2 and "mix test" in action and "mix credo" in action
    assert action.count(FAILED_MARK) == 1 and action.endswith(FAILED_MARK)  # the second call
    assert came_back.count("[failed]") == 1
    assert "Nested modules could be aliased" in came_back.split("; [failed] ")[1]
    # The same turn one call at a time: the first passed.
    run = next(i for i in plan_inputs([source]).items() if isinstance(i, Unlabelled))
    marks = failed_calls(RunRecord.model_validate({**run.data, "success": False}).turns)
    assert list(marks[-1]) == [1]


def test_a_failed_line_reads_back_to_its_turn() -> None:
    turn = {
        "role": "assistant",
        "tool_calls": [
            {"name": "TodoWrite", "arguments": {"todos": ["a"]}, "result": "Todos have been set"},
            {"name": "Bash", "arguments": {"command": "pytest"}, "result": "E   assert 2 == 1"},
        ],
    }
    role, action, came_back = summarize(turn, {1: "E   assert 2 == 1"})
    assert action == 'TodoWrite({"todos":["a"]}); Bash({"command":"pytest"}) [failed]'
    assert came_back == "Todos have been set; [failed] E assert 2 == 1"  # on one line
    pieces = raw_pieces(f"[one line] {role}: {action} => {came_back}")
    assert pieces == [  # each call's result after it, as the raw turn has them
        'TodoWrite: {"todos":["a"]}',
        "Todos have been set",
        'Bash: {"command":"pytest"}',
        "E assert 2 == 1",
    ]
    raw = format_turn(turn)
    assert passage(raw, f"[one line] {role}: {action} => {came_back}") is not None
    # A turn with no call that failed: its action is marked.
    text = summarize({"role": "assistant", "action": "ls x"}, {TURN_FAILED: "ls: x: missing"})
    assert text[1:] == ["ls x" + FAILED_MARK, "ls: x: missing"]
    assert summarize(turn) == [role, *summarize(turn, {})[1:]]  # nothing failed: no mark


# --- cuts keep what failed whole ---------------------------------------------------------------


def test_a_cut_keeps_the_passages_asked_for_whole() -> None:
    text = "a" * 500 + "\nE   AssertionError: 2 != 1\n" + "b" * 500
    cut = cut_middle(text, 100, ["E   AssertionError: 2 != 1"])
    assert "E   AssertionError: 2 != 1" in cut and cut.count("wikitrace cut") == 2
    assert cut.startswith("a" * 50) and cut.endswith("b" * 50)
    assert cut_middle(text, 100) == cut_middle(text, 100, ["not in it"])
    assert CUT_MARKER.format(count=len(text) - 100) in cut_middle(text, 100)


def test_a_long_run_shows_what_failed_in_each_failed_turn() -> None:
    """200 turns, 14 of them failed, each with a long output whose telling line sits in the
    middle: in a prompt far too small for every turn whole, every telling line is shown whole."""
    turns: list[dict[str, Any]] = []
    telling = []
    for number in range(200):
        if number % 14 == 5:
            line = f"lib/a{number}.ex:{number}:3: undefined function helper_{number}/1"
            telling.append(line)
            output = "\n".join(["compiling ..." * 8] * 30 + [line] + ["warning: x" * 8] * 30)
            turns.append(bash(f"mix compile {number}", f"Exit code 1\n{output}", is_error=True))
        else:
            turns.append(bash(f"cat notes{number}.txt", "note\n" * 400))
    run = record(turns)
    assert len(failures(run.turns)) == len(telling) == 14

    def fits(entries: list[Any], mode: str) -> bool:
        return sum(len(e.text) for e in entries) // 4 <= 12000

    budget = Budget(12000, fits, lambda e, m: sum(len(x.text) for x in e) // 4, len)
    view = fit_view(run, budget, max_field=4000)
    assert view.mode in ("skeleton", "elided")
    shown = "\n".join(view.shown)
    assert all(line in shown for line in telling)


# --- warm-ups ------------------------------------------------------------------------------------


def test_claude_code_warm_up_replies_in_a_harbor_trajectory_are_left_out_and_counted() -> None:
    (run,) = list(plan_inputs([PAGES / "atif-claude-code-warmups.json"]).items())
    assert isinstance(run, Unlabelled)
    assert run.data["metadata"]["warmup_steps_left_out"] == 2
    texts = json.dumps(run.data["turns"])
    assert "ready to help" not in texts and "Hello! I'm Claude Code" not in texts
    assert run.data["turns"][0]["content"].startswith("Fix the broken asynchronous")


def test_a_one_record_warm_up_file_beside_its_session_is_left_out(tmp_path: Path) -> None:
    """Claude Code 2.0.46 wrote some warm-up calls as a file holding only the reply."""
    folder = tmp_path / "-workspace"
    folder.mkdir()
    session = (PAGES / "claude-code-two-calls.jsonl").read_text()
    (folder / "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl").write_text(session)
    first = json.loads(session.splitlines()[0])
    for name, text in (("a1b2c3d4", "Hello! I'm ready to help you search"), ("e5f6", "Ready.")):
        reply = {
            **{k: first[k] for k in ("cwd", "sessionId", "version", "userType")},
            "agentId": name,
            "isSidechain": True,
            "parentUuid": None,
            "uuid": f"{name}-0000",
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        }
        (folder / f"agent-{name}.jsonl").write_text(json.dumps(reply) + "\n")
    (run,) = list(plan_inputs([folder]).items())
    assert isinstance(run, Unlabelled)
    assert run.data["metadata"]["warmup_agents_left_out"] == 2
    assert "ready to help" not in json.dumps(run.data["turns"])
    compiled = compile_offline(1, RunRecord.model_validate({**run.data, "success": False}))
    assert "ready to help" not in compiled.model_dump_json()


# --- the small items ------------------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parent.parent / "examples/tau-bench-airline.jsonl"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = tmp_path_factory.mktemp("example") / "corpus"
    assert run(["build", str(EXAMPLE), "-o", str(corpus)])[0] == 0
    return corpus.resolve()


def test_a_compilation_header_names_the_mined_insight_its_body_names(example: Path) -> None:
    pages = read.insights(example)
    assert pages
    for page in pages:
        source = page.header.source_step
        compiled = read.read_page(example, f"compilation/{source}.md", CompilationHeader)
        drawn = compiled.body.split("## Insights drawn from this run")[1].split("\n## ")[0]
        assert f"insight/{page.header.id}.md" in drawn
        assert page.header.id in compiled.header.insights
    # The index lists a run's own insights, in a build and read back alike.
    assert all(not row.insights for row in FrozenVersion.load("v0001", example).rows)


def test_the_audit_names_no_run_an_insight_rests_on_as_without_one(example: Path) -> None:
    findings = audit_corpus(example)
    insights = list(read.insights(example))
    rests_on = {step for page in insights for step in page.header.rests_on}
    assert len(rests_on) > len(insights)  # mined: more runs than insights
    assert not rests_on & set(findings.runs_without_insight)
    assert len(findings.runs_without_insight) == 12 - len(rests_on)


def test_the_audit_command_the_index_suggests_runs_there(
    example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = (example / "_index.md").read_text()
    command = next(line for line in index.splitlines() if "wikitrace audit" in line)
    args = command.split("`wikitrace ", 1)[1].split("`", 1)[0].split()
    monkeypatch.chdir(example)
    code, out, err = run(args)
    assert code == 0, err
    assert out.startswith("# step-0001")


def test_raw_index_rows_fit_the_line_limit_whatever_the_task_type(tmp_path: Path) -> None:
    long = "/home/me/projects/" + "a-very-long-project-folder-name/" * 4
    runs = [make_run("t1", task_type=long, success=True), make_run("t2", task_type=long)]
    runs[1]["kind"] = "add-feature"
    corpus = tmp_path / "corpus"
    assert run(["build", str(write_runs(tmp_path / "r.jsonl", runs)), "-o", str(corpus)])[0] == 0
    rows = [
        line for line in (corpus / "raw/_index.md").read_text().splitlines() if "| [step-" in line
    ]
    assert len(rows) == 2 and all(len(row) <= LINE_LIMIT for row in rows), rows
