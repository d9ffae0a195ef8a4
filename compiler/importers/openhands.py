"""OpenHands evaluation output: JSON Lines, a run a line, with its event `history` (either
[action, observation] pairs or a flat list of events whose observations name their action in
`cause`) and `test_result`. The resolver's output.jsonl is read too: an `issue` (owner, repo,
number) names the run, and its top-level `success` is the outcome."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, jsonl_objects, load_json, need, rest, text
from .chat import first_user_text

RESULT_KEYS = ("result", "resolved", "success", "correct")


def sniff(found: Probe) -> bool:
    if found.kind not in ("jsonl", "json") or found.top != "map":
        return False
    top = found.keys.get("", set())
    return "history" in top and bool(
        top & {"instruction", "instance", "test_result", "instance_id", "issue"}
    )


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
            target = by_id.get(entry.get("cause")) or (turns[-1] if turns else None)
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
            "task_type": _task_type(obj),
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
