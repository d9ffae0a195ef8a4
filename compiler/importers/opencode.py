"""OpenCode sessions as its JSON storage keeps them (`~/.local/share/opencode/storage/`, up to
OpenCode 1.1; later versions keep new sessions in the SQLite `opencode.db` beside it instead).

One session is one run. Its file, `session/<project>/<session id>.json`, is what detection finds;
the reader takes its messages from `message/<session id>/<message id>.json` and each message's
parts from `part/<message id>/<part id>.json`, in the order of their ids (OpenCode's ids grow
with time). Other files (projects, diffs, todos, shares) are no runs; message and part files are
read with their session.

- A user message is a user turn: the text it typed (parts `text`, not `synthetic`); its other
  parts (files, synthetic text, agents, subtasks) stay in the turn's metadata.
- An assistant message is one turn per model call (a `step-start` part opens one): its `text`
  parts are the content, `reasoning` parts the reasoning, `tool` parts the calls, each with its
  result (`state.output`, or `state.error` marked `is_error`); a call still `pending` or
  `running` (the session was stopped) has no result. `step-finish` (tokens, cost, reason) and
  other parts stay in the turn's metadata.
- A sub-agent (the `task` tool) runs in a session of its own whose `parentID` names the session
  that started it: it is read as a run of its own, linked by `metadata.parent_session`.
- The task is the first text the user typed. OpenCode logs no outcome; a session with no message
  at all is left out with one line. The session's share secret is not copied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import read_input

from .base import BOM, Found, LeftOut, Probe, load_json, loads, rest, session_run

HINT = (
    "give the storage folder (~/.local/share/opencode/storage) or a project's folder in it "
    "(storage/session/<project>)"
)


class _Reader:
    """One session's messages and parts, read from the storage folder, as turns."""

    def __init__(self, storage: Path) -> None:
        self.storage = storage
        self.turns: list[dict[str, Any]] = []
        self.calls = 0
        self.results = 0
        self.signals: Counter[str] = Counter()
        self.damaged: list[str] = []
        self.model: str | None = None

    def _objects(self, folder: Path) -> Iterator[dict[str, Any]]:
        for file in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                value = loads(read_input(file).removeprefix(BOM))
            except (orjson.JSONDecodeError, OSError):
                value = None
            if isinstance(value, dict):
                yield value
            else:  # a file cut off or damaged: left out, and said so
                self.damaged.append(str(file.relative_to(self.storage)))

    def read(self, session_id: str) -> int:
        messages = 0
        for message in self._objects(self.storage / "message" / session_id):
            messages += 1
            parts = list(self._objects(self.storage / "part" / str(message.get("id"))))
            if message.get("role") == "assistant":
                self._assistant(message, parts)
            else:
                self._user(message, parts)
        return messages

    def _user(self, message: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        typed = [p for p in parts if p.get("type") == "text" and not p.get("synthetic")]
        texts = [p["text"] for p in typed if isinstance(p.get("text"), str)]
        turn: dict[str, Any] = {
            "role": None if message.get("role") is None else str(message["role"]),
            "content": "\n".join(texts) if texts else None,
        }
        metadata: dict[str, Any] = {"message": rest(message, {"role"})}
        others = [p for p in parts if p not in typed]
        if others:
            metadata["parts"] = others
        turn["metadata"] = metadata
        self.turns.append(turn)

    def _assistant(self, message: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        if self.model is None and message.get("modelID"):
            self.model = f"{message.get('providerID')}/{message['modelID']}"
        if message.get("error"):
            self.signals["errors"] += 1
        turns: list[dict[str, Any]] = []
        step_open = False
        for part in parts:
            kind = part.get("type")
            if (
                kind == "step-start"
                or not turns
                or (not step_open and kind in ("text", "reasoning", "tool"))
            ):
                turns.append({"role": "assistant", "content": None, "metadata": {}})
                step_open = True
            turn = turns[-1]
            said = part.get("text") if isinstance(part.get("text"), str) else None
            if kind == "text" and said:
                turn["content"] = _joined(turn["content"], said)
            elif kind == "reasoning" and said:
                turn["reasoning"] = _joined(turn.get("reasoning"), said)
            elif kind == "tool":
                turn.setdefault("tool_calls", []).append(self._call(part))
            elif kind == "step-finish":
                turn["metadata"]["step_finish"] = part
                step_open = False
            else:  # step-start, patch, file, retry, encrypted reasoning, ...: kept with the step
                turn["metadata"].setdefault("parts", []).append(part)
        if not turns:
            turns.append({"role": "assistant", "content": None, "metadata": {}})
        turns[0]["metadata"]["message"] = rest(message, {"role"})
        self.turns += turns

    def _call(self, part: dict[str, Any]) -> dict[str, Any]:
        given = part.get("state")
        state: dict[str, Any] = given if isinstance(given, dict) else {}
        self.calls += 1
        call: dict[str, Any] = {
            "id": None if part.get("callID") is None else str(part["callID"]),
            "name": str(part.get("tool") or "unknown"),
            "arguments": state.get("input"),
        }
        metadata = rest(state, {"input", "output", "error"})
        metadata["part"] = rest(part, {"callID", "tool", "state", "type"})
        if state.get("status") == "completed":
            call["result"] = state.get("output")
            self.results += 1
        elif state.get("status") == "error":
            call["result"] = state.get("error")
            metadata["is_error"] = True
            self.results += 1
            self.signals["tool_errors"] += 1
        else:  # pending or running: the session stopped before the tool answered
            self.signals["calls_not_answered"] += 1
        call["metadata"] = metadata
        return call


def _joined(before: str | None, more: str) -> str:
    return more if before is None else f"{before}\n{more}"


def read(path: Path, found: Probe) -> Iterator[Found]:
    info = load_json(path)
    if not isinstance(info, dict) or not isinstance(info.get("id"), str):
        yield InputError("expected an OpenCode session ({id: ses_..., ...})", path=path, field="id")
        return
    session_id = info["id"]
    storage = path.parent.parent.parent
    if path.parent.parent.name != "session" or not (storage / "message").is_dir():
        yield InputError(
            "an OpenCode session file away from its storage folder: its messages are read "
            f"from <storage>/message/{session_id}/",
            path=path,
            hint=HINT,
        )
        return
    reader = _Reader(storage)
    messages = reader.read(session_id)
    if not messages:
        yield LeftOut(str(path), "an OpenCode session with no message")
        return
    task = next(
        (
            t["content"].strip()
            for t in reader.turns
            if t["role"] == "user" and isinstance(t["content"], str) and t["content"].strip()
        ),
        None,
    )
    if task is None:
        yield InputError(
            f"no task: none of the session's {messages} messages holds text the user typed",
            path=path,
            hint="an OpenCode session starts with the user's message (role user, a text part)",
        )
        return
    share = info.get("share")
    if isinstance(share, dict) and "secret" in share:  # what edits or deletes the shared page
        info = {**info, "share": rest(share, {"secret"})}
    metadata: dict[str, Any] = {
        "session": info,
        "counts": {
            "messages": messages,
            "tool_calls": reader.calls,
            "tool_results": reader.results,
        },
        "weak_signals": dict(reader.signals),
    }
    if reader.model:
        metadata["model"] = reader.model
    if info.get("parentID"):
        metadata["parent_session"] = info["parentID"]
    if reader.damaged:
        metadata["damaged_files_left_out"] = reader.damaged
    yield session_run(path, session_id, task, reader.turns, metadata)
