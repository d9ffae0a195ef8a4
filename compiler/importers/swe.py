"""mini-swe-agent and SWE-agent trajectories (one `.traj.json` / `.traj` per SWE-bench
instance), and the SWE-bench harness reports that label them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, first_user_text, load_json, need, rest, text
from .chat import chat_turns

_BASH_BLOCK = re.compile(r"```(?:bash|sh)\s*\n(.*?)\n?```", re.DOTALL)
SWE_BENCH = "swe-bench"


def _instance_from_name(path: Path) -> str:
    name = path.name
    for suffix in (".traj.json", ".traj", ".report.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _swe_run(
    path: Path, instance: str, task: str, turns: list[dict[str, Any]], metadata: dict[str, Any]
) -> Candidate:
    """A SWE-bench run: its outcome is in the harness report, never in the trajectory."""
    return Candidate(
        path=str(path),
        run_id=instance,
        data={
            "task_id": instance,
            "task": task,
            # An instance id is the same task in every split (Verified and Lite are subsets
            # of one test set), and the log does not say which split it ran.
            "origin": SWE_BENCH,
            "task_type": SWE_BENCH,
            "success": None,
            "turns": turns,
            "metadata": metadata,
        },
        note="the trajectory holds no outcome: give the SWE-bench report (--labels)",
    )


# --- mini-swe-agent ---------------------------------------------------------------------------


def mini_turns(messages: list[Any]) -> list[dict[str, Any]]:
    """The chat turns, with each assistant's bash block as its `action` and the environment's
    reply (the next user message: `<returncode>`, `<output>`, or a format error) as its
    `observation`, so an action and what it returned stay in one turn."""
    chat = chat_turns(messages)
    turns: list[dict[str, Any]] = []
    seen_assistant = False
    for turn in chat:
        role = turn.get("role")
        previous = turns[-1] if turns else None
        if (
            role == "user"
            and seen_assistant
            and previous is not None
            and previous.get("role") == "assistant"
            and "observation" not in previous
            and not turn.get("tool_calls")
        ):
            previous["observation"] = turn.get("content")
            if turn.get("metadata"):
                previous.setdefault("metadata", {})["observation_message"] = turn["metadata"]
            continue
        if role == "assistant":
            seen_assistant = True
            match = _BASH_BLOCK.search(turn.get("content") or "")
            if match:
                turn["action"] = match.group(1)
        turns.append(turn)
    return turns


def read_mini(path: Path, found: Probe) -> Iterator[Found]:
    try:
        traj = load_json(path)
        messages = need(traj, "messages", path)
        if not isinstance(messages, list) or not messages:
            raise InputError("expected a non-empty list", path=path, field="messages")
        turns = mini_turns(messages)
        task = first_user_text(turns)
        if task is None:
            raise InputError("no user message to take the task from", path=path, field="messages")
        instance = str(traj.get("instance_id") or _instance_from_name(path))
        yield _swe_run(path, instance, task, turns, rest(traj, {"messages"}))
    except InputError as error:
        yield error


# --- SWE-agent --------------------------------------------------------------------------------


STEP_FIELDS = {"response": "content", "thought": "reasoning", "action": "action"}


def _problem(traj: dict[str, Any]) -> str | None:
    config = traj.get("replay_config")
    if isinstance(config, str):
        try:
            import orjson

            config = orjson.loads(config)
        except ValueError:
            config = None
    if isinstance(config, dict):
        statement = config.get("problem_statement")
        if isinstance(statement, dict) and isinstance(statement.get("text"), str):
            return str(statement["text"])
    for message in traj.get("history") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = chat_turns([message])[0].get("content")
            if content:
                return str(content)
    return None


def read_sweagent(path: Path, found: Probe) -> Iterator[Found]:
    try:
        traj = load_json(path)
        steps = need(traj, "trajectory", path)
        if not isinstance(steps, list) or not steps:
            raise InputError("expected a non-empty list", path=path, field="trajectory")
        turns = []
        for number, step in enumerate(steps):
            if not isinstance(step, dict):
                raise InputError("expected a JSON object", path=path, field=f"trajectory[{number}]")
            turn: dict[str, Any] = {"role": "assistant"}
            for source, target in STEP_FIELDS.items():
                if step.get(source) is not None:
                    turn[target] = text(step[source])
            if step.get("observation") is not None:
                turn["observation"] = text(step["observation"])
            extra = rest(step, {*STEP_FIELDS, "observation"})
            if extra:
                turn["metadata"] = extra
            turns.append(turn)
        task = _problem(traj)
        if task is None:
            raise InputError("no problem statement in replay_config or history", path=path)
        yield _swe_run(path, _instance_from_name(path), task, turns, rest(traj, {"trajectory"}))
    except InputError as error:
        yield error


# --- SWE-bench reports (labels) ---------------------------------------------------------------


def report_labels(path: Path) -> dict[str, bool]:
    """Instance id -> resolved, from a per-instance report, a keyed report or a summary."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    if isinstance(data.get("resolved"), bool):
        # A report of its own: named by the instance, or lying in a folder named so.
        name = path.parent.name if path.name == "report.json" else _instance_from_name(path)
        return {str(data.get("instance_id") or name): data["resolved"]}
    if "resolved_ids" in data:
        labels = {str(i): False for i in data.get("unresolved_ids") or []}
        labels.update({str(i): False for i in data.get("error_ids") or []})
        labels.update({str(i): True for i in data.get("resolved_ids") or []})
        return labels
    labels = {}
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(value.get("resolved"), bool):
            labels[str(key)] = value["resolved"]
    if not labels:
        raise InputError("no 'resolved' field in this SWE-bench report", path=path)
    return labels
