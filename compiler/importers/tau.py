"""τ-bench results (a JSON list of {task_id, trial, reward, info, traj}) and τ²-bench
simulation files ({info, tasks, simulations}), both streamed item by item."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, first_user_text, json_items, json_value, need, rest
from .chat import chat_turns

TAU, TAU2 = "tau-bench", "tau2-bench"
"""The two benchmarks' names, as the sources of their tasks (`tau-bench/airline`): their
domains share names, and their task ids too, yet no task of one is a task of the other."""
_POLICY_TITLE = re.compile(r"^\s*#\s*([A-Za-z][\w -]*?)\s+agent policy", re.IGNORECASE)


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


# --- τ-bench ----------------------------------------------------------------------------------


def _domain(turns: list[dict[str, Any]]) -> str:
    """τ-bench files do not name their domain; its policy, the system message, does."""
    for turn in turns[:2]:
        if turn.get("role") == "system" and isinstance(turn.get("content"), str):
            match = _POLICY_TITLE.match(turn["content"])
            if match:
                return match.group(1).strip().lower()
    return TAU


def _tau_run(path: Path, index: int, result: Any) -> Candidate:
    at = f"[{index}]"
    traj = need(result, "traj", path, at=at)
    if not isinstance(traj, list) or not traj:
        raise InputError("expected a non-empty list of messages", path=path, at=at, field="traj")
    task_id = str(need(result, "task_id", path, at=at))
    info = result.get("info") if isinstance(result.get("info"), dict) else {}
    task = info.get("task", {}).get("instruction") if isinstance(info.get("task"), dict) else None
    turns = chat_turns(traj)
    if not isinstance(task, str):
        task = first_user_text(turns)
    if not isinstance(task, str):
        raise InputError("no task: no info.task.instruction and no user message", path=path, at=at)
    trial = result.get("trial")
    metadata = rest(result, {"task_id", "traj"})
    if isinstance(info.get("task"), dict) and info["task"].get("instruction") == task:
        metadata["task_source"] = "simulated-user"  # the user's hidden instruction
    if isinstance(trial, int) and not isinstance(trial, bool):
        metadata["attempt"] = trial + 1
    reward = _number(result.get("reward"))
    domain = _domain(turns)
    return Candidate(
        path=str(path),
        at=at,
        run_id=f"{task_id}#{trial}" if trial is not None else f"{task_id}@{index}",
        reward=reward,
        data={
            "task_id": task_id,
            "task": task,
            # τ-bench numbers each domain's tasks from 0, as τ²-bench does its own.
            "origin": TAU if domain == TAU else f"{TAU}/{domain}",
            "task_type": domain,
            "success": None,
            "turns": turns,
            "metadata": metadata,
        },
    )


def read_tau(path: Path, found: Probe) -> Iterator[Found]:
    for item in json_items(path, "item"):
        if isinstance(item, InputError):
            yield item
            continue
        index, result = item
        try:
            yield _tau_run(path, index, result)
        except InputError as error:
            yield error


# --- τ²-bench ---------------------------------------------------------------------------------


def _scenario_text(task: dict[str, Any]) -> str | None:
    scenario = task.get("user_scenario")
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, str):
        return instructions
    parts = []
    if isinstance(instructions, dict):
        for key in ("reason_for_call", "known_info", "unknown_info", "task_instructions"):
            if isinstance(instructions.get(key), str) and instructions[key].strip():
                parts.append(f"{key.replace('_', ' ').capitalize()}: {instructions[key].strip()}")
    if not parts and isinstance(task.get("description"), dict):
        purpose = task["description"].get("purpose")
        if isinstance(purpose, str):
            parts.append(purpose)
    return "\n\n".join(parts) or None


def _task_domain(task: dict[str, Any], info: Any) -> str:
    scenario = task.get("user_scenario")
    instructions = scenario.get("instructions") if isinstance(scenario, dict) else None
    if isinstance(instructions, dict) and isinstance(instructions.get("domain"), str):
        return str(instructions["domain"])
    environment = info.get("environment_info") if isinstance(info, dict) else None
    if isinstance(environment, dict) and isinstance(environment.get("domain_name"), str):
        return str(environment["domain_name"])
    return TAU2


def read_tau2(path: Path, found: Probe) -> Iterator[Found]:
    tasks: dict[str, dict[str, Any]] = {}
    for item in json_items(path, "tasks.item"):
        if isinstance(item, InputError):
            break  # damage past the tasks: reading the simulations names it
        _, task = item
        if isinstance(task, dict) and task.get("id") is not None:
            tasks[str(task["id"])] = task
    info = json_value(path, "info")
    for item in json_items(path, "simulations.item"):
        if isinstance(item, InputError):
            yield item
            continue
        index, simulation = item
        at = f"simulations[{index}]"
        try:
            messages = need(simulation, "messages", path, at=at)
            task_id = str(need(simulation, "task_id", path, at=at))
            if not isinstance(messages, list) or not messages:
                raise InputError("expected a non-empty list", path=path, at=at, field="messages")
            task = tasks.get(task_id)
            if task is None:
                raise InputError(
                    f"task {task_id!r} is not in the file's 'tasks' list",
                    path=path,
                    at=at,
                    field="task_id",
                )
            task_text = _scenario_text(task)
            if task_text is None:
                raise InputError("the task has no user scenario", path=path, at=at)
            # τ² tool results carry the call's id under "id"; "requestor" says who called.
            turns = chat_turns(messages, result_id_keys=("tool_call_id", "id"))
            metadata = rest(simulation, {"task_id", "messages"})
            metadata["task"] = task
            metadata["task_source"] = "simulated-user"  # the user scenario's instructions
            if info is not None:
                metadata["file_info"] = info
            trial = simulation.get("trial")
            if isinstance(trial, int) and not isinstance(trial, bool):
                metadata["attempt"] = trial + 1
            reward_info = simulation.get("reward_info")
            reward = _number(reward_info.get("reward")) if isinstance(reward_info, dict) else None
            if reward is not None:
                metadata["reward"] = reward
            domain = _task_domain(task, info)
            yield Candidate(
                path=str(path),
                at=at,
                run_id=str(simulation.get("id") or f"{task_id}#{trial}"),
                reward=reward,
                data={
                    "task_id": task_id,
                    "task": task_text,
                    "origin": TAU2 if domain == TAU2 else f"{TAU2}/{domain}",
                    "task_type": domain,
                    "success": None,
                    "turns": turns,
                    "metadata": metadata,
                },
            )
        except InputError as error:
            yield error
