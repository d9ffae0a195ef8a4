"""`wikitrace add CORPUS --from-hook`: an agent's session-end hook, read and answered.

The hook's JSON is this command's arguments: which session ended and where its log is. Claude
Code gives it on stdin (SessionEnd and Stop hooks; Codex's lifecycle hooks have the same
shape); Codex's `notify` program gets it as its last argument. The command must never get in
the agent's way: it checks the payload, hands the work to a process of its own and exits 0
at once; what happened goes to a log file (and, while the agent still listens, to stderr).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wikitrace.corpus_schema.errors import InputError, WikitraceError, first_problem

from .common import is_quiet
from .compile_options import CompileSettings
from .hook_io import default_log, logging_to, read_payload
from .settings import SETTINGS_META

log = logging.getLogger(__name__)

CODEX_HOME_ENV = "CODEX_HOME"
SESSION_END_EVENTS = frozenset({"SessionEnd", "Stop"})
"""Claude Code hook events after which the session's log holds what there is to capture."""
CODEX_TURN_COMPLETE = "agent-turn-complete"
_ID = re.compile(r"[^A-Za-z0-9._:@+-]")
ID_CHARS = 128


# --- the payloads -------------------------------------------------------------------------


class _Payload(BaseModel):
    # Another program's record, which gains fields release by release: what we do not read is
    # ignored, not refused, so that an agent's update never breaks the hook.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ClaudeCodeHook(_Payload):
    """A Claude Code hook's input on stdin (Codex's lifecycle hooks share its shape)."""

    hook_event_name: str
    """The event: SessionEnd and Stop are captured, any other is ignored."""
    session_id: str
    """The session's id."""
    transcript_path: str | None = None
    """Its log, `~/.claude/projects/<project>/<session>.jsonl` (Codex: its rollout, or null)."""
    cwd: str | None = None
    """The agent's working folder, against which a relative transcript_path is read."""
    reason: str | None = None
    """SessionEnd only: clear, logout, prompt_input_exit or other."""


class CodexNotify(_Payload):
    """What Codex passes its `notify` program, as the last argument, after each turn."""

    type: str
    """agent-turn-complete is captured; any other is ignored."""
    thread_id: str = Field(alias="thread-id")
    """The session's id, the end of its rollout's name (`rollout-<time>-<thread-id>.jsonl`)."""
    turn_id: str | None = Field(default=None, alias="turn-id")
    """The turn that completed."""
    cwd: str | None = None
    """The agent's working folder."""


def safe_id(value: str) -> str:
    """An id from a payload as it may appear in a log line or a path: letters, digits and
    `._:@+-` kept, anything else (a newline, `/`, `$`, a space) as `_`, at most ID_CHARS."""
    cleaned = _ID.sub("_", value)[:ID_CHARS]
    return cleaned or "_"


@dataclass(frozen=True)
class HookCall:
    """The session a payload names, and the event that ended it (or a part of it)."""

    event: str
    session_id: str
    transcript: Path
    folder: Path | None = None
    """The agent's working folder (the payload's cwd): its repository is the run's project."""

    def __str__(self) -> str:
        return f"{self.event} {self.session_id}"


def parse_payload(raw: bytes) -> HookCall | None:
    """The session a hook payload names; None for an event that ends nothing (logged).
    Raises InputError for a payload that is not one, or a log that cannot be found."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InputError(
            f"the hook payload is not JSON ({error})" if raw.strip() else "no hook payload",
            hint="--from-hook reads the hook's JSON on stdin, or as the one argument after "
            "CORPUS (as Codex's notify passes it)",
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"the hook payload is a JSON {type(data).__name__}, not an object")
    try:
        if "hook_event_name" in data:
            return _claude_code(ClaudeCodeHook.model_validate(data))
        if "type" in data:
            return _codex(CodexNotify.model_validate(data))
    except ValidationError as error:
        where, message = first_problem(error)
        raise InputError(f"hook payload field '{where}': {message}") from None
    raise InputError(
        "not a hook payload wikitrace reads",
        hint="expected a Claude Code hook's input (hook_event_name, session_id, "
        "transcript_path) or Codex's notify argument (type agent-turn-complete, thread-id)",
    )


def _claude_code(payload: ClaudeCodeHook) -> HookCall | None:
    if payload.hook_event_name not in SESSION_END_EVENTS:
        log.info(
            "%s %s: not a session-end event, ignored",
            safe_id(payload.hook_event_name),
            safe_id(payload.session_id),
        )
        return None
    if payload.transcript_path:
        transcript = Path(payload.transcript_path).expanduser()
        if not transcript.is_absolute() and payload.cwd:
            transcript = Path(payload.cwd) / transcript
    else:  # Codex's lifecycle hooks may give none: its rollout is found by the session's id
        found = find_rollout(payload.session_id)
        if found is None:
            raise InputError(
                f"{safe_id(payload.hook_event_name)} {safe_id(payload.session_id)}: the payload "
                "names no "
                "transcript_path, and no Codex rollout has that id"
            )
        transcript = found
    event, session = safe_id(payload.hook_event_name), safe_id(payload.session_id)
    return HookCall(event, session, transcript, _folder(payload.cwd))


def _codex(payload: CodexNotify) -> HookCall | None:
    if payload.type != CODEX_TURN_COMPLETE:
        log.info(
            "%s %s: not a turn's end, ignored", safe_id(payload.type), safe_id(payload.thread_id)
        )
        return None
    found = find_rollout(payload.thread_id)
    if found is None:
        raise InputError(
            f"{safe_id(payload.type)} {safe_id(payload.thread_id)}: no rollout of that thread in "
            f"{codex_home() / 'sessions'}",
            hint=f"set {CODEX_HOME_ENV} when Codex keeps its sessions elsewhere",
        )
    return HookCall(safe_id(payload.type), safe_id(payload.thread_id), found, _folder(payload.cwd))


def _folder(cwd: str | None) -> Path | None:
    """The payload's working folder, when it names an absolute one."""
    if not cwd or not Path(cwd).is_absolute():
        return None
    return Path(cwd)


def codex_home() -> Path:
    return Path(os.environ.get(CODEX_HOME_ENV) or Path.home() / ".codex")


def find_rollout(thread_id: str) -> Path | None:
    """Codex's log of a thread: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`,
    under the day it started (a resumed thread keeps writing there)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", thread_id):
        return None  # no id of Codex's, and nothing to put in a glob pattern
    found = sorted((codex_home() / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return found[-1] if found else None


# --- the command ----------------------------------------------------------------------------


def hook_add(
    corpus: Path,
    given: tuple[str, ...],
    settings: CompileSettings,
    *,
    wait: bool,
    log_file: Path | None,
    no_deploy: bool,
    as_json: bool,
) -> None:
    """`add CORPUS --from-hook [PAYLOAD]`: capture the session the payload names. Without
    `wait`, any problem is logged and the exit code is 0, and the capture itself runs in a
    process of its own; with it, the command works as `add` does (its exit codes included)."""
    with logging_to(log_file or default_log()):
        _log_settings()
        try:
            if no_deploy:
                raise InputError(
                    "--no-deploy does not go with --from-hook: a hook deploys what it adds, so "
                    "that the next session's capture finds it"
                )
            if len(given) > 1:
                raise InputError(
                    f"--from-hook reads one payload; {len(given)} arguments were given after CORPUS"
                )
            call = parse_payload(read_payload(given[0] if given else None))
            if call is None:
                return
            from wikitrace.corpus_schema.input_files import input_problem

            problem = input_problem(call.transcript)
            if problem is not None:
                raise InputError(f"{call}: its log {call.transcript}: {problem}")
        except (WikitraceError, click.ClickException, OSError) as error:
            _failed(None, error, wait)
            return
        if not wait:
            if not _detach():
                return  # the agent goes on; the child captures
            log.info("%s: capturing into %s in process %d", call, corpus.absolute(), os.getpid())
        try:
            _capture(corpus, call, settings, wait=wait, as_json=as_json)
        except (WikitraceError, click.ClickException, OSError) as error:
            _failed(call, error, wait)
        except Exception:
            log.exception("%s: not added: wikitrace failed", call)
            if wait:
                raise


def _capture(
    corpus: Path, call: HookCall, settings: CompileSettings, *, wait: bool, as_json: bool
) -> None:
    from wikitrace.compiler.capture import Session, capture_session, unlabelled_dir

    from .build import RETRY_ADD, finish_report

    corpus = corpus.absolute()  # the log is one for every corpus and every folder
    options = settings.build_options((call.transcript,), corpus, "offline")
    captured = capture_session(
        options,
        Session(call.event, call.session_id, call.transcript, call.folder),
        waiting=lambda: log.info("%s: waiting for another add into %s to finish", call, corpus),
    )
    waited = (
        f", after waiting {captured.waited_seconds:.1f} s for another add"
        if captured.waited_seconds >= 1
        else ""
    )
    # The corpus knows a session by its log's id, which a resumed session may not share.
    known = f" (session {captured.session})" if captured.session != call.session_id else ""
    if captured.outcome == "unlabelled":
        kept = unlabelled_dir(corpus)
        log.warning(
            "%s: not added, %s; its log is kept in %s until labelled: "
            "`wikitrace add %s %s --labels FILE`, or give the hook --judge MODEL",
            call,
            captured.reason if settings.judge else "unlabelled",
            kept,
            corpus,
            kept,
        )
        return
    if captured.outcome == "present":
        _say(wait, f"{call}: nothing new: {corpus} holds its {captured.turns} turns{known}{waited}")
        return
    report = captured.report
    assert report is not None and report.version is not None
    last = captured.first_turn + captured.added_turns - 1
    _say(
        wait,
        f"{call}: added {report.version} to {corpus}{known}: part {captured.part}, turns "
        f"{captured.first_turn}-{last} of {captured.turns}"
        + (" (its earlier turns changed since captured: added whole)" if captured.restarted else "")
        + waited,
    )
    if report.failed:
        log.warning(
            "%s: %d runs of %s failed to compile: %s",
            call,
            len(report.failed),
            report.version,
            RETRY_ADD,
        )
    if wait:
        from wikitrace.versions import Store

        folder = Store(corpus).version_path(report.version)
        finish_report(
            report, quiet=is_quiet(), as_json=as_json, stdout=str(folder), retry=RETRY_ADD
        )


def _log_settings() -> None:
    """Which settings files this run read (or why it read none): into the hook's log."""
    ctx = click.get_current_context(silent=True)
    said = ctx.meta.get(SETTINGS_META) if ctx is not None else None
    if isinstance(said, str):
        (log.error if said.startswith("settings not read") else log.info)("%s", said)


def _say(wait: bool, message: str) -> None:
    """What a capture did: to the log, and to stderr for whoever waits for it."""
    log.info("%s", message)
    if wait and not is_quiet():
        click.echo(message, err=True)


def _failed(call: HookCall | None, error: BaseException, wait: bool) -> None:
    """Log why nothing was added; raise it again when the caller waits for an exit code."""
    message = error.format_message() if isinstance(error, click.ClickException) else str(error)
    if isinstance(error, OSError) and error.strerror:
        message = f"{error.filename + ': ' if error.filename else ''}{error.strerror}"
    log.error("%snot added: %s", f"{call}: " if call else "", message)
    if wait:
        raise error


def _detach() -> bool:
    """Go on in a child process with a session of its own and no standard streams, so that
    the agent waiting for the hook (and for its output to close) is free at once: True in
    the child, False in the parent, which returns."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if os.fork():
        return False
    os.setsid()  # out of the agent's process group: its end does not end the capture
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return True
