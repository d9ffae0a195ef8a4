"""Gemini CLI chats (`~/.gemini/tmp/<project>/chats/`): one session is one run.

The whole `~/.gemini/tmp` can be read: a project's saved chats (`checkpoint-<tag>.json`,
`/chat save`) and restore checkpoints (`checkpoints/`) copy its sessions and are listed as
such, not read again; `logs.json` (the prompts alone) and `shell_history` are no runs.

Two layouts: the older single JSON (`sessionId`, `messages[]`; older still, `history[]` of
`{role, parts}`), and JSON Lines (a header line, then message records, `$set` updates of the
header and `$rewindTo` records). In JSON Lines a message is written again each time it grows
(same `id`): the last version stands. `$rewindTo: ID` drops that message and every later one
(the user went back).

A `gemini` message is an assistant turn: `content`, `thoughts` as reasoning, and `toolCalls`
with their `result` inside (a call whose `status` is `error` is marked `is_error`). `info`,
`warning` and `error` messages are system turns; errors also count as weak signals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import (
    Found,
    Probe,
    jsonl_objects,
    load_json,
    rest,
    session_run,
    text,
)

KINDS = frozenset({"user", "gemini", "info", "error", "warning"})


def _parts(value: Any) -> tuple[str | None, list[Any]]:
    """Message content -> (its text, the parts that are not text: images, responses, ...)."""
    if value is None or isinstance(value, str):
        return value, []
    if isinstance(value, list):
        texts = [p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
        others = [p for p in value if not (isinstance(p, dict) and isinstance(p.get("text"), str))]
        if texts:
            return "\n".join(texts), others
        if others and all(isinstance(p, dict) for p in others):
            return None, others  # calls, responses, images: no text
    return text(value), []


def _result(value: Any) -> Any:
    """A call's result: the outputs of its functionResponse parts, else as logged."""
    if isinstance(value, list):
        outputs = []
        for part in value:
            response = part.get("functionResponse") if isinstance(part, dict) else None
            inner = response.get("response") if isinstance(response, dict) else None
            if not isinstance(inner, dict):
                return value
            out = inner.get("output", inner.get("error", inner))
            outputs.append(out if isinstance(out, str) else text(out))
        return "\n".join(o or "" for o in outputs)
    return value


def _turn(message: dict[str, Any], signals: Counter[str]) -> dict[str, Any] | None:
    kind = message.get("type") or message.get("role")
    used = {"type", "role", "content", "parts", "thoughts", "toolCalls"}
    content, others = _parts(message.get("content", message.get("parts")))
    added: list[str] = []
    if kind in ("gemini", "model"):
        turn: dict[str, Any] = {"role": "assistant", "content": content or None}
        thoughts = message.get("thoughts")
        if isinstance(thoughts, list) and thoughts:
            lines = [
                " ".join(str(t.get(k)) for k in ("subject", "description") if t.get(k))
                if isinstance(t, dict)
                else str(t)
                for t in thoughts
            ]
            turn["reasoning"] = "\n".join(lines)
        calls = []
        for raw in message.get("toolCalls") or []:
            if not isinstance(raw, dict):
                calls.append({"id": None, "name": "unknown", "arguments": raw})
                continue
            call: dict[str, Any] = {
                "id": None if raw.get("id") is None else str(raw["id"]),
                "name": str(raw.get("name", "unknown")),
                "arguments": raw.get("args"),
            }
            if "result" in raw:
                call["result"] = _result(raw["result"])
            extra = rest(raw, {"id", "name", "args", "result"})
            if raw.get("status") == "error":
                extra["is_error"] = True
                signals["tool_errors"] += 1
            if extra:
                call["metadata"] = extra
            calls.append(call)
        for part in [p for p in others if isinstance(p, dict) and "functionCall" in p]:
            others.remove(part)  # a saved chat's Content: the call is a part of the message
            given = part["functionCall"] if isinstance(part["functionCall"], dict) else {}
            calls.append(
                {
                    "id": None if given.get("id") is None else str(given["id"]),
                    "name": str(given.get("name", "unknown")),
                    "arguments": given.get("args"),
                }
            )
        if calls:
            turn["tool_calls"] = calls
    elif kind == "user" and others and not content and all(_is_response(p) for p in others):
        turn = {"role": "tool", "content": None, "metadata": {"responses": others}}
        return turn  # its responses join their calls (_pair_responses)
    elif kind == "user":
        # What the hooks added (wikitrace's recall among them) is no part of what was typed.
        typed, added = _hook_contexts(content)
        turn = {"role": "user", "content": typed}
    elif kind in ("info", "error", "warning"):
        if kind == "error":
            signals["errors"] += 1
        turn = {"role": "system", "content": content}
        used.discard("type")
    else:
        turn = {"role": None if kind is None else str(kind), "content": content}
    metadata = rest(message, used)
    if others:
        metadata["parts"] = others
    if added:
        metadata["hook_context"] = added
    if metadata:
        turn["metadata"] = metadata
    return turn


def _is_response(part: Any) -> bool:
    return isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)


def _pair_responses(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A saved chat answers calls in the next user message (functionResponse parts): each
    response joins the call it answers (by id, else the first unanswered call of its name);
    a response no call is found for stays a tool turn of its own."""
    kept: list[dict[str, Any]] = []
    for turn in turns:
        responses = turn.get("metadata", {}).get("responses") if turn["role"] == "tool" else None
        if responses is None:
            kept.append(turn)
            continue
        calls = [c for t in kept[-1:] for c in t.get("tool_calls", []) if "result" not in c]
        left = []
        for part in responses:
            response = part["functionResponse"]
            match = next(
                (
                    c
                    for c in calls
                    if "result" not in c
                    and (c["id"] == response.get("id") if response.get("id") else True)
                    and c["name"] == response.get("name")
                ),
                None,
            )
            if match is None:
                left.append(part)
            else:
                match["result"] = _result([part])
        if left:
            kept.append({"role": "tool", "content": _result(left), "metadata": {"parts": left}})
    return kept


def _hook_contexts(text: str | None) -> tuple[str | None, list[str]]:
    """`corpus_schema.turns.hook_contexts` for a message that holds a hook's block; the module
    is loaded only then (most logs have none, and `convert` loads few modules)."""
    if not text or "<hook_context>" not in text:
        return text, []
    from wikitrace.corpus_schema.turns import hook_contexts

    return hook_contexts(text)


def _typed(turn: dict[str, Any]) -> str | None:
    """What the user typed: `displayContent` when it is text (a slash command the client
    expanded), else the message."""
    shown, _ = _parts(turn.get("metadata", {}).get("displayContent"))
    shown = _hook_contexts(shown)[0]
    typed = shown if shown and not shown.lstrip().startswith(("[", "{")) else turn.get("content")
    return typed.strip() or None if isinstance(typed, str) else None


def _from_jsonl(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], int, list[int]]:
    header: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    rewound = 0
    damaged: list[int] = []
    for item in jsonl_objects(path, unit="record"):
        if isinstance(item, InputError):
            damaged.append(item.line or 0)
            continue
        line, record = item
        if "$set" in record and isinstance(record["$set"], dict):
            header.update(record["$set"])
        elif "$rewindTo" in record:
            target = str(record["$rewindTo"])
            if target in messages:
                cut = order.index(target)
                for key in order[cut:]:
                    messages.pop(key, None)
                rewound += len(order) - cut
                order = order[:cut]
        elif record.get("type") in KINDS or "parts" in record:
            key = str(record.get("id", f"#{line}"))
            if key not in messages:
                order.append(key)
            messages[key] = record
        elif not header and not messages:
            header = dict(record)
        else:
            header.setdefault("other_records", []).append(record)
    return header, [messages[k] for k in order], rewound, damaged


def _in_project(folder: Path) -> bool:
    """A `~/.gemini/tmp/<project>/` folder: it holds the project's chats or its prompt log."""
    return (folder / "chats").is_dir() or (folder / "logs.json").is_file()


def read_with(path: Path) -> str | None:
    """Why this file is read with another, if it is: the client's own copies of a chat."""
    if path.name.startswith("checkpoint") and _in_project(path.parent):
        return "a Gemini CLI saved chat (/chat save), a copy of a session read from chats/"
    if path.parent.name == "checkpoints" and _in_project(path.parent.parent):
        return "a Gemini CLI restore checkpoint, a copy of a session read from chats/"
    return None


def read(path: Path, found: Probe) -> Iterator[Found]:
    rewound = 0
    damaged: list[int] = []
    if found.kind == "jsonl":
        header, messages, rewound, damaged = _from_jsonl(path)
    else:
        data = load_json(path)
        if isinstance(data, list):  # a saved chat: the Content list alone
            data = {"history": data}
        if not isinstance(data, dict):
            yield InputError("expected a JSON object or a list of messages", path=path)
            return
        listed = data.get("messages", data.get("history"))
        messages = [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
        header = rest(data, {"messages", "history"})
    signals: Counter[str] = Counter()
    turns = _pair_responses([t for t in (_turn(m, signals) for m in messages) if t is not None])
    task = next((_typed(t) for t in turns if t["role"] == "user" and _typed(t)), None)
    if task is None:
        yield InputError(
            "no task: no user message in the chat" if turns else "no messages in the chat",
            path=path,
            hint="a Gemini CLI chat holds the user's messages and Gemini's answers",
        )
        return
    metadata: dict[str, Any] = {"session": header}
    calls = sum(len(t.get("tool_calls", [])) for t in turns)
    results = sum(1 for t in turns for c in t.get("tool_calls", []) if "result" in c)
    metadata["counts"] = {"tool_calls": calls, "tool_results": results}
    if rewound:
        metadata["rewound_messages_dropped"] = rewound
    if damaged:
        metadata["damaged_lines_left_out"] = damaged
    metadata["weak_signals"] = dict(signals)
    session = str(header.get("sessionId") or path.stem)
    yield session_run(path, session, task, turns, metadata)
