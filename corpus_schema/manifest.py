"""manifest.json: what a corpus is, how it was built, and the hash of every file; verify."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import CorpusError, first_problem
from .history import VersionInfo
from .layout import FORMAT_VERSION, MANIFEST
from .records import CompiledBy
from .store import digest, file_digest, tagged


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
    """How the model was called, less any secret: api_base, temperature, max_output_tokens,
    context_tokens, max_prompt_tokens. `add` and `update` call it the same way."""
    compiled_by: CompiledBy
    prompts: dict[str, str] = Field(default_factory=dict)
    """Template name -> sha256 of its source, for every template used."""
    step_id_width: int
    """Digits in step ids (`step-0042`: 4)."""
    insight_id_width: int
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
        raise CorpusError(f"{root} is not a folder (expected a wikitrace corpus)")
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise CorpusError(
            f"{root} has no {MANIFEST}: it is not a finished wikitrace corpus"
        ) from None
    except orjson.JSONDecodeError as error:
        raise CorpusError(f"{path}: not valid JSON ({error})") from None
    if isinstance(data, dict) and data.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        raise CorpusError(
            f"{path}: corpus format version {data.get('format_version')} is not supported "
            f"(this wikitrace reads version {FORMAT_VERSION})"
        )
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        where, message = first_problem(error)
        raise CorpusError(f"{path}: field '{where}': {message}") from None


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


def verify(root: Path) -> VerifyReport:
    """Recompute every file's hash and compare with the manifest."""
    manifest = load(root)
    report = VerifyReport(root=str(root), manifest=manifest_problem(root))
    present: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        # A link to a folder is listed with dirnames but never walked into: count it as extra.
        for name in [*filenames, *(d for d in dirnames if (base / d).is_symlink())]:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if rel != MANIFEST:
                present[rel] = path
    for rel, expected in sorted(manifest.files.items()):
        found = present.pop(rel, None)
        if found is None:
            report.missing.append(rel)
            continue
        report.checked += 1
        # Never follow a link: it could point anywhere outside the corpus.
        if found.is_symlink() or not found.is_file() or file_digest(found) != expected:
            report.changed.append(rel)
    report.extra = sorted(present)
    return report
