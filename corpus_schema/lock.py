"""The lock a build holds on a corpus, and what a killed writer left beside it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from .errors import CorpusError
from .history import STORE_SUFFIX, UPDATES_DIR

LOCK_POLL_SECONDS = 0.1
"""How often a build that waits for the lock tries again."""


def lock_path(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.lock")


@contextlib.contextmanager
def build_lock(
    dest: Path, wait_seconds: float = 0.0, waiting: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold an exclusive lock on `dest` for the build; a second build into it is refused, or,
    given `wait_seconds`, waits that long for the first to finish (`waiting` is called once
    when it starts to wait).

    The lock is an flock on a side file: the kernel drops it when the process dies, so a
    killed build never leaves a stale lock behind.
    """
    path = lock_path(dest)
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    told = False
    while True:
        handle = path.open("a+")
        try:
            if _holds(handle, path):
                break
        except BaseException:
            handle.close()
            raise
        handle.close()
        left = deadline - time.monotonic()
        if left <= 0:
            waited = f" (waited {wait_seconds:g} s)" if wait_seconds else ""
            raise CorpusError(
                f"another build into {dest} is running (or an add, update or deploy of it; lock "
                f"{path}){waited}; wait for it to finish or choose another --output"
            )
        if waiting is not None and not told:
            waiting()
            told = True
        time.sleep(min(LOCK_POLL_SECONDS, left))
    with handle:
        clear_stale(dest)  # only the lock's holder may: no one else writes there meanwhile
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()


_STALE_BESIDE = r"\.(?:tmp|pointer)-([0-9]{1,12})\Z"
_STALE_IN_STORE = re.compile(r"^\..+\.tmp-([0-9]{1,12})\Z")


def clear_stale(pointer: Path) -> list[Path]:
    """Remove what a process killed while writing to the corpus `pointer` left
    (`store.temp_path` files: a pointer link about to replace the old, a history or state file
    about to be renamed into place), beside the pointer and in its store; returns what went.
    A file whose process is still alive is someone's work in progress and stays."""
    beside = re.compile("^" + re.escape(f".{pointer.name}") + _STALE_BESIDE)
    store = pointer.with_name(pointer.name + STORE_SUFFIX)
    removed: list[Path] = []
    for folder, pattern in (
        (pointer.parent, beside),
        (store, _STALE_IN_STORE),
        (store / UPDATES_DIR, _STALE_IN_STORE),
    ):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            found = pattern.match(entry.name)
            if found is None or _alive(int(found.group(1))):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    continue  # never ours: temp_path names files and links
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (ours counts: what it writes now is not stale)."""
    if pid == os.getpid():
        return True
    if pid <= 0:
        return True  # no process writes such a name: not for us to judge
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:
        return False  # larger than any process id
    except OSError:
        return True  # it exists, owned by another user
    return True


def _holds(handle: IO[str], path: Path) -> bool:
    """Take the lock through `handle`: False when another process holds it."""
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    # The holder before us may have removed the file after we opened it: our lock would then
    # be on a file nobody else sees. Hold it only if it is still the lock file.
    try:
        current = os.stat(path).st_ino
    except FileNotFoundError:
        current = None
    return current == os.fstat(handle.fileno()).st_ino
