"""What mining tested of each task type (`raw/_contrast_tests.json`): the p-value of every
pattern tried, in the order tried, so that a version made from another recounts only the task
types its new runs touch and adjusts their p-values together with the others' as one build of
every run does (compiler/mine_contrast.py, Benjamini-Hochberg); and the digest of the counts
each test was made from, so that a type recounted takes a test's p-value again when its counts
are the same (the exact test is a function of them alone)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from .catalog import damaged, versioned_json

TESTS_VERSION = 2
"""What the file's "tests" says; a file of another version is not read (every type is
counted anew). Version 1 kept no smallest p-value nor counts' digest."""


@dataclass(frozen=True)
class Tried:
    """A pattern tested in a task type's runs."""

    pattern: str
    p_value: float
    tasks: int
    """How many tasks its test compared."""
    smallest_p: float
    """The smallest p-value its tasks' counts allow."""
    strata: str
    """A digest of the counts of the tasks compared, in order (compiler/mine_contrast.py,
    `strata_key`): the test's p-values are those of any test of the same counts."""


@dataclass(frozen=True)
class TypeTests:
    """What mining tested of one task type's runs."""

    runs: int
    """How many runs of the type were counted: a type whose runs are more (or fewer) is
    counted anew."""
    tried: tuple[Tried, ...]
    """Each pattern tried, in the order mining tried them."""
    note: str | None = None
    """Why no pattern was tried, when none was (what the build's report says of the type)."""


@dataclass(frozen=True)
class ContrastTests:
    """The file: the settings the tests were made under, and each task type's tests (None:
    the runs of no task type)."""

    settings: dict[str, float]
    """The thresholds mining tried patterns under: under others, every type is counted
    anew."""
    types: dict[str | None, TypeTests]

    def dumps(self) -> bytes:
        """One JSON object, the types in the order mining counts them, a trailing newline."""
        return (
            orjson.dumps(
                {
                    "tests": TESTS_VERSION,
                    "settings": dict(sorted(self.settings.items())),
                    "types": [
                        {
                            "task_type": task_type,
                            "runs": tests.runs,
                            "note": tests.note,
                            "tried": [
                                [t.pattern, t.p_value, t.tasks, t.smallest_p, t.strata]
                                for t in tests.tried
                            ],
                        }
                        for task_type, tests in sorted(
                            self.types.items(), key=lambda item: item[0] or ""
                        )
                    ],
                }
            )
            + b"\n"
        )


def load_tests(path: Path, settings: Mapping[str, float]) -> ContrastTests | None:
    """The file at `path`; None when there is none, it is of another version or its tests
    were made under other `settings`; CorpusError when it is damaged."""
    data = versioned_json(path, "tests", TESTS_VERSION)
    if data is None:
        return None
    try:
        if data["settings"] != dict(settings):
            return None
        types: dict[str | None, TypeTests] = {}
        for item in data["types"]:
            task_type = item["task_type"]
            if task_type is not None and not isinstance(task_type, str):
                raise ValueError(f"task_type {task_type!r} is not a text")
            note = item["note"]
            if note is not None and not isinstance(note, str):
                raise ValueError(f"the note of {task_type!r} is not a text")
            tried = tuple(
                Tried(str(pattern), float(p_value), int(tasks), float(smallest), str(strata))
                for pattern, p_value, tasks, smallest, strata in item["tried"]
            )
            types[task_type] = TypeTests(runs=int(item["runs"]), tried=tried, note=note)
    except (KeyError, TypeError, ValueError) as error:
        raise damaged(path, error) from None
    return ContrastTests(settings=dict(settings), types=types)
