"""The catalog's index (catalog-index.json): where each catalog line starts and which runs and
lessons are each project's, so that a reader that needs one project's (a hook's recall) reads
those lines alone, not 40,000 of them.

Written with the catalog when a version is made, from the lines as they are written
(`IndexWriter`, version 2, for a catalog of version 3: a part for each page of runs, which a
version that links its parent's full page takes from the parent's index as it is); read by
`IndexedCatalog.read`, which answers None, so that the reader takes the whole catalog
(catalog.py), when a version has no index (made before indexes), or one that does not match
its catalog's bytes or is not what wikitrace writes. An index of version 1 (one file's
offsets, for a catalog of version 2) is read too.
"""

from __future__ import annotations

import bisect
import mmap
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .catalog import CATALOG_VERSION, CatalogLines, PastRun, by_number, damaged, page_count
from .layout import CATALOG, CATALOG_INDEX, catalog_page_rel

INDEX_VERSION = 2
"""2: a part for each page of a version 3 catalog's runs; 1: the offsets of a version 2
catalog's lines, all in catalog.jsonl (read, no longer written)."""


def page_part(lines: list[bytes], runs: list[PastRun]) -> dict[str, Any]:
    """What the index says of a page of runs (`lines`, each run's line): its size, where each
    line starts (and where the last ends), its first and last step, its runs' task types and
    each project's runs, by their place in the page."""
    offsets = [0]
    projects: dict[str, list[int]] = {}
    for place, (line, run) in enumerate(zip(lines, runs, strict=True)):
        offsets.append(offsets[-1] + len(line))
        if run.project:
            projects.setdefault(run.project, []).append(place)
    return {
        "bytes": offsets[-1],
        "offsets": offsets,
        "first": runs[0].step if runs else None,
        "last": runs[-1].step if runs else None,
        "task_types": sorted({run.task_type for run in runs if run.task_type}),
        "projects": projects,
    }


class IndexWriter:
    """The index of a catalog being written, a page of runs at a time (`page`, or `kept` for
    the parent's page a version links, with the parent's part for it), then its insights'
    lines (`catalog`, which passes catalog.jsonl's lines through); `dumps` once both are done.
    Nothing is read back from the files written. `steps`: every run's step, in the catalog's
    order (a lesson's project is its source run's)."""

    def __init__(self, page_runs: int, steps: Sequence[str]) -> None:
        self.page_runs = page_runs
        self.pages: list[dict[str, Any]] = []
        self._steps = steps
        self._offsets: list[int] = []
        self._insight_projects: dict[str, list[int]] = {}
        self._committed = False
        self._project_at: dict[int, dict[int, str]] = {}
        """Of a page a lesson's source run is in: each of its runs' project, by place."""

    def page(self, lines: list[bytes], runs: list[PastRun]) -> None:
        """A page of runs written: each run's line."""
        self.pages.append(page_part(lines, runs))

    def kept(self, part: dict[str, Any]) -> None:
        """A page of runs taken as the parent wrote it: the parent's index's part for it."""
        self.pages.append(part)

    def catalog(
        self, head: bytes, insights: Iterable[tuple[bytes, str | None, bool]]
    ) -> Iterator[bytes]:
        """catalog.jsonl's lines, passed on as they go: its `head`, then each insight's line,
        with its source run's step and whether it is committed."""
        self._offsets = [len(head)]
        yield head
        for position, (line, step, committed) in enumerate(insights):
            self._offsets.append(self._offsets[-1] + len(line))
            self._committed = self._committed or committed
            project = self._project_of(step) if step is not None else None
            if project:
                self._insight_projects.setdefault(project, []).append(position)
            yield line

    def _project_of(self, step: str) -> str | None:
        """The project of run `step` (None when it has none or is not in the catalog)."""
        steps = self._steps
        # A version's steps count from 1 with no gap: run N is at N - 1 (else found by halves).
        position = by_number(step)[0] - 1
        if not (0 <= position < len(steps) and steps[position] == step):
            position = bisect.bisect_left(steps, by_number(step), key=by_number)
            if position == len(steps) or steps[position] != step:
                return None
        page, place = divmod(position, self.page_runs)
        projects = self._project_at.get(page)
        if projects is None:
            projects = self._project_at[page] = {
                mine: str(key)
                for key, places in self.pages[page]["projects"].items()
                for mine in places
            }
        return projects.get(place)

    def dumps(self) -> Iterator[bytes]:
        """The index, once the catalog's files are written."""
        projects: dict[str, list[list[int]]] = {}
        task_types: set[str] = set()
        start = 0
        for part in self.pages:
            task_types.update(part["task_types"])
            for key, mine in part["projects"].items():
                projects.setdefault(key, [[], []])[0].extend(start + place for place in mine)
            start += len(part["offsets"]) - 1
        for key, lessons in self._insight_projects.items():
            projects.setdefault(key, [[], []])[1].extend(lessons)
        index = {
            "catalog_index": INDEX_VERSION,
            "page_runs": self.page_runs,
            "bytes": self._offsets[-1],
            "runs": start,
            "insights": len(self._offsets) - 1,
            "task_types": sorted(task_types),
            "committed": self._committed,
            "offsets": self._offsets,
            "projects": dict(sorted(projects.items())),
            "pages": self.pages,
        }
        yield orjson.dumps(index) + b"\n"


@dataclass(frozen=True)
class ProjectRows:
    """A project's runs and lessons, by their positions in the catalog's runs and insights."""

    runs: list[int]
    insights: list[int]


def _regular(status: os.stat_result, size: int) -> bool:
    return stat.S_ISREG(status.st_mode) and status.st_size == size


def _mapped(path: Path, size: int) -> bytes | mmap.mmap:
    """The bytes of the regular file at `path`, mapped, when it is `size` bytes long:
    never a FIFO (asked before it is opened, which would wait for a writer), nor a file
    written over. ValueError otherwise."""
    if not _regular(os.stat(path), size):
        raise ValueError(f"{path.name} is not the file indexed")
    with path.open("rb") as handle:
        status = os.fstat(handle.fileno())
        if not _regular(status, size):
            raise ValueError(f"{path.name} is not the file indexed")
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""


class IndexedCatalog(CatalogLines):
    """A catalog read through its index: each run and insight made from its own line when
    first asked for (a line that is not what wikitrace writes is a CorpusError then), with
    what the index says of them all (the projects' runs and lessons, the task types). A page
    of runs is opened when one of its runs is first asked for."""

    def __init__(self, root: Path, data: bytes | mmap.mmap, index: dict[str, Any]) -> None:
        path = root / CATALOG
        self._root = root
        self._data = data
        offsets: list[int] = index["offsets"]
        self._offsets = offsets
        head = orjson.loads(data[: offsets[0]])
        run_count, insight_count = int(index["runs"]), int(index["insights"])
        self._paged = index["catalog_index"] == INDEX_VERSION
        if self._paged:
            if head.get("catalog") != CATALOG_VERSION or head["runs"] != run_count:
                raise ValueError(f"catalog version {head.get('catalog')!r}")
            self._pages: list[dict[str, Any]] = index["pages"]
            self._page_runs = int(head["page_runs"])
            self._mapped: dict[int, bytes | mmap.mmap] = {}
            if (
                len(self._pages) != page_count(head)
                or sum(len(part["offsets"]) - 1 for part in self._pages) != run_count
            ):
                raise ValueError("its pages do not match the catalog's")
            lines = insight_count + 1
        else:
            if head.get("catalog") != 2:
                raise ValueError(f"catalog version {head.get('catalog')!r}")
            lines = run_count + insight_count + 1
        if len(offsets) != lines or offsets[-1] != len(data):
            raise ValueError("its offsets do not match the catalog's lines")
        self._run_count = run_count
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
        try:
            index = orjson.loads((root / CATALOG_INDEX).read_bytes())
            if not isinstance(index, dict) or index.get("catalog_index") not in (1, INDEX_VERSION):
                return None
            return cls(root, _mapped(root / CATALOG, index["bytes"]), index)
        except (OSError, IndexError, KeyError, TypeError, ValueError, AttributeError):
            return None

    def _line(self, number: int) -> bytes:
        # The index says where each line after the head starts, and where the last ends; of a
        # paged catalog, the runs' lines are in their pages, the insights' in catalog.jsonl.
        if not self._paged:
            return bytes(self._data[self._offsets[number - 1] : self._offsets[number]])
        if number > self._run_count:
            number -= self._run_count
            return bytes(self._data[self._offsets[number - 1] : self._offsets[number]])
        page, place = divmod(number - 1, self._page_runs)
        data = self._mapped.get(page)
        part = self._pages[page]
        if data is None:
            rel = catalog_page_rel(page + 1)
            try:
                data = self._mapped[page] = _mapped(self._root / rel, int(part["bytes"]))
            except (OSError, ValueError) as error:
                raise damaged(self._root / rel, error) from None
        offsets = part["offsets"]
        return bytes(data[offsets[place] : offsets[place + 1]])

    def runs_of(self, keys: Iterable[str]) -> list[int]:
        """The runs of the projects `keys` names, in catalog order."""
        return sorted(i for key in keys if key in self.projects for i in self.projects[key].runs)

    def insights_of(self, keys: Iterable[str]) -> list[int]:
        """The lessons whose source runs are of the projects `keys` names, in catalog order."""
        return sorted(
            i for key in keys if key in self.projects for i in self.projects[key].insights
        )
