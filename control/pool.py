"""The user's task pool: the tasks a runner can run, with their text and type when known."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.tasks import TaskKey, task_key


@dataclass(frozen=True)
class PoolTask:
    task_id: str
    task: str = ""
    """The task's text (for BM25), empty when the pool gives ids only."""
    task_type: str | None = None
    origin: str | None = None
    """The task's source; None when known by its id alone."""

    @property
    def key(self) -> TaskKey:
        """The task: its source and id (two sources' task 3 are two tasks)."""
        return task_key(self.origin, self.task_id)


def read_pool(path: Path) -> list[PoolTask]:
    """One task a line: a bare id, or a JSON object with task_id and optionally task,
    task_type and origin (the task's source, when two sources share its id).

    Blank lines and lines starting with # are skipped; a task given twice is an error.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the task pool ({error})", path=path) from None
    tasks: list[PoolTask] = []
    seen: set[TaskKey] = set()
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise InputError(f"not JSON ({error})", path=path, line=number) from None
            task_id = data.get("task_id")
            if not isinstance(task_id, str) or not task_id:
                raise InputError("missing or not a string", path=path, line=number, field="task_id")
            text, task_type = data.get("task", ""), data.get("task_type")
            origin = data.get("origin")
            if not isinstance(text, str):
                raise InputError("not a string", path=path, line=number, field="task")
            for name, value in (("task_type", task_type), ("origin", origin)):
                if value is not None and not isinstance(value, str):
                    raise InputError("not a string", path=path, line=number, field=name)
            task = PoolTask(task_id, text, task_type, origin or None)
        else:
            task = PoolTask(line)
        if task.key in seen:
            raise InputError(f"{task.key} is listed twice", path=path, line=number)
        seen.add(task.key)
        tasks.append(task)
    if not tasks:
        raise InputError("the task pool lists no task", path=path)
    return tasks
