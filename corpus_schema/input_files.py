"""Opening an input file: a regular file within a size limit only, never a FIFO, a device, a
folder or an endless file (every reader opens its files through here)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

MAX_INPUT_BYTES = 1 << 31
"""An input file larger than this (2 GB) is skipped, not read: no agent's log is, and a sparse
or endless file (a 10 GB hole, a link to /dev/zero) would otherwise fill the memory."""


class NotAnInputFile(OSError):
    """A path that is no regular file within MAX_INPUT_BYTES (a FIFO, a device, a folder, a
    socket, a file too large): skipped, never opened for reading or read into memory. An
    OSError, so that every reader that leaves out a file it cannot read leaves this one out."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(0, f"skipped: {what}", str(path))


def what_it_is(info: os.stat_result) -> str | None:
    """Why a file with this status is no input file to read, or None when it is one."""
    mode = info.st_mode
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    for test, name in kinds:
        if test(mode):
            return f"{name}, not a regular file"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if info.st_size > MAX_INPUT_BYTES:
        return f"{info.st_size / (1 << 30):.1f} GB, over the {MAX_INPUT_BYTES >> 30} GB limit"
    return None


def input_problem(path: Path) -> str | None:
    """Why `path` is no input file to read (missing, a FIFO, a device, a folder, too large),
    or None when it is one; nothing is opened."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return "does not exist (removed, or not yet written)"
    except OSError as error:
        return f"cannot be read: {error.strerror or error}"
    return what_it_is(info)


def open_input(path: Path, follow: bool = True) -> io.BufferedReader:
    """`path` opened for reading when it is a regular file within MAX_INPUT_BYTES; else raises
    NotAnInputFile. Checked on the file opened (fstat), without waiting: opening a FIFO to
    read blocks until a writer comes, which may be never. With `follow` False, a link is not
    followed (an OSError, ELOOP)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    try:
        problem = what_it_is(os.fstat(fd))
        if problem is not None:
            raise NotAnInputFile(path, problem)
        os.set_blocking(fd, True)
        return io.open(fd, "rb", closefd=True)  # noqa: UP020 (a descriptor, not a path)
    except BaseException:
        os.close(fd)
        raise


def read_input(path: Path, follow: bool = True) -> bytes:
    """A whole input file's bytes (see open_input)."""
    with open_input(path, follow) as handle:
        return handle.read()
