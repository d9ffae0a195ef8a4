"""OpenHands evaluation output: JSON Lines, a run a line, with its event `history` (either
[action, observation] pairs or a flat list of events whose observations name their action in
`cause`) and `test_result`. The resolver's output.jsonl is read too: an `issue` (owner, repo,
number) names the run, and its top-level `success` is the outcome.

A trajectory OpenHands saved (`--save-trajectory-path`, or downloaded from the GUI) is a JSON
list of one conversation's events: one run, its task the user's first message, no outcome."""

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
    jsonl_objects,
    load_json,
    need,
    rest,
    session_run,
    text,
)

RESULT_KEYS = ("result", "resolved", "success", "correct")


def _action_turn(event: dict[str, Any]) -> dict[str, Any]:
    given = event.get("args")
    args: dict[str, Any] = given if isinstance(given, dict) else {}
    turn: dict[str, Any] = {"role": None if event.get("source") is None else str(event["source"])}
    turn["content"] = text(event.get("message"))
    if isinstance(args.get("thought"), str) and args["thought"]:
        turn["reasoning"] = args["thought"]
    for key in ("command", "code", "content", "path", "url"):
        if event.get("action") not in (None, "message") and isinstance(args.get(key), str):
            turn["action"] = f"{event['action']}: {args[key]}"
            break
    else:
        if event.get("action") not in (None, "message"):
            turn["action"] = str(event["action"])
    turn["metadata"] = {"event": rest(event, {"message"})}
    return turn


def _observe(turn: dict[str, Any], event: dict[str, Any]) -> None:
    content = event.get("content")
    if content or event.get("observation") not in (None, "null"):
        turn["observation"] = text(content) or ""
    turn.setdefault("metadata", {})["observation_event"] = event


def history_turns(history: list[Any]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    by_id: dict[Any, dict[str, Any]] = {}
    for entry in history:
        if isinstance(entry, list):  # [action event, observation event]
            action = entry[0] if entry else {}
            turn = _action_turn(action if isinstance(action, dict) else {"message": text(action)})
            turns.append(turn)
            for observation in entry[1:]:
                if isinstance(observation, dict):
                    _observe(turn, observation)
            continue
        if not isinstance(entry, dict):
            turns.append({"content": text(entry)})
            continue
        if "observation" in entry and "action" not in entry:
            target = by_id.get(entry.get("cause"))
            if target is None and turns and entry["observation"] != "agent_state_changed":
                # No cause to go by: the action before it. A change of the agent's state
                # answers no action (it can come between an action and its observation).
                target = turns[-1]
            if target is not None and "observation" not in target:
                _observe(target, entry)
                continue
            turn = {"role": None if entry.get("source") is None else str(entry["source"])}
            _observe(turn, entry)
            turns.append(turn)
            continue
        turn = _action_turn(entry)
        turns.append(turn)
        if entry.get("id") is not None:
            by_id[entry["id"]] = turn
    return turns


def _outcome(test_result: Any) -> bool | None:
    if isinstance(test_result, bool):
        return test_result
    if isinstance(test_result, dict):
        for key in RESULT_KEYS:
            if isinstance(test_result.get(key), bool):
                return bool(test_result[key])
    return None


def _task_type(obj: dict[str, Any]) -> str | None:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("dataset"), str):
        return str(metadata["dataset"])
    return None


def _run(obj: dict[str, Any], path: Path, *, line: int | None) -> Candidate:
    history = need(obj, "history", path, line=line)
    if not isinstance(history, list) or not history:
        raise InputError("expected a non-empty list", path=path, line=line, field="history")
    turns = history_turns(history)
    task = obj.get("instruction")
    if not isinstance(task, str):
        task = first_user_text(turns)
    if not isinstance(task, str):
        raise InputError("no task: no 'instruction' and no user message", path=path, line=line)
    task_id = obj.get("instance_id") or obj.get("id")
    instance = obj.get("instance")
    if task_id is None and isinstance(instance, dict):
        task_id = instance.get("instance_id") or instance.get("id")
    issue = obj.get("issue")
    if task_id is None and isinstance(issue, dict) and issue.get("number") is not None:
        task_id = f"{issue.get('owner')}/{issue.get('repo')}#{issue['number']}"  # the resolver's
    if task_id is None:
        raise InputError(
            "no instance_id, id or issue (owner, repo, number)",
            path=path,
            line=line,
            field="instance_id",
        )
    success = _outcome(obj.get("test_result"))
    if success is None and isinstance(obj.get("success"), bool):
        success = obj["success"]
    return Candidate(
        path=str(path),
        line=line,
        run_id=str(task_id),
        note=None if success is not None else "neither test_result nor success holds an outcome",
        data={
            "task_id": str(task_id),
            "task": task,
            "origin": f"openhands/{dataset}" if (dataset := _task_type(obj)) else "openhands",
            "task_type": dataset,
            "success": success,
            "turns": turns,
            "metadata": rest(obj, {"history", "instruction"}),
        },
    )


def read(path: Path, found: Probe) -> Iterator[Found]:
    if found.kind == "json":
        try:
            yield _run(load_json(path), path, line=None)
        except InputError as error:
            yield error
        return
    for item in jsonl_objects(path):
        if isinstance(item, InputError):
            yield item
            continue
        line, obj = item
        try:
            yield _run(obj, path, line=line)
        except InputError as error:
            yield error


# --- a trajectory saved as a list of events ----------------------------------------------------
# What `openhands --save-trajectory-path` writes, and the GUI's trajectory download: one
# conversation, a JSON list of its events (actions with `args`, observations naming their
# action in `cause`, the model's tool call in `tool_call_metadata`). No outcome.


def _conversation(path: Path) -> str:
    """The conversation's id: the file is `<id>.json` (saved) or `trajectory-<id>.json`
    (downloaded)."""
    return path.name.split(".", 1)[0].removeprefix("trajectory-")


def read_events(path: Path, found: Probe) -> Iterator[Found]:
    events = load_json(path)
    if not isinstance(events, list):
        yield InputError(
            f"expected a JSON list of events, got {type(events).__name__}",
            path=path,
            hint="a saved OpenHands trajectory is a list of its events",
        )
        return
    turns = history_turns(events)
    task = first_user_text(turns)
    if task is None:
        yield InputError(
            "no task: no message from the user among its events",
            path=path,
            hint="an OpenHands trajectory starts with the user's message (source user, "
            "action message)",
        )
        return
    called = [e for e in events if isinstance(e, dict) and "action" in e and _called(e)]
    answered = {
        e.get("cause")
        for e in events
        if isinstance(e, dict) and "observation" in e and e.get("cause") is not None
    }
    metadata: dict[str, Any] = {
        "events": len(events),
        "counts": {
            "tool_calls": len(called),
            "tool_results": sum(e.get("id") in answered for e in called),
        },
        "weak_signals": {
            "errors": sum(isinstance(e, dict) and e.get("observation") == "error" for e in events),
            "failed_commands": sum(
                isinstance(e, dict) and e.get("observation") == "run" and e.get("success") is False
                for e in events
            ),
        },
    }
    model = next((_model(e) for e in called if _model(e)), None)
    if model:
        metadata["model"] = model
    yield session_run(path, _conversation(path), task, turns, metadata)


def _called(event: dict[str, Any]) -> bool:
    """Whether an action is a tool call the model made."""
    return isinstance(event.get("tool_call_metadata"), dict)


def _model(event: dict[str, Any]) -> str | None:
    response = event["tool_call_metadata"].get("model_response")
    model = response.get("model") if isinstance(response, dict) else None
    return model if isinstance(model, str) else None
