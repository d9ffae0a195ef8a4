"""Writing a corpus safely: atomic files, hashes, a staging folder, a lock, freezing."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import heapq
import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import orjson

from .errors import CorpusError
from .layout import FORMAT_NAME, MANIFEST

HASH_ALGORITHM = "sha256"


def tagged(hashed: hashlib._Hash) -> str:
    """The algorithm-tagged hash the manifest records: `sha256:<hex>`."""
    return f"{HASH_ALGORITHM}:{hashed.hexdigest()}"


def digest(data: bytes) -> str:
    """The hash the manifest records for a file's bytes."""
    return tagged(hashlib.sha256(data))


def file_digest(path: str | Path) -> str:
    with open(path, "rb") as handle:
        return tagged(hashlib.file_digest(handle, HASH_ALGORITHM))


def stat_key(info: os.stat_result) -> int:
    """A file's bytes as long as nobody writes to it: its device, inode, size and time of last
    change (what make, rsync and git trust too), as one signed 64-bit number, never 0 (what
    a seal keeps for a file it does not vouch for). See `manifest.verify`'s seal."""
    return hash((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)) or 1


def atomic_write(path: Path, data: bytes | Iterable[bytes]) -> None:
    """Write through a temporary file in the same folder, so no reader sees half a file;
    `data` whole or as chunks."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
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


def write_new(path: str | Path, chunks: Iterable[bytes]) -> str:
    """Write a new file of a staging folder (no reader sees it before the folder is done)
    from its bytes in chunks; its hash as the manifest records it. A file that is already
    there is an error: a version never writes one twice."""
    hashed = hashlib.sha256()
    try:
        with open(path, "xb") as handle:  # x: the open itself checks it is new
            for chunk in chunks:
                handle.write(chunk)
                hashed.update(chunk)
    except FileExistsError:
        raise CorpusError(f"internal error: {path} written twice") from None
    return tagged(hashed)


def spill_file(folder: Path | None, what: str) -> IO[bytes]:
    """An unnamed temporary file in `folder` (the system's temporary folder when None) for
    what a build keeps off the heap (`what` names it while it is open). Made beside the
    staging folder, it is on the corpus's disk; having no name, it is gone with the process,
    even when killed. The caller closes it."""
    return tempfile.TemporaryFile(dir=folder, prefix=f".wikitrace-{what}-")


SORT_CHUNK_LINES = 1 << 16
"""Lines sorted in memory at once when the file list is sorted: past that, sorted runs go to
temporary files and are merged."""


class CorpusWriter:
    """Writes files under a (staging) corpus root and keeps the hash of each.

    The list of files and hashes is kept on disk, not on the heap: a corpus of a million runs
    has some five million files. It is an unnamed temporary file beside the root (gone with the
    process, even when killed); `files()` reads it back sorted. Use as a context manager, or
    call close()."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = str(root)
        self._made_dirs: set[str] = set()
        self._listed = spill_file(root.parent, "files")
        self.count = 0
        """Files written or linked so far."""

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
        path = self._new_path(rel)
        if isinstance(data, str):
            data = data.encode("utf-8")
        file_hash = write_new(path, (data,) if isinstance(data, bytes) else data)
        # The file as written, in the folder only this build writes to: what its seal keeps.
        self._list(rel, file_hash, stat_key(os.lstat(path)))
        if executable:
            os.chmod(path, 0o755)

    def link(self, rel: str, source: Path, file_hash: str, key: int = 0) -> None:
        """Take a file of a frozen version as it is: a hard link (a copy across devices).

        Frozen files never change, so versions can share them; `file_hash` is the hash the
        source version's manifest lists, checked by `verify` like any other. `key` is the
        source's `stat_key` when it was found to hold those bytes (0 when unknown): the new
        version's seal vouches for the file only if the link is still that file.
        """
        path = self._new_path(rel)
        try:
            os.link(source, path)
        except FileExistsError:
            raise CorpusError(f"internal error: {rel} written twice") from None
        except OSError:
            shutil.copy2(source, path)
        self._list(rel, file_hash, key if key and stat_key(os.lstat(path)) == key else 0)

    def remove(self, rel: str) -> None:
        """Take back a file written before (to write it again, or another in its place)."""
        path = os.path.join(self._root, rel)
        file_hash = file_digest(path)
        os.unlink(path)
        self._listed.seek(0, os.SEEK_END)
        # `-` sorts before the hash's tag: a path's removals come before what it lists.
        self._listed.write(f"{rel}\t-{file_hash}\t0\n".encode())
        self.count -= 1

    def files(self) -> Iterator[tuple[str, str]]:
        """Every file written or linked with its hash, sorted by path, read from disk."""
        for rel, file_hash, _ in self.entries():
            yield rel, file_hash

    def entries(self) -> Iterator[tuple[str, str, int]]:
        """`files()`, each with its `stat_key` as written or linked (0 when unknown)."""
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
        self._listed.seek(0, os.SEEK_END)
        self._listed.write(f"{rel}\t{file_hash}\t{key}\n".encode())
        self.count += 1

    def _new_path(self, rel: str) -> str:
        """Where `rel` goes, its folder made. Strings, not pathlib: pathlib interns every part
        of every path it parses, for good."""
        if "\t" in rel or "\n" in rel:
            raise CorpusError(f"internal error: a file name with a tab or newline: {rel!r}")
        path = os.path.join(self._root, rel)
        folder = os.path.dirname(path)
        if folder not in self._made_dirs:
            os.makedirs(folder, exist_ok=True)
            if len(self._made_dirs) >= 64:  # a run's files are written together: recent is enough
                self._made_dirs.clear()
            self._made_dirs.add(folder)
        return path


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


def lock_path(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.lock")


@contextlib.contextmanager
def build_lock(dest: Path) -> Iterator[None]:
    """Hold an exclusive lock on `dest` for the build; a second build into it is refused.

    The lock is an flock on a side file: the kernel drops it when the process dies, so a
    killed build never leaves a stale lock behind.
    """
    path = lock_path(dest)
    path.parent.mkdir(parents=True, exist_ok=True)
    busy = CorpusError(
        f"another build into {dest} is running (or an add, update or deploy of it; lock "
        f"{path}); wait for it to finish or choose another --output"
    )
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy from None
        # The holder before us may have removed the file after we opened it: our lock would
        # then be on a file nobody else sees. Hold it only if it is still the lock file.
        try:
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = None
        if current != os.fstat(handle.fileno()).st_ino:
            raise busy
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()


_READ_FILE = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
_READ_DIR = _READ_FILE | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


def freeze(root: Path) -> None:
    """Make every file and folder read-only (the manifest's hashes are the real guarantee).
    A file already so (linked from a frozen version) is left as it is; the drill-down tools
    stay executable; a symbolic link is not followed."""
    _freeze(os.fspath(root))
    os.chmod(root, _READ_DIR)


def _freeze(folder: str) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                _freeze(entry.path)
                os.chmod(entry.path, _READ_DIR)
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


def is_corpus(path: Path) -> bool:
    """True for a folder whose manifest says it is a wikitrace corpus."""
    manifest = path / MANIFEST
    if path.is_symlink() or not manifest.is_file():
        return False
    try:
        return bool(orjson.loads(manifest.read_bytes()).get("format") == FORMAT_NAME)
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return False


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def check_destination(dest: Path, *, force: bool) -> None:
    """Refuse a destination that holds something: anything without force, a non-corpus ever."""
    if dest.exists() or dest.is_symlink():
        if not force:
            raise CorpusError(f"{dest} already exists; use --force to replace it")
        if not is_corpus(dest) and not _is_empty_dir(dest):
            raise CorpusError(
                f"{dest} exists and is not a wikitrace corpus; --force only replaces a corpus, "
                "so choose another --output"
            )


EXPORT_MARKER = ".wikitrace-export"
"""A file in every folder `wikitrace export skill` or `wikitrace site` writes: what it is and
which corpus version it shows, so `--force` replaces only such a folder."""


@contextlib.contextmanager
def staged_export(dest: Path, kind: str, *, force: bool) -> Iterator[Path]:
    """Write a folder made from a corpus (a skill, a site) beside `dest`, then move it into
    place whole: an interrupted export leaves `dest` as it was. An existing `dest` is replaced
    only with `force`, and only when an earlier export of the same kind wrote it."""
    if dest.exists() or dest.is_symlink():
        marker = dest / EXPORT_MARKER
        ours = not dest.is_symlink() and marker.is_file()
        if ours:
            try:
                ours = orjson.loads(marker.read_bytes()).get("kind") == kind
            except (OSError, orjson.JSONDecodeError, AttributeError):
                ours = False
        if not force:
            raise CorpusError(f"{dest} already exists; use --force to replace it")
        if not ours and not _is_empty_dir(dest):
            raise CorpusError(
                f"{dest} exists and is not a {kind} wikitrace wrote; --force only replaces "
                "one, so choose another folder"
            )
    partial = dest.with_name(f".{dest.name}.partial")
    remove_tree(partial)
    partial.mkdir(parents=True)
    try:
        yield partial
        old = dest.with_name(f".{dest.name}.old")
        remove_tree(old)
        if dest.exists():
            dest.rename(old)
        partial.rename(dest)
        remove_tree(old)
    except BaseException:
        remove_tree(partial)
        raise
