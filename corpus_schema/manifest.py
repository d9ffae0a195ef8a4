"""manifest.json: what a corpus is, how it was built, and the hash of every file; verify."""

from __future__ import annotations

import contextlib
import hashlib
import os
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
from .layout import (
    FORMAT_VERSION,
    MANIFEST,
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
    files: dict[str, str]
    """Every file but this one, by path relative to the root: `sha256:<hex>`."""
    checksum: str | None = None
    """`sha256:<hex>` of this manifest as written without this field (see `dump`), so an
    edit of the manifest itself (a file's hash, an entry removed with its file, the model,
    the counts) fails `verify`. Set when written; none only in manifests from before it."""


def _bytes(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"


def dump(manifest: Manifest) -> bytes:
    """The manifest's bytes, with the checksum of its other fields as the last one."""
    data = manifest.model_dump(mode="json", exclude={"checksum"})
    data["checksum"] = digest(_bytes(data))
    return _bytes(data)


def dump_chunks(manifest: Manifest, files: Iterable[tuple[str, str]]) -> Iterator[bytes]:
    """`dump` of `manifest` with `files` (path, hash) in place of its own, a chunk at a time:
    a million runs list four million files, which are never held as one dict nor one text.
    `files` must be in sorted order. The bytes are exactly `dump`'s."""
    data = manifest.model_dump(mode="json", exclude={"checksum", "files"})
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
    raw = path.read_bytes()
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
    path = root / MANIFEST
    if not root.is_dir():
        raise CorpusError.no_folder(root)
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorpusError(
            f"{root} has no {MANIFEST}: it is not a finished wikitrace corpus"
        ) from None
    except orjson.JSONDecodeError as error:
        raise CorpusError(f"{path}: not valid JSON ({error})") from None
    given = data.get("format_version", FORMAT_VERSION) if isinstance(data, dict) else None
    if given is not None and given not in READ_FORMAT_VERSIONS:
        raise CorpusError(
            f"{path}: corpus format version {given} is not supported (this wikitrace reads "
            f"versions {', '.join(map(str, READ_FORMAT_VERSIONS))})"
        )
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        where, message = first_problem(error)
        raise CorpusError(f"{path}: field '{where}': {message}") from None


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
