"""The versions of one corpus: a store of frozen versions beside a pointer that names the
current one (the layout is in `wikitrace.corpus_schema.history`).

Everything that reads a corpus reads it through the pointer and so sees the current version; a
sandbox that mounts it gets the one frozen version the pointer named at mount time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import orjson

from wikitrace.corpus_schema import manifest
from wikitrace.corpus_schema.destination import check_destination, check_output, is_corpus
from wikitrace.corpus_schema.errors import CorpusError
from wikitrace.corpus_schema.history import (
    DEPLOYING,
    HISTORY,
    MONITOR_STATE,
    PENDING_HISTORY,
    PROBES_DIR,
    ROWS_SUFFIX,
    RUNS,
    SEAL_SUFFIX,
    STORE_SUFFIX,
    UPDATE_STATE,
    UPDATES_DIR,
    VERSION_RE,
    Event,
    HistoryEntry,
    VersionRow,
    now,
    parse_version,
    version_name,
)
from wikitrace.corpus_schema.ledger import append_line, read_lines
from wikitrace.corpus_schema.writing import atomic_write, remove_tree, temp_path


class Store:
    """The versions of one corpus, named by the path of its pointer."""

    def __init__(self, pointer: Path) -> None:
        self.pointer = Path(os.path.abspath(pointer))
        self.dir = self.pointer.with_name(self.pointer.name + STORE_SUFFIX)

    # --- paths --------------------------------------------------------------------------

    def version_path(self, name: str) -> Path:
        return self.dir / version_name(parse_version(name))

    def staging(self, name: str) -> Path:
        return self.dir / f".{name}.partial"

    def seal_path(self, name: str) -> Path:
        """Which files of version `name` are known unchanged (`manifest.read_seal`)."""
        return self.dir / f".{name}{SEAL_SUFFIX}"

    def rows_path(self, name: str) -> Path:
        """Version `name`'s index rows (`spill.read_version_rows`)."""
        return self.dir / f".{name}{ROWS_SUFFIX}"

    def sidecars(self, name: str) -> tuple[Path, Path]:
        """What the store keeps beside version `name`: its seal and its rows."""
        return self.seal_path(name), self.rows_path(name)

    @property
    def history_path(self) -> Path:
        return self.dir / HISTORY

    @property
    def runs_path(self) -> Path:
        return self.dir / RUNS

    @property
    def updates_dir(self) -> Path:
        return self.dir / UPDATES_DIR

    @property
    def update_state_path(self) -> Path:
        return self.dir / UPDATE_STATE

    @property
    def monitor_state_path(self) -> Path:
        return self.dir / MONITOR_STATE

    # --- what is there ------------------------------------------------------------------

    def exists(self) -> bool:
        return self.dir.is_dir()

    def versions(self) -> list[str]:
        """Finished versions, oldest first."""
        if not self.dir.is_dir():
            return []
        names = [p.name for p in self.dir.iterdir() if VERSION_RE.match(p.name) and p.is_dir()]
        return sorted(names, key=parse_version)

    def next_name(self) -> str:
        versions = self.versions()
        return version_name(parse_version(versions[-1]) + 1 if versions else 1)

    def current(self) -> str:
        """The version the pointer names; a clear error when there is no store or no pointer."""
        if not self.pointer.is_symlink():
            if not self.pointer.exists():
                raise CorpusError(
                    f"{self.pointer} does not exist (make a corpus with `wikitrace build -o`)"
                )
            if is_corpus(self.pointer):
                raise CorpusError(
                    f"{self.pointer} is a corpus folder, not the link `wikitrace build -o` "
                    "makes (a copy made with cp -rL?); add to the corpus it was copied from, "
                    "or build a new one"
                )
            raise CorpusError(
                f"{self.pointer} is not a wikitrace corpus pointer "
                f"(expected a link into {self.dir.name}/, as `wikitrace build -o` writes)"
            )
        target = Path(os.readlink(self.pointer))
        if target.parent != Path(self.dir.name) or not VERSION_RE.match(target.name):
            raise CorpusError(
                f"{self.pointer} points to {target}, not to a version in {self.dir.name}/"
            )
        if not (self.dir / target.name).is_dir():
            raise CorpusError(f"{self.pointer} points to {target}, which does not exist")
        return target.name

    def point(self, name: str) -> None:
        """Make `name` current: a new link renamed over the old one, so readers see either."""
        if not self.version_path(name).is_dir():
            raise CorpusError(f"no version {name} in {self.dir}")
        tmp = temp_path(self.pointer, "pointer")  # a kill leaves it: `clear_stale` clears it
        tmp.unlink(missing_ok=True)
        try:
            os.symlink(f"{self.dir.name}/{self.version_path(name).name}", tmp)
            os.replace(tmp, self.pointer)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    # --- history ------------------------------------------------------------------------

    def record(self, entry: HistoryEntry) -> None:
        append_line(self.history_path, entry)

    def history(self) -> list[HistoryEntry]:
        self._finish_pending()
        return read_lines(self.history_path, HistoryEntry)

    def _finish_pending(self) -> None:
        """A build killed after its pointer moved and before its history was renamed into
        place (publish_build) left the new history whole beside the old: put it in place when
        the pointer names the version it records. Otherwise it is left alone (the build may
        still be running; a later build clears a dead one's under the lock)."""
        pending = self.dir / PENDING_HISTORY
        if not pending.is_file() or not self.pointer.is_symlink():
            return
        try:
            (entry,) = read_lines(pending, HistoryEntry)
            if os.readlink(self.pointer).rsplit("/", 1)[-1] != entry.version:
                return
            # Only a build's own version (no parent): a pending history a build killed before
            # its pointer moved must not replace the history of a version `add` made later.
            info = manifest.load(self.version_path(entry.version)).version
            if entry.event == "built" and (info is None or info.parent is None):
                os.replace(pending, self.history_path)
        except (CorpusError, ValueError, OSError):
            return  # another reader finished it, or it is not whole: the history stays

    def deploy(
        self, name: str, *, event: Event = "deployed", reason: str = "", update: str | None = None
    ) -> str | None:
        """Move the pointer to `name` and say so in the history; returns the previous version."""
        name = version_name(parse_version(name))
        previous = self.current() if self.pointer.is_symlink() else None
        self.point(name)
        self.record(
            HistoryEntry(
                time=now(),
                event=event,
                version=name,
                previous=previous,
                reason=reason,
                update=update,
            )
        )
        return previous

    def place(
        self,
        staging: Path,
        name: str,
        *,
        parent: str | None,
        deploy: bool,
        event: Event,
        reason: str,
    ) -> None:
        """Move a finished, frozen staging folder in as version `name`; then deploy it (the
        history says `event`) or leave it as a candidate."""
        try:
            os.replace(staging, self.version_path(name))
        except BaseException:
            remove_tree(staging)
            raise
        if deploy:
            self.deploy(name, event=event, reason=reason)
        else:
            self.record(
                HistoryEntry(
                    time=now(), event="candidate", version=name, previous=parent, reason=reason
                )
            )


def write_json(path: Path, data: Any) -> None:
    """A JSON record in the store, written atomically with stable key order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")


_STORE_FILES = frozenset(
    {HISTORY, PENDING_HISTORY, RUNS, UPDATES_DIR, UPDATE_STATE, MONITOR_STATE, PROBES_DIR}
)
_HIDDEN_RE = re.compile(r"^\.(?:v\d{4,9}\.(?:partial|seal|rows)|removing-.+|.+\.tmp-\d+)$")


def foreign_entries(store: Store) -> list[str]:
    """What the store's folder holds that wikitrace never writes there (empty for a store)."""
    if not store.dir.is_dir() or store.dir.is_symlink():
        return [store.dir.name] if store.dir.is_symlink() else []
    foreign = []
    for path in store.dir.iterdir():
        name = path.name
        if name in _STORE_FILES or _HIDDEN_RE.match(name):
            continue
        if VERSION_RE.match(name) and path.is_dir() and is_corpus(path):
            continue
        foreign.append(name)
    return sorted(foreign)


def committed(store: Store) -> bool:
    """True when a build into the store ever finished: its pointer was made."""
    if store.pointer.is_symlink():
        return True
    try:
        return any(entry.event in DEPLOYING for entry in store.history())
    except CorpusError:
        return True  # a damaged history is someone's: never taken for debris


def resumable(pointer: Path, sources: list[str]) -> bool:
    """True when `pointer` names an incomplete build (some runs failed to compile) of the same
    input paths: running the same command again resumes it, no --force needed."""
    if not pointer.is_symlink():
        return False
    try:
        store = Store(pointer)
        found = manifest.load(store.version_path(store.current()))
    except CorpusError:
        return False
    build = found.build
    return (
        build.get("complete") is False
        and (found.version is None or found.version.parent is None)
        and build.get("sources") == sources
    )


def check_new_pointer(pointer: Path, *, force: bool) -> None:
    """Refuse to build over something unless forced, and over anything not ours ever.

    A store whose build was killed before its pointer was made holds nothing anyone used:
    building again needs no --force, and the leftovers are cleared.
    """
    check_output(pointer)
    store = Store(pointer)
    foreign = foreign_entries(store)
    if foreign:
        raise CorpusError(
            f"{store.dir} holds files wikitrace did not write ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); a build never replaces them, so choose "
            "another --output"
        )
    if pointer.is_symlink():
        if not force:
            raise CorpusError(f"{pointer} already exists; use --force to replace it")
        store.current()  # a link that is not one of our pointers is refused here
    elif pointer.exists():
        check_destination(pointer, force=force)
    elif store.exists() and committed(store) and not force:
        raise CorpusError(
            f"{store.dir} holds versions of a corpus whose pointer {pointer} is gone; "
            f"use --force to replace them, or `wikitrace versions {pointer} --deploy VERSION` to "
            "point at one"
        )


def begin_build(pointer: Path) -> tuple[Store, str]:
    """The store made ready for a build (the caller holds the lock), and the version the
    build writes: v0001, or the next one when it replaces a corpus, whose versions stay
    current until the new one is in place. Leftovers of a build killed before its pointer
    existed are cleared: nobody ever used them."""
    store = Store(pointer)
    if store.exists() and not committed(store):
        _clear(store)
    store.dir.mkdir(parents=True, exist_ok=True)
    return store, store.next_name() if committed(store) else version_name(1)


def abandon_build(store: Store, staging: Path, name: str) -> None:
    """After a failed or interrupted build: its staging folder goes, so does its version if
    it was moved in but never made current, and so does a store that the build itself
    started (nothing was ever current in it)."""
    remove_tree(staging)
    for sidecar in store.sidecars(name):
        sidecar.unlink(missing_ok=True)
    if not store.dir.is_dir():
        return
    if not committed(store):
        if not foreign_entries(store):
            remove_tree(store.dir)
    elif store.pointer.is_symlink() and os.readlink(store.pointer).rsplit("/", 1)[-1] != name:
        remove_tree(store.version_path(name))


def publish_build(store: Store, staging: Path, name: str) -> None:
    """Put a finished build in place as version `name` and make it the only one.

    Replacing is safe at every instant: the old corpus stays whole and current until the new
    version is in the store and the pointer is swapped to it in one rename; only then are the
    old versions and the store's records removed, each renamed aside first, so a kill leaves
    either the old corpus or the new one current, never neither. The staging folder sits in
    the store, so the move is a rename within one folder (a frozen folder cannot be moved to
    another by a user who is not root).
    """
    os.replace(staging, store.version_path(name))
    _switch(store, name, _pending_history(store, name))


def _pending_history(store: Store, name: str) -> Path:
    """The history a build of version `name` leaves: one line, `built`, naming the version it
    replaces; written beside the history, not yet in its place."""
    pointer = store.pointer
    old = store.current() if pointer.is_symlink() else None
    old_versions = [v for v in store.versions() if v != name]
    reason = "wikitrace build" + (
        f" --force (replaced {', '.join(old_versions)}; current was {old})" if old_versions else ""
    )
    entry = HistoryEntry(time=now(), event="built", version=name, previous=old, reason=reason)
    # The history is written whole before the pointer moves and renamed into place after: a
    # kill between the two leaves it pending, and the next reader finishes the rename.
    pending = store.dir / PENDING_HISTORY
    atomic_write(pending, entry.model_dump_json().encode() + b"\n")
    return pending


def _switch(store: Store, name: str, pending: Path) -> None:
    """Make version `name` current, then put the history `pending` holds in place."""
    pointer = store.pointer
    if pointer.exists() and not pointer.is_symlink():
        # A corpus from before versions (or an empty folder, with --force): a folder cannot
        # be renamed over, so it steps aside just before the link takes its place.
        aside = pointer.with_name(f".{pointer.name}.removing-{os.getpid()}")
        os.replace(pointer, aside)
        store.point(name)
        remove_tree(aside)
    else:
        store.point(name)
    os.replace(pending, store.history_path)
    _clear(store, keep=name)


def _clear(store: Store, keep: str | None = None) -> None:
    """Remove every version but `keep` and the store's records (history, and what the store
    keeps beside `keep`, stay when kept)."""
    kept = set() if keep is None else {keep, HISTORY, *(p.name for p in store.sidecars(keep))}
    for path in list(store.dir.iterdir()):
        name = path.name
        if name in kept:
            continue
        if name.startswith(".removing-"):  # left by a kill: a version, or a file
            _remove(path)
            continue
        if name in _STORE_FILES or VERSION_RE.match(name) or _HIDDEN_RE.match(name):
            aside = store.dir / f".removing-{name}"
            os.replace(path, aside)
            _remove(aside)


def _remove(path: Path) -> None:
    """A version (or other folder) of the store, or one of its files."""
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink()


def left_unrecorded(
    store: Store, sources: list[str] | None = None, *, decided_by: str | None = None
) -> str | None:
    """The version a killed `add` of the same inputs (`sources`, as its build report names
    them), or a killed gate or monitoring call (`decided_by`: "gate" or "monitor", the key of
    its decisions in the version's report), left behind: moved into the store on top of the
    current version, or already made current, but never recorded in the history (the kill
    came before the pointer moved, or before the history said so). Running the command again
    finishes it (`record_left`) instead of making the same version a second time. None when
    there is none, or when the history cannot be read (then nothing can be told apart, and
    the command goes on as usual)."""
    try:
        recorded = {entry.version for entry in store.history()}
    except CorpusError:
        return None
    current = store.current()
    for name in reversed(store.versions()):
        if name in recorded:
            continue
        path = store.version_path(name)
        try:
            found = manifest.load(path)
        except CorpusError:
            continue
        info = found.version
        if info is None:
            continue
        if decided_by is not None:
            if info.changes.runs or decided_by not in found.build:
                continue  # not made by such a decision
        elif info.changes.runs == 0 or found.build.get("sources") != sources:
            continue  # not made by an add of these inputs
        if name == current:
            return name
        if info.parent == current and manifest.verify(path, store.seal_path(name)).ok:
            return name
    return None


def record_left(
    store: Store, name: str, *, deploy: bool, reason: str, event: Event = "added"
) -> None:
    """Finish placing version `name`, which `left_unrecorded` found: deploy it (or record that
    it is current, when the pointer had moved) or record it as a candidate, as `place` would
    have done; `event` is what the history says of a deployed one (added, gated, monitored)."""
    found = manifest.load(store.version_path(name))
    parent = found.version.parent if found.version else None
    if deploy and store.current() != name:
        store.deploy(name, event=event, reason=reason)
        return
    event = event if store.current() == name else "candidate"
    store.record(
        HistoryEntry(time=now(), event=event, version=name, previous=parent, reason=reason)
    )


def open_store(pointer: Path) -> Store:
    """The store behind a pointer; a clear error when `pointer` is none."""
    store = Store(pointer)
    store.current()
    return store


def list_versions(store: Store) -> list[VersionRow]:
    """Every finished version with its status, from the manifests and the history."""
    current = store.current()
    deployed: set[str] = set()
    refused: set[str] = set()
    for entry in store.history():
        if entry.event in DEPLOYING:
            deployed.add(entry.version)
        elif entry.event == "refused":
            refused.add(entry.version)
    rows = []
    for name in store.versions():
        path = store.version_path(name)
        found = manifest.load(path)
        info = found.version
        status: Literal["current", "previous", "candidate", "refused"] = (
            "current"
            if name == current
            else "previous"
            if name in deployed
            else "refused"
            if name in refused
            else "candidate"
        )
        rows.append(
            VersionRow(
                name=name,
                status=status,
                parent=info.parent if info else None,
                created=found.created,
                runs=found.counts.get("runs", 0),
                insights=found.counts.get("insights", 0),
                added_runs=info.changes.runs if info and info.parent else found.counts["runs"],
                added_insights=len(info.changes.insights)
                if info and info.parent
                else found.counts.get("insights", 0),
                path=str(path),
            )
        )
    return rows
