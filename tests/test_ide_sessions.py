"""IDE chat sessions (GitHub Copilot chat in VS Code, Cursor): detected from content, one run a
session (or a Cursor composer), every tool call kept with its result, counted against the
source, and no label unless something gives one."""

from __future__ import annotations

import gzip
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled
from wikitrace.corpus_schema import InputError

from helpers import DATA

COPILOT = DATA / "sessions" / "copilot-chat"
CURSOR = DATA / "sessions" / "cursor"
COMPOSER = "59f64e5e-70e9-4892-a9e3-69d3d7f4b42d"


def runs_of(*paths: Path) -> list[Any]:
    return list(plan_inputs(list(paths)).items())


def only(items: list[Any]) -> Any:
    assert len(items) == 1, items
    return items[0]


def calls_of(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for turn in turns for call in turn.get("tool_calls") or []]


def _source_calls(value: Any) -> list[dict[str, Any]]:
    """Every model tool call (`toolCallRounds[].toolCalls[]`) anywhere in a logged value."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for round_ in value.get("toolCallRounds") or []:
            found += round_.get("toolCalls") or []
        for key, item in value.items():
            if key != "toolCallRounds":
                found += _source_calls(item)
    elif isinstance(value, list):
        for item in value:
            found += _source_calls(item)
    return found


def _source_outputs(value: Any) -> dict[str, Any]:
    """Every `toolCallResults` entry anywhere in a logged value, by call id."""
    found: dict[str, Any] = {}
    if isinstance(value, dict):
        found.update(value.get("toolCallResults") or {})
        for item in value.values():
            found.update(_source_outputs(item))
    elif isinstance(value, list):
        for item in value:
            found.update(_source_outputs(item))
    return found


# --- GitHub Copilot chat (VS Code) ----------------------------------------------------------


def test_a_copilot_session_is_one_run_with_every_model_call_and_its_output() -> None:
    path = COPILOT / "copilot_session_simple.json"
    source = json.loads(path.read_text())
    item = only(runs_of(path))
    assert isinstance(item, Unlabelled) and item.format == "copilot-chat"
    data = item.data
    assert item.run_id == source["sessionId"] == "331fed7f-cfd6-409c-8502-06a56322b636"
    assert data["task"] == source["requests"][0]["message"]["text"] == "What can you help me with?"
    users = [t["content"] for t in data["turns"] if t["role"] == "user"]
    assert users == [r["message"]["text"] for r in source["requests"]]
    expected = _source_calls(source)
    outputs = _source_outputs(source)
    assert len(expected) == 2 and len(outputs) == 2
    calls = calls_of(data["turns"])
    assert [(c["id"], c["name"]) for c in calls] == [(c["id"], c["name"]) for c in expected]
    assert [c["arguments"] for c in calls] == [json.loads(c["arguments"]) for c in expected]
    assert all("result" in c for c in calls) and {c["id"] for c in calls} == set(outputs)
    assert "console.log('Bonjour');" in calls[1]["result"]  # the rendered tool output, as text
    assert data["metadata"]["counts"] == {"requests": 3, "tool_calls": 2, "tool_results": 2}
    assert data["metadata"]["weak_signals"] == {}


def test_a_copilot_mutation_log_is_replayed_before_it_is_read() -> None:
    path = COPILOT / "copilot_session_multiline.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert records[0]["kind"] == 0 and {r["kind"] for r in records[1:]} == {1, 2}
    item = only(runs_of(path))
    assert item.format == "copilot-chat"
    assert item.run_id == records[0]["v"]["sessionId"]
    # The first request is in the snapshot, the second one appended to it.
    pushed = [
        r for rec in records if rec["kind"] == 2 and rec["k"] == ["requests"] for r in rec["v"]
    ]
    requests = records[0]["v"]["requests"] + pushed
    assert len(requests) == 2
    data = item.data
    assert data["task"] == requests[0]["message"]["text"]
    assert [t["content"] for t in data["turns"] if t["role"] == "user"] == [
        r["message"]["text"] for r in requests
    ]
    expected = _source_calls(records)
    calls = calls_of(data["turns"])
    assert len(calls) == len(expected) == 2
    assert [c["id"] for c in calls] == [c["id"] for c in expected]
    assert all(c["result"] for c in calls) and set(_source_outputs(records)) == {
        c["id"] for c in calls
    }
    assert calls[1]["result"].startswith("The following files were successfully edited:")


def test_a_mutation_log_that_is_its_snapshot_alone_is_read(tmp_path: Path) -> None:
    snapshot = (COPILOT / "copilot_session_multiline.jsonl").read_text().splitlines()[0]
    path = tmp_path / "7de89a80.jsonl"
    path.write_text(snapshot)  # no line end: one JSON document
    item = only(runs_of(path))
    assert item.format == "copilot-chat" and item.run_id == json.loads(snapshot)["v"]["sessionId"]
    assert item.data["task"] == "Add a joke about 7sadfh32u23gdaWF to jokes.csv"


def test_mutation_log_sets_appends_cuts_and_deletes(tmp_path: Path) -> None:
    request = {"requestId": "r1", "message": {"text": "rename the module"}, "response": []}
    log = [
        {"kind": 0, "v": {"version": 3, "sessionId": "s1", "requests": []}},
        {"kind": 2, "k": ["requests"], "v": [request]},
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Renaming it to core."}]},
        # Cut to 0 items, then append: the answer was rewritten.
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Renamed."}], "i": 0},
        {"kind": 1, "k": ["customTitle"], "v": "Rename"},
        {"kind": 3, "k": ["customTitle"]},
        {"kind": 1, "k": ["requests", 5, "result"], "v": {}},  # no such request
    ]
    path = tmp_path / "chatSessions" / "s1.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in log) + "{broken\n")
    data = only(runs_of(path)).data
    assert [(t["role"], t["content"]) for t in data["turns"]] == [
        ("user", "rename the module"),
        ("assistant", "Renamed."),
    ]
    metadata = data["metadata"]
    assert "customTitle" not in metadata["session"]
    assert metadata["updates_left_out"] == [7] and metadata["damaged_lines_left_out"] == [8]


def test_an_exported_copilot_chat_marks_the_call_the_chat_view_saw_fail() -> None:
    path = COPILOT / "chat_error_mcp.json"
    source = json.loads(path.read_text())
    item = only(runs_of(path))
    data = item.data
    (request,) = source["requests"]
    # An export has no session id of its own: the request's result names it.
    assert item.run_id == request["result"]["metadata"]["sessionId"]
    (expected,) = _source_calls(source)
    (call,) = calls_of(data["turns"])
    assert (call["id"], call["name"]) == (expected["id"], expected["name"])
    (shown,) = [p for p in request["response"] if p.get("kind") == "toolInvocationSerialized"]
    assert shown["resultDetails"]["isError"] is True and shown["toolCallId"] != call["id"]
    assert call["metadata"]["is_error"] is True
    (output,) = _source_outputs(source).values()
    assert call["result"] == output["content"][0]["value"]
    assert data["metadata"]["weak_signals"] == {"tool_errors": 1}


def test_an_unfinished_copilot_request_is_read_from_what_the_chat_view_showed() -> None:
    path = COPILOT / "in_progress_chat.json"
    source = json.loads(path.read_text())
    (request,) = source["requests"]
    assert "result" not in request  # no model rounds yet
    shown = [
        p
        for p in request["response"]
        if p.get("kind") == "toolInvocationSerialized" and not p["toolId"].endswith("_internal")
    ]
    data = only(runs_of(path)).data
    calls = calls_of(data["turns"])
    assert [(c["id"], c["name"]) for c in calls] == [(p["toolCallId"], p["toolId"]) for p in shown]
    said = [t["content"] for t in data["turns"] if t["role"] == "assistant"]
    markdown = [p["value"].strip() for p in request["response"] if "kind" not in p]
    assert said == markdown


def test_an_empty_copilot_session_is_left_out_with_why(tmp_path: Path) -> None:
    folder = tmp_path / "chatSessions"
    folder.mkdir()
    (folder / "used.json").write_bytes((COPILOT / "copilot_session_simple.json").read_bytes())
    empty = {"version": 3, "sessionId": "e1", "responderUsername": "GitHub Copilot"}
    (folder / "empty.json").write_text(json.dumps(empty | {"requests": []}))
    plan = plan_inputs([folder])
    item = only(list(plan.items()))
    assert item.run_id == "331fed7f-cfd6-409c-8502-06a56322b636"
    assert plan.left_out == {
        str(folder / "empty.json"): "an empty Copilot chat session: no requests"
    }


# --- Cursor ------------------------------------------------------------------------------------


def cursor_db(source: Path, path: Path) -> Path:
    """A state.vscdb with Cursor's own schema, holding the excerpt's real JSON values."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as handle:
        tables = json.load(handle)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        for table in ("ItemTable", "cursorDiskKV"):
            db.execute(f"CREATE TABLE {table} (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        for table, rows in tables.items():
            db.executemany(
                f"INSERT INTO {table} VALUES (?, ?)", [(k, json.dumps(v)) for k, v in rows.items()]
            )
    db.close()
    return path


def global_rows() -> dict[str, Any]:
    with gzip.open(CURSOR / "global-composer-59f64e5e.json.gz", "rt", encoding="utf-8") as handle:
        rows: dict[str, Any] = json.load(handle)["cursorDiskKV"]
    return rows


@pytest.fixture
def global_db(tmp_path: Path) -> Path:
    return cursor_db(
        CURSOR / "global-composer-59f64e5e.json.gz", tmp_path / "globalStorage" / "state.vscdb"
    )


def test_a_cursor_composer_is_one_run_with_every_tool_call_and_its_result(global_db: Path) -> None:
    before = hashlib.sha256(global_db.read_bytes()).hexdigest()
    item = only(runs_of(global_db))
    assert isinstance(item, Unlabelled) and item.format == "cursor"
    assert item.run_id == COMPOSER and item.at == f"composerData:{COMPOSER}"
    assert "keyed by its composer or chat tab id" in item.reason
    rows = global_rows()
    headers = rows[f"composerData:{COMPOSER}"]["fullConversationHeadersOnly"]
    bubbles = [rows[f"bubbleId:{COMPOSER}:{h['bubbleId']}"] for h in headers]
    data = item.data
    assert data["task"] == bubbles[0]["text"]
    assert data["task"].startswith("/docmgr Create a new ticket REVERSE-CURSOR-CONV-DB-001.")
    tools = [b["toolFormerData"] for b in bubbles if (b.get("toolFormerData") or {}).get("name")]
    answered = [t for t in tools if "result" in t or "error" in t]
    failed = [
        t
        for t in tools
        if t.get("status") == "error" or json.loads(t.get("result") or "{}").get("exitCodeV2", 0)
    ]
    assert (len(tools), len(answered), len(failed)) == (16, 16, 2)
    calls = calls_of(data["turns"])
    assert [(c["id"], c["name"]) for c in calls] == [(t["toolCallId"], t["name"]) for t in tools]
    assert [c["arguments"] for c in calls] == [json.loads(t["rawArgs"]) for t in tools]
    assert [c["id"] for c in calls if c["metadata"].get("is_error")] == [
        t["toolCallId"] for t in failed
    ]
    first = calls[0]
    assert first["arguments"] == {"command": "uuidgen", "is_background": False}
    assert first["result"]["output"] == "aa8ad79b-e459-4989-93dd-5fbf136d08d0\n"
    # The calls one model step made share a turn, after the text that step said.
    steps = [t for t in data["turns"] if t.get("tool_calls")]
    assert len(steps) == len({t["modelCallId"] for t in tools})
    assert all(len({c["metadata"]["modelCallId"] for c in t["tool_calls"]}) == 1 for t in steps)
    assert steps[0]["content"].strip().startswith("Generating a UUID")
    metadata = data["metadata"]
    assert metadata["counts"] == {"bubbles": 27, "tool_calls": 16, "tool_results": 16}
    assert metadata["weak_signals"] == {"tool_errors": 2}
    assert metadata["bubbles_left_out"] == {"empty bubbles": 5}  # encrypted thinking only
    # Read-only: the database is unchanged and nothing was written beside it.
    assert hashlib.sha256(global_db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in global_db.parent.iterdir()) == ["state.vscdb"]


def test_labels_name_a_cursor_chat_by_its_composer_id(global_db: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({COMPOSER: True}))
    (run,) = list(plan_inputs([global_db], labels=[labels]).items())
    assert isinstance(run, SourceRun) and run.record.success is True


def test_an_older_cursor_workspace_database_holds_composers_and_chat_tabs(tmp_path: Path) -> None:
    source = json.loads((CURSOR / "workspace-f87f6e0b.json").read_text())["ItemTable"]
    path = cursor_db(CURSOR / "workspace-f87f6e0b.json", tmp_path / "f87f6e0b" / "state.vscdb")
    items = runs_of(path)
    assert [i.format for i in items] == ["cursor", "cursor"]
    (composer,) = source["composer.composerData"]["allComposers"]
    (tab,) = source["workbench.panel.aichat.view.aichat.chatdata"]["tabs"]
    assert [i.run_id for i in items] == [composer["composerId"], tab["tabId"]]
    by_composer = [(t["role"], t["content"]) for t in items[0].data["turns"]]
    assert by_composer == [
        ("user" if b["type"] == 1 else "assistant", b["text"]) for b in composer["conversation"]
    ]
    sent = [b for b in tab["bubbles"] if b.get("text")]  # the last is the unsent input box
    assert [t["content"] for t in items[1].data["turns"]] == [b["text"] for b in sent]
    assert items[1].data["task"] == tab["bubbles"][0]["text"]
    assert items[1].data["metadata"]["bubbles_left_out"] == {"empty user bubbles": 1}
    assert all(calls_of(i.data["turns"]) == [] for i in items)  # chats of 2024 made no calls


def test_a_cursor_workspace_database_with_no_chats_is_listed_with_the_global_one(
    tmp_path: Path, global_db: Path
) -> None:
    workspace = tmp_path / "workspaceStorage" / "0ab1" / "state.vscdb"
    workspace.parent.mkdir(parents=True)
    with sqlite3.connect(workspace) as db:
        db.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        db.execute("CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        listed = {"allComposers": [{"composerId": COMPOSER, "name": "Reverse the DB"}]}
        db.execute(
            "INSERT INTO ItemTable VALUES (?, ?)", ("composer.composerData", json.dumps(listed))
        )
    db.close()
    plan = plan_inputs([tmp_path])
    assert [(f.path, f.format) for f in plan.files] == [(global_db, "cursor")]
    (ignored,) = plan.ignored
    assert ignored["path"] == str(workspace) and "globalStorage/state.vscdb" in ignored["reason"]
    assert only(list(plan.items())).run_id == COMPOSER
    with pytest.raises(InputError, match="no chats of its own"):
        plan_inputs([workspace])


def test_a_cut_off_cursor_database_is_named_with_what_to_do(global_db: Path) -> None:
    data = global_db.read_bytes()
    global_db.write_bytes(data[: len(data) // 3])
    (error,) = runs_of(global_db)
    assert isinstance(error, InputError) and error.path == str(global_db)
    assert "cannot read this SQLite database: database disk image is malformed" in str(error)
    assert "close it or copy the file" in str(error)


def test_a_vs_code_state_database_is_no_cursor_one(tmp_path: Path) -> None:
    path = tmp_path / "state.vscdb"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)")
        db.execute("INSERT INTO ItemTable VALUES ('chat.ChatSessionStore.index', '{}')")
    db.close()
    with pytest.raises(InputError, match="not a trajectory format wikitrace knows"):
        plan_inputs([path])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("copilot-chat/copilot_session_simple.json", "copilot-chat"),
        ("copilot-chat/copilot_session_multiline.jsonl", "copilot-chat"),
        ("copilot-chat/chat_error_mcp.json", "copilot-chat"),
    ],
)
def test_ide_sessions_are_detected_from_content_not_the_name(
    name: str, expected: str, tmp_path: Path
) -> None:
    renamed = tmp_path / "log.data"
    renamed.write_bytes((DATA / "sessions" / name).read_bytes())
    (item,) = plan_inputs([renamed]).files
    assert (item.format, item.detected) == (expected, True)


def test_a_cursor_database_is_detected_from_content_not_the_name(
    global_db: Path, tmp_path: Path
) -> None:
    renamed = tmp_path / "chats.bin"
    renamed.write_bytes(global_db.read_bytes())
    (item,) = plan_inputs([renamed]).files
    assert (item.format, item.detected) == ("cursor", True)
