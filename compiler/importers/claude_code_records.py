"""Claude Code records (compiler/importers/claude_code.py): a session file read line by line,
what a record holds (its content blocks, the prompt the user typed), the rewound branches
dropped, and the records as turns: one handler per record type (assistant, user, system), the
blocks of one model response joined into one turn and each tool result joined to the call it
answers."""

from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import open_input

from .base import jsonl_objects, text

log = logging.getLogger(__name__)

SPAWN_TOOLS = frozenset({"Task", "Agent"})
QUIET_SYSTEM = frozenset({"turn_duration", "stop_hook_summary"})
"""System records that say nothing about the work (timings, hook bookkeeping)."""
_NOT_A_PROMPT = re.compile(r"^\s*(?:<[a-z][a-z0-9-]*>|\[Request interrupted by user)")
"""Text the client wrote in the user's place: command echoes, notifications, reminders."""
_COMMAND = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
CLIENT_COMMANDS = frozenset(
    {
        "clear",
        "compact",
        "config",
        "context",
        "cost",
        "doctor",
        "exit",
        "help",
        "hooks",
        "init",
        "login",
        "logout",
        "mcp",
        "memory",
        "model",
        "permissions",
        "resume",
        "status",
        "statusline",
        "terminal-setup",
        "vim",
        "agents",
        "add-dir",
        "bashes",
        "export",
        "ide",
        "install-github-app",
        "output-style",
        "privacy-settings",
        "release-notes",
        "rewind",
        "todos",
        "upgrade",
        "usage",
        "",
    }
)
"""Slash commands that steer the client itself; a custom command (a skill) is a prompt."""
SESSION_FIELDS = ("sessionId", "cwd", "gitBranch", "version", "slug", "entrypoint")


# --- records ------------------------------------------------------------------------------


@dataclass
class _Session:
    path: Path
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)


def _load(path: Path) -> _Session:
    session = _Session(path)
    for item in jsonl_objects(path, unit="record"):
        if isinstance(item, InputError):
            session.damaged.append(item.line or 0)
            log.warning("%s:%s: a damaged record, left out: %s", path, item.line, item.message)
            continue
        session.records.append(item)
    return session


def _message(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    return message if isinstance(message, dict) else {}


def _blocks(record: dict[str, Any]) -> list[Any]:
    content = _message(record).get("content")
    if isinstance(content, list):
        return content
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return []


def _block_type(block: Any) -> str | None:
    return block.get("type") if isinstance(block, dict) else None


def _is_result_block(block: Any) -> bool:
    return _block_type(block) == "tool_result"


def _is_result(record: dict[str, Any]) -> bool:
    return any(_is_result_block(b) for b in _blocks(record))


def _prompt_text(record: dict[str, Any]) -> str | None:
    """The text the user typed in this record, or None when it is no prompt."""
    if record.get("type") != "user" or record.get("isMeta") or record.get("isCompactSummary"):
        return None
    if _is_result(record):
        return None
    texts = [b["text"] for b in _blocks(record) if isinstance(b, dict) and _is_text(b)]
    joined = "\n".join(texts).strip()
    command = _COMMAND.search(joined)
    if command is not None:
        name = command.group(1)
        if name.lstrip("/") in CLIENT_COMMANDS:
            return None
        arguments = _COMMAND_ARGS.search(joined)
        return f"{name} {arguments.group(1).strip()}".strip() if arguments else name
    if not joined or _NOT_A_PROMPT.match(joined):
        return None
    return joined


def _is_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def _parent(record: dict[str, Any]) -> str | None:
    parent = record.get("parentUuid") or record.get("logicalParentUuid")
    return parent if isinstance(parent, str) else None


def _drop_rewound(records: list[tuple[int, dict[str, Any]]]) -> tuple[list[Any], int]:
    """The records without the rewound branches, and how many were dropped."""
    by_uuid = {r["uuid"]: r for _, r in records if isinstance(r.get("uuid"), str)}
    leaf = next(
        (
            r
            for _, r in reversed(records)
            if r.get("type") in ("user", "assistant") and isinstance(r.get("uuid"), str)
        ),
        None,
    )
    chain: set[str] = set()
    node = leaf
    while node is not None and node["uuid"] not in chain:
        chain.add(node["uuid"])
        parent = _parent(node)
        node = by_uuid.get(parent) if parent else None
    rewound: dict[str, bool] = {}
    kept = []
    for line, record in records:
        uuid = record.get("uuid")
        parent = _parent(record)
        if not isinstance(uuid, str) or uuid in chain:
            dropped = False
        elif parent in chain:  # this record leaves the chain that stayed
            dropped = _prompt_text(record) is not None
        else:  # follows its parent; a parent not seen (yet) is no evidence of a rewind
            dropped = rewound.get(parent, False) if parent else False
        if isinstance(uuid, str):
            rewound[uuid] = dropped
        if not dropped:
            kept.append((line, record))
    return kept, len(records) - len(kept)


def _head_session(file: Path, lines: int = 20) -> str | None:
    """The `sessionId` the first records of a file name (without reading the whole file)."""
    try:
        with open_input(file) as handle:
            for _, raw in zip(range(lines), handle, strict=False):
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
                    return str(record["sessionId"])
    except OSError:
        return None
    return None


# --- turns --------------------------------------------------------------------------------


def _result_value(block: dict[str, Any]) -> Any:
    """A tool_result's content: text blocks joined into one string, anything else as logged."""
    content = block.get("content")
    if isinstance(content, list) and all(isinstance(b, dict) and _is_text(b) for b in content):
        return "\n".join(b["text"] for b in content)
    return content


@dataclass
class _Builder:
    """Turns of one conversation (the main line or one sub-agent), in log order."""

    subagent: dict[str, Any] | None = None
    turns: list[dict[str, Any]] = field(default_factory=list)
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    call_turn: dict[str, int] = field(default_factory=dict)
    left_out: Counter[str] = field(default_factory=Counter)
    signals: Counter[str] = field(default_factory=Counter)
    uses: int = 0
    results: int = 0

    def _new(self, turn: dict[str, Any]) -> dict[str, Any]:
        if self.subagent is not None:
            turn.setdefault("metadata", {})["subagent"] = self.subagent
        self.turns.append(turn)
        return turn

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "assistant":
            self._assistant(record)
        elif kind == "user":
            self._user(record)
        elif kind == "system":
            self._system(record)
        else:
            self.left_out[str(kind)] += 1

    def _assistant(self, record: dict[str, Any]) -> None:
        message = _message(record)
        key = message.get("id")
        turn = self.responses.get(key) if isinstance(key, str) else None
        if turn is None:
            turn = self._new({"role": "assistant", "content": None, "metadata": {}})
            if isinstance(key, str):
                self.responses[key] = turn
            for name in ("model", "stop_reason"):
                if message.get(name) is not None:
                    turn["metadata"][name] = message[name]
            if record.get("timestamp"):
                turn["metadata"]["timestamp"] = record["timestamp"]
        metadata = turn["metadata"]
        metadata.setdefault("uuids", []).append(record.get("uuid"))
        if isinstance(message.get("usage"), dict):
            metadata["usage"] = message["usage"]
        if record.get("isApiErrorMessage") or record.get("error"):
            self.signals["api_errors"] += 1
            metadata["error"] = record.get("error") or True
        for block in _blocks(record):
            kind = _block_type(block)
            if kind == "text" and isinstance(block.get("text"), str):
                turn["content"] = _join(turn["content"], block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                turn["reasoning"] = _join(turn.get("reasoning"), block["thinking"])
            elif kind == "tool_use" and isinstance(block, dict):
                call = {
                    "id": None if block.get("id") is None else str(block["id"]),
                    "name": str(block.get("name", "unknown")),
                    "arguments": block.get("input"),
                }
                turn.setdefault("tool_calls", []).append(call)
                self.uses += 1
                if call["id"] is not None:
                    self.calls[call["id"]] = call
                    self.call_turn[call["id"]] = len(self.turns) - 1
            else:  # images, redacted thinking, server tools, model fallbacks: verbatim
                metadata.setdefault("blocks", []).append(block)

    def _user(self, record: dict[str, Any]) -> None:
        texts: list[str] = []
        other: list[Any] = []
        for block in _blocks(record):
            kind = _block_type(block)
            if kind == "tool_result" and isinstance(block, dict):
                self._result(block, record)
            elif isinstance(block, dict) and _is_text(block):
                texts.append(block["text"])
            else:
                other.append(block)
        if not texts and not other:
            return
        metadata: dict[str, Any] = {}
        for flag in ("isMeta", "isCompactSummary"):
            if record.get(flag):
                metadata[flag] = True
        if record.get("timestamp"):
            metadata["timestamp"] = record["timestamp"]
        if other:
            metadata["blocks"] = other
        self._new({"role": "user", "content": "\n".join(texts) or None, "metadata": metadata})

    def _result(self, block: dict[str, Any], record: dict[str, Any]) -> None:
        self.results += 1
        value = _result_value(block)
        failed = block.get("is_error") is True
        if failed:
            self.signals["tool_errors"] += 1
        call_id = block.get("tool_use_id")
        call = self.calls.get(call_id) if isinstance(call_id, str) else None
        if call is None or "result" in call:  # answers no call seen: a turn of its own
            turn: dict[str, Any] = {"role": "tool", "content": text(value), "metadata": {}}
            turn["metadata"]["tool_use_id"] = call_id
            if failed:
                turn["metadata"]["is_error"] = True
            self._new(turn)
            return
        call["result"] = value
        metadata = call.setdefault("metadata", {})
        if failed:
            metadata["is_error"] = True
        structured = record.get("toolUseResult")
        if structured is not None and len([b for b in _blocks(record) if _is_result_block(b)]) < 2:
            metadata["tool_use_result"] = structured

    def _system(self, record: dict[str, Any]) -> None:
        subtype = record.get("subtype")
        if subtype in ("api_error", "error") or record.get("level") == "error":
            self.signals["api_errors"] += 1
        elif subtype in QUIET_SYSTEM:
            self.left_out[f"system/{subtype}"] += 1
            return
        content = record.get("content")
        used = {"type", "content", "uuid", "parentUuid", "isSidechain", *SESSION_FIELDS}
        metadata = {k: v for k, v in record.items() if k not in used and k != "userType"}
        self._new(
            {
                "role": "system",
                "content": content if isinstance(content, str) else str(subtype or "system"),
                "metadata": metadata,
            }
        )


def _join(before: str | None, more: str) -> str:
    return more if before is None else f"{before}\n\n{more}"
