"""GitHub Copilot chat sessions in VS Code (`<User>/workspaceStorage/<hash>/chatSessions/<id>.json`
or `.jsonl`, and `Chat: Export Session` files): one session is one run.

The `.json` file is the session itself: `requests[]`, each the user's `message.text`, the
`response` parts the chat view showed, and the `result`. The `.jsonl` file is VS Code's
mutation log of the same object: a first `{"kind": 0, "v": session}`, then `kind` 1 sets the
value at the key path `k`, 2 appends the items `v` to the list at `k` (cut to `i` items first
when `i` is given), 3 deletes `k`. Replaying it in order gives the session.

Each request is a user turn, then one assistant turn per model round
(`result.metadata.toolCallRounds`: the round's text, its thinking, its `toolCalls`), each call
paired with its output in `result.metadata.toolCallResults` by call id. The chat view's own
record of a call (a `toolInvocationSerialized` response part) is not the model's call: VS Code
gives it another id, hides some, and adds internal follow-ups (`*_internal`); the others match
the model's calls in order, and one that reports `resultDetails.isError` marks its call failed.
A request with no rounds (an older or an unfinished one) takes its text and calls from the
response parts instead. A failed or cancelled request becomes a system turn and a weak signal.
A session with no requests (a chat opened and never used) is listed as left out, not an error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError

from .base import Found, LeftOut, Probe, filled, jsonl_objects, load_json, rest, session_run, text

INVOCATION = "toolInvocationSerialized"
HINT = "a Copilot chat session holds requests, each with the user's message and the response"


def _replay(path: Path) -> tuple[dict[str, Any], list[int], list[int]]:
    """The session a mutation log describes, the damaged lines, and the lines whose key path
    the session does not have (left out)."""
    session: dict[str, Any] = {}
    damaged: list[int] = []
    unplaced: list[int] = []
    for item in jsonl_objects(path, unit="record"):
        if isinstance(item, InputError):
            damaged.append(item.line or 0)
            continue
        line, record = item
        kind, value = record.get("kind"), record.get("v")
        if kind == 0:
            if not isinstance(value, dict):
                raise InputError(
                    "the first record (kind 0) holds no session object",
                    path=path,
                    line=line,
                    field="v",
                    hint=HINT,
                )
            session = value
        elif not _apply(session, kind, record.get("k"), value, record.get("i")):
            unplaced.append(line)
    return session, damaged, unplaced


def _apply(session: dict[str, Any], kind: Any, keys: Any, value: Any, cut: Any) -> bool:
    """Apply one mutation; False when its key path is not in the session."""
    if not isinstance(keys, list) or not keys or kind not in (1, 2, 3):
        return False
    parent: Any = session
    for key in keys[:-1]:
        parent = _child(parent, key)
        if parent is None:
            return False
    last = keys[-1]
    if kind == 1:
        return _put(parent, last, value)
    if kind == 3:
        if isinstance(parent, dict) and last in parent:
            del parent[last]
            return True
        return False
    target = _child(parent, last)
    if target is None and isinstance(parent, dict):
        target = parent[last] = []
    if not isinstance(target, list):
        return False
    if isinstance(cut, int) and not isinstance(cut, bool):
        del target[cut:]
    target.extend(value if isinstance(value, list) else [value])
    return True


def _child(parent: Any, key: Any) -> Any:
    if isinstance(parent, dict) and isinstance(key, str):
        return parent.get(key)
    if isinstance(parent, list) and isinstance(key, int) and -len(parent) <= key < len(parent):
        return parent[key]
    return None


def _put(parent: Any, key: Any, value: Any) -> bool:
    if isinstance(parent, dict) and isinstance(key, str):
        parent[key] = value
        return True
    if isinstance(parent, list) and isinstance(key, int) and 0 <= key <= len(parent):
        if key == len(parent):
            parent.append(value)
        else:
            parent[key] = value
        return True
    return False


def _arguments(raw: Any) -> Any:
    """A call's arguments: the JSON object the model wrote, else the string as it is."""
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return raw


def _node_text(node: Any, out: list[str]) -> None:
    """The text pieces of a rendered prompt element (the tree a tool result is kept as)."""
    if isinstance(node, dict):
        if node.get("type") == 2 and isinstance(node.get("text"), str):
            if node.get("lineBreakBefore") and out and not out[-1].endswith("\n"):
                out.append("\n")
            out.append(node["text"])
        for child in node.get("children") or []:
            _node_text(child, out)


def _result(value: Any) -> Any:
    """A call's output: the text of its content parts (plain values or rendered trees), else
    as logged."""
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        return value
    texts: list[str] = []
    for part in content:
        inner = part.get("value") if isinstance(part, dict) else None
        if isinstance(inner, str):
            texts.append(inner)
        elif isinstance(inner, dict) and "node" in inner:
            pieces: list[str] = []
            _node_text(inner["node"], pieces)
            texts.append("".join(pieces))
        else:
            return value
    return "\n".join(texts)


def _message(value: Any) -> str | None:
    """A markdown value: a string, or `{value: ...}`."""
    if isinstance(value, dict):
        value = value.get("value")
    return value if isinstance(value, str) else None


def _reference(part: dict[str, Any]) -> str:
    ref = part.get("inlineReference")
    if isinstance(ref, dict):
        name = ref.get("name") or ref.get("path") or ref.get("fsPath") or ""
        return f"`{str(name).rsplit('/', 1)[-1]}`" if name else ""
    return ""


def _is_internal(part: dict[str, Any]) -> bool:
    """A call VS Code made itself to carry out the model's call (an edit, a fetch)."""
    return str(part.get("toolId", "")).endswith("_internal")


def _invocation_output(part: dict[str, Any]) -> Any:
    details = part.get("resultDetails")
    if isinstance(details, dict) and "output" in details:
        outputs = details["output"]
        if isinstance(outputs, list) and all(
            isinstance(o, dict) and isinstance(o.get("value"), str) for o in outputs
        ):
            return "\n".join(o["value"] for o in outputs)
        return outputs
    return details


def _invocation_call(part: dict[str, Any]) -> dict[str, Any]:
    """A call as the chat view recorded it (a request with no model rounds)."""
    details = part.get("resultDetails")
    specific = part.get("toolSpecificData")
    arguments: Any = None
    if isinstance(details, dict) and "input" in details:
        arguments = _arguments(details["input"])
    elif isinstance(specific, dict):
        arguments = specific.get("rawInput", specific.get("commandLine"))
    call: dict[str, Any] = {
        "id": None if part.get("toolCallId") is None else str(part["toolCallId"]),
        "name": str(part.get("toolId") or "unknown"),
        "arguments": arguments,
    }
    if details is not None:
        call["result"] = _invocation_output(part)
    call["metadata"] = filled(rest(part, {"kind", "toolCallId", "toolId"}))
    return call


class _Session:
    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self.signals: Counter[str] = Counter()
        self.left_out: Counter[str] = Counter()
        self.calls = 0
        self.results = 0

    def request(self, index: int, request: dict[str, Any]) -> None:
        message = request.get("message")
        typed = message.get("text") if isinstance(message, dict) else message
        used = {"message", "response", "result"}
        metadata = filled(rest(request, used))
        result = request.get("result")
        found = result.get("metadata") if isinstance(result, dict) else None
        result_meta: dict[str, Any] = found if isinstance(found, dict) else {}
        if isinstance(result, dict):
            kept = rest(result, {"metadata"})
            kept_meta = rest(result_meta, {"toolCallRounds", "toolCallResults"})
            if kept_meta:
                kept["metadata"] = kept_meta
            if kept:
                metadata["result"] = filled(kept)
        metadata["request"] = index
        content = typed if isinstance(typed, str) else text(typed)
        self.turns.append({"role": "user", "content": content, "metadata": metadata})
        parts = [p for p in request.get("response") or [] if isinstance(p, dict)]
        rounds = result_meta.get("toolCallRounds")
        if isinstance(rounds, list) and rounds:
            outputs = result_meta.get("toolCallResults")
            self._rounds(rounds, outputs if isinstance(outputs, dict) else {}, parts)
        else:
            self._parts(parts)
        self._outcome(request, result)

    def _rounds(
        self, rounds: list[Any], outputs: dict[str, Any], parts: list[dict[str, Any]]
    ) -> None:
        calls: list[dict[str, Any]] = []
        for round_ in rounds:
            if not isinstance(round_, dict):
                continue
            said = round_.get("response")
            turn: dict[str, Any] = {"role": "assistant", "content": said or None}
            thinking = round_.get("thinking")
            thought = thinking.get("text") if isinstance(thinking, dict) else thinking
            if isinstance(thought, list):
                thought = "\n".join(t for t in thought if isinstance(t, str))
            if isinstance(thought, str) and thought.strip():
                turn["reasoning"] = thought
            made = []
            for raw in round_.get("toolCalls") or []:
                if not isinstance(raw, dict):
                    continue
                self.calls += 1
                call_id = None if raw.get("id") is None else str(raw["id"])
                call: dict[str, Any] = {
                    "id": call_id,
                    "name": str(raw.get("name") or "unknown"),
                    "arguments": _arguments(raw.get("arguments")),
                }
                if call_id is not None and call_id in outputs:
                    self.results += 1
                    call["result"] = _result(outputs[call_id])
                call["metadata"] = rest(raw, {"id", "name", "arguments"})
                made.append(call)
            if made:
                turn["tool_calls"] = made
                calls += made
            extra_round = filled(rest(round_, {"response", "thinking", "toolCalls"}))
            if extra_round:
                turn["metadata"] = extra_round
            if turn["content"] is not None or made or "reasoning" in turn:
                self.turns.append(turn)
        shown = [p for p in parts if p.get("kind") == INVOCATION and not _is_internal(p)]
        if len(shown) != len(calls):  # cannot tell which shown call is which
            return
        for call, part in zip(calls, shown, strict=True):
            details = part.get("resultDetails")
            if isinstance(details, dict) and details.get("isError") is True:
                call["metadata"]["is_error"] = True
                self.signals["tool_errors"] += 1
                if "result" not in call:
                    call["result"] = _invocation_output(part)

    def _parts(self, parts: list[dict[str, Any]]) -> None:
        turn: dict[str, Any] = {"role": "assistant", "content": None}
        pieces: list[str] = []
        thoughts: list[str] = []

        def close() -> None:
            nonlocal turn, pieces
            said = "".join(pieces).strip()
            turn["content"] = said or None
            if thoughts:
                turn["reasoning"] = "\n".join(thoughts)
                thoughts.clear()
            if said or turn.get("tool_calls") or "reasoning" in turn:
                self.turns.append(turn)
            turn, pieces = {"role": "assistant", "content": None}, []

        for part in parts:
            kind = part.get("kind")
            if kind is None or kind == "markdownContent":
                said = _message(part.get("content", part.get("value")))
                if said is not None:
                    if turn.get("tool_calls"):
                        close()
                    pieces.append(said)
            elif kind == "inlineReference":
                pieces.append(_reference(part))
            elif kind == "thinking":
                value = part.get("value")
                if isinstance(value, list):
                    value = "".join(v for v in value if isinstance(v, str))
                if isinstance(value, str) and value.strip():
                    thoughts.append(value)
            elif kind == INVOCATION and not _is_internal(part):
                self.calls += 1
                call = _invocation_call(part)
                if "result" in call:
                    self.results += 1
                details = part.get("resultDetails")
                if isinstance(details, dict) and details.get("isError") is True:
                    call["metadata"]["is_error"] = True
                    self.signals["tool_errors"] += 1
                turn.setdefault("tool_calls", []).append(call)
            else:
                self.left_out[f"response/{kind}"] += 1
        close()

    def _outcome(self, request: dict[str, Any], result: Any) -> None:
        error = result.get("errorDetails") if isinstance(result, dict) else None
        if isinstance(error, dict):
            code = str(error.get("code") or "error")
            self.signals["requests_canceled" if code == "canceled" else "errors"] += 1
            self.turns.append(
                {"role": "system", "content": f"{code}: {error.get('message') or ''}".strip()}
            )
        elif request.get("isCanceled") is True:
            self.signals["requests_canceled"] += 1
            self.turns.append({"role": "system", "content": "canceled"})


def read(path: Path, found: Probe) -> Iterator[Found]:
    damaged: list[int] = []
    unplaced: list[int] = []
    if found.kind == "jsonl":
        data, damaged, unplaced = _replay(path)
    else:
        data = load_json(path)
        if isinstance(data, dict) and data.get("kind") == 0 and isinstance(data.get("v"), dict):
            data = data["v"]
        if not isinstance(data, dict):
            yield InputError("expected a JSON object", path=path, hint=HINT)
            return
    requests = data.get("requests")
    if not isinstance(requests, list):
        yield InputError("not a list", path=path, field="requests", hint=HINT)
        return
    session = _Session()
    for index, request in enumerate(requests):
        if isinstance(request, dict):
            session.request(index, request)
        else:
            session.left_out["request that is no object"] += 1
    task = next(
        (
            t["content"]
            for t in session.turns
            if t["role"] == "user" and isinstance(t["content"], str) and t["content"].strip()
        ),
        None,
    )
    if not requests:  # a chat opened and never used
        yield LeftOut(str(path), "an empty Copilot chat session: no requests")
        return
    if task is None:
        yield InputError("no task: no request with a message in the session", path=path, hint=HINT)
        return
    metadata: dict[str, Any] = {"session": filled(rest(data, {"requests"}))}
    metadata["counts"] = {
        "requests": len(requests),
        "tool_calls": session.calls,
        "tool_results": session.results,
    }
    if session.left_out:
        metadata["records_left_out"] = dict(sorted(session.left_out.items()))
    if damaged:
        metadata["damaged_lines_left_out"] = damaged
    if unplaced:
        metadata["updates_left_out"] = unplaced
    metadata["weak_signals"] = dict(session.signals)
    session_id = data.get("sessionId") or _metadata_session(requests) or path.stem
    yield session_run(path, str(session_id), task, session.turns, metadata)


def _metadata_session(requests: list[Any]) -> str | None:
    """An exported session has no `sessionId` of its own; its requests' results name it."""
    for request in requests:
        result = request.get("result") if isinstance(request, dict) else None
        meta = result.get("metadata") if isinstance(result, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("sessionId"), str):
            return str(meta["sessionId"])
    return None
