"""The records of corpus versions: names, the manifest's version entry, history.jsonl lines.

The store itself (the pointer, the versions beside it, building and deploying) is
`wikitrace.versions`; what it writes is defined here, with the rest of the on-disk format:

    mem -> mem.versions/v0001        the pointer: a relative symlink, replaced atomically
    mem.versions/v0001/              a frozen corpus (its manifest names its parent)
    mem.versions/history.jsonl       every version made, deployed or refused, a line each
    mem.versions/.history.jsonl.pending
                                     a build's new history, written whole before its pointer
                                     moves and renamed over history.jsonl after: a kill
                                     between the two leaves it, and the next reader of the
                                     history finishes the rename when the pointer names its
                                     version (versions.store.Store.history)
    mem.versions/runs.jsonl          every agent run the runner made (see wikitrace.control)
    mem.versions/updates/            one record per update decision
    mem.versions/update-state.json   what the update controller remembers between updates
    mem.versions/probes/             probe memories while a gate runs
    mem.versions/.v0001.seal         which files of v0001 are known unchanged since they were
                                     written or hashed (corpus_schema.manifest.read_seal)
    mem.versions/.v0001.rows         v0001's index rows, what a version made from it reads
                                     (corpus_schema.spill.read_version_rows)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import CorpusError

STORE_SUFFIX = ".versions"
HISTORY = "history.jsonl"
PENDING_HISTORY = ".history.jsonl.pending"
RUNS = "runs.jsonl"
UPDATES_DIR = "updates"
UPDATE_STATE = "update-state.json"
MONITOR_STATE = "monitor-state.json"
"""Monitoring's running record: every report counted so far, and each insight's totals."""
PROBES_DIR = "probes"
SEAL_SUFFIX = ".seal"
ROWS_SUFFIX = ".rows"

VERSION_RE = re.compile(r"^v(\d{4,9})$")
_VERSION_ARG_RE = re.compile(r"^v?(\d{1,9})$")

Event = Literal[
    "built",
    "added",
    "candidate",
    "deployed",
    "refused",
    "gated",
    "monitored",
    "retired",
    "superseded",
]
DEPLOYING: frozenset[str] = frozenset(
    {"built", "added", "deployed", "gated", "monitored", "retired", "superseded"}
)
"""Events that moved the pointer to their version."""


class Changes(BaseModel):
    """What a version holds that its parent does not."""

    model_config = ConfigDict(extra="forbid")

    runs: int = 0
    """Runs added."""
    steps: list[str] = Field(default_factory=list)
    """Their step ids."""
    insights: list[str] = Field(default_factory=list)
    """Insight ids added."""
    task_ids: list[str] = Field(default_factory=list)
    """Task ids of the runs added, in step order, each once."""
    duplicates: int = 0
    """Input runs left out because the parent already holds the same run."""
    inputs: list[str] = Field(default_factory=list)
    """What was read, a line per format."""
    changed_insights: list[str] = Field(default_factory=list)
    """Insights whose page changed: a gate or monitoring status, a precondition, a hypothesis."""
    records: list[str] = Field(default_factory=list)
    """Decision records added (gate/gate-NNNN.md and the probe runs behind them)."""
    reason: str = ""
    """Why the version was made, when not by adding runs."""


class VersionInfo(BaseModel):
    """Which version a corpus is, and what it was made from."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """`v0001`, `v0002`, ... in the order they were made."""
    parent: str | None = None
    """The version this one was made from by adding runs; none for a fresh build."""
    changes: Changes = Field(default_factory=Changes)


class HistoryEntry(BaseModel):
    """One line of history.jsonl."""

    model_config = ConfigDict(extra="forbid")

    time: str
    event: Event
    """built (a fresh build), added (made by adding runs, and deployed), candidate (made, not
    deployed), deployed (the pointer moved to an existing version), refused (a candidate the
    update controller kept out), gated (the admission gate's decisions), monitored (insights
    retired by monitoring)."""
    version: str
    previous: str | None = None
    """The current version before this event."""
    reason: str = ""
    update: str | None = None
    """The update record behind the event (updates/update-NNNN.json)."""


def version_name(number: int) -> str:
    return f"v{number:04d}"


def parse_version(text: str) -> int:
    """`v0002`, `v2` or `2` -> 2."""
    match = _VERSION_ARG_RE.match(text.strip())
    if not match:
        raise CorpusError(f"not a version name: {text!r} (expected vNNNN, e.g. v0002)")
    return int(match.group(1))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class VersionRow(BaseModel):
    """What `wikitrace versions` lists about one version."""

    model_config = ConfigDict(extra="forbid")

    name: str
    status: Literal["current", "previous", "candidate", "refused"]
    """current (the pointer names it), previous (was current once), candidate (made, never
    deployed), refused (the update controller kept it out)."""
    parent: str | None
    created: str
    runs: int
    insights: int
    added_runs: int
    added_insights: int
    path: str
