"""The working folder a session-end hook named, kept beside a session's log that waits for a
label (`CORPUS.unlabelled/`, compiler/capture.py), and read back when that log is added: a log
recorded elsewhere (in a container) names a folder this machine does not have, so its project
is the one the hook found."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.errors import first_problem
from wikitrace.corpus_schema.input_files import read_input

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
