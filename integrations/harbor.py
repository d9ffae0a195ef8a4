"""A wikitrace memory for any Harbor agent (Terminal-Bench 2.0 and the other Harbor datasets).

`wikitrace.integrations.harbor:NAME` is Harbor's installed agent NAME (`claude-code`, `codex`,
`terminus-2`, ...) with a memory; `with_memory(AgentClass)` makes the same of any agent class.
Before the agent runs a trial, the wrapper

1. finds the trial's own task in the corpus (a run whose task id is Harbor's task name, or ends
   in `/NAME`) and, leave-one-task-out by default, takes the corpus's view without it
   (integrations/views.py): nothing drawn from the task's own runs is shown or uploaded;
2. (full mode) uploads that corpus read-only to `/work/corpus` in the task's environment;
3. hands the agent the memory's first message in place of the instruction (the message quotes
   the instruction in full, then the lessons, similar runs and how to drill down, and asks for
   the citation report at the end of the agent's last message);
4. writes what it showed to `wikitrace.json` in the trial's folder (not in `agent/`, which the
   agent's container may see; one entry in its `calls` for each time Harbor starts the agent:
   `run`, and `load` or `resume` for a seeded or resumed agent and each step of a multi-step
   task, so none of them runs without the memory), which
   `wikitrace lift JOBDIR` reads back with the trial's reward and ATIF trajectory
   (integrations/harbor_runs.py).

The agent's own options are untouched; the memory's are `--ak wikitrace_NAME=VALUE` (see
`MemorySettings`). Harbor (Python 3.12+) is imported only when a wrapped class is asked for.

    harbor run -d terminal-bench@2.0 -m anthropic/claude-sonnet-4-5 \\
        -a wikitrace.integrations.harbor:claude-code --ak wikitrace_corpus=/abs/path/corpus
"""

from __future__ import annotations

import functools
import inspect
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import orjson

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.writing import atomic_write
from wikitrace.tools.message_options import BUDGET_TOKENS, DEFAULT_MOUNT, SIMILAR, MessageOptions

from .views import loaded, view_for

Mode = Literal["full", "insights-only"]
MODES: tuple[Mode, ...] = ("full", "insights-only")
PREFIX = "wikitrace_"
"""The agent kwargs (`--ak`) the memory takes for itself; the agent never sees them."""
RECORD = "wikitrace.json"
"""What the memory showed, in the trial's folder (`TRIAL/wikitrace.json`)."""


@dataclass(frozen=True)
class MemorySettings:
    """The memory's agent kwargs, each `wikitrace_` and its name: `--ak wikitrace_corpus=...`."""

    corpus: str
    """The corpus folder (a version pointer or a version), on the machine running Harbor."""
    mode: Mode = "full"
    """"full" (the first message and the corpus uploaded) or "insights-only" (the message's
    lessons, no runs, no upload)."""
    leave_one_out: bool = True
    """Show nothing drawn from the trial's own task."""
    mount: str = DEFAULT_MOUNT
    """Where the corpus goes in the task's environment."""
    max_tokens: int = BUDGET_TOKENS
    """The first message's budget (characters / 4); 0: none."""
    similar: int = SIMILAR
    """Similar past runs the message lists."""
    task_type: str | None = None
    """Keep to this task type (default: inferred from the most similar past runs)."""
    flag_conflicts: bool = False
    """Name the listed lessons whose applicability overlaps and whose source runs ended
    differently (tools/message_options.py)."""

    def message(self, excluded: list[str]) -> MessageOptions:
        """The first message's options for a trial whose own tasks are `excluded`."""
        return MessageOptions(
            task_type=self.task_type,
            exclude_tasks=excluded,
            similar=self.similar,
            max_tokens=self.max_tokens or None,
            mount=self.mount,
            insights_only=self.mode != "full",
            report_at="first",
            access="shell",
            flag_conflicts=self.flag_conflicts,
        )

    @classmethod
    def take(cls, kwargs: dict[str, Any]) -> MemorySettings:
        """The memory's settings, taken out of an agent's kwargs (the rest are the agent's)."""
        mine = {key: kwargs.pop(key) for key in list(kwargs) if key.startswith(PREFIX)}
        fields = {key.removeprefix(PREFIX): value for key, value in mine.items()}
        unknown = sorted(set(fields) - set(cls.__dataclass_fields__))
        if unknown:
            known = ", ".join(PREFIX + name for name in cls.__dataclass_fields__)
            raise InputError(f"no agent kwarg {PREFIX}{unknown[0]}; the memory's: {known}")
        if not fields.get("corpus"):
            raise InputError(
                f"the memory needs its corpus: --ak {PREFIX}corpus=/path/to/corpus "
                "(a folder on the machine running Harbor)"
            )
        settings = cls(**fields)
        if settings.mode not in MODES:
            raise InputError(
                f"{PREFIX}mode={settings.mode!r}: expected one of {', '.join(MODES)}",
                field=f"{PREFIX}mode",
            )
        if not Path(settings.corpus).is_dir():
            raise InputError("no such corpus folder", path=Path(settings.corpus))
        return settings


def own_tasks(corpus: str | Path, task_name: str) -> list[str]:
    """The corpus's task ids for Harbor's task `task_name`: the same, or the same last part
    (`terminal-bench/fix-git` for `fix-git`, and the other way round), sorted."""
    short = task_name.rsplit("/", 1)[-1]
    runs = loaded(str(Path(corpus).resolve())).memory().runs
    return sorted({run.task_id for run in runs if run.task_id.rsplit("/", 1)[-1] == short})


class Environment(Protocol):
    """What the memory uses of a Harbor environment (harbor.environments.base.BaseEnvironment)."""

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> Any: ...

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> Any: ...


async def _exec(environment: Environment, command: str) -> None:
    result = await environment.exec(command, user="root")
    if result.return_code != 0:
        problem = (result.stderr or result.stdout or "").strip()
        raise RuntimeError(f"{command[:60]} ... in the task's environment: {problem}")


async def upload_corpus(environment: Environment, corpus: Path, mount: str) -> None:
    """The corpus at `mount`, read-only for everyone, its drill-down tools executable."""
    target = shlex.quote(mount.rstrip("/"))
    await _exec(environment, f"mkdir -p {target}")
    await environment.upload_dir(corpus, mount)
    await _exec(
        environment,
        f"chmod -R a+rX,a-w {target} && chmod a+rx {target}/tools/actions {target}/tools/turn",
    )


async def attach_memory(
    settings: MemorySettings,
    instruction: str,
    task_name: str,
    environment: Environment,
    record_dir: Path | None,
    entry: str = "run",
) -> str:
    """Make the trial's memory ready (the corpus uploaded in full mode) and return the
    instruction the agent is given: the first message, which quotes `instruction` in full.
    What it showed is written to `record_dir`/wikitrace.json, `entry` (how Harbor started the
    agent: run, load or resume) added to its `calls`."""
    corpus = str(Path(settings.corpus).resolve())
    excluded = own_tasks(corpus, task_name) if settings.leave_one_out else []
    readable = view_for(corpus, excluded)
    memory = loaded(str(readable)).memory()
    full = settings.mode == "full"
    message = memory.first_message(instruction, settings.message(excluded))
    if full:
        await upload_corpus(environment, readable, settings.mount)
    call = {
        "entry": entry,
        "insights_shown": message.insights,
        "similar_shown": message.similar,
        "task_type": message.task_type,
        "files_uploaded": len(loaded(str(readable)).files) if full else 0,
    }
    if record_dir is not None:
        _record(record_dir, settings, corpus, task_name, excluded, call)
    return str(message.text)


def _record(
    record_dir: Path,
    settings: MemorySettings,
    corpus: str,
    task_name: str,
    excluded: list[str],
    call: dict[str, Any],
) -> None:
    """The trial's record: the first call's fields at the top (as records before `calls`
    had them), every call in `calls`."""
    path = record_dir / RECORD
    calls: list[Any] = []
    if path.is_file():
        try:
            earlier = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            earlier = {}
        if isinstance(earlier, dict) and isinstance(earlier.get("calls"), list):
            calls = earlier["calls"]
    calls.append(call)
    first = {key: value for key, value in calls[0].items() if key != "entry"}
    record = {
        **asdict(settings),
        **first,
        "corpus": corpus,
        "version": loaded(corpus).version,
        "task_name": task_name,
        "excluded_tasks": excluded,
        "calls": calls,
    }
    record_dir.mkdir(parents=True, exist_ok=True)
    data = orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    atomic_write(path, data + b"\n")


def _theirs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (kwargs or {}).items() if not key.startswith(PREFIX)}


def _task_name(agent: Any, environment: Any) -> str:
    """Harbor's name of the trial's task: the environment's (the task's short name), else the
    trial's folder name before its `__` suffix."""
    name = getattr(environment, "environment_name", None)
    if isinstance(name, str) and name:
        return name
    return Path(agent.logs_dir).parent.name.split("__", 1)[0]


def _needs_task(agent_class: type) -> bool:
    """Whether the class takes the task's folder and paths, which Harbor gives only to the
    agent it names `oracle` (harbor.trial.Trial._init_agent)."""
    parameters = inspect.signature(agent_class).parameters
    return "task_dir" in parameters and "trial_paths" in parameters


def _trial_of(logs_dir: Any) -> dict[str, Any]:
    """The task folder and paths of the Harbor trial constructing an agent for `logs_dir`:
    Harbor passes them only to an agent named `oracle`, not to one given by import path, so
    they are taken from the trial on the call stack (the one whose agent folder it is)."""
    frame = inspect.currentframe() if logs_dir is not None else None
    for _ in range(12):
        frame = frame.f_back if frame is not None else None
        trial = frame.f_locals.get("self") if frame is not None else None
        paths = getattr(trial, "paths", None)
        task_dir = getattr(getattr(trial, "task", None), "task_dir", None)
        if task_dir is not None and getattr(paths, "agent_dir", None) == Path(logs_dir):
            return {
                "task_dir": task_dir,
                "trial_paths": paths,
                "agent_timeout_sec": getattr(trial, "_agent_timeout_sec", None),
            }
    raise InputError(
        "this agent needs its task's folder (task_dir, trial_paths), which Harbor gives only "
        "to a trial it runs: run it with `harbor run -a wikitrace.integrations.harbor:NAME`"
    )


@functools.cache
def with_memory(agent_class: type, name: str | None = None) -> type:
    """`agent_class` (a Harbor agent class) with a wikitrace memory; its import path is
    `wikitrace.integrations.harbor:NAME` when `name` is given."""

    class WithMemory(agent_class):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.wikitrace = MemorySettings.take(kwargs)
            self.wikitrace_attached = False
            if _needs_task(agent_class) and "task_dir" not in kwargs:
                kwargs.update(_trial_of(kwargs.get("logs_dir", args[0] if args else None)))
            super().__init__(*args, **kwargs)

        @classmethod
        def parse_options(cls, kwargs: dict[str, Any] | None = None, env: Any = None) -> Any:
            # The agent's own options are checked without the memory's.
            return super().parse_options(_theirs(kwargs), env)

        @classmethod
        def preflight(cls, kwargs: dict[str, Any] | None = None, env: Any = None) -> None:
            MemorySettings.take(dict(kwargs or {}))  # a bad corpus fails before any trial
            super().preflight(_theirs(kwargs), env)

        async def _with_memory(
            self, entry: str, start: Any, instruction: str, environment: Any, context: Any
        ) -> None:
            if self.wikitrace_attached:  # Harbor's load and resume call run: attached once
                await start(instruction, environment, context)
                return
            text = await attach_memory(
                self.wikitrace,
                instruction,
                _task_name(self, environment),
                environment,
                Path(self.logs_dir).parent,  # the trial's folder: the agent never sees it
                entry,
            )
            self.wikitrace_attached = True
            try:
                await start(text, environment, context)
            finally:
                self.wikitrace_attached = False

        async def run(self, instruction: str, environment: Any, context: Any) -> None:
            await self._with_memory("run", super().run, instruction, environment, context)

        async def load(self, instruction: str, environment: Any, context: Any) -> None:
            await self._with_memory("load", super().load, instruction, environment, context)

        async def resume(self, instruction: str, environment: Any, context: Any) -> None:
            await self._with_memory("resume", super().resume, instruction, environment, context)

    WithMemory.__name__ = WithMemory.__qualname__ = name or f"{agent_class.__name__}WithMemory"
    WithMemory.__module__ = __name__
    WithMemory.__doc__ = f"{agent_class.__name__} with a wikitrace memory."
    return WithMemory


def __getattr__(name: str) -> type:
    """`wikitrace.integrations.harbor:claude-code`: Harbor's agent `claude-code` with memory."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        from harbor.agents.factory import AgentFactory
        from harbor.models.agent.name import AgentName
    except ImportError as error:
        raise AttributeError(f"{name}: Harbor is not installed ({error})") from None
    if name not in AgentName.values():
        raise AttributeError(
            f"no Harbor agent {name!r}; its agents: {', '.join(AgentName.values())}"
        )
    return with_memory(AgentFactory.get_agent_class(AgentName(name)), name)


__all__ = [
    "DEFAULT_MOUNT",
    "MODES",
    "MemorySettings",
    "attach_memory",
    "own_tasks",
    "upload_corpus",
    "with_memory",
]
