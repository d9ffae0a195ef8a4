"""The ReAct paper's own run logs (ysymyth/ReAct): FEVER and WebShop, as the notebooks print
them, read from the saved text or from the notebook (`.ipynb`) whose cell outputs hold it.

FEVER: an episode opens with `<question id> Claim: ...`, then numbered `Thought k:`,
`Action k:`, `Observation k:` lines (a line that matches none goes on with the field above it),
and closes with the environment's info as a Python dict, `{'steps': 2, 'answer': 'REFUTES',
'gt_answer': 'REFUTES', 'question_idx': 3687, 'em': 1, ...}`: `em` is the outcome.

WebShop: an episode opens with a rule of dashes, the session's number and `Action: reset`; its
first observation is the shop's instruction page (`Instruction:` and the request), then
`Action: ...` / `Observation: ...` pairs (`think[...]` actions are reasoning). It ends with the
score the shop gives on buying, `Your score (min 0.0, max 1.0): S`, the run's reward (success:
1.0, the shop's own success rate), and a line of running averages. An episode that stopped
without buying scores 0, as the notebook counts it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import Candidate, Found, Probe, text_lines
from .sniffers import FEVER_CLAIM, FEVER_STEP, is_notebook, text_of

_FEVER_INFO = re.compile(r"^\{'steps': .*\}\s*$")
_FIELDS = {"Thought": "reasoning", "Action": "action", "Observation": "observation"}
_FEVER_TALLY = re.compile(r"^\d+ \d+ [\d.]+ [\d.]+\s*$")
"""The notebook's running tally after each episode (solved, done, share, seconds)."""

_RULE = re.compile(r"^-{5,}\s*$")
_SESSION = re.compile(r"^(\d+)\s*$")
_SHOP_STEP = re.compile(r"^(Action|Observation): ?(.*)$")
_SCORE = re.compile(r"^Your score \(min 0\.0, max 1\.0\): ([\d.]+)\s*$")
_SHOP_TALLY = re.compile(r"^(\d+) [\d.]+ [\d.]+ [\d.]+\s*$")
"""The notebook's running averages after each episode (count, score, success, fail)."""
_THINK = re.compile(r"^think\[(.*)\]$", re.DOTALL)


# --- the text: a log file, or a notebook's cell outputs -------------------------------------


def _lines(path: Path, found: Probe) -> Iterator[tuple[int, str]]:
    printed = text_of(path, found)
    if printed is None:
        yield from text_lines(path)
    else:  # numbered within the notebook's printed text
        yield from enumerate(printed.splitlines(), start=1)


def _at(found: Probe) -> str | None:
    return "cell outputs" if is_notebook(found) else None


# --- FEVER --------------------------------------------------------------------------------


def read_fever(path: Path, found: Probe) -> Iterator[Found]:
    episode: dict[str, Any] | None = None
    last: tuple[dict[str, Any], str] | None = None
    attempts: dict[str, int] = {}
    at = _at(found)

    def close(episode: dict[str, Any]) -> Found:
        task_id = episode["id"]
        attempts[task_id] = attempts.get(task_id, 0) + 1
        info = episode.get("info")
        metadata: dict[str, Any] = {"attempt": attempts[task_id]}
        success = None
        if isinstance(info, dict):
            metadata["info"] = info
            if isinstance(info.get("em"), (int, float)):
                success = info["em"] == 1
        turns = [episode["turns"][k] for k in sorted(episode["turns"])]
        strip_observations(turns)
        return Candidate(
            path=str(path),
            line=episode["line"],
            at=at,
            run_id=f"{task_id}#{attempts[task_id]}",
            note=None if success is not None else "the episode has no result (cut off here?)",
            data={
                "task_id": task_id,
                "task": f"Claim: {episode['claim']}",
                "task_type": "fever",
                "success": success,
                "turns": turns or [{"role": "agent", "content": "(no steps logged)"}],
                "metadata": metadata,
            },
        )

    for number, line in _lines(path, found):
        claim = FEVER_CLAIM.match(line)
        if claim:
            if episode is not None:
                yield close(episode)
            episode = {"id": claim.group(1), "claim": claim.group(2), "line": number, "turns": {}}
            last = None
            continue
        if episode is None:
            continue
        step = FEVER_STEP.match(line)
        if step:
            turn = episode["turns"].setdefault(int(step.group(2)), {"role": "agent"})
            turn[_FIELDS[step.group(1)]] = step.group(3)
            last = (turn, _FIELDS[step.group(1)])
        elif _FEVER_INFO.match(line):
            try:
                episode["info"] = ast.literal_eval(line.strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                yield InputError(
                    "the episode's result line is not a Python dict",
                    path=path,
                    line=number,
                    at=at,
                    hint="FEVER's notebook prints {'steps': ..., 'em': ...} after each episode",
                )
            last = None
        elif _RULE.match(line) or _FEVER_TALLY.match(line):
            last = None
        elif last is not None and line.strip():
            turn, field = last
            turn[field] += "\n" + line
    if episode is not None:
        yield close(episode)


# --- WebShop ------------------------------------------------------------------------------


def _instruction(page: str) -> str:
    """The request on the shop's first page: the text between `Instruction:` and `[Search]`."""
    found = re.search(r"Instruction:\s*(.*?)\s*(?:\[Search\]|$)", page, re.DOTALL)
    return " ".join(found.group(1).split()) if found else " ".join(page.split())


def _webshop_candidate(path: Path, at: str | None, episode: dict[str, Any]) -> Candidate:
    """A WebShop episode as a run: the harness's `reset` as the environment's first turn,
    the score (if the episode ended) as its reward."""
    turns: list[dict[str, Any]] = episode["turns"]
    first = turns[0] if turns else None
    task = _instruction(first["observation"]) if first and "observation" in first else ""
    if first is not None and first.get("action") == "reset":  # the harness's, not the agent's
        turns = [
            {"role": "environment", "observation": first.get("observation", "")},
            *turns[1:],
        ]
    strip_observations(turns)
    score = episode.get("score")
    ended = score is not None or episode.get("tallied", False)
    reward = score if score is not None else (0.0 if ended else None)
    metadata: dict[str, Any] = {"session": episode["session"]}
    if reward is not None:
        metadata["reward"] = reward
    if score is None and ended:
        metadata["stopped_without_buying"] = True
    return Candidate(
        path=str(path),
        line=episode["line"],
        at=at,
        run_id=f"fixed_{episode['session']}",
        reward=reward,
        note=None if ended else "the episode has no score (the log is cut off here?)",
        data={
            "task_id": f"fixed_{episode['session']}",
            "task": task or f"WebShop session fixed_{episode['session']}",
            "task_type": "webshop",
            "success": None,
            "turns": turns or [{"role": "environment", "observation": task}],
            "metadata": metadata,
        },
    )


def read_webshop(path: Path, found: Probe) -> Iterator[Found]:
    at = _at(found)
    episode: dict[str, Any] | None = None
    pending_session: tuple[int, str] | None = None
    after_rule = False

    last: tuple[dict[str, Any], str] | None = None
    for number, line in _lines(path, found):
        if _RULE.match(line):
            after_rule, last = True, None
            continue
        session = _SESSION.match(line)
        if after_rule and session:
            pending_session = (number, session.group(1))
            after_rule = False
            continue
        after_rule = False
        step = _SHOP_STEP.match(line)
        if step and step.group(1) == "Action" and step.group(2).strip() == "reset":
            if episode is not None:
                yield _webshop_candidate(path, at, episode)
            line_no, name = pending_session or (number, str(number))
            episode = {"session": name, "line": line_no, "turns": []}
            pending_session = None
        if episode is None:
            continue
        if step and step.group(1) == "Action":
            action = step.group(2).strip()
            thought = _THINK.match(action)
            turn: dict[str, Any] = {"role": "agent"}
            if thought:
                turn["reasoning"] = thought.group(1)
            else:
                turn["action"] = action
            episode["turns"].append(turn)
            last = None
            continue
        if step and step.group(1) == "Observation" and episode["turns"]:
            turn = episode["turns"][-1]
            turn["observation"] = step.group(2)
            last = (turn, "observation")
            scored = _SCORE.match(step.group(2).strip())
            if scored:
                episode["score"] = float(scored.group(1))
            continue
        tally = _SHOP_TALLY.match(line)
        if tally and not line.startswith(" "):
            episode["tallied"] = True
            last = None
            continue
        if last is not None:
            turn, field = last
            turn[field] += "\n" + line
    if episode is not None:
        yield _webshop_candidate(path, at, episode)


def strip_observations(turns: list[dict[str, Any]]) -> None:
    """Trailing blank lines the notebook printed after each observation, taken off in place."""
    for turn in turns:
        if isinstance(turn.get("observation"), str):
            turn["observation"] = turn["observation"].rstrip()
