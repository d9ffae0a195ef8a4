"""Chat-completion message lists, the common denominator of agent logs.

A message becomes a turn. A `tool` (or legacy `function`) message that answers an earlier call
joins that call as its `result`, so a call and what it returned stay in the turn that made it.
Every field with no place in a native turn goes into the turn's `metadata` verbatim.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import (
    Candidate,
    Found,
    Probe,
    first_user_text,
    json_items,
    jsonl_objects,
    load_json,
    rest,
    text,
)

RESULT_ROLES = ("tool", "function")


def _content(value: Any) -> tuple[str | None, str | None, bool]:
    """Message content -> (text, reasoning, lossless). A list of parts is joined; `lossless` is
    False when the parts hold more than plain text (images, ...), so the caller keeps them."""
    if value is None or isinstance(value, str):
        return value, None, True
    if not isinstance(value, list):
        return text(value), None, False
    texts: list[str] = []
    reasoning: list[str] = []
    plain = True
    for part in value:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
            plain = plain and set(part) <= {"type", "text"} and part.get("type", "text") == "text"
        elif isinstance(part, dict) and isinstance(part.get("reasoning"), str):
            reasoning.append(part["reasoning"])
            plain = False
        else:
            plain = False
    return "\n".join(texts), ("\n".join(reasoning) or None), plain


def _call(raw: Any) -> dict[str, Any]:
    """An OpenAI `{id, type, function: {name, arguments}}` or a flat `{id, name, arguments}`."""
    if not isinstance(raw, dict):
        return {"id": None, "name": "unknown", "arguments": raw}
    function = raw.get("function")
    if isinstance(function, dict):
        name, arguments = function.get("name"), function.get("arguments")
        extra = rest(raw, {"id", "function"})
        if set(function) - {"name", "arguments"}:
            extra["function"] = rest(function, {"name", "arguments"})
    else:
        name = function if isinstance(function, str) else raw.get("name")
        arguments = raw.get("arguments")
        extra = rest(raw, {"id", "function", "name", "arguments"})
    call: dict[str, Any] = {
        "id": None if raw.get("id") is None else str(raw["id"]),
        "name": str(name) if name is not None else "unknown",
        "arguments": arguments,
    }
    if extra:
        call["metadata"] = extra
    return call


def chat_turns(
    messages: list[Any], *, result_id_keys: tuple[str, ...] = ("tool_call_id",)
) -> list[dict[str, Any]]:
    """Chat messages -> native turns (see the module's docstring)."""
    turns: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    for message in messages:
        if not isinstance(message, dict):
            turns.append({"content": text(message)})
            continue
        role = message.get("role")
        if role in RESULT_ROLES:
            call_id = next(
                (str(message[key]) for key in result_id_keys if message.get(key) is not None),
                None,
            )
            call = pending.pop(call_id, None) if call_id is not None else None
            if call is None and role == "function":
                call = next(
                    (c for c in reversed(pending.values()) if c["name"] == message.get("name")),
                    None,
                )
                if call is not None and call["id"] is not None:
                    pending.pop(call["id"], None)
            if call is not None:
                call["result"] = message.get("content")
                extra = rest(message, {"role", "content", *result_id_keys})
                if extra:
                    call.setdefault("metadata", {})["result_message"] = extra
                continue
        turn: dict[str, Any] = {"role": None if role is None else str(role)}
        content, reasoning, lossless = _content(message.get("content"))
        turn["content"] = content
        for key in ("reasoning_content", "reasoning"):
            if isinstance(message.get(key), str):
                reasoning = message[key] if reasoning is None else f"{message[key]}\n{reasoning}"
        if reasoning is not None:
            turn["reasoning"] = reasoning
        raw_calls = message.get("tool_calls")
        calls = [_call(raw) for raw in raw_calls] if isinstance(raw_calls, list) else []
        if isinstance(message.get("function_call"), dict):
            calls.append(_call({"function": message["function_call"]}))
        for call in calls:
            pending[call["id"] if call["id"] is not None else f"#{id(call)}"] = call
        if calls:
            turn["tool_calls"] = calls
        consumed = {"role"}
        if lossless:
            consumed.add("content")
        if isinstance(message.get("tool_calls"), list) or message.get("tool_calls") is None:
            consumed.add("tool_calls")
        if isinstance(message.get("function_call"), dict):
            consumed.add("function_call")
        consumed.update(
            k for k in ("reasoning_content", "reasoning") if isinstance(message.get(k), str)
        )
        extra = rest(message, consumed)
        if extra:
            turn["metadata"] = extra
        turns.append(turn)
    return turns


# --- the openai format: {messages: [...]} per line, or one JSON document --------------------


RUN_FIELDS = frozenset(
    {"messages", "task_id", "id", "task", "origin", "task_type", "success", "reward"}
)


def _run(
    obj: dict[str, Any], path: Path, *, line: int | None, at: str | None, index: int
) -> Candidate:
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InputError(
            "expected a non-empty list of chat messages",
            path=path,
            line=line,
            at=at,
            field="messages",
        )
    turns = chat_turns(messages)
    task_id = obj.get("task_id", obj.get("id"))
    task = obj.get("task") if isinstance(obj.get("task"), str) else first_user_text(turns)
    if task is None:
        raise InputError(
            "no task: give a 'task' field or a user message",
            path=path,
            line=line,
            at=at,
            field="task",
        )
    metadata = rest(obj, RUN_FIELDS)
    success = obj.get("success")
    reward = obj.get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        metadata["reward"] = reward
    else:
        reward = None
    run_task_id = str(task_id) if task_id is not None else f"{path.stem}-{index + 1}"
    return Candidate(
        path=str(path),
        line=line,
        at=at,
        run_id=run_task_id,
        reward=reward,
        data={
            "task_id": run_task_id,
            "task": task,
            "origin": obj.get("origin") if isinstance(obj.get("origin"), str) else None,
            "task_type": obj.get("task_type"),
            "success": success if isinstance(success, bool) else None,
            "turns": turns,
            "metadata": metadata,
        },
    )


def read(path: Path, found: Probe) -> Iterator[Found]:
    if found.kind == "jsonl":
        for index, item in enumerate(jsonl_objects(path)):
            if isinstance(item, InputError):
                yield item
                continue
            line, obj = item
            try:
                yield _run(obj, path, line=line, at=None, index=index)
            except InputError as error:
                yield error
        return
    if found.top == "array":  # one run: a bare list of messages
        messages = [m for m in json_items(path, "item")]
        errors = [m for m in messages if isinstance(m, InputError)]
        if errors:
            yield errors[0]
            return
        obj = {"messages": [m[1] for m in messages if not isinstance(m, InputError)]}
    else:
        obj = load_json(path)
    try:
        yield _run(obj, path, line=None, at=None, index=0)
    except InputError as error:
        yield error
