"""Terminal-Bench 1.0 trial folders: `runs/<run>/<task>/<trial>/results.json` (the trial's
`instruction`, `is_resolved`, `failure_mode`) beside what the agent did.

One trial is one run; its outcome is `is_resolved`. The turns come from the agent's own logs,
the first of these the trial holds: `agent-logs/episode-N/` (the prompt the agent was given and
its response, a user and an assistant turn per episode), `commands.txt` (a turn per command sent
to the terminal); the terminal as the agent left it (`sessions/agent.log`, else
`panes/post-agent.txt`) is the last turn. The run-level `results.json` (with `resolved_ids`
and the trials' `results`) is no run, and labels nothing on its own.

`commands.txt` holds every `send_keys` of the trial's tmux sessions, one `repr(keys)` a line,
the harness's own among them (terminal_bench/terminal/tmux_session.py, harness/harness.py,
agents/installed_agents/abstract_installed_agent.py): starting each session's recording
(`asciinema rec --stdin /logs/agent.cast`, then `clear`), setting up an installed agent
(`source /installed-agent/...`), running the tests (`bash ` `/tests/run-tests.sh`) and
ending each recording (`C-d`, the file's last lines). Those are no agent turns: they are left
out and counted in `metadata.harness_keystrokes_left_out`.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import read_input

from .base import Candidate, Found, Probe, load_json, rest

_EPISODE = re.compile(r"episode-(\d+)$")


def _read(path: Path) -> str:
    return read_input(path).decode("utf-8", "replace")


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


_ENTER_KEYS = frozenset({"Enter", "C-m", "KPEnter", "C-j", "^M", "^J"})
"""The keys tmux takes for Enter (TmuxSession._ENTER_KEYS)."""
_RECORDING = re.compile(r"asciinema rec --stdin \S+\.cast")
_RUN_TESTS = ["bash ", "/tests/run-tests.sh"]
_INSTALLED_AGENT = "source /installed-agent/"


def _keys(line: str) -> list[str]:
    """The keys one `send_keys` sent, as `commands.txt` logs them (`repr(keys)`: a list of
    strings, or one string); a line in no such form is one command as it stands."""
    if not line.startswith(("[", "'", '"')):
        return [line]
    try:
        with warnings.catch_warnings():  # an invalid escape in a hand-written line
            warnings.simplefilter("ignore")
            value = ast.literal_eval(line)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return [line]
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(key, str) for key in value):
        return value
    return [line]


def _typed(keys: list[str]) -> str:
    return "".join(key for key in keys if key not in _ENTER_KEYS).strip()


def _harness_lines(sent: list[list[str]]) -> set[int]:
    """The lines of `commands.txt` the harness typed, not the agent (see the module's doc)."""
    harness: set[int] = set()
    recordings = 0
    for index, keys in enumerate(sent):
        typed = _typed(keys)
        if _RECORDING.fullmatch(typed):
            harness.add(index)
            recordings += 1
            if index + 1 < len(sent) and _typed(sent[index + 1]) == "clear":
                harness.add(index + 1)
        elif keys[:2] == _RUN_TESTS or typed.startswith(_INSTALLED_AGENT):
            harness.add(index)
    end = len(sent)
    while recordings and end and _typed(sent[end - 1]) == "C-d" and end - 1 not in harness:
        end -= 1  # TmuxSession.stop: one C-d for each session recorded, after everything
        recordings -= 1
        harness.add(end)
    return harness


def _commands(trial: Path) -> tuple[list[dict[str, Any]], int]:
    """The agent's commands, a turn each, and how many lines the harness typed."""
    commands = trial / "commands.txt"
    if not commands.is_file():
        return [], 0
    lines = [line for line in _read(commands).splitlines() if line.strip()]
    harness = _harness_lines([_keys(line) for line in lines])
    turns = [
        {"role": "agent", "action": line}
        for index, line in enumerate(lines)
        if index not in harness
    ]
    return turns, len(harness)


def read(path: Path, found: Probe) -> Iterator[Found]:
    try:
        result = load_json(path)
        if not isinstance(result, dict):
            raise InputError("expected a JSON object", path=path)
        trial = path.parent
        turns = _episodes(trial)
        harness_keystrokes = 0
        if not turns:
            turns, harness_keystrokes = _commands(trial)
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
        metadata = rest(result, {"instruction"})
        if harness_keystrokes:
            metadata["harness_keystrokes_left_out"] = harness_keystrokes
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
                "metadata": metadata,
            },
        )
    except InputError as error:
        yield error
