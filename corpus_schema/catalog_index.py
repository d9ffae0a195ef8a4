"""The catalog's index (catalog-index.json): where each of catalog.jsonl's lines starts and
which runs and lessons are each project's, so that a reader that needs one project's (a hook's
recall) reads those lines alone, not 40,000 of them.

Written with the catalog when a version is made (`index_of`, from the catalog's bytes); read
by `IndexedCatalog.read`, which answers None, so that the reader takes the whole catalog
(catalog.py), when a version has no index (made before indexes), or one that does not match
its catalog's bytes or is not what wikitrace writes.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .catalog import CATALOG_VERSION, CatalogLines, PastRun, records_of
from .layout import CATALOG, CATALOG_INDEX

INDEX_VERSION = 1


def index_of(catalog: Path) -> bytes:
    """The index of the catalog (version 2) at `catalog`, read a line at a time: its size,
    where each line after the first starts (and where the last ends), its runs' task types,
    whether any lesson is committed, and each project's runs and lessons (those whose source
    run is the project's, as a reader finds a lesson's run: the last run of its step), by
    position."""
    with catalog.open("rb") as lines:
        first = next(lines)
        head = orjson.loads(first)
        if head.get("catalog") != CATALOG_VERSION:
            raise ValueError(f"catalog version {head.get('catalog')!r}: no index is written")
        offsets = [len(first)]
        project_of_step: dict[str, str | None] = {}
        projects: dict[str, tuple[list[int], list[int]]] = {}
        task_types: set[str] = set()
        committed = False
        runs = insights = 0
        for line in lines:
            offsets.append(offsets[-1] + len(line))
            record = next(records_of(head, [line]))
            if isinstance(record, PastRun):
                project_of_step[record.step] = record.project
                if record.task_type:
                    task_types.add(record.task_type)
                if record.project:
                    projects.setdefault(record.project, ([], []))[0].append(runs)
                runs += 1
            else:
                item = record[1]
                committed = committed or item.status == "committed"
                project = project_of_step.get(item.source_step)
                if project:
                    projects[project][1].append(insights)
                insights += 1
    index = {
        "catalog_index": INDEX_VERSION,
        "bytes": offsets[-1],
        "runs": runs,
        "insights": insights,
        "task_types": sorted(task_types),
        "committed": committed,
        "offsets": offsets,
        "projects": {key: [mine, lessons] for key, (mine, lessons) in sorted(projects.items())},
    }
    return orjson.dumps(index) + b"\n"


@dataclass(frozen=True)
class ProjectRows:
    """A project's runs and lessons, by their positions in the catalog's runs and insights."""

    runs: list[int]
    insights: list[int]


def _regular(status: os.stat_result, size: int) -> bool:
    return stat.S_ISREG(status.st_mode) and status.st_size == size


class IndexedCatalog(CatalogLines):
    """A catalog read through its index: each run and insight made from its own line when
    first asked for (a line that is not what wikitrace writes is a CorpusError then), with
    what the index says of them all (the projects' runs and lessons, the task types)."""

    def __init__(self, path: Path, data: bytes | mmap.mmap, index: dict[str, Any]) -> None:
        self._data = data
        offsets: list[int] = index["offsets"]
        self._offsets = offsets
        head = orjson.loads(data[: offsets[0]])
        if head.get("catalog") != CATALOG_VERSION:
            raise ValueError(f"catalog version {head.get('catalog')!r}")
        run_count, insight_count = int(index["runs"]), int(index["insights"])
        if len(offsets) != run_count + insight_count + 1 or offsets[-1] != len(data):
            raise ValueError("its offsets do not match the catalog's lines")
        self.task_types: list[str] = [str(name) for name in index["task_types"]]
        self.committed = bool(index["committed"])
        self.projects = {
            str(key): ProjectRows([int(i) for i in mine], [int(i) for i in lessons])
            for key, (mine, lessons) in index["projects"].items()
        }
        super().__init__(path, head, run_count, insight_count)

    @classmethod
    def read(cls, root: Path) -> IndexedCatalog | None:
        """The catalog of the corpus at `root` through its index; None when there is no index,
        or one that does not match the catalog (the caller then reads the catalog whole)."""
        path = root / CATALOG
        try:
            index = orjson.loads((root / CATALOG_INDEX).read_bytes())
            if not isinstance(index, dict) or index.get("catalog_index") != INDEX_VERSION:
                return None
            # A regular file of the size indexed: never a FIFO (asked before it is opened, which
            # would wait for a writer), nor a catalog written over.
            if not _regular(os.stat(path), index["bytes"]):
                return None
            with path.open("rb") as handle:
                status = os.fstat(handle.fileno())
                if not _regular(status, index["bytes"]):
                    return None
                data: bytes | mmap.mmap = (
                    mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                    if status.st_size
                    else b""
                )
            return cls(path, data, index)
        except (OSError, IndexError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def _line(self, number: int) -> bytes:
        # The index says where each line after the head starts, and where the last ends.
        return bytes(self._data[self._offsets[number - 1] : self._offsets[number]])

    def runs_of(self, keys: Iterable[str]) -> list[int]:
        """The runs of the projects `keys` names, in catalog order."""
        return sorted(i for key in keys if key in self.projects for i in self.projects[key].runs)

    def insights_of(self, keys: Iterable[str]) -> list[int]:
        """The lessons whose source runs are of the projects `keys` names, in catalog order."""
        return sorted(
            i for key in keys if key in self.projects for i in self.projects[key].insights
        )
