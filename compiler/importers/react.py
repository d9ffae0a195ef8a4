"""ReAct-style text logs, read a line at a time.

ALFWorld: an episode opens with the game's id line (`pick_cool_then_place_in_recep-Pan-.../
trial_T...`), a type line, the room and the task; then `Act k:` / `Obs k:` lines (`think:` acts
are reasoning) and a result line `N r <reward> rs [...]`. An episode with no result line (a log
cut off) has no label.

HotpotQA (Reflexion's ReAct logs): `BEGIN TRIAL k`, sections `BEGIN CORRECT|INCORRECT|HALTED
AGENTS`, and per question `Question:`, `Thought k:`, `Action k:`, `Observation k:` lines and a
`Correct answer:` line. A line that matches none of them continues the field above it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema.work import ALFWORLD_TYPES

from .base import Candidate, Found, Probe, text_lines
from .sniffers import ALFWORLD_ACT, ALFWORLD_GAME, ALFWORLD_OBS, REACT_QUESTION, REACT_STEP

# --- ALFWorld ---------------------------------------------------------------------------------

_RESULT = re.compile(r"^(\d+) r (\S+) rs (.*)$")
_LLM_START = re.compile(r"^-----(\w+) LLM output start-----$")
_LLM_END = re.compile(r"^-----(\w+) LLM output end-----$")
STDERR_LINE = re.compile(
    r"^(?:\S+\.py:\d+: \w*(?:Warning|Error)\b|\s*warnings\.warn\(|(?:WARNING|INFO|DEBUG|ERROR)"
    r"[:\s]|\w*Warning: |Traceback \(most recent call last\)|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S*"
    r" .*\b(?:WARN|WARNING|INFO|DEBUG|ERROR)\b)"
)
"""A line a library wrote to stderr into the log (warnings, logging, tracebacks): no task text."""
_GOAL = re.compile(r"^Your task is to: ")


def _alfworld_type(game: str) -> str | None:
    for name in sorted(ALFWORLD_TYPES, key=len, reverse=True):
        if game.startswith(name):
            return name
    return None


class _Episode:
    def __init__(self, game: str, line: int) -> None:
        self.game = game
        self.line = line
        self.type_line: str | None = None
        self.task_lines: list[str] = []
        self.turns: dict[int, dict[str, Any]] = {}
        self.llm_outputs: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        """LLM prompts and completions logged before the act they produced."""
        self.unparsed: list[dict[str, Any]] = []
        self.result: str | None = None
        self.reward: float | None = None
        self.result_line: int | None = None

    def turn(self, number: int) -> dict[str, Any]:
        return self.turns.setdefault(number, {"role": "agent"})


def _alfworld_reward(value: str) -> float | None:
    if value in ("True", "False"):
        return 1.0 if value == "True" else 0.0
    try:
        return float(value)
    except ValueError:
        return None


def _alfworld_candidate(path: Path, episode: _Episode, attempt: int) -> Candidate:
    turns = [
        {**episode.turns[k], "metadata": {"step": k, **episode.turns[k].get("metadata", {})}}
        for k in sorted(episode.turns)
    ]
    if episode.pending and turns:  # logged after the last act: kept with it
        turns[-1]["metadata"].setdefault("llm_outputs", []).extend(episode.pending)
    metadata: dict[str, Any] = {"attempt": attempt, "game": episode.game}
    if episode.type_line is not None:
        metadata["type_line"] = episode.type_line
    if episode.result is not None:
        metadata["result_line"] = episode.result
        metadata["reward"] = episode.reward
    if episode.llm_outputs:  # each one is in the turn it produced; here, only how many
        metadata["llm_outputs"] = len(episode.llm_outputs)
    if episode.unparsed:
        metadata["unparsed_lines"] = episode.unparsed
    # The goal first: indexes and the first message show a task's start.
    goals = [line for line in episode.task_lines if _GOAL.match(line)]
    room = [line for line in episode.task_lines if not _GOAL.match(line)]
    task = "\n".join(goals + ([""] if goals and room else []) + room).strip()
    return Candidate(
        path=str(path),
        line=episode.line,
        run_id=f"{episode.game}#{attempt}",
        reward=episode.reward,
        note=None
        if episode.result is not None
        else "the episode has no result line (the log is cut off here?)",
        data={
            "task_id": episode.game,
            "task": task or episode.game,
            "task_type": _alfworld_type(episode.game),
            "success": None,
            "turns": turns or [{"role": "environment", "observation": task}],
            "metadata": metadata,
        },
    )


def read_alfworld(path: Path, found: Probe) -> Iterator[Found]:
    attempts: dict[str, int] = {}
    episode: _Episode | None = None
    llm: dict[str, Any] | None = None

    def finish() -> Iterator[Found]:
        if episode is not None:
            attempts[episode.game] = attempts.get(episode.game, 0) + 1
            yield _alfworld_candidate(path, episode, attempts[episode.game])

    for number, line in text_lines(path):
        if llm is not None:  # inside a logged prompt and completion: kept whole
            if _LLM_END.match(line):
                llm["text"] = "\n".join(llm.pop("lines"))
                llm = None
            else:
                llm["lines"].append(line)
            continue
        game = ALFWORLD_GAME.match(line)
        if game:
            yield from finish()
            episode = _Episode(line, number)
            continue
        if episode is None:
            continue  # the log's preamble (model loading, progress bars)
        start = _LLM_START.match(line)
        if start:
            llm = {"label": start.group(1), "line": number, "lines": []}
            episode.llm_outputs.append(llm)
            episode.pending.append(llm)
            continue
        act = ALFWORLD_ACT.match(line)
        obs = ALFWORLD_OBS.match(line)
        result = _RESULT.match(line)
        if act:
            turn = episode.turn(int(act.group(1)))
            if episode.pending:
                turn.setdefault("metadata", {})["llm_outputs"] = episode.pending
                episode.pending = []
            body = act.group(2)
            if body.startswith("think:"):
                turn["reasoning"] = body[len("think:") :].strip()
            else:
                turn["action"] = body
        elif obs:
            episode.turn(int(obs.group(1)))["observation"] = obs.group(2)
        elif result and episode.result is None:
            episode.result = line
            episode.reward = _alfworld_reward(result.group(2))
            episode.result_line = number
        elif STDERR_LINE.match(line):
            episode.unparsed.append({"line": number, "text": line, "stderr": True})
        elif not episode.turns and episode.result is None:
            if episode.type_line is None:
                episode.type_line = line
            elif line.strip() or episode.task_lines:
                episode.task_lines.append(line)
        elif line.strip() and line.strip("-"):
            episode.unparsed.append({"line": number, "text": line})
    if llm is not None:
        llm["text"] = "\n".join(llm.pop("lines"))
    yield from finish()


# --- HotpotQA ---------------------------------------------------------------------------------

_TRIAL = re.compile(r"^BEGIN TRIAL (\d+)\s*$")
_SECTION = re.compile(r"^-+ BEGIN (CORRECT|INCORRECT|HALTED) AGENTS -+\s*$")
_REFLECTED = re.compile(r"\s*You have attempted to answer (?:the )?following question before")
"""Reflexion appends this, and the reflections, to a question from its second trial on."""
_ANSWER = re.compile(r"^Correct answer: ?(.*)$")
STEP_FIELD = {"Thought": "reasoning", "Action": "action", "Observation": "observation"}


def _question_id(question: str) -> str:
    digest = hashlib.sha256(" ".join(question.split()).encode()).hexdigest()[:12]
    return f"hotpotqa-{digest}"


class _Question:
    def __init__(self, question: str, line: int, trial: int | None, section: str | None) -> None:
        self.question = question
        self.line = line
        self.trial = trial
        self.section = section
        self.turns: dict[int, dict[str, Any]] = {}
        self.answer: str | None = None
        self.last: tuple[dict[str, Any], str] | None = None
        self.extra: list[dict[str, Any]] = []
        self.blank_lines = 0
        """Blank lines seen since the last field: kept only if the field goes on after them."""
        self.step = 0
        """The step an unnumbered `Action:` line opens (the variant without numbers)."""
        self.reprints: list[int] = []
        """Later trials that printed this attempt again unchanged (left out)."""
        self.also_listed: list[str | None] = []
        """Other sections of the same trial that list this very attempt (left out)."""
        reflected = _REFLECTED.search(question)
        if reflected:  # what the agent was given besides the question: a turn of its own
            self.question = question[: reflected.start()].strip()
            self.reflection: dict[str, Any] | None = {
                "role": "user",
                "content": question[reflected.start() :].strip(),
                "metadata": {"reflection": True},
            }
            self.last = (self.reflection, "content")
        else:
            self.reflection = None

    def add_line(self, number: int, line: str) -> None:
        """A line of the question's block: a blank, a step (a thought, an action or an
        observation), the answer, more of the last field, or a line not understood."""
        if not line.strip():
            self.blank_lines += 1
            return
        blank, self.blank_lines = self.blank_lines, 0
        step = REACT_STEP.match(line)
        answer = _ANSWER.match(line)
        if step:
            if step.group(2) is not None:
                self.step = int(step.group(2))
            else:  # unnumbered: a thought or an action after an action opens the next step
                opened = self.turns.get(self.step, {})
                if not self.step or (step.group(1) != "Observation" and "action" in opened):
                    self.step += 1
            turn = self.turns.setdefault(self.step, {"role": "agent"})
            field = STEP_FIELD[step.group(1)]
            turn[field] = step.group(3)
            self.last = (turn, field)
        elif answer:
            self.answer = answer.group(1)
            self.last = None
        elif self.last is not None and not line.startswith("#"):
            turn, field = self.last
            turn[field] += "\n" * (blank + 1) + line
        elif not line.startswith("#"):
            self.extra.append({"line": number, "text": line})

    def fingerprint(self) -> str:
        turns = [self.turns[k] for k in sorted(self.turns)]
        body = orjson.dumps([self.question, turns, self.answer], option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(body).hexdigest()


def _hotpot_candidate(path: Path, q: _Question, trial_summaries: dict[int, str]) -> Candidate:
    task_id = _question_id(q.question)
    metadata: dict[str, Any] = {"section": q.section}
    if q.trial is not None:
        metadata["attempt"] = q.trial
        if q.trial in trial_summaries:
            metadata["trial_summary"] = trial_summaries[q.trial]
    if q.answer is not None:
        metadata["correct_answer"] = q.answer
    if q.extra:
        metadata["unparsed_lines"] = q.extra
    if q.reprints:
        metadata["reprints_left_out"] = q.reprints
    if q.also_listed:
        metadata["also_listed_under"] = q.also_listed
    success = None if q.section is None else q.section == "CORRECT"
    turns = [q.turns[k] for k in sorted(q.turns)]
    if q.reflection is not None:
        turns.insert(0, q.reflection)
    return Candidate(
        path=str(path),
        line=q.line,
        run_id=f"{task_id}#{q.trial}",
        note=None if q.section else "the question is under no CORRECT/INCORRECT/HALTED section",
        data={
            "task_id": task_id,
            "task": q.question,
            "task_type": "hotpotqa",
            "success": success,
            "turns": turns or [{"role": "agent", "content": "(no steps logged)"}],
            "metadata": metadata,
        },
    )


def read_hotpotqa(path: Path, found: Probe) -> Iterator[Found]:
    """Reflexion prints an agent already correct again in every later trial (it is not run
    again): such a reprint (same question, steps and answer, CORRECT again) is left out, and
    counted in the attempt it repeats. Agents that failed are run again: each trial is an
    attempt. An agent listed in two sections of one trial (INCORRECT and HALTED) is one
    attempt, which names the other section."""
    trial: int | None = None
    section: str | None = None
    summaries: dict[int, str] = {}
    current: _Question | None = None
    kept: list[_Question] = []
    printed: dict[str, _Question] = {}
    listed: dict[tuple[str, int | None], _Question] = {}

    def close(question: _Question) -> None:
        key = question.fingerprint()
        first = printed.get(key)
        if (
            first is not None
            and question.section == first.section == "CORRECT"  # solved: not run again
            and first.trial != question.trial
            and question.trial is not None
        ):
            first.reprints.append(question.trial)
            return
        same_trial = listed.get((key, question.trial))
        if same_trial is not None:  # one agent listed in two sections (INCORRECT and HALTED)
            same_trial.also_listed.append(question.section)
            return
        printed.setdefault(key, question)
        listed[(key, question.trial)] = question
        kept.append(question)

    for number, line in text_lines(path):
        trial_match = _TRIAL.match(line)
        section_match = _SECTION.match(line)
        question = REACT_QUESTION.match(line)
        if trial_match or section_match or question:
            if current is not None:
                close(current)
                current = None
            if trial_match:
                trial, section = int(trial_match.group(1)), None
            elif section_match:
                section = section_match.group(1)
            elif question:
                current = _Question(question.group(1), number, trial, section)
            continue
        if current is None:
            if trial is not None and line.startswith("Trial summary:"):
                summaries[trial] = line.removeprefix("Trial summary:").strip()
            continue
        current.add_line(number, line)
    if current is not None:
        close(current)
    for attempt in kept:
        yield _hotpot_candidate(path, attempt, summaries)
