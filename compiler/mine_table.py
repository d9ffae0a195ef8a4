"""What mining keeps of the runs of a build (compiler/mine.py): each run's patterns, in a
table of arrays that is also `raw/_patterns.jsonl`, and its actions as hashes of their
signatures, spilled beside the staging folder for the divergences."""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import orjson

from wikitrace.corpus_schema.layout import (
    MINED_PATTERNS_PAGE_RUNS,
    mined_patterns_files,
    mined_patterns_page,
)
from wikitrace.corpus_schema.tasks import TaskKey, task_key
from wikitrace.corpus_schema.writing import spill_file

from .mine_patterns import Action, action_places

# --- runs seen by the miner -----------------------------------------------------------------


def _interned(text: Any) -> Any:
    return sys.intern(text) if isinstance(text, str) else text


@dataclass(slots=True)
class RunPatterns:
    """What mining keeps of one run."""

    step: int
    task_id: str
    task_type: str | None
    success: bool
    judged: bool
    patterns: dict[str, int]
    origin: str | None = None
    """Its task's source (RunRecord.origin), if known."""

    @property
    def task(self) -> TaskKey:
        """Its task (source and id): the runs of a divergence are of one."""
        return task_key(self.origin, self.task_id)

    def as_json(self) -> bytes:
        data = {
            "step": self.step,
            "task_id": self.task_id,
            "task_type": self.task_type,
            "success": self.success,
            "judged": self.judged,
            "patterns": self.patterns,
        }
        if self.origin is not None:  # a run of no known source keeps the line it had
            data["origin"] = self.origin
        return orjson.dumps(data)

    @classmethod
    def from_json(cls, line: bytes) -> RunPatterns:
        data = orjson.loads(line)
        return cls(
            step=int(data["step"]),
            task_id=str(data["task_id"]),
            task_type=_interned(data.get("task_type")),
            success=bool(data["success"]),
            judged=bool(data.get("judged")),
            patterns={sys.intern(str(k)): int(v) for k, v in data["patterns"].items()},
            origin=_interned(data.get("origin")),
        )


def task_of(run: RunPatterns) -> TaskKey:
    """Which task a run belongs to, as mining compares runs within a task (the strata of a
    contrast, the pairs of a divergence): the one place that says it. A task is its source and
    its id (τ-bench's task 3 and τ²-bench's are two tasks)."""
    return run.task


class PatternTable(Sequence[RunPatterns]):
    """Every run's patterns, as a build keeps them until its lessons are mined: in arrays,
    the pattern names numbered once (about 40 bytes a run and 12 a pattern, where a
    RunPatterns and its dict take about 400). Each run read back is a new RunPatterns, its
    patterns in the order they were found."""

    def __init__(self, runs: Iterable[RunPatterns] = ()) -> None:
        self._names: list[str] = []
        self._numbers: dict[str, int] = {}
        self._steps = array("q")
        self._task_ids: list[str] = []
        self._task_types: list[str | None] = []
        self._origins: list[str | None] = []
        self._flags = bytearray()  # success, and judged times 2
        self._patterns = array("i")  # a name's number
        self._turns = array("q")
        self._ends = array("q")
        for run in runs:
            self.append(run)

    def append(self, run: RunPatterns) -> None:
        self._steps.append(run.step)
        self._task_ids.append(sys.intern(run.task_id))
        self._task_types.append(run.task_type)
        self._origins.append(_interned(run.origin))
        self._flags.append(run.success | run.judged << 1)
        self._add_patterns(run.patterns)

    def append_json(self, line: bytes) -> None:
        """A run as `RunPatterns.as_json` wrote it (read as `RunPatterns.from_json` reads it,
        without making one)."""
        data = orjson.loads(line)
        self._steps.append(int(data["step"]))
        self._task_ids.append(sys.intern(str(data["task_id"])))
        self._task_types.append(_interned(data.get("task_type")))
        self._origins.append(_interned(data.get("origin")))
        self._flags.append(bool(data["success"]) | bool(data.get("judged")) << 1)
        self._add_patterns(data["patterns"])

    def _add_patterns(self, patterns: dict[str, Any]) -> None:
        """A run's patterns and the turn of each, its names numbered once for the table."""
        for name, turn in patterns.items():
            number = self._numbers.get(name)
            if number is None:
                number = self._numbers[name] = len(self._names)
                self._names.append(sys.intern(str(name)))
            self._patterns.append(number)
            self._turns.append(int(turn))
        self._ends.append(len(self._patterns))

    def __len__(self) -> int:
        return len(self._steps)

    @overload
    def __getitem__(self, index: int) -> RunPatterns: ...
    @overload
    def __getitem__(self, index: slice) -> list[RunPatterns]: ...
    def __getitem__(self, index: int | slice) -> RunPatterns | list[RunPatterns]:
        if isinstance(index, slice):
            return [self._run(i) for i in range(len(self))[index]]
        return self._run(range(len(self))[index])  # IndexError past either end

    def __iter__(self) -> Iterator[RunPatterns]:
        return (self._run(i) for i in range(len(self)))

    def task_types(self) -> Counter[str | None]:
        """How many runs of each task type the table holds (no run read back)."""
        return Counter(self._task_types)

    def of_type(self, task_type: str | None) -> list[RunPatterns]:
        """The runs of `task_type`, in the table's order."""
        return [self._run(i) for i, held in enumerate(self._task_types) if held == task_type]

    def type_runs(self, task_type: str | None) -> TypeRuns:
        """The runs of `task_type` as mining counts them (`TypeRuns`): no run read back
        until one is asked for."""
        return TypeRuns(self, [i for i, held in enumerate(self._task_types) if held == task_type])

    def columns(self, indexes: Sequence[int]) -> Columns:
        """`Columns` of the runs at `indexes` (ascending), from the table's arrays."""
        import numpy as np

        chosen = np.asarray(indexes, dtype=np.int64)
        ends = np.frombuffer(self._ends, dtype=np.int64)
        starts = np.concatenate(([0], ends[:-1]))[chosen] if len(ends) else ends
        lengths = ends[chosen] - starts if len(ends) else ends
        # Each chosen run's entries, in order: its start repeated, plus 0, 1, ... within it.
        entry_runs = np.repeat(np.arange(len(chosen), dtype=np.intc), lengths)
        offsets = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(
            np.cumsum(lengths) - lengths, lengths
        )
        entries = np.repeat(starts, lengths) + offsets
        flags = np.frombuffer(bytes(self._flags), dtype=np.uint8)[chosen]
        # Tasks numbered as first met; keyed as `task_key` is (source or None, id), in tuples.
        numbers: dict[tuple[str | None, str], int] = {}
        origins, task_ids = self._origins, self._task_ids
        codes = [
            numbers.setdefault((origins[i] or None, task_ids[i]), len(numbers)) for i in indexes
        ]
        return Columns(
            names=self._names,
            failed=(flags & 1) == 0,
            task_codes=np.asarray(codes, dtype=np.intp),
            entry_runs=entry_runs,
            entry_names=np.frombuffer(self._patterns, dtype=np.intc)[entries],
            entry_turns=np.frombuffer(self._turns, dtype=np.int64)[entries],
        )

    def of_tasks(self, tasks: AbstractSet[TaskKey]) -> list[RunPatterns]:
        """The runs of `tasks`, in the table's order."""
        wanted = {(task.origin, task.id) for task in tasks}  # as `task_key` makes them
        return [
            self._run(i)
            for i, (origin, task_id) in enumerate(zip(self._origins, self._task_ids, strict=True))
            if (origin or None, task_id) in wanted
        ]

    def _run(self, i: int) -> RunPatterns:
        start, end = self._ends[i - 1] if i else 0, self._ends[i]
        names = self._names
        return RunPatterns(
            step=self._steps[i],
            task_id=self._task_ids[i],
            task_type=self._task_types[i],
            success=bool(self._flags[i] & 1),
            judged=bool(self._flags[i] & 2),
            patterns={
                names[number]: turn
                for number, turn in zip(
                    self._patterns[start:end], self._turns[start:end], strict=True
                )
            },
            origin=self._origins[i],
        )


class TypeRuns(Sequence[RunPatterns]):
    """A task type's runs in a `PatternTable`, in its order: counted from the table's arrays
    (`columns`), each run read back (a new RunPatterns) only when asked for, as the runs of a
    contrast kept are."""

    def __init__(self, table: PatternTable, indexes: list[int]) -> None:
        self._table = table
        self._indexes = indexes
        self._runs: list[RunPatterns] | None = None

    def columns(self) -> Columns:
        return self._table.columns(self._indexes)

    def _read(self) -> list[RunPatterns]:
        if self._runs is None:
            self._runs = [self._table[i] for i in self._indexes]
        return self._runs

    def __len__(self) -> int:
        return len(self._indexes)

    @overload
    def __getitem__(self, index: int) -> RunPatterns: ...
    @overload
    def __getitem__(self, index: slice) -> list[RunPatterns]: ...
    def __getitem__(self, index: int | slice) -> RunPatterns | list[RunPatterns]:
        return self._read()[index]

    def __iter__(self) -> Iterator[RunPatterns]:
        return iter(self._read())


@dataclass
class Columns:
    """Runs as mining counts them, in numpy arrays: each run's outcome and task, and each
    (run, pattern, turn) it shows, by run and then in the order the run's patterns were
    found."""

    names: Sequence[str]
    """The patterns' names, by number."""
    failed: Any
    """Whether each run failed (bool)."""
    task_codes: Any
    """Each run's task, numbered as first met (intp)."""
    entry_runs: Any
    """The run (its index) of each entry (intc), ascending."""
    entry_names: Any
    """The number of each entry's pattern (intc)."""
    entry_turns: Any
    """The turn that shows it (int64)."""


def columns_of(runs: Sequence[RunPatterns]) -> Columns:
    """`Columns` of `runs`: a `TypeRuns`'s from its table's arrays, others' from each run."""
    if isinstance(runs, TypeRuns):
        return runs.columns()
    table = PatternTable(runs)
    return table.columns(range(len(table)))


def read_patterns(root: Path, files: Iterable[str]) -> PatternTable:
    """The mined patterns of the version at `root` whose files are `files` (its pages, or the
    one file of versions before them; empty when it has none: built before mining)."""
    table = PatternTable()
    for rel in mined_patterns_files(files):
        with (root / rel).open("rb") as lines:
            for line in lines:
                if line.strip():
                    table.append_json(line)
    return table


def patterns_file(runs: Iterable[RunPatterns]) -> Iterator[bytes]:
    """Mined patterns' lines, a line at a time."""
    for run in runs:
        yield run.as_json() + b"\n"


def patterns_pages(table: PatternTable, kept: int = 0) -> Iterator[tuple[str, Iterator[bytes]]]:
    """Each page of the table's mined patterns after its first `kept` (full pages a parent
    holds as they are), and its lines."""
    size = MINED_PATTERNS_PAGE_RUNS
    for number in range(kept + 1, -(-len(table) // size) + 1):
        runs = range((number - 1) * size, min(number * size, len(table)))
        yield mined_patterns_page(number), patterns_file(table[i] for i in runs)


def action_hashes(actions: Sequence[Action]) -> array[int]:
    """Each action's signature as a hash: two runs' actions are compared by these."""
    return signature_hashes([action.signature for action in actions])


def signature_hashes(signatures: Sequence[str]) -> array[int]:
    """`action_hashes` of actions with these signatures. Python's hash of a text differs
    from one process to the next: every run's are taken in the build's own process."""
    return array("q", (hash(signature) for signature in signatures))


class ActionHashes:
    """The actions of each run that streamed past, as hashes of their signatures (8 bytes an
    action) and their places (`mine_patterns.action_places`, 4 bytes), in an unnamed file
    beside the staging folder: a divergence compares the runs of a task without reading
    their logs back and checking every turn again, and its page reads only the turns of the
    actions it names. Runs come in step order; a run not held (a parent's) is None."""

    def __init__(self, folder: Path) -> None:
        self._file = spill_file(folder, "actions")
        self._first = 0
        self._ends = array("q")  # where each run's hashes and places end in the file
        self._size = 0

    def add(self, step: int, actions: Sequence[Action]) -> None:
        self.add_hashes(step, action_hashes(actions), action_places(actions))

    def add_hashes(self, step: int, hashes: array[int], places: array[int]) -> None:
        """The next run's actions, as `action_hashes` and `action_places` give them."""
        if not self._ends:
            self._first = step
        elif step != self._first + len(self._ends):
            last = self._first + len(self._ends) - 1
            raise ValueError(f"internal error: run {step} observed after run {last}")
        if len(places) != len(hashes) or places.itemsize != _PLACE_SIZE:
            raise ValueError(f"internal error: run {step}'s actions' places do not fit")
        data = hashes.tobytes() + places.tobytes()
        self._file.seek(self._size)
        self._file.write(data)
        self._size += len(data)
        self._ends.append(self._size)

    def get(self, step: int) -> array[int] | None:
        """A run's actions' hashes."""
        held = self._read(step)
        return None if held is None else array("q", held[: len(held) // _ACTION_SIZE * 8])

    def places(self, step: int) -> array[int] | None:
        """A run's actions' places (`mine_patterns.action_places`)."""
        held = self._read(step)
        return None if held is None else array("i", held[len(held) // _ACTION_SIZE * 8 :])

    def _read(self, step: int) -> bytes | None:
        index = step - self._first
        if not self._ends or not 0 <= index < len(self._ends):
            return None
        start = self._ends[index - 1] if index else 0
        self._file.seek(start)
        return self._file.read(self._ends[index] - start)

    def close(self) -> None:
        self._file.close()


_PLACE_SIZE = array("i").itemsize
_ACTION_SIZE = 8 + _PLACE_SIZE
"""Bytes an action takes in `ActionHashes`' file: its hash and its place."""
