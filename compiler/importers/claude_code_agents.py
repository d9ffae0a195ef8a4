"""Claude Code sub-agents (compiler/importers/claude_code.py): found in a session's
`subagents/` folder, beside it (2.0.x) or inline as sidechain records, linked to the call
that started them, warm-up calls told apart, and read into turns of their own."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema.input_files import input_problem, read_input

from .claude_code_records import (
    SPAWN_TOOLS,
    _blocks,
    _head_session,
    _is_result_block,
    _is_text,
    _load,
    _prompt_text,
)
from .claude_code_turns import _Builder

log = logging.getLogger(__name__)

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
