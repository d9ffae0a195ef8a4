"""What every agent hook command shares: its payload read from stdin (or given) and its log
file. Kept apart from the payload models (cli/hook.py) so that `hooks recall`, which runs at
every session start and prompt, imports neither pydantic nor the capture code."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import select
import sys
import time
from collections.abc import Iterator
from logging.handlers import RotatingFileHandler
from pathlib import Path

import orjson

from wikitrace.corpus_schema.errors import InputError

log = logging.getLogger(__name__)

STDIN_WAIT_SECONDS = 5.0
"""How long to wait for a payload on stdin: some agents never close it."""
LOG_BYTES = 1 << 20
"""The log is cut at 1 MB (the one before is kept as hook.log.1)."""
LOG_SUFFIX = ".log"
"""A hook log's name ends so: no option sends the log's lines into a shell's start-up file."""


def read_payload(given: str | None, wait: float = STDIN_WAIT_SECONDS) -> bytes:
    """The payload given as an argument, else what stdin holds: read until it is a whole JSON
    document or closed, for at most `wait` seconds."""
    if given is not None:
        return given.encode()
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    if stdin is None or stdin.isatty():
        raise InputError(
            "no hook payload: --from-hook reads the hook's JSON on stdin (or as the one "
            "argument after CORPUS, as Codex's notify passes it)"
        )
    try:
        fd = stdin.fileno()
    except (OSError, io.UnsupportedOperation):  # not a file (a test's stream): read it whole
        return bytes(stdin.read())
    data = bytearray()
    deadline = time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
        if data.rstrip().endswith(b"}") and _is_json(data):
            break
    return bytes(data)


def _is_json(data: bytearray) -> bool:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def cache_folder() -> Path:
    """The user's cache folder of wikitrace (~/.cache/wikitrace, or under $XDG_CACHE_HOME)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "wikitrace"


def default_log() -> Path:
    return cache_folder() / "hook.log"


def compiled_templates() -> Path:
    """Where recall keeps its message's template compiled, for the next call (a new process
    at every prompt): prompts.CompiledTemplates."""
    return cache_folder() / "templates"


@contextlib.contextmanager
def logging_to(path: Path) -> Iterator[None]:
    """Also log wikitrace's messages, from INFO up, to `path` (with the time and process),
    while the hook runs; stderr keeps the level -v/-q chose."""
    root = logging.getLogger("wikitrace")
    handler: logging.Handler | None = None
    refused = _log_problem(path)
    if refused is not None:
        refused = f"the hook log {path} is not written: {refused}; this one is"
        path = default_log()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=1, encoding="utf-8")
    except OSError as error:
        log.error("cannot write the hook log %s: %s", path, error.strerror or error)
    level = root.level
    others = {other: other.level for other in root.handlers}
    if handler is not None:
        handler.setFormatter(_OneLine("%(asctime)s %(process)d %(levelname)s %(message)s"))
        handler.setLevel(logging.INFO)
        for other in others:
            other.setLevel(max(other.level, level))
        root.addHandler(handler)
        root.setLevel(min(level, logging.INFO))
    if refused is not None:
        log.error("%s", refused)
    try:
        yield
    finally:
        if handler is not None:
            root.removeHandler(handler)
            handler.close()
            root.setLevel(level)
            for other, was in others.items():
                other.setLevel(was)


def _log_problem(path: Path) -> str | None:
    """Why the hook may not append to `path`, or None: it must be a `.log` file (never a
    shell's start-up file) that is no link and, when it exists, a regular file."""
    if not path.name.endswith(LOG_SUFFIX):
        return f"its name does not end in {LOG_SUFFIX}"
    if path.is_symlink():
        return "it is a symbolic link"
    if path.exists() and not path.is_file():
        return "it is not a regular file"
    return None


class _OneLine(logging.Formatter):
    """A log record as one line: a newline or other control character in a message (a path
    or an id from a payload) is escaped, so that no payload writes a line of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return "".join(
            char if char.isprintable() else repr(char)[1:-1]
            for char in super().formatMessage(record)
        )
