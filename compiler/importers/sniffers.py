"""How each format is told from a file's start: one function per format (named after it, `-`
as `_`), each given the file's `Probe` and true when the file is in that format, and the
markers they look for. Detection imports this module alone, not the readers: a reader is
imported once a file of its format is read (see `Format` in __init__.py)."""

from __future__ import annotations

import functools
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import orjson

from wikitrace.corpus_schema.input_files import read_input

from .base import Probe, stream_keys

AIDER_HISTORY = ".aider.chat.history.md"
"""What aider names the history in each project (--chat-history-file changes it)."""

AIDER_HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")

CODEX_ENVELOPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)

COPILOT_SESSION_KEYS = frozenset({"responderUsername", "requesterUsername", "initialLocation"})
"""Keys only a Copilot chat session (or its export) has beside `requests`."""

CURSOR_CHAT_TABS = "workbench.panel.aichat.view.aichat.chatdata"

CURSOR_WORKSPACE_COMPOSERS = "composer.composerData"

CURSOR_MARKERS = (CURSOR_CHAT_TABS, CURSOR_WORKSPACE_COMPOSERS, "aiService.prompts")
"""ItemTable keys only Cursor writes (VS Code's own state database has none of them)."""

ALFWORLD_GAME = re.compile(r"^((?:pick|look)_[a-z_]+)-[^\s/]+/trial_\S+$")

ALFWORLD_ACT = re.compile(r"^Act (\d+): ?(.*)$", re.DOTALL)

ALFWORLD_OBS = re.compile(r"^Obs (\d+): ?(.*)$", re.DOTALL)

REACT_QUESTION = re.compile(r"^(?:Question|Claim): ?(.*)$")

REACT_STEP = re.compile(r"^(Thought|Action|Observation)(?: (\d+))?: ?(.*)$")

FEVER_CLAIM = re.compile(r"^(\d+) Claim: ?(.*)$")

FEVER_STEP = re.compile(r"^(Thought|Action|Observation) (\d+): ?(.*)$")


def native(found: Probe) -> bool:
    top = found.keys.get("", set())
    return (
        found.kind == "jsonl"
        and "turns" in top
        and bool(top & {"task_id", "task", "success"})
        and not top & {"messages", "history"}
    )


def aider(found: Probe) -> bool:
    return found.kind == "text" and any(AIDER_HEADER.match(line) for line in found.lines())


def atif(found: Probe) -> bool:
    if found.kind != "json" or found.top != "map":
        return False
    version = found.values.get("schema_version")
    if isinstance(version, str) and version.upper().startswith("ATIF"):
        return True
    return found.has("", "steps", "session_id") and found.has("steps.item", "source")


def harbor_result(found: Probe) -> bool:
    """A Harbor trial's (or job's) result.json: a side-car, read by the trajectory it belongs to."""
    if found.kind != "json" or found.top != "map":
        return False
    return found.has("", "trial_name", "verifier_result") or found.has(
        "", "n_total_trials", "stats"
    )


def openai(found: Probe) -> bool:
    if found.kind in ("json", "jsonl") and found.top == "map":
        return "messages" in found.keys.get("", set()) and found.has("messages.item", "role")
    return found.kind == "json" and found.top == "array" and found.has("item", "role")


def claude_code(found: Probe) -> bool:
    if found.kind != "jsonl":
        return False
    for record in found.sample:
        kind = record.get("type")
        if isinstance(kind, str) and "parentUuid" in record and "sessionId" in record:
            return True
        if kind == "summary" and "leafUuid" in record:
            return True
    return False


def codex(found: Probe) -> bool:
    if found.kind != "jsonl":
        return False
    for record in found.sample:
        kind = record.get("type")  # any JSON value: a list or object cannot be looked up in a set
        if (
            isinstance(kind, str)
            and kind in CODEX_ENVELOPES
            and isinstance(record.get("payload"), dict)
        ):
            return True
    first = found.sample[0] if found.sample else {}
    return set(first) <= {"id", "timestamp", "instructions", "git"} and any(
        r.get("type") == "message" and "role" in r for r in found.sample[1:]
    )


def copilot_chat(found: Probe) -> bool:
    if found.kind == "jsonl":
        first = found.sample[0] if found.sample else {}
        snapshot = first.get("v")
        return first.get("kind") == 0 and isinstance(snapshot, dict) and "requests" in snapshot
    if found.kind != "json" or found.top != "map":
        return False
    if found.values.get("kind") == 0 and found.has("v", "requests"):
        return True  # a mutation log that is its first snapshot alone, with no line end
    if not found.has("", "requests"):
        return False
    top = found.keys.get("", set())
    item = found.keys.get("requests.item")
    return bool(top & COPILOT_SESSION_KEYS) and (
        item is None or bool(item & {"message", "requestId"})
    )


def sqlite_read_only(path: Path) -> sqlite3.Connection:
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def sqlite_tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def cursor(found: Probe) -> bool:
    if found.kind != "sqlite":
        return False
    if b"cursorDiskKV" in found.head:  # the table's schema is on the first page
        return True
    try:
        with closing(sqlite_read_only(found.path)) as db:
            if "ItemTable" not in sqlite_tables(db):
                return False
            marks = ",".join("?" * len(CURSOR_MARKERS))
            row = db.execute(
                f"SELECT 1 FROM ItemTable WHERE key IN ({marks}) LIMIT 1", CURSOR_MARKERS
            )
            return row.fetchone() is not None
    except sqlite3.Error:
        return False


def gemini_cli(found: Probe) -> bool:
    if found.kind == "json" and found.top == "array":  # a saved chat: a list of Content
        return found.has("item", "role") and found.has("item", "parts")
    if found.kind == "jsonl":
        return any(
            ("projectHash" in r and "sessionId" in r)
            or (r.get("type") in ("user", "gemini") and "id" in r and "content" in r)
            for r in found.sample
        )
    if found.kind != "json" or found.top != "map":
        return False
    if found.has("", "messages") and found.has("messages.item", "type"):
        return found.has("", "sessionId") or found.has("", "projectHash")
    return found.has("", "history") and found.has("history.item", "parts")


def inspect(found: Probe) -> bool:
    return (
        found.kind == "json"
        and found.top == "map"
        and found.has("", "eval")
        and ("version" in found.keys.get("", set()) or "status" in found.keys.get("", set()))
    )


def inspect_eval(found: Probe) -> bool:
    return found.kind == "zip" and (
        "header.json" in found.zip_names or "_journal/start.json" in found.zip_names
    )


def langfuse(found: Probe) -> bool:
    if found.kind not in ("json", "jsonl"):
        return False
    prefix = "item." if found.top == "array" else ""
    if found.has(prefix.rstrip(".") or "", "trace", "observations"):
        return True
    return found.has(prefix.rstrip(".") or "", "observations") and found.has(
        f"{prefix}observations.item", "type", "startTime"
    )


def opencode(found: Probe) -> bool:
    """A session's file: `{id: ses_..., projectID, directory, title, time, ...}`."""
    top = found.keys.get("", set())
    return (
        found.kind in ("json", "jsonl")
        and found.top == "map"
        and {"id", "directory", "title", "time"} <= top
        and bool(top & {"projectID", "version"})
        and not top & {"role", "messageID", "sessionID"}
        and str(found.values.get("id", "")).startswith("ses_")
    )


def opencode_part(found: Probe) -> bool:
    """A message's file (`{id: msg_..., sessionID, role}`) or a part's (`{id: prt_...,
    sessionID, messageID, type}`): read with their session."""
    top = found.keys.get("", set())
    if found.kind not in ("json", "jsonl") or found.top != "map" or "sessionID" not in top:
        return False
    ident = str(found.values.get("id", ""))
    return (ident.startswith("msg_") and "role" in top) or (
        ident.startswith("prt_") and {"messageID", "type"} <= top
    )


def openhands(found: Probe) -> bool:
    if found.kind not in ("jsonl", "json") or found.top != "map":
        return False
    top = found.keys.get("", set())
    return "history" in top and bool(
        top & {"instruction", "instance", "test_result", "instance_id", "issue"}
    )


def openhands_events(found: Probe) -> bool:
    if found.kind != "json" or found.top != "array":
        return False
    item = found.keys.get("item", set())
    return "source" in item and bool(item & {"action", "observation"})


def otel_genai(found: Probe) -> bool:
    if found.kind == "json" and found.top == "map" and found.has("", "resourceSpans"):
        return True
    if found.kind == "jsonl":
        return any(
            "resourceSpans" in r or (isinstance(r.get("attributes"), dict) and "context" in r)
            for r in found.sample
        )
    prefix = "item" if found.top == "array" else "spans.item"
    attributes = found.keys.get(f"{prefix}.attributes", set())
    return found.has(prefix, "attributes") and (
        "gen_ai.operation.name" in attributes or found.has(prefix, "context")
    )


def alfworld(found: Probe) -> bool:
    if found.kind != "text":
        return False
    lines = found.lines()
    return (
        any(ALFWORLD_ACT.match(x) for x in lines)
        and any(ALFWORLD_OBS.match(x) for x in lines)
        and any(ALFWORLD_GAME.match(x) for x in lines)
    )


def hotpotqa(found: Probe) -> bool:
    if found.kind != "text":
        return False
    lines = found.lines()
    kinds = {m.group(1) for m in map(REACT_STEP.match, lines) if m}
    numbered = {"Thought", "Action"} <= kinds
    plain = {"Action", "Observation"} <= kinds  # the Action: / Observation: variant
    return (numbered or plain) and any(REACT_QUESTION.match(x) for x in lines)


def is_notebook(found: Probe) -> bool:
    """A Jupyter notebook (its `nbformat` key comes last, after every cell: not in the head)."""
    return (
        found.kind == "json"
        and found.top == "map"
        and found.has("", "cells")
        and (found.has("cells.item", "cell_type") or found.path.suffix == ".ipynb")
    )


@functools.lru_cache(maxsize=4)
def _notebook_text(path: Path, size: int, mtime: int) -> str:
    """The text a notebook's cells printed, in order (stream outputs and plain-text results);
    cached by the file's size and time, as both sniffers and the reader ask for it."""
    data = orjson.loads(read_input(path))
    parts: list[str] = []
    cells = data.get("cells") if isinstance(data, dict) else None
    for cell in cells if isinstance(cells, list) else []:
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        for output in outputs if isinstance(outputs, list) else []:
            if not isinstance(output, dict):
                continue
            value = output.get("text")
            if value is None and isinstance(output.get("data"), dict):
                value = output["data"].get("text/plain")
            if isinstance(value, list):
                value = "".join(str(piece) for piece in value)
            if isinstance(value, str):
                parts.append(value if value.endswith("\n") else value + "\n")
    return "".join(parts)


def text_of(path: Path, found: Probe) -> str | None:
    """A notebook's printed text, or None for a plain text log (read a line at a time)."""
    if not is_notebook(found):
        return None
    stat = path.stat()
    return _notebook_text(path, stat.st_size, stat.st_mtime_ns)


def _head(found: Probe) -> list[str]:
    """The first lines of a text log, or of what a notebook's cells printed."""
    if found.kind == "text":
        return found.lines()
    if is_notebook(found):
        try:
            return (text_of(found.path, found) or "")[:65536].splitlines()
        except (OSError, orjson.JSONDecodeError):
            return []
    return []


def fever(found: Probe) -> bool:
    lines = _head(found)
    return any(FEVER_CLAIM.match(x) for x in lines) and any(FEVER_STEP.match(x) for x in lines)


def webshop(found: Probe) -> bool:
    lines = _head(found)
    return any(x.startswith("Action: reset") for x in lines) and any(
        x.strip() == "Webshop" for x in lines
    )


def mini_swe_agent(found: Probe) -> bool:
    if found.kind != "json" or found.top != "map":
        return False
    fmt = found.values.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    keys = found.keys
    if found.keys.get("") == {"info"}:
        # mini-swe-agent writes `info` first, with the patch it submitted in it: a big patch
        # pushes `info.mini_version` and `messages` past the head, so read on to `messages`.
        keys = stream_keys(found.path, until="messages")
    return "mini_version" in keys.get("info", set()) and "messages" in keys.get("", set())


def swe_agent(found: Probe) -> bool:
    if found.kind != "json" or found.top != "map":
        return False
    return found.has("", "trajectory") and found.has("trajectory.item", "action")


def swebench_report(found: Probe) -> bool:
    if found.kind != "json" or found.top != "map":
        return False
    top = found.keys.get("", set())
    if "resolved" in top and ("tests_status" in top or "patch_exists" in top):
        return True
    if "resolved" in top and found.path.name == "report.json":  # logs/<instance_id>/report.json
        return True
    if "resolved_ids" in top:
        # A Terminal-Bench run's results.json has resolved_ids too, beside its trials' results.
        return not top & {"results", "accuracy", "n_resolved"}
    # {instance_id: {resolved: ...}}: any second-level map with 'resolved'
    return any(
        prefix.count(".") == 0 and prefix and "resolved" in keys and "tests_status" in keys
        for prefix, keys in found.keys.items()
    )


def tau_bench(found: Probe) -> bool:
    return found.kind == "json" and found.top == "array" and found.has("item", "traj", "task_id")


def tau2_bench(found: Probe) -> bool:
    if found.kind != "json" or found.top != "map":
        return False
    return found.has("", "simulations") or found.has("tasks.item", "user_scenario")


def terminal_bench(found: Probe) -> bool:
    return (
        found.kind == "json" and found.top == "map" and found.has("", "instruction", "is_resolved")
    )
