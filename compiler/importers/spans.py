"""What trace formats (Langfuse exports, OpenTelemetry GenAI spans) share: a run is a tree of
timed steps, model calls and tool executions among them, and their messages come in each
provider's shape.

`message_parts()` reads the text and the requested tool calls out of any of those shapes;
`steps_to_turns()` turns the ordered steps into native turns: a model call is an assistant turn
(its text, the calls it asked for), a tool execution joins the call that asked for it (by id,
else by name, in order) or is a tool turn of its own.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .base import text

TEXT_KEYS = ("text", "content", "output_text")


def decoded(value: Any) -> Any:
    """A value that some exporters store JSON-encoded in a string (at times twice), decoded;
    else as is."""
    for _ in range(3):
        if not (isinstance(value, str) and value.lstrip()[:1] in ("{", "[", '"')):
            return value
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


@dataclass
class Parts:
    texts: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    role: str | None = None

    @property
    def text(self) -> str | None:
        return "\n".join(t for t in self.texts if t) or None


def _call(name: Any, arguments: Any, call_id: Any) -> dict[str, Any]:
    return {
        "id": None if call_id is None else str(call_id),
        "name": str(name) if name is not None else "unknown",
        "arguments": decoded(arguments),
    }


def message_parts(value: Any, parts: Parts | None = None, depth: int = 0) -> Parts:
    """The text and the tool calls in a message, a list of messages or a response, in the
    shapes of OpenAI (chat and Responses), Anthropic, Google, the GenAI semantic conventions
    (role + parts) and plain strings."""
    parts = parts if parts is not None else Parts()
    value = decoded(value)
    if depth > 8 or value is None:
        return parts
    if isinstance(value, str):
        parts.texts.append(value)
        return parts
    if isinstance(value, list):
        for item in value:
            message_parts(item, parts, depth + 1)
        return parts
    if not isinstance(value, dict):
        parts.texts.append(text(value) or "")
        return parts
    kind = value.get("type")
    if isinstance(value.get("role"), str) and parts.role is None:
        parts.role = value["role"]
    if kind in ("tool_call", "function_call", "tool_use") or "tool.name" in value:
        parts.calls.append(
            _call(
                value.get("name", value.get("tool.name")),
                value.get("arguments", value.get("input", value.get("tool.args"))),
                value.get("id", value.get("call_id")),
            )
        )
        return parts
    if "function_call" in value and isinstance(value["function_call"], dict):  # Google
        call = value["function_call"]
        parts.calls.append(_call(call.get("name"), call.get("args"), call.get("id")))
        return parts
    if isinstance(value.get("tool_calls"), list):  # OpenAI chat
        for raw in value["tool_calls"]:
            function = raw.get("function") if isinstance(raw, dict) else None
            if isinstance(function, dict):
                parts.calls.append(
                    _call(function.get("name"), function.get("arguments"), raw.get("id"))
                )
            elif isinstance(raw, dict):
                parts.calls.append(_call(raw.get("name"), raw.get("arguments"), raw.get("id")))
    for key in ("choices", "output", "parts", "content", "message", "messages", "candidates"):
        if key in value and value[key] is not None:
            inner = value[key]
            if key == "choices" and isinstance(inner, list):
                inner = [c.get("message", c) if isinstance(c, dict) else c for c in inner[:1]]
            return message_parts(inner, parts, depth + 1)
    for key in TEXT_KEYS:
        if isinstance(value.get(key), str):
            parts.texts.append(value[key])
            return parts
    return parts


def first_user_text(value: Any) -> str | None:
    """The first user message's text in a list of messages (or a request holding one)."""
    value = decoded(value)
    if isinstance(value, dict):
        for key in ("messages", "input", "new_message", "contents", "history"):
            if key in value:
                found = first_user_text(value[key])
                if found:
                    return found
        if value.get("role") == "user":
            return message_parts(value).text
        return None
    if isinstance(value, list):
        for item in value:
            item = decoded(item)
            if isinstance(item, dict) and item.get("role") == "user":
                found = message_parts(item.get("content", item.get("parts"))).text
                if found and found.strip():
                    return found
        return None
    return value if isinstance(value, str) and value.strip() else None


@dataclass
class Step:
    """One node of a trace, reduced to what a turn needs."""

    kind: str
    """llm, tool, or other."""
    name: str
    start: Any = None
    output: Any = None
    tool_args: Any = None
    tool_id: str | None = None
    error: str | None = None
    """The step's error status or message, when it failed."""
    metadata: dict[str, Any] = field(default_factory=dict)


def steps_to_turns(steps: list[Step], signals: Counter[str]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # calls asked for and not yet answered
    for step in steps:
        if step.error:
            signals["step_errors"] += 1
        if step.kind == "llm":
            parts = message_parts(step.output)
            content = parts.text
            if content is None and not parts.calls and step.output is not None:
                content = text(decoded(step.output))  # a structured answer: its JSON
            turn: dict[str, Any] = {"role": "assistant", "content": content}
            if parts.calls:
                turn["tool_calls"] = parts.calls
                pending.extend(parts.calls)
            metadata = dict(step.metadata, name=step.name)
            if step.error:
                metadata["error"] = step.error
            turn["metadata"] = metadata
            turns.append(turn)
        elif step.kind == "tool":
            call = _answering(pending, step)
            result = step.output  # as logged
            if call is not None:
                pending.remove(call)
                call["result"] = result
                if call.get("arguments") is None and step.tool_args is not None:
                    call["arguments"] = decoded(step.tool_args)
                if step.error:
                    call.setdefault("metadata", {})["is_error"] = True
                    call["metadata"]["error"] = step.error
                continue
            call = _call(step.name, step.tool_args, step.tool_id)
            call["result"] = result
            call["metadata"] = dict(step.metadata)
            if step.error:
                call["metadata"].update(is_error=True, error=step.error)
            turns.append({"role": "tool", "content": None, "tool_calls": [call]})
        elif step.error:
            turns.append(
                {
                    "role": "system",
                    "content": f"{step.name} failed: {step.error}",
                    "metadata": dict(step.metadata),
                }
            )
    if signals.get("step_errors"):
        signals["tool_errors"] = sum(
            1
            for t in turns
            for c in t.get("tool_calls") or []
            if (c.get("metadata") or {}).get("is_error")
        )
    return turns


def _answering(pending: list[dict[str, Any]], step: Step) -> dict[str, Any] | None:
    if step.tool_id is not None:
        for call in pending:
            if call["id"] == step.tool_id:
                return call
    for call in pending:
        if call["name"] == step.name and "result" not in call:
            return call
    return None
