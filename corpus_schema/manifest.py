"""manifest.json: what a corpus is, how it was built, and the hash of every file; verify."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import operator
import os
import re
import struct
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import CorpusError, first_problem
from .history import VersionInfo
from .identity import digest, tagged
from .input_files import NotAnInputFile, read_input
from .layout import (
    FORMAT_VERSION,
    MANIFEST,
    MANIFESTS_DIR,
    MAX_ID_WIDTH,
    MIN_ID_WIDTH,
    READ_FORMAT_VERSIONS,
)
from .records import CompiledBy
from .writing import atomic_write, checked_key, stat_key


def builder_version() -> str:
    """The installed wikitrace's version, as a manifest records it."""
    try:
        return metadata.version("wikitrace")
    except metadata.PackageNotFoundError:
        return "unknown"


class Manifest(BaseModel):
    """manifest.json of a frozen corpus."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["wikitrace-corpus"] = "wikitrace-corpus"
    """Always `wikitrace-corpus`."""
    format_version: int = FORMAT_VERSION
    """Bumped whenever the layout or a header changes incompatibly."""
    builder: dict[str, str]
    """Name and version of the program that built the corpus."""
    created: str
    """When the build finished (UTC, ISO 8601)."""
    model: str
    """The model that wrote the compilations (`offline` for none)."""
    model_settings: dict[str, Any] = Field(default_factory=dict)
    """How the model was called, less any secret: the settings declared `recorded`
    (corpus_schema/setting_fields.py, `recorded`: api_base, the context and answer lengths,
    temperature, reasoning_effort when given). `add` and `update` call it the same way."""
    compiled_by: CompiledBy
    prompts: dict[str, str] = Field(default_factory=dict)
    """Template name -> sha256 of its source, for every template used."""
    step_id_width: int = Field(ge=MIN_ID_WIDTH, le=MAX_ID_WIDTH)
    """Digits in step ids (`step-0042`: 4)."""
    insight_id_width: int = Field(ge=MIN_ID_WIDTH, le=MAX_ID_WIDTH)
    """Digits in insight ids."""
    counts: dict[str, int]
    """runs, successes, failures, compilations, insights."""
    build: dict[str, Any] = Field(default_factory=dict)
    """The build report."""
    redactions: dict[str, int] = Field(default_factory=dict)
    """Secrets redacted before anything was sent or written, counted per kind."""
    version: VersionInfo | None = None
    """Which version this is, its parent and what it adds (none in corpora built before
    versions were kept)."""
    parent_manifest: str | None = None
    """Where this version holds its parent's manifest (`manifests/v0003.json`: the parent's
    manifest.json linked in, listed in `files` with its hash), when it is written as what
    changed since that one: `files` then lists only the files this version added or holds
    changed, and as `null` each file of the parent's that it lacks. The parent's manifest may
    be written on its own parent's in turn, each in this version's `manifests/`; `load`
    follows them and gives every file. None (a manifest of every file) in a version built
    whole, and in manifests written before these chains."""
    files: dict[str, str]
    """Every file but this one, by path relative to the root: `sha256:<hex>` (as written
    with `parent_manifest`, only what changed since the parent's manifest; `load` gives every
    file)."""
    checksum: str | None = None
    """`sha256:<hex>` of this manifest as written without this field (see `dump`), so an
    edit of the manifest itself (a file's hash, an entry removed with its file, the model,
    the counts) fails `verify`. Set when written; none only in manifests from before it."""


def _bytes(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def _fields(manifest: Manifest, *also: str) -> dict[str, Any]:
    """What is written of `manifest` but `also`: a manifest of every file leaves out the
    chain's fields, so that its bytes are those written before chains."""
    left = {"checksum", *also}
    if manifest.parent_manifest is None:
        left.add("parent_manifest")
    return manifest.model_dump(mode="json", exclude=left)


def dump(manifest: Manifest) -> bytes:
    """The manifest's bytes, with the checksum of its other fields as the last one."""
    data = _fields(manifest)
    data["checksum"] = digest(_bytes(data))
    return _bytes(data)


def dump_chunks(manifest: Manifest, files: Iterable[tuple[str, str | None]]) -> Iterator[bytes]:
    """`dump` of `manifest` with `files` (path, hash) in place of its own, a chunk at a time:
    a million runs list four million files, which are never held as one dict nor one text.
    `files` must be in sorted order; a hash of None (with `parent_manifest` only) is a file
    of the parent's that the version lacks. The bytes are exactly `dump`'s."""
    data = _fields(manifest, "files")
    head = orjson.dumps({**data, "files": {}}, option=orjson.OPT_INDENT_2)
    # `files` is the last field: its empty `{}` closes the text, the entries go inside it.
    assert head.endswith(b'"files": {}\n}'), "files must be the manifest's last field"
    checksum = hashlib.sha256()
    pending = [head[: -len(b"}\n}")]]
    first = True
    for rel, file_hash in files:
        pending.append(
            (b"\n    " if first else b",\n    ")
            + orjson.dumps(rel)
            + b": "
            + orjson.dumps(file_hash)
        )
        first = False
        if len(pending) >= 4096:
            chunk = b"".join(pending)
            checksum.update(chunk)
            yield chunk
            pending = []
    close = b"}" if first else b"\n  }"
    chunk = b"".join(pending) + close
    checksum.update(chunk + b"\n}\n")
    yield chunk + b',\n  "checksum": ' + orjson.dumps(tagged(checksum))
    yield b"\n}\n"


def manifest_problem(root: Path) -> str | None:
    """Why manifest.json is not exactly as wikitrace wrote it, or None.

    Checked on the file's own JSON, not on the model, so a manifest written before a field
    was added still checks."""
    path = root / MANIFEST
    if path.is_symlink():
        return "it is a link, not a file of the corpus"
    return _problem(path.read_bytes())


def _problem(raw: bytes) -> str | None:
    data = orjson.loads(raw)
    checksum = data.pop("checksum", None) if isinstance(data, dict) else None
    if checksum is None:
        return "it carries no checksum (written by a wikitrace before 0.2), so it cannot be checked"
    if checksum != digest(_bytes(data)):
        return "its checksum does not match its contents: it was edited or damaged"
    if raw != _bytes({**data, "checksum": checksum}):
        return "its bytes differ from what wikitrace writes for the same contents"
    return None


def load(root: Path) -> Manifest:
    """The manifest of the version at `root`, listing every file: one written as what changed
    since its parent's (`Manifest.parent_manifest`) is applied to that one, read from the
    version's own `manifests/`, and so on back to a manifest of every file."""
    if not root.is_dir():
        raise CorpusError.no_folder(root)
    path = root / MANIFEST
    try:
        manifest, gone = _load_one(path)
    except FileNotFoundError:
        raise CorpusError(
            f"{root} has no {MANIFEST}: it is not a finished wikitrace corpus"
        ) from None
    if manifest.parent_manifest is None:
        return manifest
    chain, named_by, seen = [(manifest, gone)], path, set()
    while (rel := chain[-1][0].parent_manifest) is not None:
        if not _CHAINED.fullmatch(rel) or rel in seen or len(chain) > CHAIN_LIMIT + 1:
            raise CorpusError(
                f"{named_by}: field 'parent_manifest': {rel!r} is not the manifest of an "
                f"earlier version in {MANIFESTS_DIR}/ (a damaged manifest: run `wikitrace verify`)"
            )
        seen.add(rel)
        named_by = root / rel
        if (root / MANIFESTS_DIR).is_symlink():
            raise CorpusError(
                f"{root / MANIFESTS_DIR}: a link, where a version holds its ancestors' "
                "manifests itself: the version is damaged (run `wikitrace verify`)"
            )
        try:
            chain.append(_load_one(named_by, follow=False))
        except FileNotFoundError:
            raise CorpusError(
                f"{path}: the manifest it is written on, {rel}, is missing: the version is "
                "damaged (run `wikitrace verify`)"
            ) from None
    files = chain.pop()[0].files
    added = False
    for changed, gone in reversed(chain):
        for rel in gone:
            files.pop(rel, None)
        known = len(files)
        files.update(changed.files)
        added = added or len(files) != known
    if added:  # listed in path order, as written (an added file went last)
        files = {rel: files[rel] for rel in sorted(files)}
    return manifest.model_copy(update={"files": files})


_CHAINED = re.compile(rf"{MANIFESTS_DIR}/[A-Za-z0-9_-][A-Za-z0-9._-]*\.json")
"""A chained manifest's path: in `manifests/`, never outside the version."""


CHAIN_LIMIT = 64
"""Manifests a version's chain holds at most (the version's own aside): a version that would
hold more lists every file, so that reading a manifest reads at most this many more files."""


def chain_rel(parent: str) -> str:
    """Where a version made from version `parent` holds its manifest."""
    return f"{MANIFESTS_DIR}/{parent}.json"


def is_chained(rel: str) -> bool:
    """Whether file `rel` of a version is an ancestor's manifest (in `manifests/`)."""
    return rel.startswith(f"{MANIFESTS_DIR}/")


def chain_hash(root: Path) -> tuple[str, int] | None:
    """The hash and `stat_key` of the manifest at `root` when a version made from it may list
    only what changed since (its bytes exactly as written, checksum included: see
    `manifest_problem`); else None, and the new version lists every file. wikitrace replaces
    a manifest whole, never writes into it, so the key it had before and after the bytes were
    read names those bytes (0 when it changed meanwhile)."""
    key = manifest_key(root)
    raw = (root / MANIFEST).read_bytes()
    if _problem(raw) is not None:
        return None
    return digest(raw), key if manifest_key(root) == key else 0


def changes(
    parent: dict[str, str], files: Iterable[tuple[str, str]]
) -> Iterator[tuple[str, str | None]]:
    """Of `files` (path, hash; sorted by path), those `parent` (a manifest's `files`) does not
    list with the same hash, and each path `parent` lists that `files` lacks with None: what
    a manifest written on `parent`'s lists (see `Manifest.parent_manifest`). One pass over
    both, in path order."""
    theirs = iter(parent if _in_order(parent) else sorted(parent))
    pending = next(theirs, None)
    for rel, file_hash in files:
        while pending is not None and pending < rel:
            yield pending, None
            pending = next(theirs, None)
        if pending == rel:
            pending = next(theirs, None)
            if parent[rel] == file_hash:
                continue
        yield rel, file_hash
    while pending is not None:
        yield pending, None
        pending = next(theirs, None)


def _in_order(files: dict[str, str]) -> bool:
    names = list(files)
    return all(map(operator.lt, names, itertools.islice(names, 1, None)))


def _load_one(path: Path, follow: bool = True) -> tuple[Manifest, list[str]]:
    """One manifest file as written (its `files` only what it lists), and the files it lists
    as gone (`null`: one written on its parent's, `Manifest.parent_manifest`). Only a regular
    file is read (a pipe or a device named so is refused, never waited on), and with `follow`
    False not through a link (an ancestor's manifest is the version's own file)."""
    try:
        data = orjson.loads(_regular_bytes(path, follow))
    except orjson.JSONDecodeError as error:
        raise CorpusError(f"{path}: not valid JSON ({error})") from None
    given = data.get("format_version", FORMAT_VERSION) if isinstance(data, dict) else None
    if given is not None and given not in READ_FORMAT_VERSIONS:
        raise CorpusError(
            f"{path}: corpus format version {given} is not supported (this wikitrace reads "
            f"versions {', '.join(map(str, READ_FORMAT_VERSIONS))})"
        )
    gone: list[str] = []
    files = data.get("files") if isinstance(data, dict) else None
    if isinstance(files, dict) and data.get("parent_manifest") is not None:
        gone = [rel for rel, file_hash in files.items() if file_hash is None]
        for rel in gone:
            del files[rel]
    try:
        return Manifest.model_validate(data), gone
    except ValidationError as error:
        where, message = first_problem(error)
        raise CorpusError(f"{path}: field '{where}': {message}") from None


def _regular_bytes(path: Path, follow: bool) -> bytes:
    """The bytes of `path` when it is a regular file (FileNotFoundError when it is missing)."""
    try:
        return read_input(path, follow)
    except NotAnInputFile:
        raise CorpusError(f"{path}: not a regular file, where a manifest is one") from None
    except FileNotFoundError:
        raise
    except OSError as error:
        raise CorpusError(f"{path}: cannot be read as a manifest ({error.strerror})") from None


# --- the seal: which files are known to hold the bytes the manifest lists ------------------
#
# A version's files never change once written, so hashing all of them again each time runs are
# added to it would cost what the corpus holds. The seal is a file beside the version (in its
# store, never in the corpus itself): for each of the manifest's files, in its order, the
# `stat_key` the file had when its bytes were written or last hashed and found right, 0 when
# there is none. It ends with the manifest's own key and the count, so a seal is used only
# for the manifest it was made with. A file whose inode, size and time of change are still the
# sealed ones is taken as unchanged, as make, rsync and git take it; any write gives a new
# time, so it is hashed again. `wikitrace verify` never reads a seal: it hashes every file.

_SEAL_END = struct.Struct("<qq8s")
_SEAL_MAGIC = b"wtseal01"


def manifest_key(root: Path) -> int:
    """The `stat_key` of the manifest at `root` (0 when it cannot be read): what the seal and
    the rows kept beside a version name, so that they serve this manifest only."""
    try:
        return stat_key(os.lstat(root / MANIFEST))
    except OSError:
        return 0


def read_seal(seal: Path, root: Path, count: int) -> array[int] | None:
    """The keys `seal` vouches for, one per file of the manifest at `root` in its order; None
    when there is no seal, or it was made for another manifest."""
    try:
        data = seal.read_bytes()
    except OSError:
        return None
    if len(data) != 8 * count + _SEAL_END.size:
        return None
    sealed_manifest, sealed_count, magic = _SEAL_END.unpack_from(data, 8 * count)
    if (magic, sealed_manifest, sealed_count) != (_SEAL_MAGIC, manifest_key(root), count):
        return None
    keys = array("q")
    keys.frombytes(data[: 8 * count])
    return keys


def write_seal(seal: Path, root: Path, keys: Iterable[int]) -> None:
    """Seal the version at `root` (its manifest written): `keys` in the manifest's order."""
    listed = array("q", keys)
    bound = manifest_key(root)
    atomic_write(seal, (listed.tobytes(), _SEAL_END.pack(bound, len(listed), _SEAL_MAGIC)))


@dataclass
class VerifyReport:
    """What `verify` found: listed files gone or changed, and files the manifest doesn't list."""

    root: str
    checked: int = 0
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    manifest: str | None = None
    """Why manifest.json itself cannot be trusted, or None."""
    keys: array[int] = field(default_factory=lambda: array("q"), repr=False)
    """Each listed file's `stat_key` as found, in the manifest's order (0 where it was not
    found right): what a version linking these files can seal them with."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.extra or self.manifest)

    def as_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "checked": self.checked,
            "missing": self.missing,
            "changed": self.changed,
            "extra": self.extra,
            "manifest": self.manifest,
        }


def verify(root: Path, seal: Path | None = None, manifest: Manifest | None = None) -> VerifyReport:
    """Recompute every file's hash and compare with the manifest (`manifest`, when the caller
    has just loaded it from `root`).

    With `seal` (see `read_seal`), a file whose key the seal holds is not hashed again, and
    the seal is brought up to date with the files found right."""
    manifest = load(root) if manifest is None else manifest
    report = VerifyReport(root=str(root), manifest=manifest_problem(root))
    present, empty_folders = _present(os.fspath(root))
    sealed = read_seal(seal, root, len(manifest.files)) if seal is not None else None
    keys = report.keys
    for index, (rel, expected) in enumerate(manifest.files.items()):
        found = present.pop(rel, None)
        if found is None:
            report.missing.append(rel)
            keys.append(0)
            continue
        report.checked += 1
        key = checked_key(found, expected, sealed[index] if sealed is not None else 0)
        if key is None:
            report.changed.append(rel)
            key = 0
        keys.append(key)
    report.missing.sort()
    report.changed.sort()
    # A folder holds what the manifest lists: one with nothing in it was added (by hand, or
    # by a command told to write there) and is extra too, named with its final slash.
    report.extra = sorted([*present, *(f"{folder}/" for folder in empty_folders)])
    if seal is not None and report.ok and keys != sealed:
        # Only a saving for the next check: a store this user cannot write is checked in full.
        with contextlib.suppress(OSError):
            write_seal(seal, root, keys)
    return report


def _present(root: str) -> tuple[dict[str, str], list[str]]:
    """Every file and link under `root` but the manifest (path relative to it -> path), and
    every folder under it that holds nothing at all (relative paths)."""
    present: dict[str, str] = {}
    empty: list[str] = []
    prefix = len(root) + 1
    folders = [root]
    while folders:
        folder = folders.pop()
        held = False
        with os.scandir(folder) as entries:
            for entry in entries:
                held = True
                # A link is never followed (a link to a folder is listed, as extra).
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                else:
                    present[entry.path[prefix:]] = entry.path
        if not held and folder != root:
            empty.append(folder[prefix:])
    present.pop(MANIFEST, None)
    return present, empty
