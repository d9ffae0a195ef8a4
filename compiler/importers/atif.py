"""ATIF, the Agent Trajectory Interchange Format of Harbor / Terminal-Bench (schema 1.x).

One `trajectory.json` is one run. A step becomes a turn: `message`, `reasoning_content`, the
tool calls with the observation results that answer them (by `source_call_id`). The reward is in
the trial's `result.json` (Harbor: `TRIAL/agent/trajectory.json` beside `TRIAL/result.json`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, load_json, need, rest, text

SUPPORTED_MAJOR = "1"


def sniff(found: Probe) -> bool:
    if found.kind != "json" or found.top != "map":
        return False
    version = found.values.get("schema_version")
    if isinstance(version, str) and version.upper().startswith("ATIF"):
        return True
    return found.has("", "steps", "session_id") and found.has("steps.item", "source")


def sniff_result(found: Probe) -> bool:
    """A Harbor trial's (or job's) result.json: a side-car, read by the trajectory it belongs to."""
    if found.kind != "json" or found.top != "map":
        return False
    return found.has("", "trial_name", "verifier_result") or found.has(
        "", "n_total_trials", "stats"
    )


def _turn(step: dict[str, Any]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": None if step.get("source") is None else str(step["source"])}
    used = {"source", "message", "reasoning_content", "tool_calls", "observation"}
    turn["content"] = text(step.get("message"))
    if step.get("reasoning_content") is not None:
        turn["reasoning"] = text(step["reasoning_content"])
    results = []
    observation = step.get("observation")
    if isinstance(observation, dict) and isinstance(observation.get("results"), list):
        results = list(observation["results"])
        extra_observation = rest(observation, {"results"})
    else:
        extra_observation = {} if observation is None else {"observation": observation}
    calls = []
    raw_calls = step.get("tool_calls")
    for raw in raw_calls if isinstance(raw_calls, list) else []:
        if not isinstance(raw, dict):  # a call logged as a bare string or number
            calls.append({"id": None, "name": "unknown", "arguments": raw})
            continue
        call: dict[str, Any] = {
            "id": None if raw.get("tool_call_id") is None else str(raw["tool_call_id"]),
            "name": str(raw.get("function_name", "unknown")),
            "arguments": raw.get("arguments"),
        }
        extra = rest(raw, {"tool_call_id", "function_name", "arguments"})
        for result in results:
            if isinstance(result, dict) and result.get("source_call_id") == raw.get("tool_call_id"):
                call["result"] = result.get("content")
                more = rest(result, {"source_call_id", "content"})
                if more:
                    extra["result"] = more
                if result.get("is_error") is True:  # an error signal the offline reading quotes
                    extra["is_error"] = True
                results.remove(result)
                break
        if extra:
            call["metadata"] = extra
        calls.append(call)
    if calls:
        turn["tool_calls"] = calls
    if results:  # results that answer no call of this step
        turn["observation"] = "\n".join(
            text(r.get("content")) or "" if isinstance(r, dict) else text(r) or "" for r in results
        )
        extra_observation["unmatched_results"] = results
    metadata = rest(step, used)
    if extra_observation:
        metadata["observation"] = extra_observation
    if metadata:
        turn["metadata"] = metadata
    return turn


def _is_sidechain(step: dict[str, Any]) -> bool:
    extra = step.get("extra")
    return isinstance(extra, dict) and extra.get("is_sidechain") is True


def _task(steps: list[dict[str, Any]], path: Path) -> str | None:
    users = [s for s in steps if s.get("source") == "user" and isinstance(s.get("message"), str)]
    main = [s for s in users if not _is_sidechain(s)]
    for step in main or users:
        return str(step["message"])
    instruction = path.parent.parent / "instruction.md"  # some exports keep it beside the trial
    if instruction.is_file():
        return instruction.read_text(encoding="utf-8", errors="replace")
    return None


def _trial_result(path: Path) -> tuple[Path | None, dict[str, Any] | None]:
    for candidate in (path.parent.parent / "result.json", path.parent / "result.json"):
        if candidate.is_file():
            try:
                data = orjson.loads(candidate.read_bytes())
            except orjson.JSONDecodeError:
                raise InputError(
                    "the trial's result.json is not valid JSON", path=candidate
                ) from None
            if isinstance(data, dict) and "verifier_result" in data:
                return candidate, data
    return None, None


def _reward(result: dict[str, Any] | None) -> float | None:
    if not result:
        return None
    verifier = result.get("verifier_result")
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    value = rewards.get("reward") if isinstance(rewards, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def read(path: Path, found: Probe) -> Iterator[Found]:
    try:
        trajectory = load_json(path)
        steps = need(trajectory, "steps", path)
        if not isinstance(steps, list) or not steps:
            raise InputError("expected a non-empty list of steps", path=path, field="steps")
        version = str(trajectory.get("schema_version", ""))
        major = version.upper().removeprefix("ATIF-V").split(".", 1)[0]
        if version and major != SUPPORTED_MAJOR:
            raise InputError(
                f"ATIF schema {version} is not supported (1.x is)",
                path=path,
                field="schema_version",
            )
        for number, step in enumerate(steps):
            if not isinstance(step, dict):
                raise InputError("expected a JSON object", path=path, field=f"steps[{number}]")
        turns = [_turn(step) for step in steps]
        task = _task(steps, path)
        if task is None:
            raise InputError(
                "no task: no step has source 'user', and no instruction.md beside the trial",
                path=path,
                field="steps",
            )
        result_path, result = _trial_result(path)
        metadata = rest(trajectory, {"steps"})
        reward = _reward(result)
        if result is not None:
            metadata["trial_result"] = result
            metadata["trial_result_file"] = str(result_path)
        if reward is not None:
            metadata["reward"] = reward
        task_name = (result or {}).get("task_name")
        trial_name = (result or {}).get("trial_name")
        session = str(trajectory.get("session_id") or path.parent.parent.name)
        task_id = str(task_name) if task_name else session
        yield Candidate(
            path=str(path),
            run_id=str(trial_name) if trial_name else session,
            reward=reward,
            note=None if result else "no trial result.json beside the trajectory",
            data={
                "task_id": task_id,
                "task": task,
                "task_type": (result or {}).get("source") or None,
                "success": None,
                "turns": turns,
                "metadata": metadata,
            },
        )
    except InputError as error:
        yield error
