"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

One rollout is one run. Its lines are `{timestamp, type, payload}`: `session_meta` (the run's
metadata), `turn_context` (model and policy per turn), `response_item` (what the model saw and
said), `event_msg` (what the client showed), `compacted`. The legacy format has no envelope:
a header `{id, timestamp}` and then the items themselves.

- The task is the first `event_msg` `user_message`: the `response_item` user messages start
  with context the client injected (environment, AGENTS.md); those are kept as user turns
  marked `injected`, and the ones that repeat a user message are dropped.
- Calls (`function_call`, `custom_tool_call`, `local_shell_call`, `tool_search_call`,
  `web_search_call`, ...) join the assistant turn they belong to and take their outputs by
  `call_id`; a non-zero exit code marks the result `is_error`.
- `agent_message` and `agent_reasoning` events mirror response items and are dropped when
  they repeat one.
- Outcome hints (`task_complete` with `error`, `turn_aborted`, `error` events) become system
  turns and `metadata.weak_signals`, never a label.
- A sub-agent writes a rollout of its own whose `session_meta.source` names the parent: it is
  read as a run of its own linked by `metadata.parent_session` (Codex gives it its own task
  and session), and what it copied from its parent before it started is marked `inherited`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError

from .base import Found, Probe, add_reasoning, jsonl_objects, session_run, text
from .sniffers import CODEX_ENVELOPES

CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "tool_search_call",
        "web_search_call",
        "tool_call",
        "image_generation_call",
    }
)
OUTPUTS = frozenset(
    {"function_call_output", "custom_tool_call_output", "tool_search_output", "tool_result"}
)
_EXIT = re.compile(r"^(?:Exit code|Process exited with code):?\s*(-?\d+)", re.MULTILINE)


def _texts(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(parts) if parts else None


def _failed(output: Any) -> bool:
    """Whether a call's output reports a non-zero exit code."""
    value = output
    if isinstance(output, str) and output.startswith("{"):
        try:
            value = orjson.loads(output)
        except orjson.JSONDecodeError:
            value = output
    if isinstance(value, dict):
        meta = value.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else value.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            return code != 0
        value = value.get("output")
    if isinstance(value, str):
        match = _EXIT.search(value[:200])
        return match is not None and match.group(1) != "0"
    return False


@dataclass
class _Rollout:
    turns: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    open: dict[str, Any] | None = None
    """The assistant turn later calls and text join, until a result or a user message."""
    reasoning: list[str] = field(default_factory=list)
    said: set[str] = field(default_factory=set)
    thought: set[str] = field(default_factory=set)
    signals: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)
    uses: int = 0
    results: int = 0

    def turn(self, role: str, content: str | None, **metadata: Any) -> dict[str, Any]:
        turn: dict[str, Any] = {"role": role, "content": content}
        if metadata:
            turn["metadata"] = {k: v for k, v in metadata.items() if v is not None}
        self.turns.append(turn)
        if role != "assistant":
            self.open = None
        return turn

    def assistant(self) -> dict[str, Any]:
        if self.open is None:
            self.open = self.turn("assistant", None)
        add_reasoning(self.open, self.reasoning)
        return self.open

    def say(self, content: str | None) -> None:
        """The model's text: the open assistant turn's, or a new turn's when that one already
        spoke or called; remembered, so its mirror (event or item) is not said twice."""
        turn = self.assistant()
        if turn.get("content") is not None or turn.get("tool_calls"):
            self.open = None
            turn = self.assistant()
        turn["content"] = content
        if content:
            self.said.add(content.strip())


def _item(rollout: _Rollout, item: dict[str, Any], stamp: Any, inherited: bool) -> None:
    kind = item.get("type")
    mark = {"timestamp": stamp, "inherited": True if inherited else None}
    if kind == "message":
        role = str(item.get("role") or "unknown")
        content = _texts(item.get("content"))
        if role == "assistant":
            if not (content and content.strip() in rollout.said):  # agent_message came first?
                rollout.say(content)
            return
        if role in ("user", "developer", "system"):
            rollout.turn(role, content, injected=True, **mark)
            return
        rollout.turn(role, content, **mark)
    elif kind == "reasoning":
        summary = item.get("summary")
        texts = [
            s["text"]
            for s in summary or []
            if isinstance(s, dict) and isinstance(s.get("text"), str)
        ]
        if texts:
            rollout.reasoning.append("\n".join(texts))
            rollout.thought.update(t.strip() for t in texts)
    elif kind in CALLS:
        rollout.uses += 1
        arguments = item.get("arguments", item.get("input", item.get("action")))
        name = item.get("name") or kind.removesuffix("_call")
        call: dict[str, Any] = {
            "id": None if item.get("call_id") is None else str(item["call_id"]),
            "name": str(name),
            "arguments": arguments,
        }
        extra = {
            k: v
            for k, v in item.items()
            if k not in ("type", "name", "arguments", "input", "call_id")
        }
        extra["type"] = kind
        call["metadata"] = extra
        turn = rollout.assistant()
        if any("result" in c for c in turn.get("tool_calls", [])):
            rollout.open = None
            turn = rollout.assistant()
        turn.setdefault("tool_calls", []).append(call)
        if call["id"] is not None:
            rollout.calls[call["id"]] = call
    elif kind in OUTPUTS:
        rollout.results += 1
        output = item.get("output", item.get("content"))
        call_id = item.get("call_id")
        found = rollout.calls.get(str(call_id)) if call_id is not None else None
        failed = _failed(output)
        if failed:
            rollout.signals["tool_errors"] += 1
        if found is None or "result" in found:
            rollout.turn("tool", text(output), call_id=call_id, is_error=failed or None)
            return
        found["result"] = output
        if failed:
            found["metadata"]["is_error"] = True
    else:  # snapshots and items this version does not know: counted
        rollout.left_out[f"response_item/{kind}"] += 1


def _event(rollout: _Rollout, event: dict[str, Any], stamp: Any, inherited: bool) -> str | None:
    """Handle an event; return the user's message when it is one."""
    kind = event.get("type")
    mark = {"timestamp": stamp, "inherited": True if inherited else None}
    if kind == "user_message":
        message = event.get("message")
        content = message if isinstance(message, str) else text(message)
        rollout.turn("user", content, **mark)
        return content
    if kind == "agent_message":
        message = event.get("message")
        if isinstance(message, str) and message.strip() not in rollout.said:
            rollout.say(message)
        return None
    if kind == "agent_reasoning":
        said = event.get("text")
        if isinstance(said, str) and said.strip() not in rollout.thought:
            rollout.reasoning.append(said)
        return None
    if kind in ("error", "turn_aborted", "stream_error"):
        rollout.signals["errors" if kind != "turn_aborted" else "turns_aborted"] += 1
        detail = event.get("message") or event.get("reason") or kind
        rollout.turn("system", f"{kind}: {text(detail)}", event=event)
        return None
    if kind == "task_complete":
        error = event.get("error")
        if error:
            rollout.signals["task_errors"] += 1
            rollout.turn("system", f"task_complete with an error: {text(error)}", event=event)
        else:
            rollout.signals["tasks_completed"] += 1
        return None
    if kind in ("context_compacted", "entered_review_mode", "exited_review_mode"):
        rollout.turn("system", str(kind), event=event)
        return None
    rollout.left_out[f"event_msg/{kind}"] += 1
    return None


def _is_subagent(source: Any) -> bool:
    return isinstance(source, dict) and "subagent" in source


def _source_parent(source: Any) -> str | None:
    """The parent session a sub-agent's `session_meta.source` names, when it names one."""
    sub = source.get("subagent") if isinstance(source, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    if isinstance(spawn, dict) and spawn.get("parent_thread_id"):
        return str(spawn["parent_thread_id"])
    return None


@dataclass
class _Header:
    """What a rollout says of itself besides its turns."""

    meta: dict[str, Any] | None = None
    """`session_meta`'s payload, or the legacy format's header."""
    started: str | None = None
    models: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    """The messages the user typed (`event_msg` `user_message`), in order."""
    damaged: list[int] = field(default_factory=list)


def _line(rollout: _Rollout, header: _Header, record: dict[str, Any]) -> None:
    """One line of a rollout: its envelope read, and its item or event given to the rollout."""
    kind = record.get("type")
    payload = record.get("payload")
    stamp = record.get("timestamp")
    if kind not in CODEX_ENVELOPES or not isinstance(payload, dict):
        if header.meta is None and "id" in record and "type" not in record:  # the legacy header
            header.meta = dict(record)
            return
        if isinstance(kind, str) and kind in ("message", "reasoning", *CALLS, *OUTPUTS):
            _item(rollout, record, stamp, False)
        else:
            rollout.left_out[str(kind)] += 1
        return
    if kind == "session_meta":
        if header.meta is None:
            header.meta = dict(payload)
            header.started = str(payload.get("timestamp") or stamp or "") or None
        return
    if kind == "turn_context":
        model = payload.get("model")
        if isinstance(model, str) and model not in header.models:
            header.models.append(model)
        return
    if kind == "compacted":
        rollout.left_out["compacted"] += 1
        return
    inherited = (
        header.started is not None
        and _is_subagent((header.meta or {}).get("source"))
        and isinstance(stamp, str)
        and stamp < header.started
    )
    if kind == "response_item":
        _item(rollout, payload, stamp, inherited)
    else:
        message = _event(rollout, payload, stamp, inherited)
        if message is not None and not inherited:
            header.prompts.append(message)


def _task(prompts: list[str], turns: list[dict[str, Any]]) -> str | None:
    """The first message the user typed; in the legacy format, which has no user_message
    events, the first user turn neither inherited nor injected context."""
    task = next((p for p in prompts if p.strip()), None)
    if task is None:  # the legacy format has no user_message events
        task = next(
            (
                t["content"]
                for t in turns
                if t["role"] == "user"
                and t.get("content")
                and not t.get("metadata", {}).get("inherited")
                and not str(t["content"]).lstrip().startswith("<")
            ),
            None,
        )
    return task


def _metadata(header: _Header, rollout: _Rollout) -> dict[str, Any]:
    meta = header.meta
    metadata: dict[str, Any] = {"session_meta": meta or {}}
    if header.models:
        metadata["models"] = header.models
    source = (meta or {}).get("source")
    if isinstance(source, dict) and _is_subagent(source):
        metadata["subagent"] = source["subagent"]
        parent = _source_parent(source)
        if parent is not None:
            metadata["parent_session"] = parent
    metadata["counts"] = {"tool_calls": rollout.uses, "tool_results": rollout.results}
    if rollout.left_out:
        metadata["records_left_out"] = dict(sorted(rollout.left_out.items()))
    if header.damaged:
        metadata["damaged_lines_left_out"] = header.damaged
    metadata["weak_signals"] = dict(rollout.signals)
    return metadata


def read(path: Path, found: Probe) -> Iterator[Found]:
    rollout = _Rollout()
    header = _Header()
    for item in jsonl_objects(path, unit="record"):
        if isinstance(item, InputError):
            header.damaged.append(item.line or 0)
            continue
        _line(rollout, header, item[1])
    said_by_user = {p.strip() for p in header.prompts}
    turns = [
        t
        for t in rollout.turns
        if not (
            t.get("metadata", {}).get("injected")
            and (t.get("content") or "").strip() in said_by_user
        )
    ]
    task = _task(header.prompts, turns)
    if not turns or task is None:
        yield InputError(
            "no task: no user message in the rollout" if turns else "no turns in the rollout",
            path=path,
            hint="a Codex rollout starts with session_meta and the user's message",
        )
        return
    metadata = _metadata(header, rollout)
    session = str((header.meta or {}).get("id") or path.stem)
    yield session_run(path, session, task, turns, metadata)
