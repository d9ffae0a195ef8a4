"""What a build keeps of every run, kept on disk rather than on the heap: a corpus of a
million runs is built in the memory of a few thousand."""

from __future__ import annotations

import dataclasses
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar, overload

import orjson

from .indexes import InsightRow, RunRow
from .writing import atomic_write, spill_file, stat_key

READ_AHEAD = 512
"""Rows read from the file at once when they are read in order."""

COPY_BLOCK = 1 << 20
"""Bytes copied at once when lines are copied as they are."""


T = TypeVar("T")


class _Spilled(Sequence[T]):
    """Rows kept one JSON line each in an unnamed temporary file in `folder` (gone with the
    process, even when killed). Only the offset of each line stays in memory (8 bytes a row).
    A row read back is a new object."""

    def __init__(self, folder: Path, name: str) -> None:
        self._file = spill_file(folder, name)
        self._ends = array("q", [0])
        self._at_end = True
        """Whether the file is where the next line goes: a seek flushes what is buffered, so
        appends one after another are not made a write each."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def _values(self, row: T) -> Any:
        """What is written of `row` (orjson dumps it)."""
        raise NotImplementedError

    def _row(self, values: Any) -> T:
        """A row from what orjson read back of its line."""
        raise NotImplementedError

    def append(self, row: T) -> None:
        line = orjson.dumps(self._values(row))
        if not self._at_end:
            self._file.seek(self._ends[-1])
            self._at_end = True
        self._file.write(line + b"\n")
        self._ends.append(self._ends[-1] + len(line) + 1)

    def extend(self, rows: Iterable[T]) -> None:
        for row in rows:
            self.append(row)

    def __len__(self) -> int:
        return len(self._ends) - 1

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            start, stop, stride = index.indices(len(self))
            if stride != 1:
                return [self[i] for i in range(start, stop, stride)]
            return self._read(start, stop) if start < stop else []
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._read(index, index + 1)[0]

    def __iter__(self) -> Iterator[T]:
        return self.iter_from(0)

    def iter_from(self, first: int) -> Iterator[T]:
        """The rows from position `first` on, in order, read a few hundred at a time."""
        for start in range(first, len(self), READ_AHEAD):
            yield from self._read(start, min(start + READ_AHEAD, len(self)))

    def chunks(self) -> Iterator[bytes]:
        """Every line as written, in blocks (read where they are: the file's place, where the
        next line is appended, does not move)."""
        self._file.flush()
        done, end = 0, self._ends[-1]
        while done < end:
            block = os.pread(self._file.fileno(), min(end - done, COPY_BLOCK), done)
            if not block:
                raise OSError(f"rows kept on disk ended {end - done} bytes early")
            done += len(block)
            yield block

    def _copy_lines(self, source: Path, key: int, ends: array[int]) -> bool:
        """Append the lines of the file `source` that end at `ends` (offsets in it; the first
        is where the first line starts), as bytes: lines in this file's own format. False,
        and nothing appended, when `source` is no longer the file whose `stat_key` was
        `key`."""
        if len(ends) < 2:
            return True
        try:
            with open(source, "rb") as handle:
                if stat_key(os.fstat(handle.fileno())) != key:
                    return False
                handle.seek(ends[0])
                self._file.seek(self._ends[-1])
                left = ends[-1] - ends[0]
                while left > 0:
                    block = handle.read(min(left, COPY_BLOCK))
                    if not block:
                        return False
                    self._file.write(block)
                    left -= len(block)
        except OSError:
            return False
        shift = self._ends[-1] - ends[0]
        self._ends.extend(end + shift for end in ends[1:])
        return True

    def _read(self, start: int, stop: int) -> list[T]:
        self._file.flush()
        self._at_end = False
        self._file.seek(self._ends[start])
        data = self._file.read(self._ends[stop] - self._ends[start])
        return [self._row(orjson.loads(line)) for line in data.splitlines()]


class JsonLines(_Spilled[Any]):
    """Values kept one JSON line each, as orjson writes them (a dataclass as a dict), and
    read back as it reads them; `name` names the file while it is open."""

    def _values(self, row: Any) -> Any:
        return row

    def _row(self, values: Any) -> Any:
        return values


_RUN_FIELDS = [field.name for field in dataclasses.fields(RunRow)]
_RUN = "run"
"""What begins a run's row on its line (`write_version_rows`)."""
_INSIGHT_FIELDS = [field.name for field in dataclasses.fields(InsightRow)]


class RunRows(_Spilled[RunRow]):
    """The rows of a version's runs, in step order: change a row read back, then append it to
    another RunRows. Each is the line the rows kept beside a version hold for it
    (`write_version_rows`), so that those lines are copied as bytes, both ways: a version's
    kept rows into the rows of one made from it (`copied`), and these into its kept rows."""

    def __init__(self, folder: Path, rows: Iterable[RunRow] = ()) -> None:
        super().__init__(folder, "rows")
        self._last_step = 0
        self.extend(rows)

    @classmethod
    def copied(cls, folder: Path, kept: KeptRuns) -> RunRows | None:
        """The rows of `kept` (a version's kept rows, as read), copied as bytes from its
        file; None when the file is no longer the one read."""
        rows = cls(folder)
        if not rows._copy_lines(kept.path, kept.key, kept.ends):
            rows.close()
            return None
        rows._last_step = kept.last_step
        return rows

    def append(self, row: RunRow) -> None:
        if row.step <= self._last_step:
            raise ValueError(f"internal error: row of step {row.step} after {self._last_step}")
        self._last_step = row.step
        super().append(row)

    def _values(self, row: RunRow) -> list[Any]:
        return [_RUN, *(getattr(row, name) for name in _RUN_FIELDS)]

    def _row(self, values: Any) -> RunRow:
        return RunRow(*values[1:])

    def by_step(self, step: int) -> RunRow:
        """The row of run `step` (steps count from 1 with no gap in a version; a search
        otherwise)."""
        if 0 < step <= len(self):
            row = self[step - 1]
            if row.step == step:
                return row
        low, high = 0, len(self)
        while low < high:
            middle = (low + high) // 2
            row = self[middle]
            if row.step == step:
                return row
            low, high = (middle + 1, high) if row.step < step else (low, middle)
        raise KeyError(step)


class InsightRows(_Spilled[InsightRow]):
    """The index rows of a version's insights, in number order. A row replaced (a parent's
    mined lesson, recounted) is kept in memory: there are few."""

    def __init__(self, folder: Path, rows: Iterable[InsightRow] = ()) -> None:
        super().__init__(folder, "insight-rows")
        self._replaced: dict[int, InsightRow] = {}
        self.extend(rows)

    def __setitem__(self, index: int, row: InsightRow) -> None:
        if not 0 <= index < len(self):
            raise IndexError(index)
        self._replaced[index] = row

    def _values(self, row: InsightRow) -> list[Any]:
        return [getattr(row, name) for name in _INSIGHT_FIELDS]

    def _row(self, values: Any) -> InsightRow:
        return InsightRow(*values)

    def _read(self, start: int, stop: int) -> list[InsightRow]:
        rows = super()._read(start, stop)
        for index in range(start, stop) if self._replaced else ():
            if index in self._replaced:
                rows[index - start] = dataclasses.replace(self._replaced[index])
        return rows


# --- a version's rows, kept beside it in its store ------------------------------------------
#
# What a version made from another needs of it (its runs' and insights' index rows) is written
# when it is made, so that `add`, the gate and `update` read one file instead of every page's
# header. It sits in the store (`history.ROWS_SUFFIX`), never in the corpus, and names the
# manifest it was made with (its `store.stat_key`): a version copied elsewhere, or one from
# before this file, is read from its pages instead.

ROWS_FORMAT = 1


def _rows_head(bound: int) -> dict[str, Any]:
    return {
        "rows": ROWS_FORMAT,
        "manifest": bound,
        "run": _RUN_FIELDS,
        "insight": _INSIGHT_FIELDS,
    }


def write_version_rows(
    path: Path, bound: int, runs: Iterable[RunRow], insights: Iterable[InsightRow]
) -> None:
    """Keep a version's rows at `path`; `bound` is its manifest's `stat_key`. Rows `runs`
    kept on disk (`RunRows`) are copied as the lines they are."""

    def chunks() -> Iterator[bytes]:
        pending = [orjson.dumps(_rows_head(bound)), b"\n"]
        if isinstance(runs, RunRows):
            yield b"".join(pending)
            yield from runs.chunks()
            pending = []
        for kind, rows, names in (
            (_RUN, () if isinstance(runs, RunRows) else runs, _RUN_FIELDS),
            ("insight", insights, _INSIGHT_FIELDS),
        ):
            for row in rows:
                pending.append(orjson.dumps([kind, *(getattr(row, name) for name in names)]))
                pending.append(b"\n")
                if len(pending) >= 8192:
                    yield b"".join(pending)
                    pending = []
        yield b"".join(pending)

    atomic_write(path, chunks())


@dataclasses.dataclass(frozen=True)
class KeptRuns:
    """Where the run rows a version's kept rows hold are in their file (`read_version_rows`),
    to be copied as bytes (`RunRows.copied`)."""

    path: Path
    key: int
    """The file's `stat_key` as it was read."""
    ends: array[int]
    """Where the first run's line starts, then where each ends."""
    last_step: int


def read_version_rows(
    path: Path, bound: int
) -> tuple[list[RunRow], list[InsightRow], KeptRuns] | None:
    """The rows `write_version_rows` kept at `path` for the manifest whose key is `bound`, and
    where its runs' are; None when there are none, they were kept for another manifest, or
    cannot be read."""
    runs: list[RunRow] = []
    insights: list[InsightRow] = []
    try:
        with open(path, "rb") as handle:
            key = stat_key(os.fstat(handle.fileno()))
            head = handle.readline()
            if orjson.loads(head) != _rows_head(bound):
                return None
            ends = array("q", [len(head)])
            for line in handle:
                kind, *values = orjson.loads(line)
                if kind == _RUN and not insights:
                    runs.append(RunRow(*values))
                    ends.append(ends[-1] + len(line))
                elif kind == "insight":
                    insights.append(InsightRow(*values))
                else:
                    return None
    except (OSError, ValueError, TypeError):
        return None
    return runs, insights, KeptRuns(path, key, ends, runs[-1].step if runs else 0)
