"""Terminal-Bench 1.0 trial folders: `runs/<run>/<task>/<trial>/results.json` (the trial's
`instruction`, `is_resolved`, `failure_mode`) beside what the agent did.

One trial is one run; its outcome is `is_resolved`. The turns come from the agent's own logs,
the first of these the trial holds: `agent-logs/episode-N/` (the prompt the agent was given and
its response, a user and an assistant turn per episode), `commands.txt` (a turn per command sent
to the terminal); the terminal as the agent left it (`sessions/agent.log`, else
`panes/post-agent.txt`) is the last turn. The run-level `results.json` (with `resolved_ids`
and the trials' `results`) is no run, and labels nothing on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, load_json, rest

_EPISODE = re.compile(r"episode-(\d+)$")


def sniff(found: Probe) -> bool:
    return (
        found.kind == "json" and found.top == "map" and found.has("", "instruction", "is_resolved")
    )


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _episodes(trial: Path) -> list[dict[str, Any]]:
    logs = trial / "agent-logs"
    if not logs.is_dir():
        return []
    folders = sorted(
        (p for p in logs.rglob("episode-*") if p.is_dir() and _EPISODE.search(p.name)),
        key=lambda p: int(_EPISODE.search(p.name).group(1)),  # type: ignore[union-attr]
    )
    turns: list[dict[str, Any]] = []
    for folder in folders:
        prompt = folder / "prompt.txt"
        if prompt.is_file():
            turns.append(
                {"role": "user", "content": _read(prompt), "metadata": {"episode": folder.name}}
            )
        for name in ("response.json", "response.txt", "debug.json"):
            response = folder / name
            if response.is_file():
                turns.append(
                    {
                        "role": "assistant",
                        "content": _read(response),
                        "metadata": {"episode": folder.name, "file": name},
                    }
                )
                break
    return turns


def _commands(trial: Path) -> list[dict[str, Any]]:
    commands = trial / "commands.txt"
    if not commands.is_file():
        return []
    return [
        {"role": "agent", "action": line} for line in _read(commands).splitlines() if line.strip()
    ]


def read(path: Path, found: Probe) -> Iterator[Found]:
    try:
        result = load_json(path)
        if not isinstance(result, dict):
            raise InputError("expected a JSON object", path=path)
        trial = path.parent
        turns = _episodes(trial) or _commands(trial)
        for screen in (trial / "sessions/agent.log", trial / "panes/post-agent.txt"):
            if screen.is_file():
                turns.append(
                    {
                        "role": "environment",
                        "observation": _read(screen),
                        "metadata": {"file": str(screen.relative_to(trial))},
                    }
                )
                break
        if not turns:
            raise InputError(
                "no agent log beside this trial's results.json (agent-logs/, commands.txt, "
                "sessions/agent.log or panes/post-agent.txt)",
                path=path,
            )
        resolved = result.get("is_resolved")
        task_id = str(result.get("task_id") or trial.parent.name)
        yield Candidate(
            path=str(path),
            run_id=str(result.get("trial_name") or trial.name),
            note=None
            if isinstance(resolved, bool)
            else f"is_resolved is {resolved!r} (failure_mode {result.get('failure_mode')!r})",
            data={
                "task_id": task_id,
                "task": str(result["instruction"]),
                "task_type": None,
                "success": resolved if isinstance(resolved, bool) else None,
                "turns": turns,
                "metadata": rest(result, {"instruction"}),
            },
        )
    except InputError as error:
        yield error
