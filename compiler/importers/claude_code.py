"""Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`).

One session file is one run. Its records (`type` user / assistant / system / progress / ...)
are linked by `uuid` and `parentUuid`:

- One model response is logged over several assistant records, one per content block: they
  share `message.id` and become one turn (text, thinking as reasoning, tool_use as calls).
- A `tool_result` in a later user record joins the call it answers (`tool_use_id`), with
  `is_error` and the structured `toolUseResult` in the call's metadata.
- A rewound branch (the user went back and sent another prompt in place of one) is dropped:
  following `parentUuid` from the last record gives the branch that stayed; a branch that
  leaves it at a user prompt is a rewound one. Parallel tool results, which also leave that
  chain, are kept.
- The task is the first prompt the user typed: not a tool result, meta text, a slash-command
  echo or a compaction summary (`isCompactSummary`).
- Sub-agents are part of the run that spawned them. Their turns are placed right after the
  turn whose Task/Agent call started them, each marked with `metadata.subagent`: what the
  parent asked, what the sub-agent did and what came back read in order, and a lesson is
  about the whole session whose outcome the label gives. They come from
  `<session>/subagents/agent-<id>.jsonl` (2.1+; linked by the result's `agentId`, the
  `.meta.json`'s `toolUseId`, progress records, or the prompt), from `agent-<id>.jsonl`
  beside the session in the project folder (2.0.x: its records' `sessionId` names the
  session) or from inline `isSidechain` records (older versions). Compaction helpers
  (`agent-acompact-*`) and warm-up calls (a sub-agent whose prompt is "Warmup" and that no
  call started: the client warms its cache) are left out and counted.
- A file with no prompt the user typed (a side file, an excerpt of a session) or no turn is
  left out with why, never an error: a projects folder is read whole.
- Progress, snapshots, queue operations, attachments and titles are no turns; their counts
  go into the run's metadata. So do weak outcome signals (tool errors, API errors), which
  never label the run by themselves.

The records, read and built into turns, are claude_code_records.py's; the sub-agents and the
run, this module's.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema.input_files import input_problem, read_input
from wikitrace.corpus_schema.projects import claude_folder_project

from .base import Found, LeftOut, Probe, session_run
from .claude_code_records import (
    SESSION_FIELDS,
    SPAWN_TOOLS,
    _blocks,
    _Builder,
    _drop_rewound,
    _head_session,
    _is_result,
    _is_result_block,
    _is_text,
    _load,
    _prompt_text,
)

log = logging.getLogger(__name__)


def subagent_parent(path: Path) -> Path | None:
    """The session file a sub-agent's `agent-*.jsonl` belongs to, if it exists: the session
    of its `<session>/subagents/` folder (2.1+), or the `<sessionId>.jsonl` its records name
    in the same folder (2.0.x)."""
    if not path.name.startswith("agent-"):
        return None
    if path.parent.name == "subagents":
        session = path.parent.parent
        found = session.with_name(session.name + ".jsonl")
        return found if found.is_file() else None
    named = _head_session(path)
    if not named:
        return None
    beside = path.with_name(f"{named}.jsonl")
    return beside if beside != path and beside.is_file() else None


# --- sub-agents ---------------------------------------------------------------------------


@dataclass
class _Agent:
    id: str
    records: list[dict[str, Any]]
    source: str
    call: str | None = None
    """The id of the Task/Agent call that started it, when known."""
    kind: str | None = None


def _beside(path: Path) -> list[Path]:
    """2.0.x sub-agent files: `agent-*.jsonl` in the session's own folder whose records name
    this session (`<sessionId>.jsonl`)."""
    folder = path.parent
    try:
        changed = folder.stat().st_mtime_ns
    except OSError:
        return []
    return [file for file in _agents_by_session(folder, changed).get(path.stem, []) if file != path]


@functools.lru_cache(maxsize=8)
def _agents_by_session(folder: Path, changed: int) -> dict[str, list[Path]]:
    """A folder's `agent-*.jsonl` by the session their records name: each file's head read
    once for the folder, not once for every session in it (a projects folder holds hundreds
    of each). Keyed by the folder's modification time, which a new file changes."""
    found: dict[str, list[Path]] = {}
    for file in sorted(folder.glob("agent-*.jsonl")):
        named = _head_session(file)
        if named:
            found.setdefault(named, []).append(file)
    return found


def _agent_files(path: Path) -> tuple[list[_Agent], int, list[int]]:
    """The sub-agents of a session from its `subagents/` folder and (2.0.x) the agent files
    beside it; how many compaction helpers were left out; damaged lines."""
    folder = path.with_suffix("") / "subagents"
    agents: list[_Agent] = []
    helpers = 0
    damaged: list[int] = []
    files = sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() else []
    if not path.name.startswith("agent-"):
        files += _beside(path)
    for file in files:
        if file.name.startswith("agent-acompact"):
            helpers += 1
            continue
        problem = input_problem(file)
        if problem is not None:  # a FIFO, a device, a huge file: never opened
            log.warning("%s: a sub-agent's log left out: %s", file, problem)
            continue
        loaded = _load(file)
        damaged += loaded.damaged
        agent = _Agent(
            id=file.stem.removeprefix("agent-"),
            records=[r for _, r in loaded.records],
            source=file.relative_to(path.parent).as_posix(),  # beside the session, as on disk
        )
        meta = file.with_suffix(".meta.json")
        if meta.is_file():
            try:
                info = orjson.loads(read_input(meta))
            except (orjson.JSONDecodeError, OSError):
                info = None
            if isinstance(info, dict):
                agent.call = (
                    info.get("toolUseId") if isinstance(info.get("toolUseId"), str) else None
                )
                agent.kind = (
                    info.get("agentType") if isinstance(info.get("agentType"), str) else None
                )
        agents.append(agent)
    return agents, helpers, damaged


def _inline_agents(records: list[dict[str, Any]]) -> list[_Agent]:
    """Sidechain records (older versions) grouped into sub-agents by their root record."""
    root_of: dict[str, str] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        uuid = record.get("uuid")
        parent = record.get("parentUuid")
        root = root_of.get(parent) if isinstance(parent, str) else None
        root = root or (uuid if isinstance(uuid, str) else f"#{len(groups)}")
        if isinstance(uuid, str):
            root_of[uuid] = root
        groups.setdefault(root, []).append(record)
    return [
        _Agent(id=str(group[0].get("agentId") or root), records=group, source="inline")
        for root, group in groups.items()
    ]


def _link(agents: list[_Agent], records: list[dict[str, Any]], calls: dict[str, Any]) -> None:
    """Find the call that started each sub-agent: the result's agentId, progress records, or
    the prompt the call gave."""
    by_agent: dict[str, str] = {}
    for record in records:
        result = record.get("toolUseResult")
        if isinstance(result, dict) and isinstance(result.get("agentId"), str):
            for block in _blocks(record):
                if _is_result_block(block) and isinstance(block.get("tool_use_id"), str):
                    by_agent.setdefault(result["agentId"], block["tool_use_id"])
        data = record.get("data")
        if (
            isinstance(data, dict)
            and isinstance(data.get("agentId"), str)
            and isinstance(record.get("parentToolUseID"), str)
        ):
            by_agent.setdefault(data["agentId"], record["parentToolUseID"])
    by_prompt = {
        str((call.get("arguments") or {}).get("prompt", "")).strip(): call_id
        for call_id, call in calls.items()
        if call["name"] in SPAWN_TOOLS and isinstance(call.get("arguments"), dict)
    }
    for agent in agents:
        if agent.call is None:
            agent.call = by_agent.get(agent.id)
        if agent.call is None and agent.records:
            first = next((_prompt_text(r) for r in agent.records if r.get("type") == "user"), None)
            agent.call = by_prompt.get((first or "").strip())
        call = calls.get(agent.call) if agent.call else None
        if call is not None and agent.kind is None and isinstance(call.get("arguments"), dict):
            kind = call["arguments"].get("subagent_type")
            agent.kind = kind if isinstance(kind, str) else None


WARMUP_LEFT_OUT = (
    'a Claude Code warm-up call (its prompt is "Warmup", or it is a side-chain reply to no '
    "prompt, and no call of a session here started it): no work"
)


WARMUP_MAX_RECORDS = 2
"""The most records a side-chain file of replies alone may hold and be a warm-up."""


def _is_warmup(records: list[dict[str, Any]]) -> bool:
    """Records of a warm-up call: the client sends "Warmup" to warm its cache. Some 2.0.x files
    hold only the reply ("Hello! I'm ready to help..."): side-chain assistant text, with no
    prompt and no tool call, is one too."""
    first = next((r for r in records if r.get("type") == "user"), None)
    if first is None:
        messages = [r for r in records if r.get("type") in ("user", "assistant")]
        return (
            0 < len(messages) <= WARMUP_MAX_RECORDS
            and all(r.get("isSidechain") is True for r in messages)
            and all(isinstance(b, dict) and _is_text(b) for r in messages for b in _blocks(r))
        )
    texts = [b["text"] for b in _blocks(first) if isinstance(b, dict) and _is_text(b)]
    return "".join(texts).strip() == "Warmup"


def _agent_turns(agent: _Agent) -> tuple[list[dict[str, Any]], _Builder]:
    builder = _Builder(
        subagent={"id": agent.id, "type": agent.kind, "call": agent.call, "source": agent.source}
    )
    for record in agent.records:
        builder.add(record)
    return builder.turns, builder


# --- the run ------------------------------------------------------------------------------


def _task(main: list[dict[str, Any]], everything: list[dict[str, Any]]) -> str | None:
    for record in main:
        prompt = _prompt_text(record)
        if prompt is not None:
            return prompt
    for record in everything:  # a log with no typed prompt: the client's summary of it
        if record.get("type") == "summary" and isinstance(record.get("summary"), str):
            return str(record["summary"])
    for record in everything:  # or the first text a user record holds (a sub-agent's prompt)
        if record.get("type") == "user" and not _is_result(record):
            texts = [b["text"] for b in _blocks(record) if isinstance(b, dict) and _is_text(b)]
            if "".join(texts).strip():
                return "\n".join(texts).strip()
    return None


def inside_harbor_trial(path: Path) -> bool:
    """A session Harbor keeps beside the trial's ATIF trajectory (`agent/sessions/...`): the
    same run, read once, from the trajectory."""
    for parent in list(path.parents)[:6]:
        if parent.name == "sessions" and (parent.parent / "trajectory.json").is_file():
            return True
    return False


def read_with(path: Path) -> str | None:
    """Why this file is read with another, if it is (see Format.read_with)."""
    if subagent_parent(path) is not None:
        return "a sub-agent, read with the session that spawned it"
    if inside_harbor_trial(path):
        return "the agent's session in a Harbor trial, read as the trial's ATIF trajectory"
    return None


@dataclass
class _Assembled:
    """The session's turns with its sub-agents' turns placed among them, and what the main
    line and every sub-agent counted."""

    turns: list[dict[str, Any]]
    counts: dict[str, int]
    signals: Counter[str]
    left_out: Counter[str]


def _assemble(builder: _Builder, agents: list[_Agent]) -> _Assembled:
    """Each sub-agent's turns right after the turn whose call started it (at the end when no
    call is known), the counts of all of them added up."""
    turns = list(builder.turns)
    placed: dict[int, list[dict[str, Any]]] = {}
    loose: list[dict[str, Any]] = []
    counts = {"tool_calls": builder.uses, "tool_results": builder.results}
    signals = Counter(builder.signals)
    left_out = Counter(builder.left_out)
    for agent in agents:
        agent_turns, agent_builder = _agent_turns(agent)
        counts["tool_calls"] += agent_builder.uses
        counts["tool_results"] += agent_builder.results
        signals.update(agent_builder.signals)
        left_out.update(agent_builder.left_out)
        at = builder.call_turn.get(agent.call) if agent.call else None
        if at is None:
            loose += agent_turns
        else:
            placed.setdefault(at, []).extend(agent_turns)
    if placed:
        ordered: list[dict[str, Any]] = []
        for index, turn in enumerate(turns):
            ordered.append(turn)
            ordered += placed.get(index, [])
        turns = ordered
    turns += loose
    for turn in turns:
        if not turn.get("metadata"):
            turn.pop("metadata", None)
    return _Assembled(turns, counts, signals, left_out)


def _session_metadata(everything: list[dict[str, Any]]) -> dict[str, Any]:
    """The session's fields (id, folder, branch, client version, ...) and its title."""
    metadata: dict[str, Any] = {}
    for name in SESSION_FIELDS:
        value = next((r[name] for r in everything if r.get(name)), None)
        if value is not None:
            metadata[name] = value
    for record in everything:
        if record.get("type") in ("custom-title", "ai-title", "summary"):
            title = record.get("customTitle") or record.get("aiTitle") or record.get("summary")
            if isinstance(title, str):
                metadata.setdefault("title", title)
    return metadata


def read(path: Path, found: Probe) -> Iterator[Found]:
    if read_with(path) is not None:
        return
    session = _load(path)
    records = session.records
    kept, rewound = _drop_rewound(records)
    main = [r for _, r in kept if not r.get("isSidechain")]
    sidechains = [r for _, r in kept if r.get("isSidechain")]
    if not [r for r in main if r.get("type") in ("user", "assistant")]:
        main, sidechains = [r for _, r in kept], []  # a sub-agent's file read on its own
    builder = _Builder()
    for record in main:
        builder.add(record)
    agents, helpers, damaged = _agent_files(path)
    agents += _inline_agents(sidechains)
    _link(agents, main, builder.calls)
    if _is_warmup(main):  # a warm-up file read on its own: its session is not here
        yield LeftOut(str(path), WARMUP_LEFT_OUT)
        return
    warmups = sum(agent.call is None and _is_warmup(agent.records) for agent in agents)
    agents = [agent for agent in agents if agent.call is not None or not _is_warmup(agent.records)]
    assembled = _assemble(builder, agents)
    turns = assembled.turns
    everything = [r for _, r in records]
    task = _task(main, everything)
    if task is None or not turns:
        yield LeftOut(
            str(path),
            "a Claude Code file with no prompt the user typed and no summary: a side file or "
            "an excerpt of a session, not a session"
            if turns
            else "a Claude Code file with no user, assistant or system record",
        )
        return
    metadata = _session_metadata(everything)
    metadata["counts"] = {**assembled.counts, "subagents": len(agents)}
    if assembled.left_out:
        metadata["records_left_out"] = dict(sorted(assembled.left_out.items()))
    if rewound:
        metadata["rewound_records_dropped"] = rewound
    if helpers:
        metadata["compaction_helpers_left_out"] = helpers
    if warmups:
        metadata["warmup_agents_left_out"] = warmups
    if session.damaged or damaged:
        metadata["damaged_lines_left_out"] = session.damaged + damaged
    metadata["weak_signals"] = dict(assembled.signals)
    session_id = str(metadata.get("sessionId") or path.stem)
    # A session whose records name no working folder is known by its project folder's name.
    project = None if metadata.get("cwd") else claude_folder_project(path.parent.name)
    yield session_run(path, session_id, task, turns, metadata, project=project)
