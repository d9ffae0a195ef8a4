"""Claude Code records (compiler/importers/claude_code.py): a session file read line by line,
what a record holds (its content blocks, the prompt the user typed) and the rewound branches
dropped."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import open_input

from .base import jsonl_objects

log = logging.getLogger(__name__)

SPAWN_TOOLS = frozenset({"Task", "Agent"})
QUIET_SYSTEM = frozenset({"turn_duration", "stop_hook_summary"})
"""System records that say nothing about the work (timings, hook bookkeeping)."""
_NOT_A_PROMPT = re.compile(r"^\s*(?:<[a-z][a-z0-9-]*>|\[Request interrupted by user)")
"""Text the client wrote in the user's place: command echoes, notifications, reminders."""
_COMMAND = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
CLIENT_COMMANDS = frozenset(
    {
        "clear",
        "compact",
        "config",
        "context",
        "cost",
        "doctor",
        "exit",
        "help",
        "hooks",
        "init",
        "login",
        "logout",
        "mcp",
        "memory",
        "model",
        "permissions",
        "resume",
        "status",
        "statusline",
        "terminal-setup",
        "vim",
        "agents",
        "add-dir",
        "bashes",
        "export",
        "ide",
        "install-github-app",
        "output-style",
        "privacy-settings",
        "release-notes",
        "rewind",
        "todos",
        "upgrade",
        "usage",
        "",
    }
)
"""Slash commands that steer the client itself; a custom command (a skill) is a prompt."""
SESSION_FIELDS = ("sessionId", "cwd", "gitBranch", "version", "slug", "entrypoint")


# --- records ------------------------------------------------------------------------------


@dataclass
class _Session:
    path: Path
    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)


def _load(path: Path) -> _Session:
    session = _Session(path)
    for item in jsonl_objects(path, unit="record"):
        if isinstance(item, InputError):
            session.damaged.append(item.line or 0)
            log.warning("%s:%s: a damaged record, left out: %s", path, item.line, item.message)
            continue
        session.records.append(item)
    return session


def _message(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    return message if isinstance(message, dict) else {}


def _blocks(record: dict[str, Any]) -> list[Any]:
    content = _message(record).get("content")
    if isinstance(content, list):
        return content
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return []


def _block_type(block: Any) -> str | None:
    return block.get("type") if isinstance(block, dict) else None


def _is_result_block(block: Any) -> bool:
    return _block_type(block) == "tool_result"


def _is_result(record: dict[str, Any]) -> bool:
    return any(_is_result_block(b) for b in _blocks(record))


def _prompt_text(record: dict[str, Any]) -> str | None:
    """The text the user typed in this record, or None when it is no prompt."""
    if record.get("type") != "user" or record.get("isMeta") or record.get("isCompactSummary"):
        return None
    if _is_result(record):
        return None
    texts = [b["text"] for b in _blocks(record) if isinstance(b, dict) and _is_text(b)]
    joined = "\n".join(texts).strip()
    command = _COMMAND.search(joined)
    if command is not None:
        name = command.group(1)
        if name.lstrip("/") in CLIENT_COMMANDS:
            return None
        arguments = _COMMAND_ARGS.search(joined)
        return f"{name} {arguments.group(1).strip()}".strip() if arguments else name
    if not joined or _NOT_A_PROMPT.match(joined):
        return None
    return joined


def _is_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and isinstance(block.get("text"), str)


def _parent(record: dict[str, Any]) -> str | None:
    parent = record.get("parentUuid") or record.get("logicalParentUuid")
    return parent if isinstance(parent, str) else None


def _drop_rewound(records: list[tuple[int, dict[str, Any]]]) -> tuple[list[Any], int]:
    """The records without the rewound branches, and how many were dropped."""
    by_uuid = {r["uuid"]: r for _, r in records if isinstance(r.get("uuid"), str)}
    leaf = next(
        (
            r
            for _, r in reversed(records)
            if r.get("type") in ("user", "assistant") and isinstance(r.get("uuid"), str)
        ),
        None,
    )
    chain: set[str] = set()
    node = leaf
    while node is not None and node["uuid"] not in chain:
        chain.add(node["uuid"])
        parent = _parent(node)
        node = by_uuid.get(parent) if parent else None
    rewound: dict[str, bool] = {}
    kept = []
    for line, record in records:
        uuid = record.get("uuid")
        parent = _parent(record)
        if not isinstance(uuid, str) or uuid in chain:
            dropped = False
        elif parent in chain:  # this record leaves the chain that stayed
            dropped = _prompt_text(record) is not None
        else:  # follows its parent; a parent not seen (yet) is no evidence of a rewind
            dropped = rewound.get(parent, False) if parent else False
        if isinstance(uuid, str):
            rewound[uuid] = dropped
        if not dropped:
            kept.append((line, record))
    return kept, len(records) - len(kept)


def _head_session(file: Path, lines: int = 20) -> str | None:
    """The `sessionId` the first records of a file name (without reading the whole file)."""
    try:
        with open_input(file) as handle:
            for _, raw in zip(range(lines), handle, strict=False):
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
                    return str(record["sessionId"])
    except OSError:
        return None
    return None
