"""Claude Code records as turns (compiler/importers/claude_code.py): one handler per record
type (assistant, user, system), the blocks of one model response joined into one turn and
each tool result joined to the call it answers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .base import text
from .claude_code_records import (
    QUIET_SYSTEM,
    SESSION_FIELDS,
    _block_type,
    _blocks,
    _is_result_block,
    _is_text,
    _message,
)

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
