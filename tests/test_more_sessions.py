"""More session formats (aider's chat history, OpenHands event lists, OpenCode's storage), each
read from a real excerpt: detected from content, one run per session with no label, and every
tool call kept with its output, counted against the source files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.aider import command
from wikitrace.compiler.importers.runs import Unlabelled
from wikitrace.corpus_schema import InputError

from helpers import DATA

SESSIONS = DATA / "sessions"
AIDER = SESSIONS / "aider/aider-project"
OPENHANDS = SESSIONS / "openhands-events"
STORAGE = SESSIONS / "opencode/storage"
OPENCODE_SESSION = "ses_3b1180a94ffefQl1IYkVWDHHoL"
OPENCODE_PROJECT = "c387ae0c45859f241b82f03beba884dfed805718"


def runs_of(*paths: Path) -> list[Any]:
    return list(plan_inputs(list(paths)).items())


def calls_of(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for turn in turns for call in turn.get("tool_calls") or []]


def detected(path: Path, tmp_path: Path) -> str:
    renamed = tmp_path / "log.data"  # no telling name
    renamed.write_bytes(path.read_bytes())
    (item,) = plan_inputs([renamed]).files
    return item.format


# --- aider ------------------------------------------------------------------------------------


def test_an_aider_history_is_one_run_per_session_with_every_command(tmp_path: Path) -> None:
    history = AIDER / ".aider.chat.history.md"
    lines = history.read_text().splitlines()
    # Counted in the source: sessions, prompts that run a command, and commands answered by
    # aider's `> ` output on the next line.
    assert sum(line.startswith("# aider chat started at") for line in lines) == 3
    commands = [n for n, line in enumerate(lines) if line.startswith("#### /")]
    answered = [n for n in commands if lines[n + 1].startswith("> ")]
    assert (len(commands), len(answered)) == (5, 3)

    items = runs_of(AIDER)  # the project's folder: the hidden history is found in it
    assert [type(i) for i in items] == [Unlabelled, Unlabelled]  # the third session has no prompt
    assert {i.format for i in items} == {"aider"}
    first, second = (i.data for i in items)
    assert [i.run_id for i in items] == [
        "aider-project@2024-08-20 10:55:58",
        "aider-project@2024-08-20 10:57:25",
    ]
    assert first["task"] == "add a test that confirms `return_coder` causes a Coder to be returned"
    calls = calls_of(first["turns"]) + calls_of(second["turns"])
    assert len(calls) == len(commands)
    assert [c["name"] for c in calls] == ["undo", "undo", "exit", "run", "exit"]
    assert sum("result" in c for c in calls) == len(answered)
    assert calls[0]["result"].startswith("Removed: 654280e style: Fix linter issues")
    # A `> ` message written with line breaks keeps them, blank lines included, up to its end.
    run = calls[3]
    assert run["arguments"] == "pytest tests/basic/test_main.py::TestMain::test_return_coder"
    assert "collected 1 item\n\ntests/basic/test_main.py ." in run["result"]
    assert run["result"].endswith("Add the output to the chat?\n(Y/n/instructions) n")
    assert first["metadata"]["counts"] == {"commands": 3, "command_outputs": 2}
    assert first["metadata"]["session"] == {
        "started": "2024-08-20 10:55:58",
        "aider_version": "v0.51.1-dev",
        "model": "claude-3-5-sonnet-20240620",
        "line": 1,
    }
    # The reply keeps its SEARCH/REPLACE blocks; what aider did after it is its observation.
    reply = first["turns"][2]
    assert reply["role"] == "assistant" and ">>>>>>> REPLACE" in reply["content"]
    assert reply["observation"].startswith("Tokens: 7.4k sent, 509 received.\nCost: $0.03")
    assert "Applied edit to tests/basic/test_main.py" in reply["observation"]
    assert first["turns"][0]["role"] == "system"  # the start-up banner
    assert [t["role"] for t in second["turns"]].count("user") == 4  # 2 prompts, 2 commands
    assert detected(history, tmp_path) == "aider"


def test_aider_headings_in_replies_commands_and_a_history_with_no_prompt(tmp_path: Path) -> None:
    history = tmp_path / "app" / ".aider.chat.history.md"
    history.parent.mkdir()
    history.write_text(
        "\n# aider chat started at 2025-01-02 03:04:05\n\n"
        "> Aider v0.80.0  \n\n"
        "#### /tok  \n"
        "> 1.2k tokens total  \n\n"
        "#### /ask why does the build fail?  \n"
        "#### it worked yesterday  \n\n"
        "The linker cannot find `libfoo`.\n\n"
        "#### Why\n\n"
        "It moved.\n\n"
    )
    (item,) = runs_of(history)
    turns = item.data["turns"]
    assert item.data["task"] == "/ask why does the build fail?\nit worked yesterday"
    assert calls_of(turns) == [
        {"id": None, "name": "tokens", "arguments": None, "result": "1.2k tokens total"}
    ]
    # A heading inside a reply has no line break mark after it: it stays in the reply.
    assert turns[-1]["content"] == "The linker cannot find `libfoo`.\n\n#### Why\n\nIt moved."
    assert command("!ls -la") == ("run", "ls -la")
    assert command("/a x") == ("a", "x")  # ambiguous (add, architect, ask): as typed
    assert command("fix it") is None

    empty = tmp_path / "idle" / ".aider.chat.history.md"
    empty.parent.mkdir()
    empty.write_text("\n# aider chat started at 2025-01-02 03:04:05\n\n> Aider v0.80.0  \n")
    plan = plan_inputs([tmp_path / "idle"])
    assert list(plan.items()) == []
    assert plan.left_out == {str(empty): "aider chat history with no prompt in its 1 sessions"}


# --- OpenHands event lists --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["wrong_initial_state.json", "basic_gui_mode.json"])
def test_an_openhands_event_list_is_one_run_with_every_call_paired(
    name: str, tmp_path: Path
) -> None:
    path = OPENHANDS / name
    events = json.loads(path.read_text())
    called = [e for e in events if "action" in e and "tool_call_metadata" in e]
    answers = {e["cause"]: e for e in events if "observation" in e and e.get("cause") is not None}
    (item,) = runs_of(path)
    assert isinstance(item, Unlabelled) and item.format == "openhands-events"
    assert item.run_id == name.removesuffix(".json")
    data = item.data
    assert data["task"] == next(e["message"] for e in events if e["source"] == "user")
    turns = [t for t in data["turns"] if "tool_call_metadata" in t["metadata"].get("event", {})]
    assert [t["metadata"]["event"]["id"] for t in turns] == [e["id"] for e in called]
    for turn in turns:
        answer = answers.get(turn["metadata"]["event"]["id"])
        if answer is None:  # finish: no observation
            assert "observation" not in turn
            continue
        assert turn["metadata"]["observation_event"]["id"] == answer["id"]
        assert turn["observation"] == answer["content"]
        calls = {
            m["tool_call_metadata"]["tool_call_id"] for m in (answer, turn["metadata"]["event"])
        }
        assert len(calls) == 1  # the observation answers this very tool call
    counts = data["metadata"]["counts"]
    assert counts == {
        "tool_calls": len(called),
        "tool_results": sum(e["id"] in answers for e in called),
    }
    assert data["metadata"]["weak_signals"]["failed_commands"] == sum(
        e.get("observation") == "run" and e.get("success") is False for e in events
    )
    assert detected(path, tmp_path) == "openhands-events"


def test_a_change_of_the_agents_state_answers_no_action() -> None:
    (item,) = runs_of(OPENHANDS / "basic_gui_mode.json")
    user = next(t for t in item.data["turns"] if t["role"] == "user")
    assert "observation" not in user  # the state change after the message is a turn of its own
    states = [
        t
        for t in item.data["turns"]
        if t.get("metadata", {}).get("observation_event", {}).get("observation")
        == "agent_state_changed"
    ]
    assert len(states) == 4 and all("action" not in t for t in states)


def test_an_openhands_event_list_with_no_user_message_names_the_file(tmp_path: Path) -> None:
    events = json.loads((OPENHANDS / "wrong_initial_state.json").read_text())
    path = tmp_path / "trajectory-abc.json"
    path.write_text(json.dumps([e for e in events if e["source"] != "user"]))
    (error,) = runs_of(path)
    assert isinstance(error, InputError) and error.path == str(path)
    assert error.message == "no task: no message from the user among its events"


# --- OpenCode ---------------------------------------------------------------------------------


def _source(storage: Path, kind: str) -> list[dict[str, Any]]:
    """The storage's parts of one type, in the order of their message and part ids."""
    parts = [json.loads(p.read_text()) for p in sorted((storage / "part").glob("*/*.json"))]
    return [p for p in parts if p["type"] == kind]


def test_an_opencode_storage_folder_is_one_run_per_session_with_every_call() -> None:
    plan = plan_inputs([STORAGE])
    (item,) = list(plan.items())
    assert isinstance(item, Unlabelled) and item.format == "opencode"
    assert item.run_id == OPENCODE_SESSION
    data = item.data
    assert data["task"].startswith('"\\"<context>\\nYour current working repo is open62541')
    # Counted in the source: every tool part, with its output; a turn per model call.
    tools = _source(STORAGE, "tool")
    assert len(tools) == 5 and {t["state"]["status"] for t in tools} == {"completed"}
    calls = calls_of(data["turns"])
    assert [c["id"] for c in calls] == [t["callID"] for t in tools]
    assert [c["name"] for c in calls] == ["grep", "read", "grep", "read", "apply_patch"]
    assert [c["result"] for c in calls] == [t["state"]["output"] for t in tools]
    assert [c["arguments"] for c in calls] == [t["state"]["input"] for t in tools]
    assistant = [t for t in data["turns"] if t["role"] == "assistant"]
    assert len(assistant) == len(_source(STORAGE, "step-start")) == 6
    assert assistant[-1]["content"].startswith("Initialized the work queue")
    assert data["metadata"]["counts"] == {"messages": 7, "tool_calls": 5, "tool_results": 5}
    assert data["metadata"]["model"] == "openai/gpt-5.2-codex"
    assert data["metadata"]["session"]["share"] == {
        "id": "kVWDHHoL",
        "url": "https://opncd.ai/share/kVWDHHoL",
    }  # no secret
    # Messages, parts and the project file are no runs of their own.
    reasons = sorted(i["reason"] for i in plan.ignored)
    assert reasons.count("opencode-part: read with its trajectory") == 32
    assert reasons.count("not a known trajectory format") == 1  # project/<id>.json
    # A project's folder in the storage reads the same session.
    (again,) = runs_of(STORAGE / "session" / OPENCODE_PROJECT)
    assert again.data == data


def _storage_copy(tmp_path: Path) -> Path:
    storage = tmp_path / "storage"
    shutil.copytree(STORAGE, storage)
    return storage


def test_opencode_failed_and_unanswered_calls_and_sub_agent_sessions(tmp_path: Path) -> None:
    storage = _storage_copy(tmp_path)
    parts = sorted((storage / "part").glob("*/*.json"))
    tools = [p for p in parts if json.loads(p.read_text())["type"] == "tool"]
    failed, stopped = json.loads(tools[0].read_text()), json.loads(tools[1].read_text())
    failed["state"] = {**failed["state"], "status": "error", "error": "rg: not found"}
    stopped["state"] = {"status": "running", "input": stopped["state"]["input"], "time": {}}
    tools[0].write_text(json.dumps(failed))
    tools[1].write_text(json.dumps(stopped))
    session_file = storage / "session" / OPENCODE_PROJECT / f"{OPENCODE_SESSION}.json"
    session = json.loads(session_file.read_text())
    session_file.write_text(json.dumps({**session, "parentID": "ses_parent"}))
    (item,) = runs_of(storage)
    first, second = calls_of(item.data["turns"])[:2]
    assert first["result"] == "rg: not found" and first["metadata"]["is_error"] is True
    assert "result" not in second and second["metadata"]["status"] == "running"
    metadata = item.data["metadata"]
    assert metadata["weak_signals"] == {"tool_errors": 1, "calls_not_answered": 1}
    assert metadata["counts"] == {"messages": 7, "tool_calls": 5, "tool_results": 4}
    assert metadata["parent_session"] == "ses_parent"


def test_opencode_sessions_away_from_their_storage_or_with_no_message(tmp_path: Path) -> None:
    loose = tmp_path / f"{OPENCODE_SESSION}.json"
    shutil.copy(STORAGE / "session" / OPENCODE_PROJECT / f"{OPENCODE_SESSION}.json", loose)
    (error,) = runs_of(loose)
    assert isinstance(error, InputError) and error.path == str(loose)
    assert "away from its storage folder" in error.message
    assert error.hint is not None and "~/.local/share/opencode/storage" in error.hint

    storage = _storage_copy(tmp_path)
    shutil.rmtree(storage / "message" / OPENCODE_SESSION)
    plan = plan_inputs([storage])
    assert list(plan.items()) == []
    session_file = storage / "session" / OPENCODE_PROJECT / f"{OPENCODE_SESSION}.json"
    assert plan.left_out == {str(session_file): "an OpenCode session with no message"}


def test_a_damaged_opencode_part_is_left_out_and_named(tmp_path: Path) -> None:
    storage = _storage_copy(tmp_path)
    text = next(
        p for p in sorted((storage / "part").glob("*/*.json")) if "reasoning" in p.read_text()
    )
    text.write_text(text.read_text()[:40])  # cut off
    (item,) = runs_of(storage)
    assert item.data["metadata"]["damaged_files_left_out"] == [str(text.relative_to(storage))]
