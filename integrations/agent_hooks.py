"""wikitrace in coding agents' own hook settings: recall at session start and at each prompt,
capture at the session's end, installed and removed without touching anything else.

Claude Code keeps its hooks in `settings.json` (`~/.claude/`, or a repository's
`.claude/settings.local.json`), Codex in `hooks.json` (`$CODEX_HOME`, or a repository's
`.codex/`; `[features] hooks = true` in the same folder's `config.toml` keeps them on),
Gemini CLI in `settings.json` (`~/.gemini/`, or a repository's `.gemini/`). All three take
`{"hooks": {EVENT: [{"matcher": ..., "hooks": [{"type": "command", "command": ...}]}]}}`. Our
handlers are told from the user's by their command (wikitrace's `hooks recall` or
`add --from-hook`); a file is backed up before it changes and written atomically.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from wikitrace.corpus_schema.errors import InputError

Agent = Literal["claude-code", "codex", "gemini"]
AGENTS: tuple[Agent, ...] = ("claude-code", "codex", "gemini")
BACKUP_SUFFIX = ".wikitrace-backup"
"""The file as it was before wikitrace last changed it, beside it."""
MAX_BYTES = 1 << 20
CODEX_FEATURE = "hooks"
"""Codex's feature flag for hooks: on by default in Codex 0.171, written so that an older
release, or a default changed, runs them too."""
CODEX_LEGACY_FEATURE = "codex_hooks"
"""Its older name: Codex 0.171 still reads it, with a warning at every start."""
RECALL_SECONDS = 5
"""The agent's own time limit for the recall hook, at least (the hook keeps a shorter one
itself: see `recall_seconds`)."""
START_SECONDS = 4
"""What the agent's limit leaves above recall's own, for the process's start, which recall's
limit does not count: a few seconds on a busy machine."""
CAPTURE_SECONDS = 30


REVIEW_NOTES: dict[Agent, str] = {
    "codex": "Codex runs a new or changed hook only once you have trusted it: start `codex` "
    'and accept its "hooks need review" (or review them with /hooks). Until then (and in '
    "`codex exec`, which cannot ask, unless run with --dangerously-bypass-hook-trust) it "
    "skips them without a word. A repository's .codex/ (--repo) it reads only once the "
    "project is trusted too (its trust prompt, or `codex exec --trust`).",
}
"""What an agent asks of its user before it runs hooks that `install` wrote, said after it."""


@dataclass(frozen=True)
class AgentHooks:
    """Where one agent keeps its hooks and which of its events we use."""

    agent: Agent
    folder: Path
    """The folder of its settings (user-wide or one repository's)."""
    file_name: str
    recall_events: tuple[str, ...]
    capture_event: str
    timeout_unit: int
    """The hook timeout's unit in seconds' fractions: 1 (seconds) or 1000 (milliseconds)."""

    @property
    def path(self) -> Path:
        return self.folder / self.file_name


def agent_hooks(agent: Agent, repository: Path | None) -> AgentHooks:
    """Where `agent`'s hooks live: user-wide, or in the repository at `repository`."""
    home = Path.home()
    if agent == "claude-code":
        user = Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude")
        folder = repository / ".claude" if repository else user
        # A repository's shared settings.json is committed; hooks naming this machine's
        # paths belong in its local file.
        name = "settings.local.json" if repository else "settings.json"
        return AgentHooks(
            agent, folder, name, ("SessionStart", "UserPromptSubmit"), "SessionEnd", 1
        )
    if agent == "codex":
        user = Path(os.environ.get("CODEX_HOME") or home / ".codex")
        folder = repository / ".codex" if repository else user
        return AgentHooks(
            agent, folder, "hooks.json", ("SessionStart", "UserPromptSubmit"), "Stop", 1
        )
    folder = repository / ".gemini" if repository else home / ".gemini"
    return AgentHooks(
        agent, folder, "settings.json", ("SessionStart", "BeforeAgent"), "SessionEnd", 1000
    )


@dataclass(frozen=True)
class Change:
    """A file wikitrace wrote (or found as it should be)."""

    path: Path
    what: str
    backup: Path | None = None
    changed: bool = True

    def __str__(self) -> str:
        kept = f" (the file before: {self.backup})" if self.backup else ""
        return f"{self.path}: {self.what}{kept}"


def install(
    agent: Agent,
    recall_command: Sequence[str],
    capture_command: Sequence[str],
    *,
    repository: Path | None,
    recall_limit: float,
) -> list[Change]:
    """Put our recall and capture hooks into `agent`'s settings (replacing any of ours there
    before, so that installing twice is installing once); every other key and hook is kept.
    `recall_limit` is the recall command's own --time-limit; the agent's is longer."""
    where = agent_hooks(agent, repository)
    recall = shlex.join(recall_command)
    capture = shlex.join(capture_command)

    def edit(settings: dict[str, Any]) -> None:
        hooks = _without_ours(settings, where.path)
        for event in (*where.recall_events, where.capture_event):
            if not isinstance(hooks.get(event, []), list):
                raise InputError(
                    f"{where.path}: field 'hooks.{event}' is a {type(hooks[event]).__name__}, "
                    "not a list",
                    hint="fix that entry (a list of hook groups), then run the command again",
                )
        for event in where.recall_events:
            hooks.setdefault(event, []).append(
                _group(where, recall, "recall", recall_seconds(recall_limit))
            )
        hooks.setdefault(where.capture_event, []).append(
            _group(where, capture, "capture", CAPTURE_SECONDS)
        )
        settings["hooks"] = hooks

    events = ", ".join((*where.recall_events, where.capture_event))
    # Codex's config.toml is checked before anything is written: a file refused leaves both.
    feature = _codex_feature(where.folder / "config.toml") if agent == "codex" else None
    changes = [_edit_json(where.path, edit, f"wikitrace's hooks on {events}")]
    if feature is not None:
        changes.append(feature())
    return changes


def remove(agent: Agent, *, repository: Path | None = None) -> list[Change]:
    """Take our hooks out of `agent`'s settings, and nothing else (Codex's feature flag
    stays: other hooks may need it)."""
    where = agent_hooks(agent, repository)
    if not where.path.exists():
        return [Change(where.path, "no such file: nothing to remove", changed=False)]

    def edit(settings: dict[str, Any]) -> None:
        had = settings.get("hooks")
        hooks = _without_ours(settings, where.path)
        if hooks or not had:
            settings["hooks"] = hooks
        else:
            del settings["hooks"]

    return [_edit_json(where.path, edit, "wikitrace's hooks removed")]


# --- which handlers are ours -------------------------------------------------------------------


def is_ours(handler: Any) -> bool:
    """Whether a hook handler runs wikitrace's recall or capture."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    runs_us = any(Path(word).name == "wikitrace" or word == "wikitrace.cli" for word in words[:3])
    recall = any(words[i : i + 2] == ["hooks", "recall"] for i in range(len(words)))
    return runs_us and (recall or ("add" in words and "--from-hook" in words))


def recall_seconds(recall_limit: float) -> int:
    """The agent's time limit for a recall hook that keeps `recall_limit` itself: never below
    RECALL_SECONDS, and START_SECONDS above a longer limit, so that the agent does not cut a
    recall its own limit allows."""
    return max(RECALL_SECONDS, math.ceil(recall_limit) + START_SECONDS)


def _group(where: AgentHooks, command: str, role: str, seconds: int) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": command}
    if where.agent == "gemini":
        handler["name"] = f"wikitrace-{role}"
    handler["timeout"] = seconds * where.timeout_unit
    return {"hooks": [handler]}


def _without_ours(settings: dict[str, Any], path: Path) -> dict[str, Any]:
    """The settings' `hooks` table with our handlers (and groups left empty by that) taken
    out; InputError naming the field when the table is not the shape every agent reads."""
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InputError(f"{path}: field 'hooks' is a {type(hooks).__name__}, not an object")
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups  # not an event's list (Gemini's `enabled`, say): not ours
            continue
        left = []
        for number, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                raise InputError(
                    f"{path}: field 'hooks.{event}[{number}].hooks' is not a list",
                    hint="fix or remove that entry, then run the command again",
                )
            theirs = [handler for handler in handlers if not is_ours(handler)]
            if len(theirs) == len(handlers):
                left.append(group)
            elif theirs:
                left.append({**group, "hooks": theirs})
        if left or not groups:
            kept[event] = left
    return kept


# --- editing a file safely -----------------------------------------------------------------


def _read(path: Path) -> bytes | None:
    """The file's bytes, None when there is none; InputError for what is no settings file."""
    if not path.exists():
        return None
    if path.is_symlink() or not path.is_file():
        raise InputError(f"{path}: not a regular file", hint="point the agent at a real file")
    if path.stat().st_size > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES} bytes: no settings file")
    return path.read_bytes()


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], None], what: str) -> Change:
    before = _read(path)
    settings: Any = {}
    if before is not None and before.strip():
        try:
            settings = json.loads(before)
        except json.JSONDecodeError as error:
            raise InputError(
                f"{path}, line {error.lineno}, column {error.colno}: not valid JSON ({error.msg})",
                hint="fix the file (or move it away), then run the command again; it was "
                "not changed",
            ) from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not UTF-8 text; it was not changed") from None
    if not isinstance(settings, dict):
        raise InputError(f"{path}: a JSON {type(settings).__name__}, not an object")
    edit(settings)
    after = (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode()
    return _write(path, before, after, what)


def _write(path: Path, before: bytes | None, after: bytes, what: str) -> Change:
    # The store's module is heavy to import, and this one is imported at every CLI start.
    from wikitrace.corpus_schema.writing import atomic_write

    if before is not None and _same(before, after, path):
        return Change(path, f"{what}: already so, not changed", changed=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if before is not None:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        atomic_write(backup, before)
        shutil.copymode(path, backup)
    atomic_write(path, after)
    if backup is not None:
        shutil.copymode(backup, path)
    return Change(path, what, backup)


def _same(before: bytes, after: bytes, path: Path) -> bool:
    """Whether the edit changes nothing the agent reads (a JSON file's layout aside)."""
    if path.suffix != ".json":
        return before == after
    try:
        return bool(json.loads(before) == json.loads(after))
    except json.JSONDecodeError:
        return False


_FEATURES = re.compile(r"^\[features\][ \t]*(#.*)?$", re.M)
_LEGACY_LINE = re.compile(rf"^{CODEX_LEGACY_FEATURE}[ \t]*=[ \t]*true[ \t]*(#.*)?\n", re.M)


def _codex_feature(path: Path) -> Callable[[], Change]:
    """`[features] hooks = true` in Codex's config.toml, to be written: one line added (or an
    earlier install's `codex_hooks = true`, its older name, made it), the rest of
    the file as it was; a file that is not valid TOML, or turns hooks off, is refused now."""
    before = _read(path)
    text = before.decode("utf-8", "replace") if before is not None else ""
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(
            f"{path}: not valid TOML ({error})",
            hint="fix the file, then run the command again; nothing was changed in it",
        ) from None
    features = config.get("features", {})
    if not isinstance(features, dict):
        features = {}
    flag, legacy = features.get(CODEX_FEATURE), features.get(CODEX_LEGACY_FEATURE)
    what = f"[features] {CODEX_FEATURE} = true (Codex's hooks turned on)"
    for name, value in ((CODEX_FEATURE, flag), (CODEX_LEGACY_FEATURE, legacy)):
        if value is not None and value is not True:
            raise InputError(
                f"{path}: [features] {name} is {json.dumps(value, default=str)}: Codex "
                "would not run the hooks",
                hint=f"set {CODEX_FEATURE} = true there yourself if you want them",
            )
    if flag is True and legacy is None:
        return lambda: Change(path, f"{what}: already so, not changed", changed=False)
    line = f"{CODEX_FEATURE} = true\n"
    if text and not text.endswith("\n"):
        text += "\n"
    if legacy is True:
        # The old name still works but Codex warns of it at every start: it is renamed.
        after = _LEGACY_LINE.sub(line if flag is None else "", text, count=1)
    elif (found := _FEATURES.search(text)) is not None:
        cut = found.end() + 1
        after = text[:cut] + line + text[cut:]
    else:
        after = text + ("\n" if text else "") + "[features]\n" + line
    try:
        parsed = tomllib.loads(after).get("features", {})
    except tomllib.TOMLDecodeError:
        parsed = {}
    if parsed.get(CODEX_FEATURE) is not True or CODEX_LEGACY_FEATURE in parsed:
        raise InputError(
            f"{path}: its [features] table could not be given {CODEX_FEATURE} = true as one "
            "line (it is written another way)",
            hint=f"add `{CODEX_FEATURE} = true` under [features] yourself (and take out "
            f"`{CODEX_LEGACY_FEATURE}`, its old name)",
        )
    return lambda: _write(path, before, after.encode(), what)
