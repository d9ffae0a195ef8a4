"""`wikitrace hooks`: recall and capture in a coding agent's own hooks (install, remove, and
`recall`, which the agent runs)."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from pathlib import Path

import click

from wikitrace.corpus_schema.setting_fields import declared, default
from wikitrace.integrations.agent_hooks import AGENTS, REVIEW_NOTES, Agent, install, remove

from .common import option

log = logging.getLogger(__name__)

CORPUS = click.Path(path_type=Path, file_okay=False, exists=True)


@click.group("hooks")
def hooks_group() -> None:
    """Recall lessons in a coding agent's sessions and capture them as they end.

    `wikitrace hooks install AGENT CORPUS` puts two hooks into the agent's settings: recall
    (`wikitrace hooks recall CORPUS`) at each session's start and each prompt, which gives the
    agent the lessons of the repository it works in, and capture (`wikitrace add CORPUS
    --from-hook`) when a session ends. AGENT is claude-code, codex or gemini; see
    docs/hooks.md for each agent's settings side by side.
    """


_repo_option = option(declared("repo"))
_max_tokens_option = option(declared("max-tokens"))
_time_limit_option = option(declared("time-limit"))


@hooks_group.command("install")
@click.argument("agent", type=click.Choice(AGENTS))
@click.argument("corpus", type=CORPUS)
@_repo_option
@_max_tokens_option
@_time_limit_option
def install_command(
    agent: Agent, corpus: Path, repo: bool, max_tokens: int, time_limit: float
) -> None:
    """Recall from CORPUS at AGENT's session starts and prompts, and capture its sessions.

    Every other key and hook of the settings file is kept; installing again replaces what
    wikitrace installed before; the file as it was is kept beside it (*.wikitrace-backup).
    A settings file that is not valid JSON (or, for Codex's config.toml, TOML) is left as it
    is, and the error names its line. Prints each file written. Codex runs the hooks only
    once its user has trusted them (`/hooks` in codex): said on stderr.

    \b
    Example:
      wikitrace hooks install claude-code ~/corpus
    """
    program = _program()
    target = str(corpus.absolute())
    recall = [*program, "hooks", "recall", target]
    if max_tokens != default("max-tokens"):
        recall += ["--max-tokens", str(max_tokens)]
    if time_limit != default("time-limit"):
        recall += ["--time-limit", f"{time_limit:g}"]
    capture = [*program, "add", target, "--from-hook"]
    installed = install(
        agent, recall, capture, repository=_repository(repo), recall_limit=time_limit
    )
    for change in installed:
        click.echo(str(change))
    if agent in REVIEW_NOTES:
        click.echo(REVIEW_NOTES[agent], err=True)


@hooks_group.command("remove")
@click.argument("agent", type=click.Choice(AGENTS))
@_repo_option
def remove_command(agent: Agent, repo: bool) -> None:
    """Take wikitrace's hooks out of AGENT's settings, and nothing else.

    The file as it was is kept beside it (*.wikitrace-backup). Prints each file written.
    """
    for change in remove(agent, repository=_repository(repo)):
        click.echo(str(change))


@hooks_group.command("recall")
@click.argument("corpus", type=click.Path(path_type=Path))
@_max_tokens_option
@_time_limit_option
@option(declared("hook-log"))
def recall_command(corpus: Path, max_tokens: int, time_limit: float, hook_log: Path | None) -> None:
    """Run as an agent's SessionStart, UserPromptSubmit or BeforeAgent hook: the lessons of
    CORPUS for the repository and prompt the hook's JSON on stdin names.

    Prints the agent's JSON (hookSpecificOutput.additionalContext), or nothing when nothing
    applies. Always exits 0: a missing or damaged corpus, a slow disk or a bad payload gives
    no answer and a line in the hook's log.
    """
    from wikitrace.tools.hook_recall import parse_recall_payload, recall

    from .hook_io import compiled_templates, default_log, logging_to, read_payload
    from .settings import user_projects

    with logging_to(hook_log or default_log()):
        watchdog = _Watchdog(time_limit)
        answer = b""
        try:
            payload = parse_recall_payload(read_payload(None, wait=time_limit))
            said = recall(
                corpus,
                payload,
                max_tokens=max_tokens,
                project_aliases=user_projects(),
                compiled_templates=compiled_templates(),
            )
            who = f"{said.event} {payload.session_id or '-'}"
            if said.text:
                log.info("%s: recalled %d lessons for %s", who, len(said.insights), said.project)
            else:
                log.info("%s: nothing recalled: %s", who, said.reason)
            answer = said.output()
        except Exception as error:  # the agent goes on whatever went wrong here
            log.error("recall from %s: nothing recalled: %s", corpus, _said(error))
        with watchdog.answering():
            if answer:
                click.echo(answer, nl=False)


def _said(error: Exception) -> str:
    if isinstance(error, click.ClickException):
        return error.format_message()
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename + ': ' if error.filename else ''}{error.strerror}"
    return str(error) or type(error).__name__


class _Watchdog:
    """A hard deadline: past it, the process logs it and exits 0 having printed nothing,
    whatever the main thread is blocked in (a read of a FIFO, a hung disk)."""

    def __init__(self, seconds: float):
        self._lock = threading.Lock()
        self._seconds = seconds
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        if not self._lock.acquire(blocking=False):
            return  # the answer is being printed: let it finish
        log.error("recall: no answer within %.1f s: nothing recalled", self._seconds)
        for handler in logging.getLogger("wikitrace").handlers:
            handler.flush()
        os._exit(0)

    def answering(self) -> _Answering:
        return _Answering(self)


class _Answering:
    """Printing the answer: the watchdog no longer ends the process once it has begun."""

    def __init__(self, watchdog: _Watchdog):
        self._watchdog = watchdog

    def __enter__(self) -> None:
        self._watchdog._lock.acquire()

    def __exit__(self, *_: object) -> None:
        self._watchdog._timer.cancel()


def _program() -> list[str]:
    """How the agent runs this wikitrace: the script installed beside this Python, else the
    one on PATH, else this Python with `-m wikitrace.cli`."""
    beside = Path(sys.executable).with_name("wikitrace")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("wikitrace")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "wikitrace.cli"]


def _repository(repo: bool) -> Path | None:
    """The top of the repository the current folder is in, for --repo; else None."""
    if not repo:
        return None
    here = Path.cwd().absolute()
    for place in (here, *here.parents):
        if (place / ".git").exists():
            return place
    raise click.UsageError(f"--repo: {here} is in no git repository")
