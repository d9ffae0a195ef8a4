"""Leave-one-task-out for the harness integrations: the corpus an episode may read.

An episode of a task the corpus has runs of reads a view of it without that task
(`versions.leave_out`, as `wikitrace view` writes it): its runs, their compilations, the lessons
drawn from them and the records naming them are gone, and the indexes, catalog, search indexes
and manifest are written afresh, so no page, index line, search hit or tool answer names them.
Each view is written once per process and set of tasks, into a temporary folder removed at exit;
an episode whose task the corpus does not know reads the corpus itself.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema.history import STORE_SUFFIX
from wikitrace.corpus_schema.writing import remove_tree
from wikitrace.tools.mcp_server import Corpus

_lock = threading.Lock()
_views: dict[tuple[str, tuple[str, ...]], Path] = {}
_scratch: list[Path] = []


@functools.cache
def loaded(path: str) -> Corpus:
    """One loaded corpus per folder and process: every episode shares its memory."""
    return Corpus(Path(path))


def known_tasks(corpus: str | Path, tasks: Sequence[str]) -> list[str]:
    """Those of `tasks` the corpus has runs of (each named by its id, or its source and id:
    TaskKey.named_in), sorted."""
    runs = loaded(str(Path(corpus).resolve())).memory().runs
    return sorted({name for run in runs for name in (run.task_id, run.task_key.name)} & set(tasks))


@functools.cache
def _frozen(root: str) -> Any:
    """The version at `root`, read back once (with its store's seal and rows when it is a
    store's version, so that its files are not all hashed again)."""
    from wikitrace.versions import FrozenVersion, Store

    path = Path(root)
    if path.parent.name.endswith(STORE_SUFFIX):
        pointer = path.parent.with_name(path.parent.name.removesuffix(STORE_SUFFIX))
        seal, rows = Store(pointer).sidecars(path.name)
        return FrozenVersion.load(path.name, path, seal=seal, rows=rows)
    return FrozenVersion.load(path.name, path)


def _folder() -> Path:
    if not _scratch:
        _scratch.append(Path(tempfile.mkdtemp(prefix="wikitrace-views-")))
        atexit.register(remove_tree, _scratch[0])
    return _scratch[0]


def view_for(corpus: str | Path, tasks: Sequence[str]) -> Path:
    """The corpus an episode of `tasks` may read: a view without those of them the corpus
    knows, or the corpus itself (resolved) when it knows none."""
    root = Path(corpus).resolve()
    left_out = known_tasks(root, tasks)
    if not left_out:
        return root
    key = (str(root), tuple(left_out))
    with _lock:  # episodes of one task (epochs, attempts) share its view
        found = _views.get(key)
        if found is None:
            from wikitrace.versions import leave_out

            name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            found = _folder() / f"view-{name}"
            leave_out(_frozen(str(root)), found, left_out, force=False)
            _views[key] = found
    return found


__all__ = ["known_tasks", "loaded", "view_for"]
