"""What a build keeps of every run, kept on disk rather than on the heap: a corpus of a
million runs is built in the memory of a few thousand."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

import orjson

from .render import RunRow
from .store import spill_file

READ_AHEAD = 512
"""Rows read from the file at once when they are read in order."""


class RunRows(Sequence[RunRow]):
    """The rows of a version's runs, in step order, one JSON line each in an unnamed temporary
    file in `folder` (gone with the process, even when killed). Only the offset of each line
    stays in memory (8 bytes a run). A row read back is a new object: change it, then append
    it to another RunRows."""

    def __init__(self, folder: Path, rows: Iterable[RunRow] = ()) -> None:
        self._file = spill_file(folder, "rows")
        self._ends = array("q", [0])
        self._last_step = 0
        self.extend(rows)

    def __enter__(self) -> RunRows:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def append(self, row: RunRow) -> None:
        if row.step <= self._last_step:
            raise ValueError(f"internal error: row of step {row.step} after {self._last_step}")
        self._last_step = row.step
        line = orjson.dumps(
            [
                row.step,
                row.task_id,
                row.task_type,
                row.outcome,
                row.turns,
                row.task,
                row.judged,
                row.compiled,
                row.title,
                row.unverified_quotes,
                row.insights,
            ]
        )
        self._file.seek(self._ends[-1])
        self._file.write(line + b"\n")
        self._ends.append(self._ends[-1] + len(line) + 1)

    def extend(self, rows: Iterable[RunRow]) -> None:
        for row in rows:
            self.append(row)

    def __len__(self) -> int:
        return len(self._ends) - 1

    @overload
    def __getitem__(self, index: int) -> RunRow: ...

    @overload
    def __getitem__(self, index: slice) -> list[RunRow]: ...

    def __getitem__(self, index: int | slice) -> RunRow | list[RunRow]:
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

    def __iter__(self) -> Iterator[RunRow]:
        return self.iter_from(0)

    def iter_from(self, first: int) -> Iterator[RunRow]:
        """The rows from position `first` on, in order, read a few hundred at a time."""
        for start in range(first, len(self), READ_AHEAD):
            yield from self._read(start, min(start + READ_AHEAD, len(self)))

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

    def _read(self, start: int, stop: int) -> list[RunRow]:
        self._file.flush()
        self._file.seek(self._ends[start])
        data = self._file.read(self._ends[stop] - self._ends[start])
        return [RunRow(*orjson.loads(line)) for line in data.splitlines()]
