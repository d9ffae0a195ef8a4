"""Lessons checked against today's code: how far the repository moved since each lesson's
source run, which of the files it names were deleted, renamed or changed, and whether the
symbols it names are still there; each lesson's age.

The first message (tools/first_message.py) asks this of the lessons it may list when the agent
works in a git checkout of the lesson's project. What a run saw is its repository state
(RunRecord.repo: commit, branch, start, files touched); what a lesson names is read from its
text and its quotes (corpus_schema/code_names.py). Names come from logs and models: only plain
relative paths inside the repository are looked at, and every git call takes them after `--`.

Git is asked at most `MAX_CALLS` times, in two rounds of calls run at once: the checkout and its
history; then a diff for each of the `MAX_BASES` commits compared exactly and one for the rest,
and the commits since each of those only when the history listed is not the whole. All within
`budget` seconds; a missing git, a slow disk or a commit not in the history leaves lessons
unchecked, never the message unmade.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from wikitrace.corpus_schema.catalog import InsightEntry, PastRun
from wikitrace.corpus_schema.code_names import named_files, named_symbols, safe_path
from wikitrace.corpus_schema.input_files import open_input

from .message_options import CODE_SECONDS

if TYPE_CHECKING:
    from .loaded_memory import LoadedMemory as Memory

log = logging.getLogger(__name__)

MAX_BASES = 4
"""The most past commits one message compares today's code with exactly (the runs' commits
most lessons rest on); the other lessons are compared from the oldest of theirs."""
HISTORY = 2000
"""The most recent commits listed to find the commit a run saw and count those since."""
MAX_CALLS = 3 + 2 * MAX_BASES
"""Git calls a message makes at most: the checkout, its history, a diff for each commit
compared exactly and one for the rest, and, in a history longer than HISTORY commits, a count
of those since each commit compared exactly."""
SYMBOL_BYTES = 1 << 18
"""The most of a named file read to look for the symbols a lesson names."""
SHOWN_NAMES = 3
"""The most files a note names."""


@dataclass(frozen=True)
class CodeNote:
    """What today's code says of one lesson."""

    text: str
    """`src/a.py deleted since the run, 14 commits ago`; `3 commits since the run; src/a.py
    changed`."""
    stale: bool
    """A file it names was deleted or renamed, or a symbol it names is gone."""
    gone: bool = False
    """Every file it names is deleted: the message leaves it out."""


@dataclass
class CodeCheck:
    """What the first message says of its lessons' code."""

    ages: dict[int, str] = field(default_factory=dict)
    """Insight -> its source run's age (`3 days ago`)."""
    notes: dict[int, CodeNote] = field(default_factory=dict)
    """Insight -> what today's code says of it (none: unchanged, or not checked)."""
    unchecked: str | None = None
    """Why the code was not checked although a checkout was given (no git, too slow, ...)."""
    git_calls: int = 0
    seconds: float = 0.0

    @property
    def gone(self) -> list[int]:
        return sorted(i for i, note in self.notes.items() if note.gone)


def check_code(
    memory: Memory,
    insights: Sequence[int],
    own: Iterable[int],
    checkout: Path | None,
    *,
    now: datetime | None = None,
    budget: float = CODE_SECONDS,
) -> CodeCheck:
    """The ages of `insights` and, for those of the project the agent is in (`own`), what
    the git checkout at `checkout` says of the files and symbols they name since their
    source runs."""
    moment = now or datetime.now(UTC)
    found = CodeCheck()
    runs = {i: memory.run_of(i) for i in insights}
    for i, run in runs.items():
        started = _started(run)
        if started is not None:
            found.ages[i] = _age(moment - started)
    checked = [i for i in own if (run := runs.get(i)) is not None and run.repo]
    if checkout is None or not checked:
        return found
    git = _Git(checkout, budget)
    try:
        _check(memory, checked, runs, git, found)
    except _GitFailed as error:
        found.unchecked = str(error)
        log.info("lessons not checked against the code in %s: %s", checkout, error)
    except (OSError, ValueError) as error:  # a checkout or an answer not as expected
        found.unchecked = f"{type(error).__name__}: {error}"
        log.warning("lessons not checked against the code in %s: %s", checkout, error)
    found.git_calls, found.seconds = git.calls, round(time.perf_counter() - git.start, 4)
    return found


def _check(
    memory: Memory,
    own: list[int],
    runs: dict[int, PastRun | None],
    git: _Git,
    found: CodeCheck,
) -> None:
    # The checkout's top and its history at once (git's paths are the top's, from any folder).
    toplevel, listed = git.at_once(
        [
            ("rev-parse", "--show-toplevel"),
            ("log", f"--max-count={HISTORY}", "--format=%H %ct %P", "HEAD", "--"),
        ]
    )
    top = Path(toplevel.strip())
    git.folder = top
    tree = _Tree(top)
    history = _History(listed)
    by_base: dict[str, list[int]] = {}
    for i in own:
        base = history.base(runs[i])
        if base is not None:
            by_base.setdefault(base, []).append(i)
    # Exactly, for the commits most lessons rest on; the rest against the oldest of theirs,
    # which tells what was deleted or renamed since (a change may be older than their run).
    ranked = sorted(by_base.items(), key=lambda item: (-len(item[1]), history.since(item[0])))
    exact, rest = ranked[:MAX_BASES], ranked[MAX_BASES:]
    oldest = max((base for base, _ in rest), key=history.since) if rest else None
    # Every diff at once (and the counts the history cannot tell): git's time is the
    # longest call's, not their sum.
    counts = {base: history.made_since(base) for base, _ in exact}
    asked: list[tuple[str, ...]] = [
        ("diff", "--name-status", "-z", "-M", base, "--") for base, _ in exact
    ]
    asked += [("diff", "--name-status", "-z", "-M", oldest, "--")] if oldest else []
    unknown = [base for base, count in counts.items() if count is None]
    asked += [("rev-list", "--count", f"{base}..HEAD", "--") for base in unknown]
    answers = git.at_once(asked)
    for base, answer in zip(unknown, answers[len(exact) + bool(oldest) :], strict=True):
        counts[base] = int(answer.strip() or 0)
    for (base, lessons), answer in zip(exact, answers, strict=False):
        changes, since = _changes(answer), counts[base] or 0
        for i in lessons:
            _noted(found, i, _note(memory.insights[i], runs[i], changes, since, tree))
    if oldest:
        changes = _changes(answers[len(exact)])
        for base, lessons in rest:
            for i in lessons:
                note = _note(
                    memory.insights[i], runs[i], changes, history.since(base), tree, exact=False
                )
                _noted(found, i, note)


def _noted(found: CodeCheck, insight: int, note: CodeNote | None) -> None:
    if note is not None:
        found.notes[insight] = note


class _History:
    """The checkout's last HISTORY commits (`git log --format='%H %ct %P'`), newest first: the
    commit a run saw, and how many were made since, without asking git again."""

    def __init__(self, output: str) -> None:
        self.commits: list[tuple[str, int]] = []
        self._parents: dict[str, list[str]] = {}
        for line in output.splitlines():
            sha, stamp, *parents = line.split(" ")
            if len(sha) == 40 and stamp.isdigit():
                self.commits.append((sha, int(stamp)))
                self._parents[sha] = parents
        self._place = {sha: at for at, (sha, _) in enumerate(self.commits)}
        self._whole = len(self.commits) < HISTORY

    def since(self, sha: str) -> int:
        """Commits listed before `sha`: those made since, in a history without merges."""
        return self._place[sha]

    def made_since(self, sha: str) -> int | None:
        """The commits since `sha`, as `git rev-list --count sha..HEAD` counts them (merges
        and their branches included): those of HEAD's history that are not `sha`'s. None when
        the history listed is not the whole, where older commits could count."""
        if not self._whole:
            return None
        seen = {sha}
        waiting = [sha]
        while waiting:
            for parent in self._parents.get(waiting.pop(), ()):
                if parent not in seen:
                    seen.add(parent)
                    waiting.append(parent)
        return len(self.commits) - len(seen & self._place.keys())

    def base(self, run: PastRun | None) -> str | None:
        """The commit a run saw: the one its log names when the history has it, else the last
        commit before it started; None when neither is known."""
        if run is None or not run.repo:
            return None
        commit = run.repo.get("commit")
        if isinstance(commit, str) and len(commit) >= 7:
            if commit in self._place:
                return commit
            if len(commit) < 40:  # an abbreviated id
                found = [sha for sha, _ in self.commits if sha.startswith(commit)]
                if len(found) == 1:
                    return found[0]
        started = _started(run)
        if started is None:
            return None
        moment = started.timestamp()
        for sha, stamp in self.commits:
            if stamp <= moment:
                return sha
        return None  # older than the commits listed (or than the repository)


_Change = tuple[str, str | None]
"""A file's change since a commit: its status letter (D, M, R, A, ...) and, for a rename,
its new path."""


def _changes(output: str) -> dict[str, _Change]:
    """`git diff --name-status -z -M`'s answer, by the path at the older commit."""
    parts = output.split("\0")
    changes: dict[str, _Change] = {}
    at = 0
    while at < len(parts) and parts[at]:
        status = parts[at]
        if status[:1] in "RC" and at + 2 < len(parts):
            if status[0] == "R":
                changes[parts[at + 1]] = ("R", parts[at + 2])
            at += 3
        else:
            if at + 1 < len(parts):
                changes[parts[at + 1]] = (status[:1], None)
            at += 2
    return changes


class _Tree:
    """The checkout's files as they are now: whether one is there is asked of the disk once
    a message, however many lessons name it."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self._files: dict[str, bool] = {}

    def has(self, path: str) -> bool:
        """Whether `path` (relative to the top) is a file in the checkout."""
        found = self._files.get(path)
        if found is None:
            found = self._files[path] = (self.top / path).is_file()
        return found


def _named(item: InsightEntry, run: PastRun, changes: dict[str, _Change], tree: _Tree) -> list[str]:
    """The repository's files a lesson names: each name in its text or quotes that is a file
    the run touched (its path, a path ending in it, or a bare name's), a path with a folder
    in the repository at the run or now, or a bare name of a file there now."""
    assert run.repo is not None
    touched = [p for p in run.repo.get("files", []) if isinstance(p, str) and safe_path(p)]
    texts = [item.title, item.guideline, item.applicability, item.precondition or ""]
    found: dict[str, None] = {}
    for name in [*named_files(texts), *item.quoted_files]:
        clean = name.strip().removeprefix("./")
        matches = [
            path
            for path in touched
            if path == clean or clean.endswith("/" + path) or path.endswith("/" + clean)
        ]
        relative = safe_path(clean)
        if not matches and relative is not None and (relative in changes or tree.has(relative)):
            matches = [relative]
        for path in matches:
            found.setdefault(path, None)
    return list(found)


def _note(
    item: InsightEntry,
    run: PastRun | None,
    changes: dict[str, _Change],
    since: int,
    tree: _Tree,
    *,
    exact: bool = True,
) -> CodeNote | None:
    """What today's code says of one lesson; None when nothing it names changed and no
    commit was made since its run. Not `exact` (`changes` counted from an older commit than
    its run's): only files deleted or renamed are said, not those changed."""
    assert run is not None and run.repo is not None
    named = _named(item, run, changes, tree)
    gone: list[str] = []
    renamed: list[str] = []
    changed: list[str] = []
    moved_to: list[str] = []
    for path in named:
        status, new = changes.get(path, ("", None))
        if status == "D":
            gone.append(f"{path} deleted")
        elif status == "R" and new is not None:
            renamed.append(f"{path} renamed to {new}")
            moved_to.append(new)
        elif not tree.has(path):  # touched by the run, never committed
            gone.append(f"{path} not in the checkout")
        elif status and exact:
            changed.append(path)
    # A symbol can only have gone from a file that changed (or moved) since the run.
    missing = _missing_symbols(item, changed + moved_to, tree.top)
    ago = f"{since} commit{'s' * (since != 1)} ago" if since else "not committed"
    stale = gone + renamed + missing
    if stale:
        return CodeNote(
            f"{_listed(stale)} since the run, {ago}",
            stale=True,
            gone=bool(named) and len(gone) == len(named),
        )
    if not since and not changed:
        return None
    moved = f"{since} commit{'s' * (since != 1)} since the run" if since else "since the run"
    if changed:
        return CodeNote(f"{moved}; {_listed(changed)} changed", stale=False)
    if named:
        kept = "unchanged" if exact else "still in the checkout"
        return CodeNote(f"{moved}; {_listed(named)} {kept}", stale=False)
    return CodeNote(moved, stale=False)


def _missing_symbols(item: InsightEntry, files: list[str], top: Path) -> list[str]:
    """`\\`parse\\` no longer in src/a.py` for each symbol the lesson names in backquotes that
    none of `files` (those changed or renamed since the run) holds now."""
    symbols = named_symbols(" ".join([item.title, item.guideline, item.applicability]))
    if not symbols or not files:
        return []
    texts = []
    for path in files:
        place = top / path
        # A regular file inside the checkout only: never a FIFO, or a link out of it.
        if place.is_symlink() or not place.resolve().is_relative_to(top.resolve()):
            continue
        try:
            with open_input(place) as handle:
                texts.append(handle.read(SYMBOL_BYTES).decode(errors="replace"))
        except OSError:
            continue
    if not texts:
        return []
    return [
        f"`{symbol}` no longer in {_listed(files)}"
        for symbol in symbols
        if not any(symbol.rsplit(".", 1)[-1] in text for text in texts)
    ]


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def _started(run: PastRun | None) -> datetime | None:
    """When a run started, from its repository state; None when unknown or not a time."""
    if run is None or not run.repo or not isinstance(run.repo.get("started"), str):
        return None
    try:
        started = datetime.fromisoformat(run.repo["started"])
    except ValueError:
        return None
    return started if started.tzinfo is not None else started.replace(tzinfo=UTC)


def _age(elapsed: timedelta) -> str:
    """`today`, `1 day ago`, `3 weeks ago`, `5 months ago`, `2 years ago`."""
    days = elapsed.days
    if days < 1:
        return "today"
    for span, unit in ((365, "year"), (30, "month"), (7, "week"), (1, "day")):
        if days >= span:
            count = days // span
            return f"{count} {unit}{'s' * (count != 1)} ago"
    return "today"


class _GitFailed(Exception):
    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class _Git:
    """Git calls in one folder (`-C`), each within what is left of one budget in seconds;
    nothing read from the user's git config can run a program (no pager, no external diff,
    no textconv), and the environment's GIT_DIR and the like are ignored."""

    def __init__(self, folder: Path, budget: float) -> None:
        self.folder = folder
        self.budget = budget
        self.start = time.perf_counter()
        self.calls = 0
        self._env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("GIT_") or key in ("GIT_CEILING_DIRECTORIES",)
        } | {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}

    def __call__(self, *arguments: str) -> str:
        return self.at_once([arguments])[0]

    def at_once(self, asked: Sequence[Sequence[str]]) -> list[str]:
        """Each git command of `asked` (its arguments) run at the same time; their outputs,
        in order, once all have ended."""
        left = self.budget - (time.perf_counter() - self.start)
        if left <= 0:
            raise _GitFailed(f"git took more than {self.budget:g} s", timed_out=True)
        running: list[subprocess.Popen[bytes]] = []
        try:
            for arguments in asked:
                running.append(self._started(arguments))
            return [
                self._ended(process, arguments)
                for process, arguments in zip(running, asked, strict=True)
            ]
        finally:
            for process in running:
                if process.returncode is None:
                    _killed(process)

    def _started(self, arguments: Sequence[str]) -> subprocess.Popen[bytes]:
        self.calls += 1
        command = [
            "git",
            "-C",
            str(self.folder),
            "-c",
            "core.fsmonitor=false",
            "-c",
            "diff.external=",
            "--no-pager",
            *arguments,
        ]
        try:
            # Its own process group: a git that is too slow goes with whatever it started.
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,
            )
        except OSError as error:
            raise _GitFailed(f"git could not run: {error.strerror or error}") from None

    def _ended(self, process: subprocess.Popen[bytes], arguments: Sequence[str]) -> str:
        left = self.budget - (time.perf_counter() - self.start)
        try:
            out, err = process.communicate(timeout=max(left, 0.001))
        except subprocess.TimeoutExpired:
            _killed(process)
            raise _GitFailed(f"git took more than {self.budget:g} s", timed_out=True) from None
        if process.returncode != 0:
            first = err.decode(errors="replace").strip().splitlines()[:1]
            raise _GitFailed(f"git {arguments[0]}: {first[0] if first else process.returncode}")
        return out.decode(errors="replace")


def _killed(process: subprocess.Popen[bytes]) -> None:
    """A git call stopped with whatever it started, its pipes read to the end."""
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
