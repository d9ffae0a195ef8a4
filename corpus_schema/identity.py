"""A run's identity, as versions compare runs: its turn log as the corpus holds it, hashed with
the algorithm the manifest records, with its task, outcome and given attempt. Imports nothing
else of wikitrace, so `wikitrace convert` can drop a run the input holds twice without loading
the corpus writer."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

HASH_ALGORITHM = "sha256"


def tagged(hashed: hashlib._Hash) -> str:
    """The algorithm-tagged hash the manifest records: `sha256:<hex>`."""
    return f"{HASH_ALGORITHM}:{hashed.hexdigest()}"


def digest(data: bytes) -> str:
    """The hash the manifest records for a file's bytes."""
    return tagged(hashlib.sha256(data))


def turn_log(turns: Iterable[Mapping[str, Any]]) -> tuple[bytes, list[int]]:
    """solver.full.jsonl (one JSON object per turn, exactly as logged; line N is turn N) and
    the byte offset where each line starts, plus the end."""
    lines = [orjson.dumps(turn) + b"\n" for turn in turns]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return b"".join(lines), offsets


def given_attempt(metadata: dict[str, Any]) -> str:
    """The attempt number a run's log gives, as its identity counts it ("" when none)."""
    given = metadata.get("attempt")
    return str(given) if isinstance(given, int) and not isinstance(given, bool) else ""


def fingerprint(task_id: str, outcome: str, turn_log_digest: str, attempt: str) -> str:
    """A run's identity across versions: its task, outcome, the attempt number its log gives
    (`given_attempt`: two trials of a deterministic agent can log the very same turns), and
    its turns exactly as the corpus holds them."""
    return f"{task_id}\0{outcome}\0{attempt}\0{turn_log_digest}"
