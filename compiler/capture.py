"""Live capture: add the session an agent's hook names to a corpus as it ends, a part at a time.

A corpus never changes a run it holds, so a session that grows after it was captured (resumed
later, or captured at every reply by a Stop hook or Codex's notify) is added in parts: each
capture adds the turns past those the corpus holds, as a run of its own (`<session>/part-N`),
its task the first prompt typed in it. The corpus itself tells what it holds: a part counts
only while its turns, as the corpus keeps them, are still the session's (a rewind that changed
them adds the whole session again, as a new part that starts at turn 1).

A session with no outcome (every coding-agent session, unless a labels file names it or a judge
model labels it) cannot enter a corpus: its files are copied beside the corpus
(`CORPUS.unlabelled/`) so that they outlive the agent's own clean-up, until labelled.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema import read as corpus_read
from wikitrace.corpus_schema.identity import digest, turn_log
from wikitrace.corpus_schema.input_files import input_problem, read_input
from wikitrace.corpus_schema.lock import build_lock
from wikitrace.corpus_schema.projects import repository_at
from wikitrace.corpus_schema.records import RawHeader
from wikitrace.corpus_schema.writing import atomic_write
from wikitrace.versions import FrozenVersion, open_store

from .add import add_version
from .importers import plan_inputs
from .importers.repository import HookFolder, hook_folder_path
from .importers.runs import SourceRun, Unlabelled
from .redact import Redactor
from .report import BuildOptions, BuildReport

log = logging.getLogger(__name__)

UNLABELLED_SUFFIX = ".unlabelled"
"""`CORPUS.unlabelled/`: copies of the sessions a hook could not label, beside the corpus."""
PART_MARK = "/part-"
"""A later part's task id: `<session>/part-2`, `<session>/part-3`, ..."""
LOCK_WAIT_SECONDS = 600.0
"""How long a capture waits for another add into the same corpus to finish."""
SESSION_TALLIES = ("counts", "weak_signals")
"""Run metadata an importer counts over the whole session: a later part keeps them apart."""


@dataclass(frozen=True)
class Session:
    """The session a hook names."""

    event: str
    """What ended: SessionEnd, Stop, agent-turn-complete, ..."""
    session_id: str
    """The agent's id for it (Claude Code's session_id, Codex's thread-id)."""
    transcript: Path
    """Its log: a Claude Code session file, a Codex rollout."""
    folder: Path | None = None
    """The agent's working folder, as the hook says: when it is in a repository on this
    machine, that repository is the run's project (a worktree's, its main one's)."""


@dataclass
class Captured:
    """What a capture did with one session."""

    outcome: Literal["added", "present", "unlabelled"]
    """added: a new version holds its new part; present: the corpus holds all its turns;
    unlabelled: nothing labels it, its files were kept beside the corpus."""
    session: str
    """The session as the corpus knows it (its runs' task id)."""
    turns: int
    """The session's turns, as read."""
    part: int = 0
    """The part added (1 for the first), or the number of parts held."""
    first_turn: int = 0
    """The session's turn the part added starts at (1-based)."""
    added_turns: int = 0
    restarted: bool = False
    """The session's earlier turns are no longer those the corpus holds: it was added whole."""
    kept: Path | None = None
    """Where an unlabelled session's log was copied to."""
    waited_seconds: float = 0.0
    """How long the capture waited for another add into the corpus."""
    report: BuildReport | None = None
    """The add's report, when a version was made."""
    reason: str = ""
    """Why an unlabelled session was not added."""


@dataclass
class _Part:
    """The turns of a session a capture adds."""

    number: int
    first: int
    """0-based index of its first turn in the session."""
    turns: list[dict[str, Any]]
    restarted: bool = False


Run = SourceRun | Unlabelled
"""A session as its importer reads it: labelled, or waiting for a label."""


def _key(run: Run) -> str:
    """The session's id as the corpus knows it: its run's task id."""
    return str(run.data["task_id"])


def capture_session(
    options: BuildOptions,
    session: Session,
    *,
    lock_wait: float = LOCK_WAIT_SECONDS,
    waiting: Callable[[], None] | None = None,
) -> Captured:
    """Add `session` (options.inputs is ignored) to the corpus options.output names, as the
    part of it the corpus does not hold, in a new version that is deployed. Waits up to
    `lock_wait` seconds for another add into the corpus (`waiting` is told when it starts to
    wait). Raises InputError for a log that holds no session, CorpusError for a corpus that
    cannot be added to (or a lock still held after `lock_wait`)."""
    started = time.monotonic()
    with build_lock(options.output, lock_wait, waiting):
        waited = round(time.monotonic() - started, 3)
        # Read once the lock is held: no capture that ran before saw more of the log than this.
        run = _read_session(options, session)
        key = _key(run)
        turns: list[dict[str, Any]] = run.data["turns"]
        base = FrozenVersion.current(open_store(options.output))
        redactor = (
            Redactor(options.redact_patterns, options.redact_keep) if options.redact else None
        )
        part = _next_part(base, key, turns, redactor)
        if part is None:
            held = len(_parts_of(base, key))
            return Captured("present", key, len(turns), part=held, waited_seconds=waited)
        if isinstance(run, Unlabelled) and options.judge is None:
            return _unlabelled(options.output, session, run, run.reason, redactor)
        with tempfile.TemporaryDirectory(prefix="wikitrace-capture-") as folder:
            # Named as the log is: the corpus names a run's source by its file name.
            record = Path(folder) / session.transcript.name
            record.write_bytes(orjson.dumps(_part_record(run, part, session)) + b"\n")
            adding = dataclasses.replace(options, inputs=[record], input_format="native", labels=[])
            try:
                report = add_version(adding)
            except InputError:
                if isinstance(run, Unlabelled):  # the judge labelled nothing
                    reason = f"the judge {options.judge} gave no verdict backed by quotes"
                    return _unlabelled(options.output, session, run, reason, redactor)
                raise
    if report.version is None:  # the very same turns are held under another id
        return Captured("present", key, len(turns), waited_seconds=waited)
    _drop_kept(options.output, session.transcript)
    return Captured(
        "added",
        key,
        len(turns),
        part=part.number,
        first_turn=part.first + 1,
        added_turns=len(part.turns),
        restarted=part.restarted,
        waited_seconds=waited,
        report=report,
    )


def _read_session(options: BuildOptions, session: Session) -> Run:
    """The one run the log holds, labelled from options.labels when they name it."""
    plan = plan_inputs(
        [session.transcript], options.input_format, options.labels, options.success_threshold
    )
    runs: list[Run] = []
    errors: list[InputError] = []
    for item in plan.items():
        if isinstance(item, InputError):
            errors.append(item)
        else:
            runs.append(item)
    if not runs:
        raise errors[0] if errors else InputError("no session in it", path=session.transcript)
    # A log of one session holds one run; the one with the hook's id, should there be more.
    run = next((run for run in runs if _key(run) == session.session_id), runs[0])
    project = repository_at(session.folder) if session.folder is not None else None
    if project is not None:
        run.data["project"] = project
    return run


def _unlabelled(
    pointer: Path, session: Session, run: Run, reason: str, redactor: Redactor | None
) -> Captured:
    return Captured(
        "unlabelled",
        _key(run),
        len(run.data["turns"]),
        kept=keep_unlabelled(pointer, session.transcript, redactor, folder=session.folder),
        reason=reason,
    )


def unlabelled_dir(pointer: Path) -> Path:
    """Where the hook keeps the sessions it could not label: `CORPUS.unlabelled/`."""
    return pointer.with_name(pointer.name + UNLABELLED_SUFFIX)


def keep_unlabelled(
    pointer: Path,
    transcript: Path,
    redactor: Redactor | None = None,
    *,
    folder: Path | None = None,
) -> Path:
    """Copy a session's log (and the folder of its sub-agents, `<session>/`) into
    `unlabelled_dir`, replacing an older copy; the copy of the log. The folder is the user's
    alone (0700), and the copies are redacted as a build redacts (a JSON record a line stays
    one, so the copy reads as the log did): the copy sits beside a corpus that may be shared,
    and outlives the agent's own clean-up. Without a redactor (--no-redact) they are as
    written. The hook's working `folder`, and the repository it is in, are kept beside the
    copy (`hook_folder_path`), so that the session, labelled later, has the project a capture
    would have given it."""
    where = unlabelled_dir(pointer)
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept = where / transcript.name
    _copy(transcript, kept, redactor)
    if folder is not None:
        said = HookFolder(cwd=str(folder), project=repository_at(folder))
        atomic_write(hook_folder_path(kept), said.model_dump_json(indent=2).encode() + b"\n")
    else:
        hook_folder_path(kept).unlink(missing_ok=True)
    companions = transcript.with_suffix("")
    if companions.is_dir() and not companions.is_symlink():
        for root, dirs, files in os.walk(companions):  # links to folders are not followed
            dirs.sort()
            for name in sorted(files):
                source = Path(root) / name
                # Only the session's own files: a link is not followed (it may point at a key
                # or a device), nor is a FIFO, a device or a huge file read.
                problem = "a symbolic link" if source.is_symlink() else input_problem(source)
                if problem is not None:
                    log.warning("%s: not kept: %s", source, problem)
                    continue
                _copy(source, where / companions.name / source.relative_to(companions), redactor)
    return kept


def _redacted_bytes(source: Path, redactor: Redactor) -> bytes:
    """A log's bytes with its secrets replaced: each line that is JSON redacted as a value and
    written back as one line, any other line as text."""
    lines = []
    for raw in read_input(source).splitlines():
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            lines.append(redactor.text(raw.decode("utf-8", "replace")).encode())
            continue
        lines.append(orjson.dumps(redactor.value(value)))
    return b"\n".join(lines) + (b"\n" if lines else b"")


def _copy(source: Path, dest: Path, redactor: Redactor | None = None) -> None:
    """Copy through a hidden temporary file: a build reading the folder sees whole files."""
    dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        if redactor is None:
            tmp.write_bytes(read_input(source))
        else:
            tmp.write_bytes(_redacted_bytes(source, redactor))
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _drop_kept(pointer: Path, transcript: Path) -> None:
    """A session now in the corpus waits for a label no more: its copy goes."""
    folder = unlabelled_dir(pointer)
    (folder / transcript.name).unlink(missing_ok=True)
    hook_folder_path(folder / transcript.name).unlink(missing_ok=True)
    companions = folder / transcript.with_suffix("").name
    if companions.is_dir() and not companions.is_symlink():
        shutil.rmtree(companions, ignore_errors=True)


# --- which part is new ------------------------------------------------------------------------


def _parts_of(base: FrozenVersion, key: str) -> list[tuple[int, int, int]]:
    """The parts of session `key` the version holds: (step, index of the session's turn it
    starts at, turns), in step order. A run added by a plain `wikitrace add` is a first part."""
    rows = [r for r in base.rows if r.task_id == key or r.task_id.startswith(key + PART_MARK)]
    layout = base.layout()
    parts = []
    for row in rows:
        header = corpus_read.read_page(base.root, layout.raw_metadata_rel(row.step), RawHeader)
        capture = header.header.metadata.get("capture")
        first = capture.get("first_turn") if isinstance(capture, dict) else None
        parts.append((row.step, int(first) - 1 if isinstance(first, int) else 0, row.turns))
    return sorted(parts)


def _next_part(
    base: FrozenVersion, key: str, turns: list[dict[str, Any]], redactor: Redactor | None
) -> _Part | None:
    """The turns of the session the version does not hold (None when it holds them all)."""
    parts = _parts_of(base, key)
    if not parts:
        return _Part(1, 0, turns)
    # The parts since the session was last added whole must still be its first turns.
    chain = parts[max((i for i, (_, first, _) in enumerate(parts) if first == 0), default=0) :]
    held = 0
    for step, first, count in chain:
        if first != held or not _holds_turns(base, step, turns[held : held + count], redactor):
            return _Part(len(parts) + 1, 0, turns, restarted=True)
        held += count
    if held >= len(turns):
        return None
    return _Part(len(parts) + 1, held, turns[held:])


def _holds_turns(
    base: FrozenVersion, step: int, turns: Sequence[dict[str, Any]], redactor: Redactor | None
) -> bool:
    """True when step `step`'s turn log is these turns, as a build would write them."""
    shown = list(turns) if redactor is None else redactor.value(list(turns))
    held = base.manifest.files.get(base.layout().raw_turns_rel(step))
    return held == digest(turn_log(shown)[0])


def _part_record(run: Run, part: _Part, session: Session) -> dict[str, Any]:
    """The part as a native run: the session's run, its turns cut to the part's."""
    data = run.data
    key = _key(run)
    metadata = dict(data.get("metadata") or {})
    capture: dict[str, Any] = {
        "event": session.event,
        "format": run.format,
        "log": session.transcript.name,
        "part": part.number,
        "first_turn": part.first + 1,
    }
    if part.restarted:
        capture["restarted"] = True
    task = data["task"]
    if part.first:
        whole = {name: metadata.pop(name) for name in SESSION_TALLIES if name in metadata}
        if whole:
            capture["whole_session"] = whole
        task = _first_prompt(part.turns) or task
    metadata["capture"] = capture
    return {
        **data,
        "task_id": key if part.number == 1 else f"{key}{PART_MARK}{part.number}",
        "task": task,
        "turns": part.turns,
        "metadata": metadata,
    }


def _first_prompt(turns: Sequence[dict[str, Any]]) -> str | None:
    """The first prompt the user typed in these turns: not a sub-agent's, a tool's, a client
    command's echo or a note the client wrote in the user's place."""
    for turn in turns:
        meta = turn.get("metadata") or {}
        content = turn.get("content")
        if (
            turn.get("role") == "user"
            and isinstance(content, str)
            and content.strip()
            and not content.lstrip().startswith(("<", "[Request interrupted"))
            and not any(meta.get(flag) for flag in ("subagent", "inherited", "injected"))
            and not any(meta.get(flag) for flag in ("isMeta", "isCompactSummary"))
        ):
            return content.strip()
    return None
