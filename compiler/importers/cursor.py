"""Cursor chats, kept in SQLite (`<User>/globalStorage/state.vscdb`, and in older versions
`<User>/workspaceStorage/<hash>/state.vscdb`): one composer (an agent or chat session) is one
run, and one database holds many.

The database is opened read-only and immutable, so reading it never writes, not even a lock
or a journal (close Cursor first if it is writing: an immutable read does not see the log of
a write under way). Values are JSON text:

- `cursorDiskKV`: `composerData:<composerId>` (the composer, its bubbles in order in
  `fullConversationHeadersOnly`, or inline in `conversation` in older ones) and
  `bubbleId:<composerId>:<bubbleId>` (one bubble each).
- `ItemTable` (older): `composer.composerData` (`allComposers`, each with its `conversation`)
  and `workbench.panel.aichat.view.aichat.chatdata` (chat `tabs`, each a run of `bubbles`,
  `type` user or ai). A newer workspace database lists its composers there with no bubbles:
  their bubbles are in the global one, which this file is then read with.

A user bubble (`type` 1) is a user turn. Assistant bubbles (`type` 2) hold text, thinking, or
one tool call (`toolFormerData`: `name`, `rawArgs`, `result` or `error`, `status`); the calls
one model step made (same `modelCallId`) share an assistant turn, and text after a call starts
a new one. A call whose status is `error`, or whose command exited non-zero, is `is_error`.
Bubbles with nothing in them (streaming placeholders, encrypted thinking) are counted, not kept.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, LeftOut, Probe, add_reasoning, filled, rest, session_run, text
from .sniffers import CURSOR_CHAT_TABS, CURSOR_WORKSPACE_COMPOSERS, sqlite_read_only, sqlite_tables

COMPOSER = "composerData:"
USER, ASSISTANT = 1, 2
NOTE = (
    "the log carries no outcome: label it with --labels (keyed by its composer or chat tab id) "
    "or with --judge MODEL"
)
"""Why a Cursor chat is unlabelled (its database's file name names no one chat)."""
HINT = (
    "Cursor keeps its chats in <User>/globalStorage/state.vscdb (and older ones in "
    "<User>/workspaceStorage/<hash>/state.vscdb); if Cursor is running, close it or copy the file"
)


def read_with(path: Path) -> str | None:
    """Why a database is not read on its own: a workspace database with no chats of its own
    (a newer one lists its composers, whose bubbles are in the global database)."""
    try:
        with closing(sqlite_read_only(path)) as db:
            if _composer_count(db) or _tabs(db, path):
                return None
            workspace = _item(db, CURSOR_WORKSPACE_COMPOSERS, path)
    except (sqlite3.Error, InputError):
        return None  # read() names the damage
    listed = workspace.get("allComposers") if isinstance(workspace, dict) else None
    listed = listed if isinstance(listed, list) else []
    if any(_inline(c) for c in listed):
        return None
    where = (
        f" (the bubbles of the {len(listed)} composers it lists are in globalStorage/state.vscdb)"
        if listed
        else ""
    )
    return f"a Cursor workspace database with no chats of its own{where}"


def _composer_count(db: sqlite3.Connection) -> int:
    if "cursorDiskKV" not in sqlite_tables(db):
        return 0
    row = db.execute(
        "SELECT COUNT(*) FROM cursorDiskKV WHERE key >= ? AND key < ?", (COMPOSER, "composerData;")
    ).fetchone()
    return int(row[0])


def _json(raw: Any, path: Path, at: str) -> Any:
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise InputError(
            f"the value is not JSON ({type(error).__name__})", path=path, at=at, hint=HINT
        ) from None


def _item(db: sqlite3.Connection, key: str, path: Path) -> Any:
    if "ItemTable" not in sqlite_tables(db):
        return None
    row = db.execute("SELECT value FROM ItemTable WHERE key = ?", (key,)).fetchone()
    return None if row is None else _json(row[0], path, f"ItemTable:{key}")


def _inline(composer: Any) -> bool:
    conversation = composer.get("conversation") if isinstance(composer, dict) else None
    return isinstance(conversation, list) and bool(conversation)


def _tabs(db: sqlite3.Connection, path: Path) -> list[dict[str, Any]]:
    """The chat tabs that hold bubbles (a new tab holds none)."""
    chats = _item(db, CURSOR_CHAT_TABS, path)
    tabs = chats.get("tabs") if isinstance(chats, dict) else None
    return [t for t in tabs or [] if isinstance(t, dict) and t.get("bubbles")]


def _decoded(value: Any) -> Any:
    """A JSON-encoded string field (`rawArgs`, `params`, `result`) as the value it encodes."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _failed(data: dict[str, Any], result: Any) -> bool:
    if data.get("status") == "error" or data.get("error"):
        return True
    if isinstance(result, dict):
        code = result.get("exitCodeV2", result.get("exitCode"))
        return isinstance(code, int) and not isinstance(code, bool) and code != 0
    return False


@dataclass
class _Composer:
    turns: list[dict[str, Any]] = field(default_factory=list)
    open: dict[str, Any] | None = None
    """The assistant turn the next call joins, until a user bubble or text after a call."""
    reasoning: list[str] = field(default_factory=list)
    signals: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    results: int = 0

    def bubble(self, bubble: dict[str, Any]) -> None:
        kind = bubble.get("type")
        said = bubble.get("text")
        said = said if isinstance(said, str) and said.strip() else None
        metadata = filled(rest(bubble, {"type", "text", "richText", "thinking", "toolFormerData"}))
        if kind == USER:
            self.finish()
            self.open = None
            if said is None:  # the input box's draft, never sent
                self.left_out["empty user bubbles"] += 1
            else:
                self.turns.append({"role": "user", "content": said, "metadata": metadata})
            return
        thinking = bubble.get("thinking")
        thought = thinking.get("text") if isinstance(thinking, dict) else thinking
        thought = thought if isinstance(thought, str) and thought.strip() else None
        if thought is not None:
            self.reasoning.append(thought)
        tool = bubble.get("toolFormerData")
        call = (
            tool
            if isinstance(tool, dict) and (tool.get("name") or tool.get("toolCallId"))
            else None
        )
        if said is not None:  # text starts a step; the calls after it join it
            turn = self._assistant(new=True)
            turn["content"] = said
            turn["metadata"] = metadata
        if call is not None:
            self._call(call, metadata)
        elif said is None and thought is None:
            self.left_out["empty bubbles"] += 1

    def finish(self) -> None:
        """Keep thinking no text or call followed (the step was cut off) as a turn of its own."""
        if self.reasoning:
            self._assistant(new=True)

    def _assistant(self, *, new: bool = False) -> dict[str, Any]:
        if new or self.open is None:
            self.open = {"role": "assistant", "content": None}
            self.turns.append(self.open)
        add_reasoning(self.open, self.reasoning)
        return self.open

    def _call(self, tool: dict[str, Any], bubble: dict[str, Any]) -> None:
        """Add a call to the open step, or to a new one when another model step made it."""
        self.calls += 1
        step = tool.get("modelCallId")
        turn = self._assistant()
        made = turn.get("tool_calls") or []
        if made and (not step or made[-1]["metadata"].get("modelCallId") != step):
            turn = self._assistant(new=True)
        arguments = _decoded(tool.get("rawArgs")) if tool.get("rawArgs") else None
        if arguments is None:
            arguments = _decoded(tool.get("params"))
        call: dict[str, Any] = {
            "id": None if tool.get("toolCallId") is None else str(tool["toolCallId"]),
            "name": str(tool.get("name") or tool.get("tool") or "unknown"),
            "arguments": arguments,
        }
        outcome = tool.get("result", tool.get("error"))
        if outcome is not None:
            self.results += 1
            call["result"] = _decoded(outcome)
        extra = filled(rest(tool, {"toolCallId", "name", "rawArgs", "result"}))
        extra["bubble"] = bubble
        if _failed(tool, call.get("result")):
            extra["is_error"] = True
            self.signals["tool_errors"] += 1
        call["metadata"] = extra
        turn.setdefault("tool_calls", []).append(call)


def _run(
    path: Path,
    run_id: str,
    bubbles: list[dict[str, Any]],
    metadata: dict[str, Any],
    at: str,
) -> Found:
    composer = _Composer()
    for bubble in bubbles:
        composer.bubble(bubble)
    composer.finish()
    task = next(
        (t["content"] for t in composer.turns if t["role"] == "user" and t["content"]), None
    )
    if task is None:
        return InputError(
            "no task: no user message in this chat" if bubbles else "an empty chat: no bubbles",
            path=path,
            at=at,
            hint="a Cursor chat starts with the user's message",
        )
    metadata["counts"] = {
        "bubbles": len(bubbles),
        "tool_calls": composer.calls,
        "tool_results": composer.results,
    } | metadata.get("counts", {})
    if composer.left_out:
        metadata["bubbles_left_out"] = dict(sorted(composer.left_out.items()))
    metadata["weak_signals"] = dict(composer.signals)
    candidate: Candidate = session_run(path, run_id, task, composer.turns, metadata)
    # One database holds many runs: its file name names none of them.
    return replace(candidate, at=at, aliases=(), note=NOTE)


def _global(db: sqlite3.Connection, path: Path, unused: Counter[str]) -> Iterator[Found]:
    rows = db.execute(
        "SELECT key, value FROM cursorDiskKV WHERE key >= ? AND key < ? ORDER BY key",
        (COMPOSER, "composerData;"),
    )
    for key, raw in rows:
        composer_id = str(key)[len(COMPOSER) :]
        try:
            composer = _json(raw, path, str(key))
        except InputError as error:
            yield error
            continue
        if not isinstance(composer, dict):
            continue  # a composer Cursor deleted: its value is null
        bubbles, missing = _bubbles(db, path, composer_id, composer)
        metadata: dict[str, Any] = {
            "composer": filled(
                rest(composer, {"fullConversationHeadersOnly", "conversation", "conversationMap"})
            )
        }
        if not bubbles:  # opened and never used, or its bubbles are gone
            unused["composers with no bubbles"] += 1
            continue
        if missing:
            metadata["counts"] = {"bubbles_missing": missing}
        yield _run(path, str(composer.get("composerId") or composer_id), bubbles, metadata, key)


def _bubbles(
    db: sqlite3.Connection, path: Path, composer_id: str, composer: dict[str, Any]
) -> tuple[list[dict[str, Any]], int]:
    """A composer's bubbles in order, and how many its headers name that are not stored."""
    inline = composer.get("conversation")
    if isinstance(inline, list) and inline:
        return [b for b in inline if isinstance(b, dict)], 0
    headers = composer.get("fullConversationHeadersOnly")
    if not isinstance(headers, list):
        return [], 0
    prefix = f"bubbleId:{composer_id}:"
    stored = {
        str(key)[len(prefix) :]: raw
        for key, raw in db.execute(
            "SELECT key, value FROM cursorDiskKV WHERE key >= ? AND key < ?",
            (prefix, f"bubbleId:{composer_id};"),
        )
    }
    kept = composer.get("conversationMap")
    inline_map = kept if isinstance(kept, dict) else {}
    bubbles: list[dict[str, Any]] = []
    missing = 0
    for header in headers:
        bubble_id = header.get("bubbleId") if isinstance(header, dict) else None
        value = inline_map.get(bubble_id) if bubble_id else None
        if value is None and bubble_id in stored:
            value = _json(stored[bubble_id], path, f"{prefix}{bubble_id}")
        if not isinstance(value, dict):
            missing += 1
            continue
        bubble = dict(value)
        bubble.setdefault("type", header.get("type"))
        bubble.setdefault("bubbleId", bubble_id)
        bubbles.append(bubble)
    return bubbles, missing


def _workspace(db: sqlite3.Connection, path: Path) -> Iterator[Found]:
    composers = _item(db, CURSOR_WORKSPACE_COMPOSERS, path)
    listed = composers.get("allComposers") if isinstance(composers, dict) else None
    for composer in listed or []:
        if not _inline(composer):
            continue
        composer_id = str(composer.get("composerId"))
        bubbles = [b for b in composer["conversation"] if isinstance(b, dict)]
        metadata = {"composer": filled(rest(composer, {"conversation"}))}
        yield _run(
            path, composer_id, bubbles, metadata, f"{CURSOR_WORKSPACE_COMPOSERS}:{composer_id}"
        )
    for tab in _tabs(db, path):
        bubbles = [_tab_bubble(b) for b in tab["bubbles"] if isinstance(b, dict)]
        tab_id = str(tab.get("tabId"))
        metadata = {"chat_tab": filled(rest(tab, {"bubbles"}))}
        yield _run(path, tab_id, bubbles, metadata, f"{CURSOR_CHAT_TABS}:{tab_id}")


def _tab_bubble(bubble: dict[str, Any]) -> dict[str, Any]:
    """A chat tab's bubble (`type` user or ai, text in `text` or `rawText`) as a composer's."""
    kind = bubble.get("type")
    said = bubble.get("text")
    if not (isinstance(said, str) and said.strip()):
        said = bubble.get("rawText")
    converted = rest(bubble, {"type", "text", "rawText", "id"})
    converted.update(
        {
            "type": USER if kind == "user" else ASSISTANT,
            "text": said if isinstance(said, str) else text(said),
            "bubbleId": bubble.get("id"),
        }
    )
    return converted


def read(path: Path, found: Probe) -> Iterator[Found]:
    nothing = True
    unused: Counter[str] = Counter()
    try:
        with closing(sqlite_read_only(path)) as db:
            tables = sqlite_tables(db)
            parts = []
            if "cursorDiskKV" in tables:
                parts.append(_global(db, path, unused))
            if "ItemTable" in tables:
                parts.append(_workspace(db, path))
            for part in parts:
                for item in part:
                    nothing = False
                    yield item
    except sqlite3.Error as error:
        raise InputError(
            f"cannot read this SQLite database: {error}", path=path, hint=HINT
        ) from None
    if nothing and unused:
        counted = ", ".join(f"{n} {what}" for what, n in sorted(unused.items()))
        yield LeftOut(str(path), f"a Cursor database with no chat in it ({counted})")
    elif nothing:
        yield InputError("no Cursor chats in this database", path=path, hint=HINT)
