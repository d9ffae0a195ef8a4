"""A wikitrace memory for any inspect_ai task: first message, drill-down, citation report.

`with_memory(agent, corpus)` wraps a task's solver in three steps:

1. `first_message`: the memory's first message for the sample's task (its task type and project
   from the sample's metadata, or inferred) takes the place of the task's first user message
   (the message quotes the task in full). Leave-one-task-out by default: nothing drawn from
   the sample's own task is shown, so an eval never sees its own answer: the sample reads the
   corpus's view without that task (integrations/views.py), whose indexes, catalog and search
   indexes are written without it.
2. The drill-down, in full mode: with a sandbox, the corpus is copied read-only to
   `/work/corpus` inside it (the message names shell commands there); without one, the
   MCP server's tools (`read_page`, `search`, `audit`, `actions`, `turn`) are added to the
   sample's tools, answered in-process by the same code as `wikitrace mcp`.
3. `citation_report`: once the agent is done, the model is asked which memory entries shaped
   its actions; the checked report, the entries the message showed and how many drill-downs
   the agent made go into the sample's metadata under "wikitrace". The agent's output (what
   the scorer reads) is kept as it was.

Insights Only (`mode="insights-only"`) shows the same insights with no runs and no drill-down.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ContentText, get_model
from inspect_ai.solver import Generate, Solver, TaskState, chain, solver
from inspect_ai.tool import Tool, ToolDef, ToolError, ToolParams
from inspect_ai.util import sandbox

from wikitrace.corpus_schema import InputError, WikitraceError
from wikitrace.corpus_schema.turns import as_text
from wikitrace.tools.mcp_server import build_server

from .views import loaded, view_for

Mode = Literal["full", "insights-only"]
MODES: tuple[Mode, ...] = ("full", "insights-only")
METADATA_KEY = "wikitrace"
"""The sample metadata key the memory's record is kept under."""
DEFAULT_MOUNT = "/work/corpus"
MEMORY_TOOLS = ("read_page", "search", "audit", "actions", "turn")
"""The MCP server's tools an agent without a sandbox drills down with (those the first message
names); `first_message` is given and `check_citations` is the harness's job."""


@functools.cache
def _server(path: str) -> Any:
    return build_server(loaded(path))


def _task_name(given: str | None) -> str | None:
    if given:
        return given
    try:  # the running sample's task: inspect keeps it on a private context
        from inspect_ai.log._samples import sample_active
    except ImportError:
        return None
    active = sample_active()
    return active.task if active is not None else None


def own_tasks(task_name: str | None, sample_id: int | str) -> list[str]:
    """The ids a corpus may know this sample's task by: `task/id` (as `wikitrace build` names
    an inspect sample) and the bare id (a corpus built from another format)."""
    ids = [str(sample_id)]
    if task_name:
        ids.insert(0, f"{task_name}/{sample_id}")
    return ids


async def memory_tools(corpus: str | Path, exclude_tasks: Sequence[str] = ()) -> list[Tool]:
    """The MCP server's drill-down tools as inspect tools: the same names, descriptions and
    parameters, each call answered by the server in-process. With `exclude_tasks`, the server
    serves the corpus's leave-one-task-out view (`views.view_for`): no page, index, search hit
    or answer names their runs or the lessons drawn from them."""
    server = _server(str(view_for(corpus, exclude_tasks)))
    tools = []
    for listed in await server.list_tools():
        if listed.name not in MEMORY_TOOLS:
            continue
        schema = dict(listed.input_schema)
        properties = dict(schema.get("properties", {}))
        if listed.name == "search":
            properties.pop("exclude_tasks", None)  # the view has left them out already
        parameters = ToolParams.model_validate(
            {"properties": properties, "required": schema.get("required", [])}
        )
        tools.append(
            ToolDef(
                _caller(server, listed.name),
                name=listed.name,
                description=listed.description or listed.name,
                parameters=parameters,
            ).as_tool()
        )
    return tools


def _caller(server: Any, name: str) -> Any:
    from mcp.server.mcpserver.exceptions import ToolError as McpToolError

    async def call(**arguments: Any) -> str:
        try:
            result = await server.call_tool(name, arguments)
        except McpToolError as error:
            raise ToolError(str(error).removeprefix(f"Error executing tool {name}: ")) from None
        return "".join(getattr(block, "text", "") for block in result.content)

    return call


def _has_sandbox() -> bool:
    try:
        sandbox()
    except (ProcessLookupError, RuntimeError):
        return False
    return True


async def copy_corpus(
    corpus: str | Path, mount: str = DEFAULT_MOUNT, exclude_tasks: Sequence[str] = ()
) -> int:
    """Copy the corpus's files (those its manifest lists) into the sample's sandbox at
    `mount`, read-only, its drill-down tools executable; with `exclude_tasks`, the files of
    its leave-one-task-out view (`views.view_for`: their runs, the lessons drawn from them
    and every index line naming them left out). Returns the number of files copied."""
    memory = loaded(str(view_for(corpus, exclude_tasks)))
    box = sandbox()
    copied = 0
    executables = []
    for rel in sorted(memory.files):
        source = memory.root / rel
        if not source.is_file():
            continue
        await box.write_file(f"{mount}/{rel}", source.read_bytes())
        if os.access(source, os.X_OK):
            executables.append(f"{mount}/{rel}")
        copied += 1
    if executables:
        await _run(box, ["chmod", "a+rx", *executables])
    await _run(box, ["chmod", "-R", "a-w", mount])
    return copied


async def _run(box: Any, command: list[str]) -> None:
    result = await box.exec(command)
    if not result.success:
        raise RuntimeError(f"{' '.join(command[:3])} ... in the sandbox: {result.stderr.strip()}")


def _put_first(state: TaskState, text: str) -> None:
    """The first message in place of the task's first user message (it quotes the task)."""
    for message in state.messages:
        if isinstance(message, ChatMessageUser):
            if isinstance(message.content, str):
                message.content = text
            else:  # images and other parts stay; the text parts give way to the message
                others = [part for part in message.content if not isinstance(part, ContentText)]
                message.content = [ContentText(text=text), *others]
            return
    state.messages.insert(0, ChatMessageUser(content=text))


@solver
def first_message(
    corpus: str,
    mode: Mode = "full",
    *,
    task_name: str | None = None,
    leave_one_out: bool = True,
    task_type: str | None = None,
    project: str | None = None,
    use_sandbox: bool | None = None,
    mount: str = DEFAULT_MOUNT,
    max_tokens: int = 6000,
    similar: int = 3,
) -> Solver:
    """Put the memory's first message in front of the agent, and (full mode) the corpus where
    it can drill down: in the sandbox at `mount` when there is one (`use_sandbox` None: when
    the sample has one), else as tools.

    Args:
      corpus: The corpus folder (a version pointer or a version).
      mode: "full" (the first message and the drill-down) or "insights-only".
      task_name: The task's name, for leave-one-task-out (default: the running task's).
      leave_one_out: Show nothing drawn from the sample's own task.
      task_type: Keep to this task type (default: the sample's metadata "task_type", else
        inferred from the most similar past runs).
      project: The sample's project (default: its metadata "project").
      use_sandbox: Copy the corpus into the sandbox (None: when there is one).
      mount: Where the corpus goes in the sandbox.
      max_tokens: The first message's budget (characters / 4).
      similar: Similar past runs to list.
    """
    if mode not in MODES:
        raise InputError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    path = str(Path(corpus).resolve())
    version = loaded(path).version

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        excluded = own_tasks(_task_name(task_name), state.sample_id) if leave_one_out else []
        # What the sample reads, its first message included: the view without its own task.
        memory = loaded(str(view_for(path, excluded))).memory()
        shell = mode == "full" and (_has_sandbox() if use_sandbox is None else use_sandbox)
        kind = state.metadata.get("task_type") if task_type is None else task_type
        known = {run.task_type for run in memory.runs}
        if task_type is None and kind not in known:
            kind = None  # a type the corpus does not know: inferred instead
        scope = project if project is not None else state.metadata.get("project")
        message = memory.first_message(
            state.input_text,
            task_type=kind,
            exclude_tasks=excluded,
            similar=similar,
            max_tokens=max_tokens or None,
            mount=mount,
            insights_only=mode == "insights-only",
            report_at="end",
            project=str(scope) if scope else None,
            access="shell" if shell else "mcp",
        )
        _put_first(state, message.text)
        record: dict[str, Any] = {
            "mode": mode,
            "corpus": path,
            "version": version,
            "excluded_tasks": excluded,
            "insights_shown": message.insights,
            "similar_shown": message.similar,
            "task_type": message.task_type,
            "access": None if mode == "insights-only" else ("sandbox" if shell else "tools"),
            "mount": mount if shell else None,
        }
        if mode == "full" and shell:
            record["files_copied"] = await copy_corpus(path, mount, excluded)
        elif mode == "full":
            state.tools.extend(await memory_tools(path, excluded))
        state.metadata[METADATA_KEY] = record
        return state

    return solve


def count_drilldowns(state: TaskState, record: dict[str, Any]) -> int:
    """The agent's tool calls that read the memory: a memory tool, or a command naming the
    mount (as `wikitrace drilldowns` finds them in a log)."""
    from wikitrace.evaluation.attribute import mount_pattern

    names = mount_pattern(record["mount"]) if record.get("mount") else None
    count = 0
    for message in state.messages:
        if not isinstance(message, ChatMessageAssistant):
            continue
        for call in message.tool_calls or []:
            tool = record.get("access") == "tools" and call.function in MEMORY_TOOLS
            command = names is not None and names.search(as_text(call.arguments))
            count += bool(tool or command)
    return count


@solver
def citation_report() -> Solver:
    """Once the agent is done: ask which memory entries shaped its actions, check the report
    against the corpus and keep it in the sample's metadata ("wikitrace": "used", or
    "report_problem"), with the number of drill-downs. The report's exchange is kept out of
    the messages, and the agent's output stays what the scorer reads."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        from wikitrace.compiler.compile import reply_json
        from wikitrace.tools.cite import check_report
        from wikitrace.tools.first_message import report_request

        record = state.metadata.get(METADATA_KEY)
        if not isinstance(record, dict):
            return state  # no memory was given (no-memory runs)
        record["drilldowns"] = count_drilldowns(state, record)
        insights_only = record.get("mode") == "insights-only"
        request = ChatMessageUser(content=report_request(insights_only=insights_only))
        reply = await get_model().generate([*state.messages, request])
        record["report_text"] = reply.completion
        try:
            report = check_report(Path(record["corpus"]), reply_json(reply.completion))
        except (ValueError, WikitraceError) as error:
            record["used"], record["report_problem"] = None, str(error)
        else:
            record["used"] = report.used.model_dump()
        return state

    return solve


def with_memory(
    agent: Solver | Sequence[Solver],
    corpus: str | Path,
    mode: Mode = "full",
    **options: Any,
) -> Solver:
    """The task's own solver (`agent`) with a wikitrace memory: the first message before it,
    the citation report after. `options` are `first_message`'s."""
    steps = list(agent) if isinstance(agent, Sequence) else [agent]
    return chain(first_message(str(corpus), mode, **options), *steps, citation_report())


__all__ = [
    "DEFAULT_MOUNT",
    "MEMORY_TOOLS",
    "METADATA_KEY",
    "MODES",
    "citation_report",
    "copy_corpus",
    "first_message",
    "memory_tools",
    "own_tasks",
    "with_memory",
]
