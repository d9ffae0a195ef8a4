"""What every importer shares: the run it hands on, the probe that detection reads, and the
streaming readers of JSON documents, JSON Lines and zip members."""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import open_input, read_input
from wikitrace.corpus_schema.work import CODING, infer_kind

HEAD_BYTES = 256 * 1024
"""How much of a file detection reads."""
FIRST_LINE_BYTES = 64 * 1024 * 1024
"""How far detection reads for the end of a JSON Lines file's first record (a long run)."""
BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark some editors and Windows tools put before JSON; skipped."""
JSONL_PROBE_LINES = 20
"""Lines of a head detection tries when the first is damaged."""
SQLITE_HEADER = b"SQLite format 3\x00"
"""How every SQLite database file starts (an IDE's chat store, ...)."""
SCAN_BYTES = 64 * 1024 * 1024
"""How far `stream_keys` reads a JSON document for a key its head does not reach."""
SCAN_CHUNK = 1024 * 1024
"""How much `stream_keys` reads at a time."""


@dataclass
class Candidate:
    """One run an importer found, in the native shape, before labels are applied.

    `data["success"]` is True or False when the log says so, else None; `reward` is a numeric
    outcome the success threshold turns into a label.
    """

    path: str
    data: dict[str, Any]
    run_id: str
    line: int | None = None
    at: str | None = None
    reward: float | None = None
    note: str | None = None
    """Why the run has no label when the log says why (an episode cut off, ...)."""
    aliases: tuple[str, ...] = ()
    """Other keys a labels file may use for this run (a session's file name, ...)."""


@dataclass(frozen=True)
class LeftOut:
    """A file read and found to hold no run, on purpose rather than by damage (a session's
    side file with no prompt the user typed, a warm-up call): listed once, never an error."""

    path: str
    reason: str


Found = Candidate | InputError | LeftOut
"""What an importer yields: a run, the error of one record (reading goes on after it), or
why a whole file holds no run."""


@dataclass
class Probe:
    """The head of a file, as detection sees it. Nothing here reads the whole file."""

    path: Path
    head: bytes
    zip_names: frozenset[str] = frozenset()
    kind: str = "text"
    """json (one document), jsonl (an object a line), zip, sqlite (a database), or text."""
    top: str | None = None
    """The JSON document's top: map or array."""
    keys: dict[str, set[str]] = field(default_factory=dict)
    """Keys seen at each JSON prefix ('' for the top map, 'item' for an array's items, ...)."""
    values: dict[str, Any] = field(default_factory=dict)
    """The first scalar seen at each prefix up to depth two."""
    text_error: str | None = None
    """Why the head is not JSON, for the 'unrecognised' error."""
    sample: list[dict[str, Any]] = field(default_factory=list)
    """The whole records of a JSON Lines head (up to JSONL_PROBE_LINES): session logs whose
    first line is a header or a snapshot are known by the records after it."""

    def has(self, prefix: str, *names: str) -> bool:
        seen = self.keys.get(prefix, set())
        return all(name in seen for name in names)

    def lines(self) -> list[str]:
        return self.head.decode("utf-8", "replace").splitlines()


def _depth(prefix: str) -> int:
    return 0 if not prefix else prefix.count(".") + 1


def probe(path: Path) -> Probe:
    """Read the head of `path` and note what it looks like."""
    with open_input(path) as handle:
        head = handle.read(HEAD_BYTES)
        if head.startswith(BOM):
            head = head[len(BOM) :]
        stripped = head.lstrip()
        if stripped[:1] == b"{" and b"\n" not in stripped and len(head) == HEAD_BYTES:
            # One record longer than the head (a long run, as `convert` writes it): read on
            # to the end of its line, so a JSON Lines file is known by its first record.
            rest_of_line = handle.readline(FIRST_LINE_BYTES)
            if rest_of_line.endswith(b"\n"):
                head += rest_of_line
                stripped = head.lstrip()
    found = Probe(path=path, head=head)
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                found.zip_names = frozenset(archive.namelist())
            found.kind = "zip"
        except (zipfile.BadZipFile, OSError, ValueError) as error:
            found.text_error = f"a damaged zip: {error}"
        return found
    if head.startswith(SQLITE_HEADER):
        found.kind = "sqlite"
        return found
    if stripped[:1] not in (b"{", b"["):
        return found
    sample = _jsonl_sample(stripped)
    if sample:
        found.kind = "jsonl"
        found.top = "map"
        found.sample = sample
        _note_object(found, sample[0], "")
        return found
    found.kind = "json"
    _scan_head(found, stripped)
    return found


def _jsonl_sample(head: bytes) -> list[dict[str, Any]]:
    """The whole object records among the first lines of a JSON Lines head; empty when the head
    is no JSON Lines.

    A damaged first record does not hide the file's format: when the first line is a broken
    object (not the `{` that opens a pretty-printed document), the next whole line that is an
    object stands for the file, and the reader reports line 1 as bad.
    """
    lines = head.split(b"\n")
    if len(lines) < 2:  # no complete line
        return []
    opener = lines[0].strip()
    if not opener.startswith(b"{") or opener == b"{":
        return []
    sample = []
    for line in lines[: min(len(lines) - 1, JSONL_PROBE_LINES)]:
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            value = loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            sample.append(value)
    return sample


def _note_object(found: Probe, value: Any, prefix: str) -> None:
    if _depth(prefix) > 3:
        return
    if isinstance(value, dict):
        found.keys.setdefault(prefix, set()).update(value)
        for key, item in value.items():
            _note_object(found, item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list):
        for item in value[:3]:
            _note_object(found, item, f"{prefix}.item" if prefix else "item")
    else:
        found.values.setdefault(prefix, value)


_BIG_INT = re.compile(rb"(?<=[:\[,\s])-?\d{19,}(?=\s*[,\]\}])")
"""Integers of 19 digits or more (128-bit trace ids), which the streaming parser refuses."""


def _scan_head(found: Probe, head: bytes) -> None:
    import ijson

    head = _BIG_INT.sub(b"0", head)
    try:
        for prefix, event, value in ijson.parse(io.BytesIO(head), use_float=True):
            if found.top is None:
                found.top = "map" if event == "start_map" else "array"
            if _depth(prefix) > 3:
                continue
            if event == "map_key":
                found.keys.setdefault(prefix, set()).add(value)
            elif event in ("string", "number", "boolean", "null"):
                found.values.setdefault(prefix, value)
    except (ijson.JSONError, ValueError, RecursionError) as error:
        # The head ends mid-document, or the file is cut off or broken (bad UTF-8, a lone
        # surrogate, nesting too deep): what was seen before is enough to detect it, and its
        # reader names the damage. Nothing seen: not JSON.
        if not found.keys:
            found.text_error = f"not valid JSON: {parse_error(error)}"
            found.kind = "text"


def stream_keys(path: Path, until: str, limit: int = SCAN_BYTES) -> dict[str, set[str]]:
    """The keys of a JSON document's top map and of the maps right under it, streamed from its
    start as far as the top-level key `until` (or `limit` bytes, or the damage): for a format
    told by a key that a big first field (a patch in `info.submission`) pushes past the head.
    A sniffer calls it only for files whose head looks like that format's, so detection stays
    cheap for a folder of other files."""
    import ijson

    keys: dict[str, set[str]] = {}
    events = ijson.sendable_list()
    parser = ijson.parse_coro(events)
    read = 0
    with open_json(path) as handle:
        try:
            while read < limit:
                chunk = handle.read(min(SCAN_CHUNK, limit - read))
                if not chunk:
                    break
                read += len(chunk)
                parser.send(chunk)
                for prefix, event, value in events:
                    if event == "map_key" and _depth(prefix) <= 1:
                        keys.setdefault(prefix, set()).add(value)
                        if prefix == "" and value == until:
                            return keys
                del events[:]
        except (ijson.JSONError, ValueError, RecursionError):
            pass  # damaged or cut off: what was seen before stands; its reader names the damage
    return keys


# --- reading ------------------------------------------------------------------------------


def load_json(path: Path) -> Any:
    """One whole JSON file (a single trajectory); errors name the file and the byte."""
    try:
        data = read_input(path)
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", path=path) from None
    try:
        return loads(data.removeprefix(BOM))
    except orjson.JSONDecodeError as error:
        raise InputError(
            f"not valid JSON ({error.msg}); the file may be cut off",
            path=path,
            line=error.lineno,
            hint=f"column {error.colno}",
        ) from None


def json_items(path: Path, prefix: str) -> Iterator[tuple[int, Any] | InputError]:
    """Each item of the JSON array at `prefix` ('item' for a top-level array), streamed.

    A file cut off or broken part-way yields the items before the damage, then one error that
    says after which item it is.
    """
    import ijson

    count = 0
    with open_json(path) as handle:
        try:
            for value in ijson.items(handle, prefix, use_float=True):
                yield count, value
                count += 1
        except (ijson.JSONError, ValueError, RecursionError) as error:
            where = f"{_array_name(prefix)}[{count}]"
            yield InputError(
                f"JSON is cut off or broken in this item ({parse_error(error)}); the {count} "
                "items before it were read",
                path=path,
                at=where,
            )


def json_value(path: Path, prefix: str) -> Any:
    """The first value at `prefix`, streamed (a header beside a big list); None if absent."""
    import ijson

    with open_json(path) as handle:
        try:
            for value in ijson.items(handle, prefix, use_float=True):
                return value
        except (ijson.JSONError, ValueError, RecursionError):
            return None
    return None


_NON_FINITE = re.compile(rb"\b(?:NaN|-?Infinity)\b")


def loads(data: bytes) -> Any:
    """orjson.loads, and for JSON that Python's json module wrote with NaN or Infinity in it
    (its default), the standard library's reader, which takes them as floats."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if not _NON_FINITE.search(data):
            raise
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise error from None


def parse_error(error: Exception) -> str:
    """A JSON parser's complaint without the input it quotes (yajl copies the bytes around the
    damage, which may hold a secret, into its message)."""
    lines = str(error).strip().splitlines()
    return lines[0][:160] if lines else type(error).__name__


def open_json(path: Path) -> io.BufferedReader:
    """`path` opened for reading, past a UTF-8 byte order mark if it starts with one."""
    handle = open_input(path)
    if handle.peek(len(BOM))[: len(BOM)] == BOM:
        handle.read(len(BOM))
    return handle


def _array_name(prefix: str) -> str:
    return prefix.removesuffix(".item").removesuffix("item") or ""


def jsonl_objects(
    path: Path, unit: str = "run"
) -> Iterator[tuple[int, dict[str, Any]] | InputError]:
    """Each object of a JSON Lines file (one `unit` a line) with its line number; one line in
    memory at a time."""
    with open_json(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                value = loads(raw)
            except orjson.JSONDecodeError as error:
                cut = "" if raw.endswith(b"\n") else " (the last line is cut off)"
                yield InputError(f"not valid JSON: {error}{cut}", path=path, line=number)
                continue
            if not isinstance(value, dict):
                yield InputError(
                    f"expected a JSON object (one {unit} a line), got {type(value).__name__}",
                    path=path,
                    line=number,
                )
                continue
            yield number, value


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Each line of a text log without its line ending, numbered from 1 as `grep -n` does (a
    lone carriage return, as progress bars write, does not end a line); streamed."""
    with open_input(path) as handle:
        for number, raw in enumerate(handle, start=1):
            yield number, raw.decode("utf-8", "replace").rstrip("\r\n")


def zip_member(archive: zipfile.ZipFile, name: str, path: Path) -> Any:
    from .zipped import read_member

    try:
        return orjson.loads(read_member(archive, name))
    except (
        orjson.JSONDecodeError,
        zipfile.BadZipFile,
        zlib.error,
        KeyError,
        OSError,
        EOFError,
        NotImplementedError,
        RuntimeError,  # an encrypted member
    ) as error:
        raise InputError(f"cannot read this member: {error}", path=path, at=name) from None


SESSION_NOTE = (
    "the log carries no outcome: label it with --labels (keyed by its session or trace id, "
    "or its file name) or with --judge MODEL"
)
"""Why a session or a trace is unlabelled."""


def file_aliases(path: Path) -> tuple[str, ...]:
    """The keys a labels file may name a one-run file by: its name and its name's stem."""
    return (path.name, path.name.split(".", 1)[0])


def session_run(
    path: Path,
    session: str,
    task: str,
    turns: list[dict[str, Any]],
    metadata: dict[str, Any],
    *,
    project: str | None = None,
) -> Candidate:
    """A coding agent's session (one file, one run): task type `coding`, its project (given,
    or found in its metadata: `project_of`), its kind of work (from the task and the files its
    tool calls changed: corpus_schema/work.py), no outcome of its own, its id the session's,
    and named in a labels file by that id or by the file's name."""
    # A session's alone: not loaded to read a benchmark.
    from .repository import changed_files, folder_of, hook_project, project_of, repo_state

    guess = infer_kind(task, changed_files(turns, folder_of(metadata)))
    return Candidate(
        path=str(path),
        run_id=session,
        note=SESSION_NOTE,
        aliases=file_aliases(path),
        data={
            "task_id": session,
            "task": task,
            "task_type": CODING,
            "project": hook_project(path) or project or project_of(metadata),
            "kind": guess.kind,
            "kind_basis": guess.basis,
            "repo": repo_state(metadata, turns),
            "success": None,
            "turns": turns,
            "metadata": metadata,
        },
    )


def filled(value: Any) -> Any:
    """`value` without its empty lists, maps and strings (IDE chat logs write dozens a
    message: Copilot's chat view, Cursor's bubbles)."""
    if isinstance(value, dict):
        kept = {k: filled(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ("", None, [], {})}
    if isinstance(value, list):
        return [filled(v) for v in value]
    return value


def add_reasoning(turn: dict[str, Any], pending: list[str]) -> None:
    """Move the reasoning logged before a reply (`pending`, emptied) into its turn."""
    if not pending:
        return
    before = turn.get("reasoning")
    joined = "\n\n".join(pending)
    turn["reasoning"] = joined if before is None else f"{before}\n\n{joined}"
    pending.clear()


def rest(record: dict[str, Any], used: set[str] | frozenset[str]) -> dict[str, Any]:
    """The fields of `record` not in `used`, verbatim: what goes into `metadata`."""
    return {key: value for key, value in record.items() if key not in used}


def text(value: Any) -> str | None:
    """A logged value as turn text: strings as they are, anything else as JSON, None as None."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def first_user_text(turns: list[dict[str, Any]]) -> str | None:
    """The content of the first user turn that has any: a run's task when its log names none."""
    for turn in turns:
        if turn.get("role") == "user" and turn.get("content"):
            return str(turn["content"])
    return None


def need(
    record: Any, key: str, path: Path, *, at: str | None = None, line: int | None = None
) -> Any:
    """`record[key]`, or an InputError naming the missing field."""
    if not isinstance(record, dict):
        raise InputError(
            f"expected a JSON object, got {type(record).__name__}", path=path, at=at, line=line
        )
    if key not in record or record[key] is None:
        raise InputError("missing", path=path, at=at, line=line, field=key)
    return record[key]
