"""aider's chat history (`.aider.chat.history.md`, one in each project aider ran in).

aider appends every session to the same markdown file: `# aider chat started at <time>`, then
what the user typed (`#### ` lines), aider's own output (`> ` lines: the start-up banner, files
added, edits applied, commits, command output, questions and their answers) and the model's
replies (every other line). One session is one run, its task the first prompt the user typed.
The log holds no outcome.

- aider ends each line it writes for a prompt or a `> ` message with two spaces (a markdown
  line break), so a `#### ` heading inside a reply, which has none, stays in the reply. A `> `
  message written with line breaks in it has only its first line marked: the lines after it
  belong to it up to the one that ends with the two spaces (test output, a traceback).
- An in-chat command (`/run pytest`, `!ls`, `/add`, `/undo`, ...) is a tool call the user made,
  named as aider resolves it (`/tok` is `tokens`), its result the `> ` output that follows.
  `/ask`, `/code`, `/architect`, `/context` and `/help` with a message, and `/ok`, send that
  message to the model: they are prompts.
- The `> ` output after a reply (edits applied, commits, lint, shell commands run) is that
  reply's observation; any other `> ` output (the banner) is a system turn.
- A session with no prompt (aider started and left) is no run; a file with none at all is left
  out with one line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import SESSION_NOTE, Candidate, Found, LeftOut, Probe, text_lines
from .sniffers import AIDER_HEADER

log = logging.getLogger(__name__)

MARK = "  "
"""The markdown line break aider ends its prompt and `> ` lines with."""
COMMANDS = (
    "add",
    "architect",
    "ask",
    "chat-mode",
    "clear",
    "code",
    "commit",
    "context",
    "copy",
    "copy-context",
    "diff",
    "drop",
    "edit",
    "editor",
    "editor-model",
    "exit",
    "git",
    "help",
    "lint",
    "load",
    "ls",
    "map",
    "map-refresh",
    "model",
    "models",
    "multiline-mode",
    "ok",
    "paste",
    "quit",
    "read-only",
    "reasoning-effort",
    "report",
    "reset",
    "run",
    "save",
    "settings",
    "test",
    "think-tokens",
    "tokens",
    "undo",
    "voice",
    "weak-model",
    "web",
)
"""aider's in-chat commands (aider/commands.py, `cmd_*`), which a unique prefix also names."""
PROMPTS = frozenset({"ask", "code", "architect", "context", "help"})
"""Commands that, given a message, send it to the model (in that chat mode)."""
_COMMAND = re.compile(r"^/(\S*)(.*)$", re.DOTALL)
_VERSION = re.compile(r"^Aider (v\S+)")
_MODEL = re.compile(r"^(?:Main model|Models?): (\S+)")


@dataclass
class _Block:
    kind: str
    """user (a prompt or a command), tool (aider's `> ` output) or reply (the model's)."""
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.lines).strip("\n")


@dataclass
class _Session:
    started: str
    line: int
    blocks: list[_Block] = field(default_factory=list)
    open_message: bool = False
    """Inside a `> ` message written with line breaks: the lines up to its marked end are its."""
    gap: bool = False
    """A blank line since the last prompt line: the next `#### ` line starts a new prompt."""

    def add(self, raw: str) -> None:
        last = self.blocks[-1] if self.blocks else None
        if self.open_message and last is not None and not _is_tool(raw) and not _is_user(raw):
            last.lines.append(raw.removesuffix(MARK))
            self.open_message = not raw.endswith(MARK)
            return
        self.open_message = False
        in_reply = last is not None and last.kind == "reply"
        if _is_tool(raw):
            marked = raw.endswith(MARK)
            body = (raw[: -len(MARK)] if marked else raw)[1:]
            self._append("tool", body.removeprefix(" "))
            self.open_message = not marked
        elif _is_user(raw) and (raw.endswith(MARK) or not in_reply):
            body = raw.removesuffix(MARK)[5:]
            if last is not None and last.kind == "user" and not self.gap:
                last.lines.append(body)
            else:
                self.blocks.append(_Block("user", [body]))
        elif not raw.strip():
            if in_reply and last is not None:
                last.lines.append("")
        else:
            self._append("reply", raw)
        self.gap = not raw.strip()

    def _append(self, kind: str, body: str) -> None:
        last = self.blocks[-1] if self.blocks else None
        if last is not None and last.kind == kind:
            last.lines.append(body)
        else:
            self.blocks.append(_Block(kind, [body]))


def _is_tool(raw: str) -> bool:
    return raw.startswith("> ") or raw.rstrip() == ">"


def _is_user(raw: str) -> bool:
    return raw.startswith("####") and (len(raw) == 4 or raw[4] == " ")


def _sessions(path: Path) -> Iterator[_Session]:
    session: _Session | None = None
    for number, raw in text_lines(path):
        header = AIDER_HEADER.match(raw)
        if header:
            if session is not None:
                yield session
            session = _Session(started=header.group(1), line=number)
        elif session is not None:  # lines before the first header are no session's
            session.add(raw)
    if session is not None:
        yield session


def command(typed: str) -> tuple[str, str] | None:
    """The in-chat command a prompt runs and its arguments, as aider resolves them; None for a
    message to the model."""
    if typed.startswith("!"):
        return "run", typed[1:].strip()
    words = _COMMAND.match(typed)
    if words is None:
        return None
    word = words.group(1)
    matching = [name for name in COMMANDS if name.startswith(word)]
    name = matching[0] if len(matching) == 1 else word or "/"  # ambiguous or unknown: as typed
    return name, words.group(2).strip()


def _unanswered(turn: dict[str, Any] | None) -> dict[str, Any] | None:
    """The command a turn ran, if its output has not come yet."""
    calls = (turn or {}).get("tool_calls") or []
    return calls[-1] if calls and "result" not in calls[-1] else None


def _turns(session: _Session) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    info: dict[str, Any] = {"started": session.started}
    calls = results = 0
    for block in session.blocks:
        content = block.text()
        last = turns[-1] if turns else None
        if block.kind == "user":
            run = command(content)
            if run is None or (run[0] in PROMPTS and run[1]) or run[0] == "ok":
                turn: dict[str, Any] = {"role": "user", "content": content}
                if run is not None:
                    turn["metadata"] = {"command": run[0]}
            else:
                calls += 1
                ran = {"id": None, "name": run[0], "arguments": run[1] or None}
                turn = {"role": "user", "content": content, "tool_calls": [ran]}
            turns.append(turn)
        elif block.kind == "tool":
            call = _unanswered(last)
            if call is not None:
                call["result"] = content
                results += 1
            elif last is not None and last["role"] == "assistant" and "observation" not in last:
                last["observation"] = content
            else:
                if not turns:  # the start-up banner
                    _banner(block.lines, info)
                turns.append({"role": "system", "content": content})
        elif content.strip():
            turns.append({"role": "assistant", "content": content})
    counts = {"commands": calls, "command_outputs": results}
    return turns, {"session": info, "counts": counts}


def _banner(lines: list[str], info: dict[str, Any]) -> None:
    for line in lines:
        for key, pattern in (("aider_version", _VERSION), ("model", _MODEL)):
            found = pattern.match(line)
            if found and key not in info:
                info[key] = found.group(1)


def read(path: Path, found: Probe) -> Iterator[Found]:
    seen: dict[str, int] = {}
    sessions = runs = 0
    for session in _sessions(path):
        sessions += 1
        turns, metadata = _turns(session)
        task = next(
            (t["content"] for t in turns if t["role"] == "user" and "tool_calls" not in t), None
        )
        if not task:
            continue
        runs += 1
        # A file holds one project's sessions and every project's file has the same name: the
        # folder names the project, the start time the session (twice in a second: numbered).
        session_id = f"{path.parent.name or 'aider'}@{session.started}"
        seen[session_id] = seen.get(session_id, 0) + 1
        if seen[session_id] > 1:
            session_id += f"#{seen[session_id]}"
        metadata["session"]["line"] = session.line
        yield Candidate(
            path=str(path),
            line=session.line,
            run_id=session_id,
            note=SESSION_NOTE,
            aliases=(session.started,),
            data={
                "task_id": session_id,
                "task": task,
                "task_type": None,
                "success": None,
                "turns": turns,
                "metadata": metadata,
            },
        )
    if sessions > runs:
        log.info("%s: %d of its %d aider sessions hold no prompt", path, sessions - runs, sessions)
    if not runs:
        yield LeftOut(
            str(path),
            f"aider chat history with no prompt in its {sessions} sessions"
            if sessions
            else "aider chat history with no session",
        )
