"""Run an inspect_ai task with and without a wikitrace memory (`wikitrace lift run-inspect`),
and write the rows `wikitrace lift` and its parts read.

The task runs four times, each an inspect eval with its own logs under OUT/METHOD/:
`no-memory` and `no-memory-rerun` (the task as it is: the baseline, and the rerun whose Gain and
Regression are the noise band), `insights-only` (the same insights, no runs, no drill-down)
and `wikitrace` (the first message and the drill-down). Each runs every sample `epochs` times.
OUT/results.jsonl then holds one row an episode: its score, its log (`trajectory`, the
sample's place in the .eval log after `#`), its citation report, tokens, seconds and
drill-downs; the rows of methods not run this time are kept from an earlier run into OUT.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from wikitrace.compiler.importers.inspect_log import score_value
from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.corpus_schema.writing import atomic_write
from wikitrace.evaluation.rows import ResultRow, read_rows

from .inspect import METADATA_KEY, Mode, with_memory

BASELINE, RERUN = default("baseline"), default("rerun")
METHODS: dict[str, Mode | None] = {
    BASELINE: None,
    RERUN: None,
    "insights-only": "insights-only",
    "wikitrace": "full",
}
"""Each method and the memory it runs with (None: the task as it is)."""
RESULTS = "results.jsonl"


def load_task(spec: str, args: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A maker of fresh Task objects from `file.py@name` or `package.module@name` (inspect's
    own way to name a task; `@name` may be left out when the file holds one task)."""
    from inspect_ai import Task

    where, _, name = spec.partition("@")
    path = Path(where)
    if where.endswith(".py"):
        if not path.is_file():
            raise InputError("no such file", path=path, hint="name a task as file.py@task_name")
        module_name = f"_wikitrace_task_{abs(hash(path.resolve()))}"
        module = sys.modules.get(module_name)
        if module is None:
            found = importlib.util.spec_from_file_location(module_name, path)
            if found is None or found.loader is None:
                raise InputError("cannot be imported as Python", path=path)
            module = importlib.util.module_from_spec(found)
            sys.modules[module_name] = module
            found.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as error:
            raise InputError(f"cannot import {where!r}: {error}") from None
    if not name:
        makers = [
            key
            for key, value in vars(module).items()
            if callable(value)
            and getattr(value, "__registry_info__", None) is not None
            and getattr(value.__registry_info__, "type", None) == "task"
        ]
        if len(makers) != 1:
            raise InputError(
                f"{where} holds {len(makers)} tasks ({', '.join(makers) or 'none'})",
                hint="name one: file.py@task_name",
            )
        name = makers[0]
    maker = getattr(module, name, None)
    if not callable(maker):
        raise InputError(f"{where} has no task {name!r}", hint="name a task as file.py@task_name")

    def fresh() -> Any:
        task = maker(**(args or {}))
        if not isinstance(task, Task):
            raise InputError(f"{spec} returned {type(task).__name__}, not an inspect Task")
        return task

    return fresh


@dataclass
class MethodRun:
    """One method's eval: its logs and the rows made from them."""

    method: str
    logs: list[Path]
    rows: list[ResultRow]


def run_methods(
    spec: str,
    corpus: Path,
    model: Any,
    out: Path,
    *,
    epochs: int = 3,
    task_args: dict[str, Any] | None = None,
    methods: tuple[str, ...] = tuple(METHODS),
    memory_options: dict[str, Any] | None = None,
    eval_options: dict[str, Any] | None = None,
) -> list[MethodRun]:
    """Run the task once per method (see the module's docstring) and write OUT/results.jsonl.
    `model` is any model inspect takes (a name such as `openai/gpt-4o`, or a Model);
    `memory_options` go to `first_message`, `eval_options` to inspect's `eval`."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai import task_with

    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError(f"no method {unknown[0]!r}; the methods: {', '.join(METHODS)}")
    if not corpus.is_dir():
        raise InputError("no such corpus folder", path=corpus)
    make_task = load_task(spec, task_args)
    runs = []
    for method in methods:
        task = make_task()
        mode = METHODS[method]
        if mode is not None:
            task = task_with(
                task,
                solver=with_memory(
                    task.solver, corpus, mode, task_name=task.name, **(memory_options or {})
                ),
            )
        folder = out / method
        logs = inspect_eval(
            task,
            model=model,
            epochs=epochs,
            log_dir=str(folder),
            log_format="eval",
            display="none",
            metadata={"wikitrace_method": method},
            **(eval_options or {}),
        )
        for log in logs:
            if log.status != "success":
                problem = log.error.message if log.error else log.status
                raise RuntimeError(f"{method}: the inspect eval did not finish: {problem}")
        paths = [Path(log.location) for log in logs]
        rows = [row for log in logs for row in episode_rows(log, method, out)]
        runs.append(MethodRun(method, paths, rows))
    # A run of some methods keeps the rows of the others from an earlier run into `out`.
    kept = []
    if (out / RESULTS).is_file():
        kept = [item.row for item in read_rows([out / RESULTS]) if item.row.method not in methods]
    rows = kept + [row for run in runs for row in run.rows]
    lines = (orjson.dumps(row.model_dump(exclude_none=True)) + b"\n" for row in rows)
    atomic_write(out / RESULTS, lines)
    return runs


def episode_rows(log: Any, method: str, out: Path) -> Iterator[ResultRow]:
    """One row per sample and epoch of an inspect EvalLog; its trajectory relative to `out`."""
    location = Path(log.location)
    try:
        where = location.resolve().relative_to(out.resolve()).as_posix()
    except ValueError:
        where = str(location.resolve())
    for sample in log.samples or []:
        scores = {name: score.model_dump() for name, score in (sample.scores or {}).items()}
        value, _ = score_value(scores)
        if value is None:  # an error, or no scorer: neither a success nor a failure
            continue
        record = sample.metadata.get(METADATA_KEY) if isinstance(sample.metadata, dict) else None
        record = record if isinstance(record, dict) else {}
        tokens = sum(usage.total_tokens for usage in (sample.model_usage or {}).values())
        harness = record.get("report_tokens")
        harness = harness if isinstance(harness, int) and 0 <= harness <= tokens else None
        yield ResultRow(
            suite=log.eval.task,
            method=method,
            task_id=str(sample.id),
            trial=sample.epoch,
            score=value,
            trajectory=f"{where}#samples/{sample.id}_epoch_{sample.epoch}.json",
            used=record.get("used"),
            tokens=tokens - (harness or 0),
            harness_tokens=harness,
            seconds=sample.total_time,
            drilldowns=record.get("drilldowns"),
        )
