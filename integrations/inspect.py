"""A wikitrace memory for any inspect_ai task: first message, drill-down, citation report.

`with_memory(agent, corpus)` wraps a task's solver in three steps:

1. `first_message`: the memory's first message for the sample's task (its task type and project
   from the sample's metadata, or inferred) takes the place of the task's first user message
   (the message quotes the task in full). Leave-one-task-out by default: nothing drawn from
   the sample's own task is shown, so an eval never sees its own answer: the sample reads the
   corpus's view without that task (integrations/views.py), whose indexes, catalog and search
   indexes are written without it.
2. The drill-down, in full mode: with a sandbox, the sample's view is copied read-only to
   `/work/corpus` inside it and removed after the sample (`inspect_sandbox.py`; a local
   sandbox's copy goes into the sample's own folder); without one, the MCP server's tools
   (`read_page`, `search`, `audit`, `actions`, `turn`) are added to the sample's tools,
   answered in-process by the same code as `wikitrace mcp`. A sample whose task the corpus
   does not hold is reported (or failed: `unknown_task`).
3. `citation_report`: once the agent is done (or a limit stopped it), the model is asked
   which memory entries shaped its actions; the report's valid entries, the entries the
   message showed, how many drill-downs the agent made, the report call's tokens (the
   harness's) and any problems go into the sample's metadata under "wikitrace". The agent's
   output (what the scorer reads) is kept as it was.

Insights Only (`mode="insights-only"`) shows the same insights with no runs and no drill-down.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ContentText, get_model
from inspect_ai.solver import Generate, Solver, TaskState, chain, solver
from inspect_ai.tool import Tool, ToolDef, ToolError, ToolParams
from inspect_ai.util import message_limit, sandbox

from wikitrace.corpus_schema import InputError, WikitraceError
from wikitrace.corpus_schema.drilldown import as_text
from wikitrace.tools.mcp_server import build_server
from wikitrace.tools.message_options import BUDGET_TOKENS, DEFAULT_MOUNT, SIMILAR, MessageOptions

from . import inspect_sandbox
from .views import known_tasks, loaded, view_for

log = logging.getLogger(__name__)

Mode = Literal["full", "insights-only"]
MODES: tuple[Mode, ...] = ("full", "insights-only")
UnknownTask = Literal["report", "fail"]
UNKNOWN_TASK: tuple[UnknownTask, ...] = ("report", "fail")
METADATA_KEY = "wikitrace"
"""The sample metadata key the memory's record is kept under."""
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
    an inspect sample, `importers/inspect_log.py`) and the bare id (a corpus built from another
    format). The one place a sample's task is matched to the corpus's task ids."""
    ids = [str(sample_id)]
    if task_name:
        ids.insert(0, f"{task_name}/{sample_id}")
    return ids


async def memory_tools(
    corpus: str | Path, exclude_tasks: Sequence[str] | None = None
) -> list[Tool]:
    """The MCP server's drill-down tools as inspect tools: the same names, descriptions and
    parameters, each call answered by the server in-process, from the corpus's
    leave-one-task-out view (`views.view_for`: no page, index, search hit or answer names the
    left-out tasks' runs or the lessons drawn from them). Without `exclude_tasks` (as given to
    `react(tools=...)` once for every sample), each call leaves out the task of the sample
    running it (`own_tasks`); called outside a sample, the whole corpus."""
    root = str(Path(corpus).resolve())
    server = _server(str(view_for(root, exclude_tasks or [])))
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
        serve: Any = functools.partial(_sample_server, root)
        if exclude_tasks is not None:
            serve = functools.partial(_server, str(view_for(root, exclude_tasks)))
        tools.append(
            ToolDef(
                _caller(serve, listed.name),
                name=listed.name,
                description=listed.description or listed.name,
                parameters=parameters,
            ).as_tool()
        )
    return tools


def _sample_server(root: str) -> Any:
    """The server of the view the running sample may read (the corpus outside a sample)."""
    try:
        from inspect_ai.log._samples import sample_active
    except ImportError:
        return _server(root)
    active = sample_active()
    if active is None or active.sample.id is None:
        return _server(root)
    return _server(str(view_for(root, own_tasks(active.task, active.sample.id))))


def _caller(server: Any, name: str) -> Any:
    """A tool function calling `name` on the server `server()` returns at each call."""
    from mcp.server.mcpserver.exceptions import ToolError as McpToolError

    async def call(**arguments: Any) -> str:
        serving = server()
        try:
            result = await serving.call_tool(name, arguments)
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
    `mount` (`inspect_sandbox.copy_view`: one tar stream, read-only), its drill-down tools
    executable; with `exclude_tasks`, the files of its leave-one-task-out view. Returns the
    number of files copied."""
    count, _ = await inspect_sandbox.copy_view(sandbox(), view_for(corpus, exclude_tasks), mount)
    return count


def _put_first(state: TaskState, text: str) -> None:
    """The first message in place of the input's task: its last user message (a few-shot
    input's earlier exchanges stay as they were), which the first message quotes."""
    for message in reversed(state.messages):
        if isinstance(message, ChatMessageUser):
            if isinstance(message.content, str):
                message.content = text
            else:  # images and other parts stay; the text parts give way to the message
                others = [part for part in message.content if not isinstance(part, ContentText)]
                message.content = [ContentText(text=text), *others]
            return
    state.messages.insert(0, ChatMessageUser(content=text))


@dataclass(frozen=True)
class _Options:
    """`first_message`'s options, as the sample's steps read them."""

    corpus: str
    mode: Mode
    task_name: str | None
    leave_one_out: bool
    unknown_task: UnknownTask
    task_type: str | None
    project: str | None
    use_sandbox: bool | None
    message: MessageOptions
    """The first message's options each sample shares (its task, project, type and mount
    are its own)."""


@solver
def first_message(
    corpus: str,
    mode: Mode = "full",
    *,
    task_name: str | None = None,
    leave_one_out: bool = True,
    unknown_task: UnknownTask = "report",
    task_type: str | None = None,
    project: str | None = None,
    use_sandbox: bool | None = None,
    mount: str = DEFAULT_MOUNT,
    max_tokens: int = BUDGET_TOKENS,
    similar: int = SIMILAR,
    flag_conflicts: bool = False,
) -> Solver:
    """Put the memory's first message in front of the agent, and (full mode) the corpus where
    it can drill down: in the sandbox at `mount` when there is one (`use_sandbox` None: when
    the sample has one), else as tools.

    Args:
      corpus: The corpus folder (a version pointer or a version).
      mode: "full" (the first message and the drill-down) or "insights-only".
      task_name: The task's name, for leave-one-task-out (default: the running task's).
      leave_one_out: Show nothing drawn from the sample's own task.
      unknown_task: When the corpus holds no run of the sample's task (`own_tasks`: a new
        task, or a variant named otherwise): "report" it (a warning, and "task_not_in_corpus"
        and a problem in the sample's metadata) and read the whole corpus, or "fail" the sample.
      task_type: Keep to this task type (default: the sample's metadata "task_type", else
        inferred from the most similar past runs).
      project: The sample's project (default: its metadata "project").
      use_sandbox: Copy the corpus into the sandbox (None: when there is one).
      mount: Where the corpus goes in the sandbox (a local sandbox: the folder of that name in
        the sample's own working folder).
      max_tokens: The first message's budget (characters / 4).
      similar: Similar past runs to list.
      flag_conflicts: Name the listed lessons whose applicability overlaps and whose source
        runs ended differently (tools/message_options.py).
    """
    if mode not in MODES:
        raise InputError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if unknown_task not in UNKNOWN_TASK:
        raise InputError(f"unknown_task {unknown_task!r}: expected one of report, fail")
    path = str(Path(corpus).resolve())
    loaded(path)  # a corpus that cannot be read fails the task, not each sample
    message = MessageOptions(
        similar=similar,
        max_tokens=max_tokens or None,
        mount=mount,
        insights_only=mode != "full",
        report_at="end",
        flag_conflicts=flag_conflicts,
    )
    options = _Options(
        path, mode, task_name, leave_one_out, unknown_task, task_type, project, use_sandbox,
        message,
    )  # fmt: skip

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await _begin(state, options)
        return state

    return solve


def _own(state: TaskState, options: _Options) -> tuple[list[str], list[str]]:
    """The sample's task ids to leave out, and the problems found matching them."""
    if not options.leave_one_out:
        return [], []
    ids = own_tasks(_task_name(options.task_name), state.sample_id)
    if known_tasks(options.corpus, ids):
        return ids, []
    problem = (
        f"the corpus holds no run of this sample's task ({' or '.join(ids)}): nothing was left "
        "out; if it is a variant of a task the corpus knows, name that task with task_name"
    )
    if options.unknown_task == "fail":
        raise InputError(problem, hint="or pass unknown_task='report' to run it on the corpus")
    log.warning("sample %s: %s", state.sample_id, problem)
    return ids, [problem]


async def _begin(state: TaskState, options: _Options) -> None:
    excluded, problems = _own(state, options)
    # What the sample reads, its first message included: the view without its own task.
    view = view_for(options.corpus, excluded)
    memory = loaded(str(view)).memory()
    full = options.mode == "full"
    shell = full and (_has_sandbox() if options.use_sandbox is None else options.use_sandbox)
    given = options.message.mount
    mount = await inspect_sandbox.place(sandbox(), given) if shell else given
    kind = state.metadata.get("task_type") if options.task_type is None else options.task_type
    if options.task_type is None and kind not in {run.task_type for run in memory.runs}:
        kind = None  # a type the corpus does not know: inferred instead
    scope = options.project if options.project is not None else state.metadata.get("project")
    message = memory.first_message(
        state.input_text,
        options.message,
        task_type=kind,
        exclude_tasks=excluded,
        mount=mount,
        project=str(scope) if scope else None,
        access="shell" if shell else "mcp",
    )
    _put_first(state, message.text)
    record: dict[str, Any] = {
        "mode": options.mode,
        "corpus": options.corpus,
        "version": loaded(options.corpus).version,
        "excluded_tasks": excluded,
        "task_not_in_corpus": bool(problems),
        "insights_shown": message.insights,
        "similar_shown": message.similar,
        "task_type": message.task_type,
        "access": None if not full else ("sandbox" if shell else "tools"),
        "mount": mount if shell else None,
        "problems": problems,
    }
    state.metadata[METADATA_KEY] = record
    if shell:
        copied, read_only = await inspect_sandbox.copy_view(sandbox(), view, mount)
        record["files_copied"], record["read_only"] = copied, read_only
    elif full:
        state.tools.extend(await memory_tools(options.corpus, excluded))


def count_drilldowns(state: TaskState, record: dict[str, Any]) -> int:
    """The agent's tool calls that read the memory: a memory tool, or a command naming the
    mount (as `wikitrace lift drilldowns` finds them in a log)."""
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
    against the corpus and keep it in the sample's metadata ("wikitrace": "used", its valid
    entries; "problems", the bad ones named), with the number of drill-downs and the
    tokens of the report's call ("report_tokens": the harness's, not the agent's). The
    report's exchange is kept out of the messages, and the agent's output stays what the
    scorer reads."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        record = state.metadata.get(METADATA_KEY)
        if isinstance(record, dict):  # else no memory was given (no-memory runs)
            await _report(state, record)
        return state

    return solve


async def _report(state: TaskState, record: dict[str, Any]) -> None:
    from wikitrace.compiler.compile import reply_json
    from wikitrace.tools.cite import keep_known, known_ids, parse_report
    from wikitrace.tools.first_message import report_request

    record["drilldowns"] = count_drilldowns(state, record)
    problems = record.setdefault("problems", [])
    if record.get("access") == "tools" and not _tools_reached_agent():
        record["access"] = None
        problems.append(
            "the agent was never given the memory tools its first message names (an agent "
            "such as react() takes only its own tools): give it a sandbox, or memory_tools()"
        )
    insights_only = record.get("mode") == "insights-only"
    request = ChatMessageUser(content=report_request(insights_only=insights_only))
    # The tool calls in the messages are sent with the tools they call (a provider refuses
    # calls of tools it was not given); the request itself is answered without calling any.
    # The report is the harness's call: the agent's message limit does not stop it (inspect
    # checks only the innermost message limit).
    with message_limit(None):
        reply = await get_model().generate(
            [*state.messages, request], tools=state.tools, tool_choice="none"
        )
    record["report_tokens"] = reply.usage.total_tokens if reply.usage else None
    record["report_text"] = reply.completion
    try:
        report = parse_report(reply_json(reply.completion))
    except (ValueError, WikitraceError) as error:
        record["used"] = None
        problems.append(f"citation report: {error}")
    else:
        kept, bad = keep_known(report, known_ids(Path(record["corpus"])))
        record["used"] = kept.used.model_dump()
        problems.extend(f"citation report: {line}" for line in bad)


def _tools_reached_agent() -> bool:
    """Whether a model call of the sample so far was offered a memory tool (True when
    inspect's transcript cannot say)."""
    try:
        from inspect_ai.event import ModelEvent
        from inspect_ai.log import transcript
    except ImportError:
        return True
    calls = [event for event in transcript().events if isinstance(event, ModelEvent)]
    offered = {tool.name for event in calls for tool in event.tools}
    return not calls or bool(offered & set(MEMORY_TOOLS))


@solver
def _episode(steps: list[Solver]) -> Solver:
    """The agent's steps, then the citation report, and the sandbox's copy removed: a sample
    that hits a limit (messages, tokens, time) keeps its record, the limit named among its
    problems, and the limit still ends it as inspect would have."""
    from inspect_ai.util import LimitExceededError

    agent, report = chain(*steps), citation_report()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        try:
            state = await agent(state, generate)
        except LimitExceededError as limit:
            record = state.metadata.get(METADATA_KEY)
            if isinstance(record, dict):
                record.setdefault("problems", []).append(f"the {limit.type} limit: {limit}")
                record["drilldowns"] = count_drilldowns(state, record)
                try:
                    await _report(state, record)
                except LimitExceededError:  # the report's own call went past a token limit
                    record["problems"].append("no citation report: the limit stopped it too")
            raise
        else:
            return await report(state, generate)
        finally:
            await _remove_copy(state)

    return solve


async def _remove_copy(state: TaskState) -> None:
    record = state.metadata.get(METADATA_KEY)
    if isinstance(record, dict) and record.get("files_copied") is not None:
        try:
            await inspect_sandbox.remove_copy(sandbox(), record["mount"])
        except Exception as error:  # the sample's own outcome comes first
            log.warning("the corpus copy at %s was not removed: %s", record["mount"], error)
            record.setdefault("problems", []).append(f"the copy was not removed: {error}")
            record["removed"] = False
        else:
            record["removed"] = True


def with_memory(
    agent: Solver | Sequence[Solver],
    corpus: str | Path,
    mode: Mode = "full",
    **options: Any,
) -> Solver:
    """The task's own solver (`agent`) with a wikitrace memory: the first message before it,
    the citation report after (kept when a limit ends the sample), and the sandbox's copy of
    the corpus removed once the sample is done. `options` are `first_message`'s."""
    steps = list(agent) if isinstance(agent, Sequence) else [agent]
    return chain(first_message(str(corpus), mode, **options), _episode(steps))


__all__ = [
    "DEFAULT_MOUNT",
    "MEMORY_TOOLS",
    "METADATA_KEY",
    "MODES",
    "UNKNOWN_TASK",
    "citation_report",
    "copy_corpus",
    "first_message",
    "memory_tools",
    "own_tasks",
    "with_memory",
]
