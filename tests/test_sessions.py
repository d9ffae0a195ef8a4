"""Session logs and traces (Claude Code, Codex, Gemini CLI, Langfuse, OpenTelemetry GenAI):
detected from content, every tool call and result kept, the task found, and no label unless
something gives one (--labels, a success score, or --judge)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import frontmatter
import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.claude_code import read_with
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled
from wikitrace.corpus_schema import InputError, read, verify
from wikitrace.corpus_schema.records import CompilationHeader

from helpers import DATA, FakeLLM, judge_answer, read_jsonl, run

SESSIONS = DATA / "sessions"
SPOTTER = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"


def runs_of(*paths: Path, labels: list[Path] | None = None) -> list[Any]:
    return list(plan_inputs(list(paths), labels=labels).items())


def only(items: list[Any]) -> Any:
    assert len(items) == 1, items
    return items[0]


def calls_of(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for turn in turns for call in turn.get("tool_calls") or []]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~/.claude/projects/<project>/ folder: the real session and its sub-agents."""
    folder = tmp_path_factory.mktemp("claude") / "-home-user-projects-spotter"
    with tarfile.open(SESSIONS / "claude-code/spotter-project.tar.gz") as archive:
        archive.extractall(folder, filter="data")
    return folder


def _source_blocks(path: Path, kind: str) -> list[dict[str, Any]]:
    blocks = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        if isinstance(content, list):
            blocks += [b for b in content if isinstance(b, dict) and b.get("type") == kind]
    return blocks


# --- Claude Code ------------------------------------------------------------------------------


def test_a_claude_code_project_folder_is_one_run_per_session_with_every_call(
    project: Path,
) -> None:
    item = only(runs_of(project))
    assert isinstance(item, Unlabelled) and item.format == "claude-code"
    data = item.data
    assert data["task_id"] == SPOTTER
    assert data["task"].startswith("Work on bead spotter-a0y. Run bd show spotter-a0y")
    # Every tool call and result of the session and of its two sub-agents (not the
    # compaction helper), counted in the source files.
    files = [project / f"{SPOTTER}.jsonl"] + [
        f
        for f in sorted((project / SPOTTER / "subagents").glob("agent-*.jsonl"))
        if not f.name.startswith("agent-acompact")
    ]
    uses = [b for f in files for b in _source_blocks(f, "tool_use")]
    results = [b for f in files for b in _source_blocks(f, "tool_result")]
    assert len(uses) == 243 and len(results) == 243
    calls = calls_of(data["turns"])
    assert sorted(c["id"] for c in calls) == sorted(b["id"] for b in uses)
    answered = {c["id"]: c for c in calls if "result" in c}
    assert set(answered) == {b["tool_use_id"] for b in results}
    failed = [b["tool_use_id"] for b in results if b.get("is_error") is True]
    assert failed and all(answered[i]["metadata"]["is_error"] is True for i in failed)
    metadata = data["metadata"]
    assert metadata["counts"] == {"tool_calls": 243, "tool_results": 243, "subagents": 2}
    assert metadata["weak_signals"]["tool_errors"] == len(failed)
    assert metadata["compaction_helpers_left_out"] == 1
    assert metadata["records_left_out"]["progress"] > 1000  # progress lines are no turns


def test_sub_agent_turns_follow_the_call_that_started_them(project: Path) -> None:
    turns = only(runs_of(project)).data["turns"]
    spawns = [
        (index, call)
        for index, turn in enumerate(turns)
        for call in turn.get("tool_calls") or []
        if call["name"] == "Task"
    ]
    assert len(spawns) == 2
    for index, call in spawns:
        following = turns[index + 1]
        marked = following["metadata"]["subagent"]
        assert marked["call"] == call["id"] and marked["type"] == call["arguments"].get(
            "subagent_type"
        )
        assert following["content"] == call["arguments"]["prompt"]  # the sub-agent's task
    # `actions` marks them: sub:user, sub:assistant.
    from wikitrace.corpus_schema.turns import summarize

    index, _ = spawns[0]
    assert summarize(turns[index + 1])[0] == "sub:user"
    assert summarize(turns[index])[0] == "assistant"
    main = [t for t in turns if "subagent" not in t.get("metadata", {})]
    assert all(t["role"] in ("user", "assistant", "system", "tool") for t in main)


def test_one_response_split_over_records_is_one_turn(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    base = {"sessionId": "s1", "isSidechain": False, "cwd": "/w"}
    lines = [
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": "Fix the failing test in test_api.py"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "Two files to read."}],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "a1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file": "a.py"}}
                ],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a3",
            "parentUuid": "a2",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file": "b.py"}}
                ],
            },
        },
        # Parallel results: the first hangs off a2, off the chain from the last record.
        {
            **base,
            "type": "user",
            "uuid": "r1",
            "parentUuid": "a2",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A = 1"}],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "r2",
            "parentUuid": "a3",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t2",
                        "content": "boom",
                        "is_error": True,
                    }
                ],
            },
        },
        # A rewound prompt: the user went back and asked again from r2.
        {
            **base,
            "type": "user",
            "uuid": "x1",
            "parentUuid": "r2",
            "message": {"role": "user", "content": "no, delete the test instead"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "x2",
            "parentUuid": "x1",
            "message": {
                "id": "m9",
                "role": "assistant",
                "content": [{"type": "text", "text": "Deleting it."}],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u2",
            "parentUuid": "r2",
            "message": {"role": "user", "content": "now run the tests"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a4",
            "parentUuid": "u2",
            "message": {
                "id": "m2",
                "role": "assistant",
                "content": [{"type": "text", "text": "All 12 tests pass."}],
            },
        },
    ]
    session.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    data = only(runs_of(session)).data
    roles = [t["role"] for t in data["turns"]]
    assert roles == ["user", "assistant", "user", "assistant"]
    response = data["turns"][1]
    assert response["reasoning"] == "Two files to read."
    assert [c["result"] for c in response["tool_calls"]] == ["A = 1", "boom"]
    assert response["tool_calls"][1]["metadata"]["is_error"] is True
    assert "delete the test" not in json.dumps(data["turns"])
    assert data["metadata"]["rewound_records_dropped"] == 2
    assert data["task"] == "Fix the failing test in test_api.py"


def test_older_sessions_with_inline_sidechains_and_the_subagents_layout() -> None:
    showcase = only(runs_of(SESSIONS / "claude-code/minimal_showcase"))
    turns = showcase.data["turns"]
    marked = [t for t in turns if "subagent" in t.get("metadata", {})]
    assert {t["metadata"]["subagent"]["id"] for t in marked} == {"showcol1", "showcol2"}
    assert all(t["metadata"]["subagent"]["call"] for t in marked)  # linked by .meta.json
    # A log with no prompt the user typed (an excerpt) holds no run: left out, with why.
    plan = plan_inputs([SESSIONS / "claude-code/sidechain_integrated.jsonl"])
    assert list(plan.items()) == []
    ((path, why),) = plan.left_out.items()
    assert path.endswith("sidechain_integrated.jsonl") and "no prompt the user typed" in why


def test_damaged_lines_are_left_out_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    item = only(runs_of(SESSIONS / "claude-code/edge_cases.jsonl"))
    assert isinstance(item, Unlabelled)
    assert item.data["metadata"]["damaged_lines_left_out"] == [13, 15, 16]


# --- Codex ------------------------------------------------------------------------------------


def test_a_codex_rollout() -> None:
    item = only(runs_of(SESSIONS / "codex/codex_session.jsonl"))
    assert item.format == "codex"
    data = item.data
    assert data["task"] == (
        "add myapp directory and create myapp/hoge.py which shows result of print(1+1)."
    )
    calls = calls_of(data["turns"])
    assert [c["name"] for c in calls] == ["shell_command", "apply_patch"] + ["shell_command"] * 3
    assert all("result" in c for c in calls)
    failed = [c for c in calls if c.get("metadata", {}).get("is_error")]
    assert len(failed) == 2 and all(c["result"].startswith("Exit code: 1") for c in failed)
    assert data["metadata"]["weak_signals"] == {"tool_errors": 2}
    said = [t["content"] for t in data["turns"] if t["role"] == "assistant" and t["content"]]
    assert len(said) == len(set(said)) == 2  # agent_message events mirror items: once each
    injected = [t for t in data["turns"] if t.get("metadata", {}).get("injected")]
    assert injected and injected[0]["content"].startswith("<environment_context>")
    users = [t["content"] for t in data["turns"] if t["role"] == "user"]
    assert users.count(data["task"]) == 1


def test_a_codex_sub_agent_is_a_linked_run() -> None:
    items = runs_of(SESSIONS / "codex/sessions")
    by_id = {item.run_id: item for item in items}
    child = by_id["33333333-3333-4333-8333-333333333333"].data
    assert child["metadata"]["parent_session"] == "22222222-2222-4222-8222-222222222222"
    assert child["task"] == "Inspect fixtures."  # not the parent's message it copied
    inherited = [t for t in child["turns"] if t.get("metadata", {}).get("inherited")]
    assert inherited and inherited[0]["content"] == "Spawn a synthetic researcher."


# --- Gemini CLI -------------------------------------------------------------------------------


def test_a_gemini_cli_session_in_json_lines() -> None:
    item = only(runs_of(SESSIONS / "gemini-cli/gemini.jsonl"))
    assert item.format == "gemini-cli"
    data = item.data
    assert data["task"] == "/init"  # what the user typed; the expanded prompt is turn 2
    lines = (SESSIONS / "gemini-cli/gemini.jsonl").read_text().splitlines()
    source = [json.loads(line) for line in lines]
    last = {r["id"]: r for r in source if "id" in r}  # a message written again: last wins
    expected = [c["id"] for r in last.values() for c in r.get("toolCalls") or []]
    calls = calls_of(data["turns"])
    assert [c["id"] for c in calls] == expected and len(calls) == 12
    assert all(isinstance(c["result"], str) and c["result"] for c in calls)


def test_what_gemini_cli_s_hooks_added_to_a_message_is_not_what_the_user_typed() -> None:
    """Gemini CLI 0.61 writes each hook's additionalContext into the user's message (a
    session start's before it, a prompt's after it, even in displayContent): a session
    captured after wikitrace recalled into it keeps the task the user typed."""
    data = only(runs_of(SESSIONS / "gemini-cli/hook-context.jsonl")).data
    assert data["task"] == "Fix the failing test in the parser module"
    user = next(t for t in data["turns"] if t["role"] == "user")
    assert user["content"] == "Fix the failing test in the parser module"
    assert user["metadata"]["hook_context"] == [
        "<hook_context>MARKER-SessionStart-CONTEXT</hook_context>",
        "<hook_context>MARKER-BeforeAgent-CONTEXT</hook_context>",
    ]


def test_gemini_rewinds_drop_the_messages_after_them(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    records = [
        {"sessionId": "g1", "projectHash": "p", "startTime": "t", "kind": "main"},
        {"id": "1", "type": "user", "content": [{"text": "rename the module"}]},
        {"id": "2", "type": "gemini", "content": "Renamed it to core."},
        {"id": "3", "type": "user", "content": [{"text": "no, call it engine"}]},
        {"id": "4", "type": "gemini", "content": "Renamed it to engine."},
        {"$rewindTo": "3"},
        {"id": "5", "type": "user", "content": [{"text": "and update the imports"}]},
    ]
    chat.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    data = only(runs_of(chat)).data
    assert [t["content"] for t in data["turns"]] == [
        "rename the module",
        "Renamed it to core.",
        "and update the imports",
    ]
    assert data["metadata"]["rewound_messages_dropped"] == 2


def test_gemini_single_json_files_old_and_new() -> None:
    assert only(runs_of(SESSIONS / "gemini-cli/small.json")).data["task"] == "Hello"
    drift = only(runs_of(SESSIONS / "gemini-cli/schema_drift.json")).data
    assert drift["task"] == "Describe this image:"
    assert drift["turns"][0]["metadata"]["parts"][0]["inlineData"]["mimeType"] == "image/png"


# --- Langfuse and OpenTelemetry ---------------------------------------------------------------


def test_a_langfuse_export() -> None:
    path = SESSIONS / "langfuse/openai-agents-2025-09-30.trace.json"
    item = only(runs_of(path))
    assert isinstance(item, Unlabelled) and item.format == "langfuse"  # toxicity is no label
    data = item.data
    assert data["task"] == "What's the weather in Tokyo?"
    (call,) = calls_of(data["turns"])
    assert call["name"] == "get_weather" and call["result"] == "The weather in Tokyo is sunny."
    assert data["turns"][-1]["content"].startswith("The weather in Tokyo is currently sunny")


def test_a_langfuse_success_score_labels_the_run(tmp_path: Path) -> None:
    export = json.loads((SESSIONS / "langfuse/openai-agents-2025-09-30.trace.json").read_text())
    export["trace"]["scores"].append({"name": "success", "value": 0, "dataType": "NUMERIC"})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(export))
    item = only(runs_of(path))
    assert isinstance(item, SourceRun) and item.record.success is False
    assert item.data["metadata"]["label_score"] == "success"


def test_opentelemetry_sdk_json_spans() -> None:
    item = only(runs_of(SESSIONS / "otel-genai/OPENAI_trace.json"))
    assert item.format == "otel-genai"
    data = item.data
    assert data["task"].startswith("Find what year it is in the America/New_York timezone")
    calls = calls_of(data["turns"])
    assert [c["name"] for c in calls] == ["get_current_time", "write_file"]
    assert '"timezone": "America/New_York"' in calls[0]["result"]
    # 128-bit trace ids, read exactly (orjson would round them to a float)
    assert data["metadata"]["trace_id"] == "100927429609276267646756448943279827607"


def test_otlp_json_with_an_error_span(tmp_path: Path) -> None:
    def attrs(**values: Any) -> list[dict[str, Any]]:
        return [
            {"key": k.replace("__", "."), "value": {"stringValue": v}} for k, v in values.items()
        ]

    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Book a room"}]}])
    reply = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "book", "arguments": {}}],
            }
        ]
    )
    spans = [
        {
            "traceId": "ab12",
            "spanId": "1",
            "name": "chat m",
            "startTimeUnixNano": "1",
            "attributes": attrs(
                gen_ai__operation__name="chat",
                gen_ai__input__messages=messages,
                gen_ai__output__messages=reply,
            ),
        },
        {
            "traceId": "ab12",
            "spanId": "2",
            "name": "execute_tool book",
            "startTimeUnixNano": "2",
            "status": {"code": 2, "message": "no rooms left"},
            "attributes": attrs(
                gen_ai__operation__name="execute_tool",
                gen_ai__tool__name="book",
                gen_ai__tool__call__id="c1",
                gen_ai__tool__call__result="sold out",
            ),
        },
    ]
    path = tmp_path / "otlp.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    data = only(runs_of(path)).data
    assert data["task"] == "Book a room"
    (call,) = calls_of(data["turns"])
    assert call["result"] == "sold out" and call["metadata"]["is_error"] is True
    assert data["metadata"]["weak_signals"]["tool_errors"] == 1


def test_labels_name_a_session_by_its_id_or_file_name(tmp_path: Path) -> None:
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"codex_session.jsonl": True, "OPENAI_trace": False}))
    items = runs_of(
        SESSIONS / "codex/codex_session.jsonl",
        SESSIONS / "otel-genai/OPENAI_trace.json",
        labels=[labels],
    )
    assert [(i.format, i.record.success) for i in items] == [
        ("codex", True),
        ("otel-genai", False),
    ]


# --- --judge ----------------------------------------------------------------------------------


def test_the_judge_labels_sessions_and_every_page_says_so(tmp_path: Path) -> None:
    judge = FakeLLM(answer=lambda m: judge_answer(m[0]["content"]), model="fake/judge")
    options = BuildOptions(
        inputs=[SESSIONS / "codex/codex_session.jsonl", SESSIONS / "gemini-cli/small.json"],
        output=tmp_path / "corpus",
        judge="fake/judge",
        cache_dir=tmp_path / "cache",
    )
    report = build_corpus(options, judge_llm=judge)
    assert report.runs == 2 and report.judged == 2 and len(judge.calls) == 2  # one call a run
    corpus = tmp_path / "corpus"
    assert verify(corpus).ok
    page = frontmatter.load(corpus / "raw/step-0001/metadata.md")
    verdict = page["metadata"]["judge"]
    assert page["metadata"]["outcome_source"] == "judged" and verdict["model"] == "fake/judge"
    assert verdict["reason"] and all(q["verified"] for q in verdict["evidence"])
    assert "(success (judged by a model))" in page.content
    for index in ("raw/_index.md", "compilation/_index.md"):
        assert "success (judged by a model)" in (corpus / index).read_text()
    assert "judged by a model" in (corpus / "compilation/step-0001.md").read_text()
    code, first, _ = run(["prompt", str(corpus), "add a script that prints 2"])
    assert code == 0 and "judged by a model" in first
    # The same build again: every verdict from the cache.
    again = FakeLLM(answer=judge.answer, model="fake/judge")
    build_corpus(
        BuildOptions(**{**options.__dict__, "output": tmp_path / "again"}), judge_llm=again
    )
    assert again.calls == []


def test_a_verdict_whose_quotes_are_not_in_the_log_labels_nothing(tmp_path: Path) -> None:
    judge = FakeLLM(
        answer=lambda m: judge_answer(m[0]["content"], wrong_quote=True), model="fake/judge"
    )
    options = BuildOptions(
        inputs=[SESSIONS / "codex/codex_session.jsonl"],
        output=tmp_path / "corpus",
        judge="fake/judge",
        use_cache=False,
    )
    with pytest.raises(InputError, match="none of the 1 runs found has a label") as refused:
        build_corpus(options, judge_llm=judge)
    assert "the judge's quotes were not found in the log" in str(refused.value)
    assert len(judge.calls) == 2  # asked, then told once, as a compilation is, what was not found
    repair = judge.calls[-1][-1]["content"]
    assert repair.startswith("These quotes could not be used:\n\n- turn ")
    assert "this sentence appears in no turn at all" in repair and "most like it" in repair


@pytest.mark.integration
def test_judge_through_litellm_against_the_local_stub(tmp_path: Path, openai_stub: Any) -> None:
    code, _, err = run(
        [
            "build",
            str(SESSIONS / "gemini-cli/small.json"),
            "-o",
            str(tmp_path / "corpus"),
            "--judge",
            "openai/judge-model",
            "--api-base",
            openai_stub.url,
        ],
        env={"WIKITRACE_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert code == 0, err
    assert [r["model"] for r in openai_stub.requests] == ["judge-model"]
    assert openai_stub.requests[0]["messages"][0]["content"].startswith("You are judging")
    assert "1 run labelled by the judge model" in err
    # The judge's call is counted, with the tokens the server reported (offline compilation).
    assert "model offline and the judge model: 1 LLM calls, 0 from cache, 50 prompt + 10" in err
    assert "its 1 LLM call (0 from cache), 50 prompt + 10 completion tokens" in err
    turns = read_jsonl(tmp_path / "corpus/raw/step-0001/solver.full.jsonl")
    assert turns[0]["content"] == "Hello"


def test_the_offline_compilation_quotes_calls_the_log_marks_failed(tmp_path: Path) -> None:
    labels = tmp_path / "labels.json"
    labels.write_text('{"codex_session.jsonl": false}\n')  # one line, ending with a newline
    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(
            inputs=[SESSIONS / "codex/codex_session.jsonl"], output=corpus, labels=[labels]
        )
    )
    page = frontmatter.load(corpus / "compilation/step-0001.md").content
    # The two failed calls, quoted from their turns: the line that says what failed (not
    # "Exit code: 1"), and the command that ran.
    assert page.count("error: target shim binary not found") == 2
    header = read.read_page(corpus, "compilation/step-0001.md", CompilationHeader).header
    quotes = [[e.quote for e in claim.evidence] for claim in header.claims[:2]]
    assert [q[1][:26] for q in quotes] == ['"command":"python hoge.py"'] * 2
    assert "The log's own signals (not its label): tool errors 2." in page


def test_sub_agent_files_and_harbor_sessions_are_read_once(project: Path, tmp_path: Path) -> None:
    plan = plan_inputs([project])
    reasons = [i["reason"] for i in plan.ignored]
    assert sum("sub-agent, read with the session" in r for r in reasons) == 3
    given = next((project / SPOTTER / "subagents").glob("agent-a*.jsonl"))
    with pytest.raises(InputError, match="a sub-agent, read with the session that spawned it"):
        plan_inputs([given])
    # Harbor keeps the agent's Claude Code session beside the trial's ATIF trajectory.
    agent = tmp_path / "trial/agent"
    session = agent / "sessions/projects/-workspace/s.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes((SESSIONS / "claude-code/edge_cases.jsonl").read_bytes())
    (agent / "trajectory.json").write_text("{}")
    assert read_with(session) == (
        "the agent's session in a Harbor trial, read as the trial's ATIF trajectory"
    )
    assert read_with(SESSIONS / "claude-code/edge_cases.jsonl") is None


def test_the_first_message_abstains_when_sessions_and_typed_runs_split(tmp_path: Path) -> None:
    """Untyped runs (sessions) among a task's nearest runs vote against inferring a type that
    would leave them out: the 2 sessions are the runs near enough to vote (the swe-bench and
    browser runs share a stray word or two, under task_scope.VOTE_SCORE), and the message
    abstains rather than show one domain's runs for another's task."""
    from wikitrace.tools.memory import Memory

    from helpers import make_run, write_runs

    def task(task_id: str, task_type: str | None, text: str) -> dict[str, Any]:
        return make_run(task_id, task=text, task_type=task_type)

    runs = [
        task("s1", None, "Work on bead spotter-4te: run bd show spotter-4te for the issue"),
        task("s2", None, "Work on bead spotter-a0y: run bd show spotter-a0y for the issue"),
        task("w1", "swe-bench", "Fix the issue: show the bead count in the summary"),
        task("w2", "swe-bench", "Fix the issue: bd command output is wrong"),
        task("b1", "browser", "Open the page and show the issue tracker"),
    ]
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[write_runs(tmp_path / "r.jsonl", runs)], output=corpus))
    message = Memory.load(corpus).first_message(
        "Work on bead spotter-b12: run bd show spotter-b12 for the issue"
    )
    assert message.task_type is None and not message.task_type_inferred
    assert message.type_unsure == {"untyped": 2}
    assert message.similar == [] and message.insights == []


def test_actions_keeps_its_columns_with_sub_agent_roles(tmp_path: Path) -> None:
    from wikitrace.corpus_schema.drilldown import actions_text

    labels = tmp_path / "labels.json"
    labels.write_text('{"55550000-0000-4000-8000-000000000001": true}')
    corpus = tmp_path / "corpus"
    inputs = [SESSIONS / "claude-code/minimal_showcase"]
    build_corpus(BuildOptions(inputs=inputs, output=corpus, labels=[labels]))
    lines = actions_text(str(corpus.resolve()), "1").splitlines()[1:]
    assert any(" sub:assistant " in line for line in lines)
    # The action column starts at the same place on every line.
    starts = {re.match(r"\s*\d+  \S+\s+", line).end() for line in lines}  # type: ignore[union-attr]
    assert len(starts) == 1, lines


SIDECHAIN = SESSIONS / "claude-code/sidechain_integrated.jsonl"
SESSION_ID = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"


def _two_oh_project(folder: Path, *, warmup_session: str = SESSION_ID) -> Path:
    """A Claude Code 2.0.x project folder made from the real 2.0.46 records of
    sidechain_integrated.jsonl: its main records as the session `<sessionId>.jsonl` (with the
    prompt the excerpt lacks, and the agentId 2.0.46 puts in the Task result's
    toolUseResult), its sidechain records as `agent-e1c84ba5.jsonl` beside it, as 2.0.x
    writes a sub-agent with an agentId, and a warm-up call's file."""
    folder.mkdir(parents=True)
    records = [json.loads(line) for line in SIDECHAIN.read_text().splitlines()]
    main = [r for r in records if not r["isSidechain"]]
    side = [r for r in records if r["isSidechain"]]
    prompt = {
        **{k: main[0][k] for k in ("sessionId", "cwd", "version", "userType")},
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "uuid": main[0]["parentUuid"],
        "message": {"role": "user", "content": "Find where data-border-color is used"},
    }
    main[1]["toolUseResult"] = {"status": "completed", "agentId": "e1c84ba5"}
    for record in side:
        record["agentId"] = "e1c84ba5"
    warm = {
        **{k: prompt[k] for k in ("cwd", "version", "userType")},
        "sessionId": warmup_session,
        "agentId": "9b0c4d21",
        "isSidechain": True,
        "parentUuid": None,
        "uuid": "5d2c8a0e-0000-4000-8000-000000000001",
        "type": "user",
        "message": {"role": "user", "content": "Warmup"},
    }
    answer = {**warm, "type": "assistant", "uuid": "5d2c8a0e-0000-4000-8000-000000000002"}
    answer["parentUuid"] = warm["uuid"]
    answer["message"] = {"role": "assistant", "content": [{"type": "text", "text": "Ready."}]}

    def write(name: str, rows: list[dict[str, Any]]) -> None:
        (folder / name).write_text("".join(json.dumps(row) + "\n" for row in rows))

    write(f"{SESSION_ID}.jsonl", [prompt, *main])
    write("agent-e1c84ba5.jsonl", side)
    write("agent-9b0c4d21.jsonl", [warm, answer])
    write("excerpt.jsonl", records)  # a side file: no prompt the user typed
    return folder


def test_claude_code_2_0_sub_agents_beside_the_session_are_joined(tmp_path: Path) -> None:
    folder = _two_oh_project(tmp_path / "-workspace")
    plan = plan_inputs([folder])
    item = only(list(plan.items()))
    assert isinstance(item, Unlabelled)
    turns = item.data["turns"]
    calls = calls_of(turns)
    # Every tool_use block of the session and of its sub-agent file is a call.
    source = [
        b
        for name in (f"{SESSION_ID}.jsonl", "agent-e1c84ba5.jsonl")
        for b in _source_blocks(folder / name, "tool_use")
    ]
    assert [c["name"] for c in calls] == [b["name"] for b in source] == ["Task", "Grep"]
    task_turn = next(i for i, t in enumerate(turns) if calls_of([t])[:1] == calls[:1])
    marked = [t for t in turns if "subagent" in t.get("metadata", {})]
    assert marked and turns[task_turn + 1] is marked[0]  # right after the call that started it
    assert {t["metadata"]["subagent"]["call"] for t in marked} == {calls[0]["id"]}
    metadata = item.data["metadata"]
    assert metadata["counts"]["subagents"] == 1 and metadata["warmup_agents_left_out"] == 1
    reasons = {Path(i["path"]).name: i["reason"] for i in plan.ignored}
    assert reasons["agent-e1c84ba5.jsonl"].endswith("read with the session that spawned it")
    assert reasons["agent-9b0c4d21.jsonl"].endswith("read with the session that spawned it")
    assert "no prompt the user typed" in plan.left_out[str(folder / "excerpt.jsonl")]


def test_a_warm_up_file_whose_session_is_elsewhere_is_left_out(tmp_path: Path) -> None:
    folder = _two_oh_project(tmp_path / "p", warmup_session="00000000-gone")
    plan = plan_inputs([folder / "agent-9b0c4d21.jsonl"])
    assert list(plan.items()) == []
    assert "warm-up call" in plan.left_out[str(folder / "agent-9b0c4d21.jsonl")]


def test_a_projects_folder_with_side_files_builds_and_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    folder = _two_oh_project(tmp_path / "projects/-workspace", warmup_session="elsewhere")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({SESSION_ID: True}))
    corpus = tmp_path / "corpus"
    command = ["build", str(tmp_path / "projects"), "-o", str(corpus), "--labels", str(labels)]
    code, out, err = run(command)
    assert code == 0, err
    assert out.strip() == str(corpus)
    assert f"left out {folder / 'excerpt.jsonl'}: a Claude Code file with no prompt" in err
    assert f"left out {folder / 'agent-9b0c4d21.jsonl'}: a Claude Code warm-up call" in err
    assert [p.name for p in sorted((corpus / "raw").glob("step-*"))] == ["step-0001"]
    # Given alone, nothing but side files: the error says what was read and why.
    code, _, err = run(["build", str(folder / "excerpt.jsonl"), "-o", str(tmp_path / "c2")])
    assert code == 2 and "hold no run" in err and "no prompt the user typed" in err


def test_the_whole_gemini_tmp_folder_reads_each_session_once(tmp_path: Path) -> None:
    """~/.gemini/tmp/<project>/: chats/ (a real session), beside the client's copies of it
    (a /chat save checkpoint: a list of Content; a restore checkpoint) and its prompt log,
    shaped as Gemini CLI writes them."""
    project = tmp_path / "tmp/4f1c0e"
    (project / "chats").mkdir(parents=True)
    (project / "checkpoints").mkdir()
    session = project / "chats/session-2026-01-16T18-34-3739ef95.json"
    session.write_bytes((SESSIONS / "gemini-cli/small.json").read_bytes())
    saved = [
        {"role": "user", "parts": [{"text": "fix the failing test"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command"}}]},
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "run_shell_command",
                        "response": {"output": "1 failed"},
                    }
                }
            ],
        },
    ]
    (project / "checkpoint-before-fix.json").write_text(json.dumps(saved))
    restore = {"history": saved, "clientHistory": [], "toolCall": {"name": "replace"}}
    (project / "checkpoints/2026-01-16T18-40-00_000Z-app.py-replace.json").write_text(
        json.dumps(restore)
    )
    (project / "logs.json").write_text(
        json.dumps([{"sessionId": "s", "messageId": 0, "type": "user", "message": "hi"}])
    )
    plan = plan_inputs([tmp_path / "tmp"])
    item = only(list(plan.items()))
    assert isinstance(item, Unlabelled) and item.path == str(session)
    reasons = {Path(i["path"]).name: i["reason"] for i in plan.ignored}
    assert "a copy of a session read from chats/" in reasons["checkpoint-before-fix.json"]
    assert len(reasons) == 3  # the saved chat, the restore checkpoint, the prompt log
    # A saved chat read on its own (outside a project folder) is a run.
    alone = tmp_path / "saved.json"
    alone.write_text(json.dumps(saved))
    run_ = only(runs_of(alone))
    assert isinstance(run_, Unlabelled) and run_.data["task"] == "fix the failing test"
    assert [(c["name"], c["result"]) for c in calls_of(run_.data["turns"])] == [
        ("run_shell_command", "1 failed")  # the response joined its call
    ]
    assert [t["role"] for t in run_.data["turns"]] == ["user", "assistant"]


def test_prompts_and_corpus_do_not_depend_on_how_the_input_was_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same session folder given relative and as an absolute path with '..' in it: the
    model is asked the same (so its cached replies serve both), and no file of either corpus
    holds the builder's absolute paths (a corpus is mounted on other machines)."""
    import shutil

    work = tmp_path / "work"
    shutil.copytree(SESSIONS / "claude-code/minimal_showcase", work / "showcase")
    (work / "labels.json").write_text('{"55550000-0000-4000-8000-000000000001": true}')
    monkeypatch.chdir(work)
    prompts = []
    for number, given in enumerate([Path("showcase"), work / "showcase/../showcase"]):
        llm = FakeLLM()
        options = BuildOptions(
            inputs=[given],
            output=work / f"corpus{number}",
            model=llm.model,
            labels=[Path("labels.json") if number == 0 else work / "labels.json"],
            use_cache=False,
        )
        build_corpus(options, llm=llm)
        prompts.append([call[0]["content"] for call in llm.calls])
    assert prompts[0] == prompts[1] and len(prompts[0]) == 1
    for number in (0, 1):
        for file in (work / f"corpus{number}.versions").rglob("*"):
            if file.is_file():
                assert str(tmp_path) not in file.read_text(errors="replace"), file
    metadata = (work / "corpus1/raw/step-0001/metadata.md").read_text()
    assert "source: showcase/55550000-0000-4000-8000-000000000001.jsonl" in metadata
