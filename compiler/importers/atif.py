"""ATIF, the Agent Trajectory Interchange Format of Harbor / Terminal-Bench (schema 1.x).

One `trajectory.json` is one run. A step becomes a turn: `message`, `reasoning_content`, the
tool calls with the observation results that answer them: by `source_call_id`, else by place
(Harbor's Terminus-2 and mini-swe-agent log results without it, in the order of the calls), when
the results that name no call are as many as the calls left unanswered; one result for several
calls (Terminus-2's terminal output after all of a step's commands) answers none of them and is
the step's observation. The reward is in the trial's `result.json` (Harbor:
`TRIAL/agent/trajectory.json` beside `TRIAL/result.json`).

Sub-agents are part of the run that delegated to them: a result's `subagent_trajectory_ref`
names a trajectory embedded in the root's `subagent_trajectories` (by `trajectory_id`) or a file
beside this one (`trajectory_path`: Terminus-2's `trajectory.summarization-1-summary.json` beside
`trajectory.json`). Its turns are placed right after the turn of the step that delegated, each
marked with `metadata.subagent` (its id, where it was found, and the parent's step and call);
such a file is read with its parent, not as a run of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import read_input

from .base import Candidate, Found, Probe, load_json, need, rest, text

SUPPORTED_MAJOR = "1"
MAX_SUBAGENT_DEPTH = 5
"""Sub-agents of sub-agents are joined this deep; a reference deeper (or in a loop) is not."""


def _answers(calls: list[Any], results: list[Any]) -> dict[int, tuple[int, str]]:
    """Which result answers each call (call index -> result index, and how it was paired): the
    result naming the call's `tool_call_id`; then, when the results naming no call are exactly
    as many as the calls still unanswered, each such result the call in the same place."""
    ids: dict[str, int] = {}
    for index, raw in enumerate(calls):
        if isinstance(raw, dict) and raw.get("tool_call_id") is not None:
            ids.setdefault(str(raw["tool_call_id"]), index)
    answers: dict[int, tuple[int, str]] = {}
    nameless = []
    for at, result in enumerate(results):
        if not isinstance(result, dict):
            continue
        if result.get("source_call_id") is None:
            nameless.append(at)
            continue
        call = ids.get(str(result["source_call_id"]))
        if call is not None and call not in answers:
            answers[call] = (at, "id")
    unanswered = [i for i, raw in enumerate(calls) if isinstance(raw, dict) and i not in answers]
    if nameless and len(nameless) == len(unanswered):
        for call, at in zip(unanswered, nameless, strict=True):
            answers[call] = (at, "position")
    return answers


def _refs(result: Any) -> list[Any]:
    refs = result.get("subagent_trajectory_ref") if isinstance(result, dict) else None
    return list(refs) if isinstance(refs, list) else []


def _turn(step: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[Any, str | None]]]:
    """The step as a turn, and each sub-agent reference among its results with the id of the
    call whose result holds it (None: a result of the step's own)."""
    turn: dict[str, Any] = {"role": None if step.get("source") is None else str(step["source"])}
    used = {"source", "message", "reasoning_content", "tool_calls", "observation"}
    turn["content"] = text(step.get("message"))
    if step.get("reasoning_content") is not None:
        turn["reasoning"] = text(step["reasoning_content"])
    results: list[Any] = []
    observation = step.get("observation")
    if isinstance(observation, dict) and isinstance(observation.get("results"), list):
        results = list(observation["results"])
        extra_observation = rest(observation, {"results"})
    else:
        extra_observation = {} if observation is None else {"observation": observation}
    raw_calls = step.get("tool_calls")
    raw_calls = raw_calls if isinstance(raw_calls, list) else []
    answers = _answers(raw_calls, results)
    calls = []
    links: list[tuple[Any, str | None]] = []
    for index, raw in enumerate(raw_calls):
        if not isinstance(raw, dict):  # a call logged as a bare string or number
            calls.append({"id": None, "name": "unknown", "arguments": raw})
            continue
        call: dict[str, Any] = {
            "id": None if raw.get("tool_call_id") is None else str(raw["tool_call_id"]),
            "name": str(raw.get("function_name", "unknown")),
            "arguments": raw.get("arguments"),
        }
        extra = rest(raw, {"tool_call_id", "function_name", "arguments"})
        if index in answers:
            at, how = answers[index]
            result = results[at]
            call["result"] = result.get("content")
            more = rest(result, {"source_call_id", "content"})
            if more:
                extra["result"] = more
            if how == "position":  # the log does not say which call it answers
                extra["result_paired_by"] = "position"
            if result.get("is_error") is True:  # an error signal the offline reading quotes
                extra["is_error"] = True
            links += [(ref, call["id"]) for ref in _refs(result)]
        if extra:
            call["metadata"] = extra
        calls.append(call)
    if calls:
        turn["tool_calls"] = calls
    paired = {at for at, _ in answers.values()}
    results = [result for at, result in enumerate(results) if at not in paired]
    links += [(ref, None) for result in results for ref in _refs(result)]
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
    return turn, links


@dataclass
class _Sub:
    """A sub-agent's trajectory a reference led to."""

    trajectory: dict[str, Any]
    steps: list[dict[str, Any]]
    source: str
    """Where it was found: its `trajectory_path`, or `subagent_trajectories` (embedded)."""
    folder: Path
    """The folder its own file references are read from."""


@dataclass
class _Reading:
    """What reading one run has met: the embedded sub-agents by id, the trajectories joined
    (files by resolved path, embedded ones by id), and the references that led nowhere."""

    root: str
    """The run's own file (resolved): a reference back to it is a loop."""
    embedded: dict[str, dict[str, Any]] = field(default_factory=dict)
    joined: set[str] = field(default_factory=set)
    unresolved: int = 0

    def embed(self, trajectory: dict[str, Any]) -> None:
        """Note the sub-agents `trajectory` embeds, so that references to them resolve."""
        embedded = trajectory.get("subagent_trajectories")
        for sub in embedded if isinstance(embedded, list) else []:
            if isinstance(sub, dict) and isinstance(sub.get("trajectory_id"), str):
                self.embedded.setdefault(sub["trajectory_id"], sub)

    def has_joined(self, sub: Any) -> bool:
        """Whether the embedded sub-agent `sub` was joined to a step."""
        return isinstance(sub, dict) and f"id:{sub.get('trajectory_id')}" in self.joined

    def resolve(self, ref: Any, folder: Path) -> _Sub | None:
        """The sub-agent's trajectory `ref` names, not joined before (it is joined now); a
        reference that names none readable is counted as unresolved."""
        ident = ref.get("trajectory_id") if isinstance(ref, dict) else None
        where = ref.get("trajectory_path") if isinstance(ref, dict) else None
        sub: _Sub | None = None
        if isinstance(ident, str) and ident in self.embedded:
            key = f"id:{ident}"
            trajectory: Any = self.embedded[ident]
            sub = _sub(trajectory, "subagent_trajectories", folder)
        else:
            target = _beside(folder, where) if isinstance(where, str) else None
            key = str(target)
            if target is not None and key not in self.joined and key != self.root:
                try:
                    sub = _sub(load_json(target), str(where), target.parent)
                except InputError:
                    sub = None
        if key in self.joined or key == self.root:
            return None  # joined already: a second reference to it, or a loop
        if sub is None:
            self.unresolved += 1
            return None
        self.joined.add(key)
        self.embed(sub.trajectory)
        return sub


def _sub(trajectory: Any, source: str, folder: Path) -> _Sub | None:
    steps = _steps(trajectory)
    return None if steps is None else _Sub(trajectory, steps, source, folder)


def _beside(folder: Path, where: str) -> Path | None:
    """The file a `trajectory_path` names, when it lies in `folder` or under it (a URL, or a
    path out of the trial, is not followed)."""
    if "://" in where:
        return None
    base = folder.resolve()
    target = (base / where).resolve()
    return target if target.is_relative_to(base) and target.is_file() else None


def _steps(trajectory: Any) -> list[dict[str, Any]] | None:
    steps = trajectory.get("steps") if isinstance(trajectory, dict) else None
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        return None
    return steps


def _turns(
    steps: list[dict[str, Any]], folder: Path, reading: _Reading, depth: int = 0
) -> list[dict[str, Any]]:
    """The turns of a trajectory's steps, each sub-agent's right after the step that
    delegated to it."""
    turns = []
    for step in steps:
        turn, links = _turn(step)
        turns.append(turn)
        for ref, call in links:
            if depth >= MAX_SUBAGENT_DEPTH:
                reading.unresolved += 1
                continue
            sub = reading.resolve(ref, folder)
            if sub is None:
                continue
            link = {
                "id": sub.trajectory.get("trajectory_id") or sub.trajectory.get("session_id"),
                "source": sub.source,
                "step": step.get("step_id"),
                "call": call,
            }
            for sub_turn in _turns(sub.steps, sub.folder, reading, depth + 1):
                sub_turn.setdefault("metadata", {}).setdefault("subagent", link)
                turns.append(sub_turn)
    return turns


def _delegating_parent(path: Path) -> Path | None:
    """The trajectory beside `path` whose `subagent_trajectory_ref` names it: Terminus-2 writes
    `trajectory.summarization-1-summary.json` beside `trajectory.json`, so the parent is named
    by a leading part of the name."""
    parts = path.name.split(".")
    for cut in range(len(parts) - 2, 0, -1):
        parent = path.with_name(".".join(parts[:cut]) + ".json")
        if not parent.is_file():
            continue
        try:
            steps = _steps(load_json(parent))
        except InputError:
            continue
        for step in steps or []:
            observation = step.get("observation")
            results = observation.get("results") if isinstance(observation, dict) else None
            for result in results if isinstance(results, list) else []:
                for ref in _refs(result):
                    where = ref.get("trajectory_path") if isinstance(ref, dict) else None
                    if isinstance(where, str) and _beside(parent.parent, where) == path.resolve():
                        return parent
    return None


def read_with(path: Path) -> str | None:
    """Why this file is read with another, if it is (see Format.read_with)."""
    parent = _delegating_parent(path)
    if parent is not None:
        return f"a sub-agent's trajectory, read with {parent.name}, which delegated to it"
    return None


def _is_sidechain(step: dict[str, Any]) -> bool:
    extra = step.get("extra")
    return isinstance(extra, dict) and extra.get("is_sidechain") is True


def _warmups(steps: list[dict[str, Any]]) -> int:
    """How many steps open the trajectory as a sub-agent's reply to no request: Claude Code's
    warm-up calls ("I'm ready to help! ..."), which Harbor puts first: side-chain steps of the
    agent that call no tool and end its turn (`stop_reason` end_turn), before any other step.
    They are no work, and are left out."""
    count = 0
    for step in steps:
        extra = step.get("extra")
        if (
            step.get("source") != "agent"
            or step.get("tool_calls")
            or not _is_sidechain(step)
            or not isinstance(extra, dict)
            or extra.get("stop_reason") != "end_turn"
        ):
            break
        count += 1
    return count


def _task(steps: list[dict[str, Any]], path: Path) -> str | None:
    users = [s for s in steps if s.get("source") == "user" and isinstance(s.get("message"), str)]
    main = [s for s in users if not _is_sidechain(s)]
    for step in main or users:
        return str(step["message"])
    instruction = path.parent.parent / "instruction.md"  # some exports keep it beside the trial
    if instruction.is_file():
        return read_input(instruction).decode("utf-8", "replace")
    return None


def _trial_result(path: Path) -> tuple[Path | None, dict[str, Any] | None]:
    for candidate in (path.parent.parent / "result.json", path.parent / "result.json"):
        if candidate.is_file():
            try:
                data = orjson.loads(read_input(candidate))
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


def _origin(result: dict[str, Any] | None) -> str:
    """The source of a trial's task: its dataset, as the trial's result names it (`source`,
    or the folder of `task_id.path`, `datasets/<name>/<task>`), else Harbor or ATIF alone."""
    if result is None:
        return "atif"
    if isinstance(result.get("source"), str) and result["source"].strip():
        return f"harbor/{result['source'].strip()}"
    task = result.get("task_id")
    path = task.get("path") if isinstance(task, dict) else None
    parts = path.split("/") if isinstance(path, str) else []
    if len(parts) >= 3 and parts[0] == "datasets" and parts[1]:
        return f"harbor/{parts[1]}"
    return "harbor"


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
        reading = _Reading(root=str(path.resolve()))
        reading.embed(trajectory)
        warmups = _warmups(steps)
        turns = _turns(steps[warmups:], path.parent, reading)
        task = _task(steps, path)
        if task is None:
            raise InputError(
                "no task: no step has source 'user', and no instruction.md beside the trial",
                path=path,
                field="steps",
            )
        result_path, result = _trial_result(path)
        metadata = rest(trajectory, {"steps"})
        if reading.joined or reading.unresolved:
            joined, unresolved = len(reading.joined), reading.unresolved
            metadata["subagents"] = {"joined": joined, "unresolved": unresolved}
        embedded = metadata.pop("subagent_trajectories", None)
        if isinstance(embedded, list):  # those no step delegated to stay as they were
            embedded = [sub for sub in embedded if not reading.has_joined(sub)]
        if embedded:
            metadata["subagent_trajectories"] = embedded
        if warmups:
            metadata["warmup_steps_left_out"] = warmups
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
                "origin": _origin(result),
                "task_type": (result or {}).get("source") or None,
                "success": None,
                "turns": turns,
                "metadata": metadata,
            },
        )
    except InputError as error:
        yield error
