"""A coding session's repository, read from its log: the project it belongs to (`project_of`,
or the one a session-end hook found, kept beside the log: `hook_project`), the state it saw
(`repo_state`: commit, branch, start, files touched) and the files its tool calls changed
(`changed_files`, which a session's kind of work is inferred from)."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.code_names import named_files, safe_path
from wikitrace.corpus_schema.errors import first_problem
from wikitrace.corpus_schema.input_files import read_input
from wikitrace.corpus_schema.projects import normal_project, project_of_folder
from wikitrace.corpus_schema.records import REPO_FILES

_REMOTE_KEYS = ("repository_url", "remote_url", "remote", "gitRemote", "git_remote")
_FOLDER_KEYS = ("cwd", "directory", "workspace", "workspaceFolder", "worktree", "root")

_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "target_file", "filename")
_CHANGING = re.compile(
    r"edit|write|replace|patch|create|insert|delete|remove|rename|move|str_replace", re.IGNORECASE
)
"""A tool whose name says it changes files (Edit, MultiEdit, Write, NotebookEdit, apply_patch,
write_file, replace, edit_file, create_file, str_replace_based_edit_tool, ...)."""
_PATCHED = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$", re.MULTILINE)
"""A file named in an apply_patch envelope (Codex), wherever the patch is (its own tool's
input, or a shell command's argument)."""
_READ_ONLY_COMMANDS = frozenset(["view", "read"])
"""An editor tool's commands that change nothing (str_replace_based_edit_tool's `view`)."""


def _command_text(arguments: dict[str, Any]) -> str | None:
    """The command a tool call's arguments run (`command`, a string or a list of words), as
    one text; None when they name none."""
    command = arguments.get("command")
    if isinstance(command, list):
        return "\n".join(str(part) for part in command)
    return command if isinstance(command, str) else None


def _named_path(arguments: dict[str, Any]) -> list[str]:
    """The file a tool call's arguments name (the first of _PATH_KEYS given), or none."""
    return [
        arguments[key]
        for key in _PATH_KEYS
        if isinstance(arguments.get(key), str) and arguments[key].strip()
    ][:1]


def changed_files(turns: list[dict[str, Any]], folder: str | None = None) -> list[str]:
    """The files a session's tool calls changed, in the order first changed: the path of each
    call of a tool whose name says it changes files, and every file an apply_patch envelope
    names; relative to the working `folder` when under it. Shell commands that write files
    (`sed -i`, `>`) are not read: what they touch cannot be told reliably."""
    found: list[str] = []
    prefix = folder.rstrip("/\\") + "/" if folder else None
    for turn in turns:
        for call in turn.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            arguments = call.get("arguments")
            text = arguments if isinstance(arguments, str) else None
            if isinstance(arguments, dict):
                command = arguments.get("command")
                if (command_text := _command_text(arguments)) is not None:
                    text = command_text
                if _CHANGING.search(str(call.get("name") or "")) and not (
                    isinstance(command, str) and command in _READ_ONLY_COMMANDS
                ):
                    found += _named_path(arguments)
            if text:
                found += _PATCHED.findall(text)
    relative = [
        path[len(prefix) :] if prefix and path.startswith(prefix) else path for path in found
    ]
    return list(dict.fromkeys(relative))


_COMMIT_KEYS = ("commit_hash", "commit", "sha", "head")
_BRANCH_KEYS = ("gitBranch", "branch", "git_branch")
_TIME_KEYS = ("timestamp", "started", "startTime", "start_time", "created_at")
_NO_COMMIT = re.compile(r"^0+$")


def _places(metadata: dict[str, Any], *, git: bool) -> list[dict[str, Any]]:
    """Where a session's metadata may say something: itself, its tables one level down
    (Codex's session_meta) and, with `git`, the `git` table of any of them."""
    places = [metadata] + [v for v in metadata.values() if isinstance(v, dict)]
    if git:
        places += [v["git"] for v in places if isinstance(v.get("git"), dict)]
    return places


def repo_state(metadata: dict[str, Any], turns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The repository as a session saw it (RunRecord.repo), from what its log says: the
    commit and branch (Codex: session_meta.git; Claude Code: gitBranch, no commit), when it
    started (its metadata's time, else its first turn's) and the files its tool calls touched
    (`touched_files`); None when the log says none of these."""
    places = _places(metadata, git=True)

    def first(keys: tuple[str, ...]) -> str | None:
        for place in places:
            for key in keys:
                value = place.get(key)
                if isinstance(value, str) and value.strip():
                    return value.strip()
        return None

    commit = (first(_COMMIT_KEYS) or "").lower()
    if not re.match(r"^[0-9a-f]{7,40}$", commit) or _NO_COMMIT.match(commit):
        commit = ""  # none, or a placeholder (all zeros)
    branch = first(_BRANCH_KEYS)
    started = first(_TIME_KEYS) or next(
        (
            str(turn["metadata"]["timestamp"])
            for turn in turns
            if isinstance(turn.get("metadata"), dict) and turn["metadata"].get("timestamp")
        ),
        None,
    )
    files = touched_files(turns, folder_of(metadata))[:REPO_FILES]
    state = {
        "commit": commit or None,
        # HEAD: detached, no branch; a log's text is kept short where it is no file
        "branch": branch[:200] if branch and branch != "HEAD" else None,
        "started": started[:64] if started else None,
        "files": files,
    }
    kept = {key: value for key, value in state.items() if value}
    return kept if kept.keys() - {"started"} else None


_SHELL = re.compile(r"shell|bash|exec|command|terminal|run_cmd", re.IGNORECASE)
"""A tool whose name says it runs a shell command (Bash, shell, exec_command,
run_terminal_cmd, ...)."""
_PATCHED_BODY = re.compile(r"^\*\*\* Begin Patch$.*?^\*\*\* End Patch$", re.MULTILINE | re.DOTALL)
"""An apply_patch envelope inside a command: its lines are code, not file names."""


def touched_files(turns: list[dict[str, Any]], folder: str | None = None) -> list[str]:
    """The files a session's tool calls touched, in the order first touched: the path any
    call names (Read, Edit, Write, view, ...), every file an apply_patch envelope names, and
    the files a shell command names (`sed -n 1,80p src/a.py`: code_names.named_files),
    relative to the working `folder`. A path outside the folder (absolute, or with `..`) is
    left out: it cannot be told to be in the repository."""
    found: list[str] = []
    prefix = folder.rstrip("/\\") + "/" if folder else None
    for turn in turns:
        for call in turn.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            arguments = call.get("arguments")
            text = arguments if isinstance(arguments, str) else None
            within = ""  # a command run in a folder below the session's (Codex's workdir)
            if text is not None and text.lstrip().startswith("{"):
                with contextlib.suppress(ValueError):  # arguments logged as a JSON string
                    arguments = json.loads(text)
            if isinstance(arguments, dict):
                if (command_text := _command_text(arguments)) is not None:
                    text = command_text
                workdir = arguments.get("workdir")
                if isinstance(workdir, str) and prefix and workdir.startswith(prefix):
                    within = workdir[len(prefix) :].rstrip("/") + "/"
                found += _named_path(arguments)
            if text:
                found += _PATCHED.findall(text)
                if _SHELL.search(str(call.get("name") or "")):
                    named = named_files([_PATCHED_BODY.sub("", text)])
                    found += [name if name.startswith("/") else within + name for name in named]
    kept: dict[str, None] = {}
    for path in found:
        if prefix and path.startswith(prefix):
            path = path[len(prefix) :]
        relative = safe_path(path)
        if relative is not None:
            kept.setdefault(relative, None)
    return list(kept)


def folder_of(metadata: dict[str, Any]) -> str | None:
    """A session's working folder, as its metadata names it (see project_of)."""
    places = _places(metadata, git=False)
    for place in places:
        for key in _FOLDER_KEYS:
            if isinstance(place.get(key), str) and place[key].strip():
                return str(place[key])
    return None


def project_of(metadata: dict[str, Any]) -> str | None:
    """A session's project from what its log says: the git remote when it names one
    (`github.com/owner/repo`, whatever the URL's form), else the repository its working folder
    belongs to (`project_of_folder`: a worktree's main repository, `app` for /home/me/app or
    C:\\src\\app, none for a temporary folder), else a Gemini CLI project hash. Looked for in
    the metadata and one level down (Codex keeps them in session_meta, with git inside)."""
    places = _places(metadata, git=True)
    for place in places:
        for key in _REMOTE_KEYS:
            if isinstance(place.get(key), str) and place[key].strip():
                return normal_project(place[key])
    for place in places:
        for key in _FOLDER_KEYS:
            if isinstance(place.get(key), str) and place[key].strip():
                return project_of_folder(place[key])
    for place in places:
        if isinstance(place.get("projectHash"), str) and place["projectHash"]:
            return f"gemini:{str(place['projectHash'])[:12]}"
    return None


# --- the working folder a session-end hook named ------------------------------------------
# Kept beside a session's log that waits for a label (`CORPUS.unlabelled/`,
# compiler/capture.py), and read back when that log is added: a log recorded elsewhere (in a
# container) names a folder this machine does not have, so its project is the one the hook
# found.

HOOK_FOLDER_SUFFIX = ".hook.json"
"""`.<log's name>.hook.json`, beside a session's log: where the agent worked, as its hook said."""


class HookFolder(BaseModel):
    """The working folder a session-end hook's payload named, kept beside a copy of the
    session's log that waits for a label (`CORPUS.unlabelled/`): when the log is added later,
    its project is the repository that folder was in when the hook ran, not the one the log's
    own folder names."""

    model_config = ConfigDict(extra="forbid")

    cwd: str
    """The payload's cwd, as given."""
    project: str | None
    """The repository that folder was in when the hook ran (a project key), or None."""


def hook_folder_path(log_path: Path) -> Path:
    """Where the hook's folder of the session logged at `log_path` is kept: a hidden file
    beside it (a folder's walk reads no hidden file as a log)."""
    return log_path.with_name(f".{log_path.name}{HOOK_FOLDER_SUFFIX}")


def hook_project(log_path: Path) -> str | None:
    """The project the hook found for the session logged at `log_path`, when one was kept
    beside it; InputError naming the file when it is damaged."""
    kept = hook_folder_path(log_path)
    if not kept.is_file():
        return None
    try:
        return HookFolder.model_validate_json(read_input(kept)).project
    except ValidationError as error:
        where, message = first_problem(error)
        raise InputError(
            f"field '{where}': {message}",
            path=kept,
            hint="remove that file to take the project from the log's own folder",
        ) from None
