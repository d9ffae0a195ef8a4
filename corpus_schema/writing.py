"""Writing a corpus safely: atomic files, hashes, a staging folder, freezing (the lock is
lock.py's)."""

from __future__ import annotations

import bisect
import contextlib
import errno
import hashlib
import heapq
import itertools
import os
import shutil
import stat
import tempfile
import time
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .errors import CorpusError
from .identity import HASH_ALGORITHM, digest, tagged


def file_digest(path: str | Path) -> str:
    with open(path, "rb") as handle:
        return tagged(hashlib.file_digest(handle, HASH_ALGORITHM))


def stat_key(info: os.stat_result) -> int:
    """A file's bytes as long as nobody writes to it: its device, inode, size and time of last
    change (what make, rsync and git trust too), as one signed 64-bit number, never 0 (what
    a seal keeps for a file it does not vouch for). See `manifest.verify`'s seal."""
    return hash((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)) or 1


RACY_NS = 2_000_000_000
"""A file is sealed after hashing only when its last change is older than this before the
hash began: a write in the same tick of the file clock as the change it had could otherwise
leave its key as it was."""


def checked_key(path: str, expected: str, sealed: int) -> int | None:
    """`path`'s key when it holds the bytes hashed `expected` (0 when right but too recently
    changed to seal), None when it does not, or is no plain file. Hashed unless `sealed` is its
    key."""
    try:
        # Never follow a link: it could point anywhere outside the corpus.
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return None
        key = stat_key(info)
        if key == sealed:
            return key
        started = time.time_ns()
        if file_digest(path) != expected:
            return None
        if info.st_mtime_ns >= started - RACY_NS or stat_key(os.lstat(path)) != key:
            return 0
    except OSError:
        return None
    return key


class ChangedFile(CorpusError):
    """A file of a frozen version that no longer holds the bytes its manifest lists (or is
    gone), found as a version made from it took it."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        super().__init__(f"{rel} does not hold the bytes its manifest lists")


def temp_path(path: Path, kind: str = "tmp") -> Path:
    """Where this process writes `path` before renaming it into place: beside it, named by
    `kind` and the process id, so that a later run can tell a killed process's leftover
    (`clear_stale`) from a file being written."""
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}")


def atomic_write(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Write through a temporary file in the same folder, so no reader sees half a file;
    `data` whole or as chunks."""
    tmp = temp_path(path)
    try:
        with tmp.open("wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                for chunk in data:
                    handle.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def write_new(path: str | Path, chunks: Iterable[bytes]) -> tuple[str, int]:
    """Write a new file of a staging folder (no reader sees it before the folder is done)
    from its bytes in chunks; its hash as the manifest records it and its `stat_key` as
    written. A file that is already there is an error: a version never writes one twice.
    Plain system calls, most files costing four (create, write, stat, close): a model build
    writes some 11 files a run, and Python's buffered file adds three more and a stat by
    name."""
    hashed = hashlib.sha256()
    try:
        # O_EXCL: the open itself checks it is new. Read-only from the start: freezing the
        # version need not look at it again (the open's mode is cut by the umask: fchmod then).
        fd = os.open(path, _NEW_FLAGS, _READ_FILE)
    except FileExistsError:
        raise CorpusError(f"internal error: {path} written twice") from None
    try:
        for chunk in chunks:
            hashed.update(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
        info = os.fstat(fd)
        if stat.S_IMODE(info.st_mode) != _READ_FILE:
            os.fchmod(fd, _READ_FILE)  # changes no field stat_key reads
    finally:
        os.close(fd)
    return tagged(hashed), stat_key(info)


def spill_file(folder: Path | None, what: str) -> IO[bytes]:
    """An unnamed temporary file in `folder` (the system's temporary folder when None) for
    what a build keeps off the heap (`what` names it while it is open). Made beside the
    staging folder, it is on the corpus's disk; having no name, it is gone with the process,
    even when killed. The caller closes it."""
    return tempfile.TemporaryFile(dir=folder, prefix=f".wikitrace-{what}-")


class NewFiles:
    """New files written under a staging root, each hashed as it is written: the line it adds
    to a CorpusWriter's list of files. A CorpusWriter writes through one; a worker process of
    a build (compiler/workers.py) writes its runs' files through its own, into the same staging
    folder, and hands the lines to the build's writer (`CorpusWriter.listed`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = os.fspath(root)
        self._made_dirs: set[str] = set()

    def write(self, rel: str, data: str | bytes | Iterable[bytes]) -> bytes:
        """Write a new file of the version, its bytes given whole or as chunks (hashed as they
        go); its line in the list of files."""
        path = self.path(rel)
        if isinstance(data, str):
            data = data.encode("utf-8")
        # The file as written, in the folder only this build writes to: what its seal keeps.
        file_hash, key = write_new(path, (data,) if isinstance(data, bytes) else data)
        return listed_line(rel, file_hash, key)

    def write_files(self, files: Iterable[tuple[str, str | bytes]]) -> list[bytes]:
        """`write` each (path, text); their lines."""
        return [self.write(rel, data) for rel, data in files]

    def remove(self, rel: str) -> bytes:
        """Take back a file written before; the line that takes it off the list."""
        path = os.path.join(self.root, rel)
        file_hash = file_digest(path)
        os.unlink(path)
        return unlisted_line(rel, file_hash)

    def rewrite(self, files: Iterable[tuple[str, str | bytes]], written: set[str]) -> list[bytes]:
        """What `remove` of each of `written` (files written under this root, none of them
        linked) and then `write_files(files)` do, with each file in both written over in
        place, then cut to its new length: no block is freed unless it is shorter. On this
        project's ext4 (mounted with `discard`) freeing a file's blocks costs some 2 ms, in an
        unlink or a truncation to nothing, and writing over 0.03 ms. `written` is emptied. A
        file linked from a frozen version (more links than one) is never written over: it is
        removed, and written anew. The lines that take the old files off the list and put
        the new ones on it."""
        lines: list[bytes] = []
        for rel, data in files:
            path = os.path.join(self.root, rel)
            if rel not in written or os.lstat(path).st_nlink != 1:
                if rel in written:
                    lines.append(self.remove(rel))
                    written.discard(rel)
                lines.append(self.write(rel, data))
                continue
            written.discard(rel)
            lines.append(unlisted_line(rel, file_digest(path)))
            encoded = data.encode("utf-8") if isinstance(data, str) else data
            # The staging folder's own file, written read-only (`write`): its owner makes it
            # writable again for this, as one who is not root cannot open it for writing.
            os.chmod(path, _READ_FILE | stat.S_IWUSR)
            with open(path, "r+b") as handle:
                handle.write(encoded)
                handle.truncate()
                os.fchmod(handle.fileno(), _READ_FILE)  # changes no field stat_key reads
            lines.append(listed_line(rel, digest(encoded), stat_key(os.lstat(path))))
        lines += [self.remove(rel) for rel in written]
        written.clear()
        return lines

    def path(self, rel: str) -> str:
        """Where `rel` goes, its folder made. Strings, not pathlib: pathlib interns every part
        of every path it parses, for good."""
        if "\t" in rel or "\n" in rel:
            raise CorpusError(f"internal error: a file name with a tab or newline: {rel!r}")
        path = f"{self.root}/{rel}"
        folder = path.rpartition("/")[0]
        if folder not in self._made_dirs:
            try:  # one system call for a run's folder, whose own folder is there already
                os.mkdir(folder)
            except FileExistsError:
                pass
            except FileNotFoundError:
                os.makedirs(folder, exist_ok=True)
            if len(self._made_dirs) >= 64:  # a run's files are written together: recent is enough
                self._made_dirs.clear()
            self._made_dirs.add(folder)
        return path


def listed_line(rel: str, file_hash: str, key: int) -> bytes:
    """A file's line in a CorpusWriter's list: its path, its hash and its `stat_key`."""
    return f"{rel}\t{file_hash}\t{key}\n".encode()


def unlisted_line(rel: str, file_hash: str) -> bytes:
    """The line that takes a file off a CorpusWriter's list: `-` sorts before the hash's
    tag, so a path's removals come before what it lists."""
    return f"{rel}\t-{file_hash}\t0\n".encode()


SORT_CHUNK_LINES = 1 << 16
"""Lines sorted in memory at once when the file list is sorted: past that, sorted runs go to
temporary files and are merged."""


@dataclass
class Linked:
    """The files one `CorpusWriter.link_all` linked from a frozen version (`source`), in path
    order, kept in memory apart from the writer's list on disk: a version made from another
    links nearly every file of it (some 110,000 at 20,000 runs), and a manifest written on
    the source's (finish.py) takes them as they are, with neither a line each written, sorted
    and read back nor a pass of Python over them. 24 bytes a file: the path and hash are the
    caller's own strings (the source manifest's), the key a number."""

    source: str
    rels: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    keys: array[int] = field(default_factory=lambda: array("q"))
    folders: set[str] = field(default_factory=set)
    """The folder of each file (not their own folders)."""

    def entries(self) -> Iterator[tuple[str, str, int]]:
        return zip(self.rels, self.hashes, self.keys, strict=True)

    def lines(self) -> Iterator[bytes]:
        for rel, file_hash, key in self.entries():
            yield listed_line(rel, file_hash, key)


class CorpusWriter:
    """Writes files under a (staging) corpus root and keeps the hash of each.

    The list of files and hashes is kept on disk, not on the heap: a corpus of a million runs
    has some five million files. It is an unnamed temporary file beside the root (gone with the
    process, even when killed); `files()` reads it back sorted. Use as a context manager, or
    call close()."""

    LINK_BATCH = 4096
    """Lines `link_all` lists at once."""

    def __init__(self, root: Path, *, track_written: bool = False) -> None:
        self.root = root
        self._root = str(root)
        self._new = NewFiles(root)
        self._listed = spill_file(root.parent, "files")
        self.count = 0
        """Files written or linked so far."""
        self.written: set[str] | None = set() if track_written else None
        """With `track_written` (a version made from another): the files written, not linked
        nor copied."""
        self.linked: Linked | None = None
        """What the first `link_all` linked, in path order (not in the list on disk)."""

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._listed.close()

    def write(
        self, rel: str, data: str | bytes | Iterable[bytes], *, executable: bool = False
    ) -> None:
        """Write a file of the version, its bytes given whole or as chunks (hashed as they
        go). Written in place: the whole folder is a staging folder, removed when the build
        fails and moved into place when it is done, so no file needs a rename of its own."""
        self._list_lines([self._new.write(rel, data)])
        if executable:
            os.chmod(os.path.join(self._root, rel), _READ_DIR)

    def write_files(self, files: Iterable[tuple[str, str | bytes]]) -> None:
        """Write each (path, text): a page and its data file (render.PageFiles)."""
        for rel, data in files:
            self.write(rel, data)

    def link(self, rel: str, source: Path, file_hash: str, key: int = 0) -> None:
        """Take a file of a frozen version as it is: a hard link (a copy across devices).

        Frozen files never change, so versions can share them; `file_hash` is the hash the
        source version's manifest lists, checked by `verify` like any other. `key` is the
        source's `stat_key` when it was found to hold those bytes (0 when unknown): the new
        version's seal vouches for the file only if the link is still that file.
        """
        path = self._new_path(rel)
        _link_or_copy(os.fspath(source), path, rel)
        self._list(rel, file_hash, key if key and stat_key(os.lstat(path)) == key else 0)

    def link_all(
        self, source: Path, files: Iterable[tuple[str, str, int]], *, check: bool = False
    ) -> None:
        """`link` each (path, hash, key) of the frozen version at `source`: the same files and
        list, in a loop of strings (a version of 20,000 runs keeps some 110,000 files).

        With `check`, the links are the check of the source's files (`ChangedFile` for the
        first gone or changed): a link is the source's own file, so one whose key is not the
        one given (the source's seal's) is hashed, as `manifest.verify` would hash it.

        The first call keeps what it links in path order in memory (`linked`), where a file
        costs no line on disk; a file that does not come after the one before goes to the
        list on disk, as do the files of later calls."""
        source_root, root = os.fspath(source) + os.sep, self._root + os.sep
        lines: list[bytes] = []
        folder = None  # the last file's: a run's files come one after another
        kept = self.linked = Linked(os.fspath(source)) if self.linked is None else None
        last = ""
        try:
            for rel, file_hash, key in files:
                same = rel.rpartition("/")[0] == folder and "\t" not in rel and "\n" not in rel
                path = root + rel if same else self._new_path(rel)  # NewFiles.path makes folders
                folder, source_path = rel.rpartition("/")[0], source_root + rel
                try:
                    os.link(source_path, path)
                except FileNotFoundError:
                    if check:
                        raise ChangedFile(rel) from None
                    raise
                except OSError:
                    _link_or_copy(source_path, path, rel)
                if not key or stat_key(os.lstat(path)) != key:
                    found = checked_key(source_path, file_hash, 0) if check else 0
                    if found is None:
                        raise ChangedFile(rel)
                    key = found
                if kept is not None and rel > last:
                    last = rel
                    kept.rels.append(rel)
                    kept.hashes.append(file_hash)
                    kept.keys.append(key)
                    if not same:
                        kept.folders.add(folder)
                    self.count += 1
                    continue
                lines.append(f"{rel}\t{file_hash}\t{key}\n".encode())  # listed_line
                if len(lines) >= self.LINK_BATCH:
                    self._list_lines(lines, linked=True)
        finally:  # what was linked is listed, as `link` lists each file as it goes
            self._list_lines(lines, linked=True)
            if kept is not None and not kept.rels:
                self.linked = None

    def listed(self, lines: list[bytes]) -> None:
        """List files written (or taken back: `NewFiles.remove`) under the root by others
        (`NewFiles`: a build's worker processes), given their lines; `lines` is emptied."""
        # A line of `unlisted_line` takes a file off: its hash, the second field, after `-`.
        removed = [
            fields[0].decode()
            for fields in (line.split(b"\t", 2) for line in lines)
            if fields[1][:1] == b"-"
        ]
        if self.linked is not None and any(map(self._is_linked, removed)):
            # Rare (a linked file taken back): what `link_all` kept goes to the list on disk,
            # where each removal takes its file off.
            self._listed.seek(0, os.SEEK_END)
            self._listed.writelines(self.linked.lines())
            self.linked = None
        self._list_lines(lines)
        self.count -= 2 * len(removed)

    def _is_linked(self, rel: str) -> bool:
        assert self.linked is not None
        rels = self.linked.rels
        place = bisect.bisect_left(rels, rel)
        return place < len(rels) and rels[place] == rel

    def _list_lines(self, lines: list[bytes], *, linked: bool = False) -> None:
        if self.written is not None and not linked:
            self.written.update(line.split(b"\t", 1)[0].decode() for line in lines)
        self._listed.seek(0, os.SEEK_END)
        self._listed.writelines(lines)
        self.count += len(lines)
        lines.clear()

    def copy(self, rel: str, source: Path, file_hash: str) -> None:
        """Take a file of a frozen version as a copy of its own (`copy_file`): for a folder
        handed to others (a view), whose files must never be the version's."""
        path = self._new_path(rel)
        try:
            copy_file(source, path)
        except FileExistsError:
            raise CorpusError(f"internal error: {rel} written twice") from None
        self._list(rel, file_hash, 0)

    def remove(self, rel: str) -> None:
        """Take back a file written before (to write it again, or another in its place)."""
        self.listed([self._new.remove(rel)])

    def files(self) -> Iterator[tuple[str, str]]:
        """Every file written or linked with its hash, sorted by path, read from disk."""
        for rel, file_hash, _ in self.entries():
            yield rel, file_hash

    def entries(self, *, linked: bool = True) -> Iterator[tuple[str, str, int]]:
        """`files()`, each with its `stat_key` as written or linked (0 when unknown); without
        `linked`, those the `linked` record holds are left out."""
        listed = self._entries_listed()
        if not linked or self.linked is None:
            return listed
        return heapq.merge(self.linked.entries(), listed)

    def _entries_listed(self) -> Iterator[tuple[str, str, int]]:
        """The entries of the list on disk, sorted by path."""
        self._listed.flush()
        self._listed.seek(0)
        current = ""
        removed: list[str] = []  # hashes of the current path's removed files
        for line in sorted_lines(self._listed, self.root.parent):
            rel, file_hash, key = line.decode("utf-8").rstrip("\n").split("\t")
            if rel != current:
                current, removed = rel, []
            if file_hash.startswith("-"):
                removed.append(file_hash[1:])
            elif file_hash in removed:
                removed.remove(file_hash)
            else:
                yield rel, file_hash, int(key)

    def _list(self, rel: str, file_hash: str, key: int) -> None:
        """List a file linked or copied from a frozen version (not one `written`)."""
        self._list_lines([listed_line(rel, file_hash, key)], linked=True)

    def _new_path(self, rel: str) -> str:
        return self._new.path(rel)


_COPY_CHUNK = 1 << 30
_NO_COPY_RANGE = frozenset(
    {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM, errno.EBADF}
)
"""What `os.copy_file_range` answers where it cannot copy (an old kernel, two file systems
it will not copy between, a special file system): the bytes are then copied in user space."""


def copy_file(source: str | Path, target: str | Path) -> None:
    """Copy `source` to the new file `target`, read-only (executable when `source` is): a file
    of its own, never a hard link, so writing to the copy never changes the source. The
    kernel copies the bytes, cloning them where the file system can (btrfs, XFS: a reflink,
    no bytes written until one side changes)."""
    with open(source, "rb") as src, open(target, "xb") as dst:
        info = os.fstat(src.fileno())
        try:
            while os.copy_file_range(src.fileno(), dst.fileno(), _COPY_CHUNK):
                pass
            whole = os.fstat(dst.fileno()).st_size == info.st_size
        except OSError as error:
            if error.errno not in _NO_COPY_RANGE:
                raise
            whole = False
        if not whole:  # some file systems copy nothing and say so with 0: copy it here
            src.seek(0)
            dst.seek(0)
            dst.truncate()
            shutil.copyfileobj(src, dst, 1 << 20)
    os.chmod(target, _READ_DIR if info.st_mode & stat.S_IXUSR else _READ_FILE)


def sorted_lines(
    handle: IO[bytes], spill_dir: Path, chunk_lines: int | None = None
) -> Iterator[bytes]:
    """The lines of `handle` (from where it is), sorted, holding at most `chunk_lines` of them
    at once: each chunk is sorted and, when there is more than one, kept in a temporary file
    in `spill_dir` until all are merged."""
    chunk_lines = chunk_lines or SORT_CHUNK_LINES
    with contextlib.ExitStack() as stack:
        runs: list[IO[bytes]] = []
        while True:
            lines = list(itertools.islice(handle, chunk_lines))
            if not runs and len(lines) < chunk_lines:
                lines.sort()
                yield from lines
                return
            if not lines:
                break
            lines.sort()
            run = stack.enter_context(spill_file(spill_dir, "sort"))
            run.writelines(lines)
            run.seek(0)
            runs.append(run)
            del lines
        yield from heapq.merge(*runs)


_READ_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
_READ_DIR = _READ_FILE | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def freeze(
    root: Path, *, files_read_only: bool = False, folders: Iterable[str] | None = None
) -> None:
    """Make every file and folder read-only (the manifest's hashes are the real guarantee).
    A file already so (linked from a frozen version) is left as it is; the drill-down tools
    stay executable; a symbolic link is not followed. With `files_read_only` (a folder whose
    every file a CorpusWriter wrote, read-only as written, or linked from a frozen version),
    only the folders are made so: no file is looked at; given `folders`, those alone."""
    if folders is None:
        _freeze(os.fspath(root), files_read_only)
    for folder in [*(folders or ()), "."]:  # the root last
        os.chmod(f"{root}/{folder}", _READ_DIR)


def _freeze(folder: str, files_read_only: bool) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                _freeze(entry.path, files_read_only)
                os.chmod(entry.path, _READ_DIR)
                continue
            if files_read_only:
                continue
            mode = entry.stat().st_mode
            wanted = _READ_DIR if mode & stat.S_IXUSR else _READ_FILE
            if stat.S_IMODE(mode) != wanted:
                os.chmod(entry.path, wanted)


def remove_tree(root: Path) -> None:
    """Remove a corpus folder, frozen or not."""
    if not root.exists():
        return
    for dirpath, dirnames, _ in os.walk(root):
        for name in dirnames:
            Path(dirpath, name).chmod(stat.S_IRWXU)
    root.chmod(stat.S_IRWXU)
    shutil.rmtree(root)


def _link_or_copy(source: str, path: str, rel: str) -> None:
    """A frozen file taken as it is: a hard link, a copy across devices; `rel` names a file
    the version already holds in the error."""
    try:
        os.link(source, path)
    except FileExistsError:
        raise CorpusError(f"internal error: {rel} written twice") from None
    except OSError:
        shutil.copy2(source, path)
