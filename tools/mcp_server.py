"""`wikitrace mcp`: a corpus over the Model Context Protocol, for agents without a shell.

Read-only by construction: every tool reads, none writes, and a page is served only when the
corpus's manifest lists it (so nothing outside the corpus, nor a file slipped into it, is ever
read). The server resolves the corpus's pointer once, at start, and serves that frozen version
until it stops, as a read-only mount would.

The tools' texts are the CLI's: `first_message` is `wikitrace prompt`, `actions` and `turn`
are the shipped drill-down tools, `audit` is `wikitrace audit`, `check_citations` checks one
report as `wikitrace cite` does.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from wikitrace.corpus_schema import CorpusError, WikitraceError, drilldown, layout, manifest, read
from wikitrace.corpus_schema.layout import INDEX_NAME, MANIFEST
from wikitrace.corpus_schema.projects import folder_aliases, project_named, repository_at
from wikitrace.corpus_schema.work import KINDS, kind_named
from wikitrace.search import MIN_SCORE

from . import mcp_stdio
from .message_options import BUDGET_TOKENS, DEFAULT_MOUNT, SIMILAR, SIMILAR_LIMIT, MessageOptions

URI_ROOT = "wikitrace://corpus/"
"""A page's URI is this plus its path in the corpus: wikitrace://corpus/insight/insight-0001.md"""
READ_LIMIT = 20_000
"""Characters `read_page` returns at most per call; `offset` pages on."""
OFFSET_LIMIT = 2**40
"""The largest `offset` read_page takes: past any page a corpus holds (a bigger number is no
place in a page, and could not be skipped to in memory)."""
SKIP_CHUNK = 1 << 20
"""Characters skipped at a time on the way to `offset`, so that a far offset costs no memory."""
TOKEN_LIMIT = 10_000_000
"""The largest `max_tokens` first_message takes."""
INDEXES = (
    ("", "The corpus: its layers, counts and how to drill down."),
    (layout.RAW_DIR, "Every past run: task, outcome, turns."),
    (layout.COMPILATION_DIR, "Why each run succeeded or failed."),
    (layout.INSIGHT_DIR, "Every lesson, by task type, with its source run and status."),
)

INSTRUCTIONS = """\
A read-only memory of an agent's past runs ({runs} runs, {insights} insights; {version}).
It has three layers, from least to most trustworthy: insights (lessons, each a guess drawn
from one run or mined from many), compilations (why a run succeeded or failed, each claim
quoting turns: an interpretation) and raw runs (every turn as logged: the facts).

Start a task with `first_message`. Before you act on a lesson, drill down: `audit` shows the
turns it rests on; `actions` and `turn` read the run itself. Drill down especially when a
lesson came from a FAILED run, is not tested, seems to contradict another, or its
"applies when" does not clearly match your situation. When you finish, report the entries
you used (the first message says how) and check the report with `check_citations`."""

_Tool = TypeVar("_Tool", bound=Callable[..., str])


class Corpus:
    """The frozen version a server serves: its root, manifest and (loaded once) memory."""

    def __init__(
        self,
        path: Path,
        folder: Path | None = None,
        project_aliases: Mapping[str, str] | None = None,
    ) -> None:
        self.root = path.resolve()
        self.folder = folder
        """The client's working folder (where it started the server): the project a first
        message is for, when the call names none."""
        self.project_aliases = dict(project_aliases or {})
        """The user's `[projects]` table: names joined to projects."""
        self.manifest = manifest.load(self.root)
        self.version = self.manifest.version.name if self.manifest.version else None
        self.files = set(self.manifest.files) | {MANIFEST}
        self._memory: Any = None

    def folder_project(self) -> str | None:
        """The repository the client's working folder is in, if any."""
        return repository_at(self.folder) if self.folder is not None else None

    def aliases(self, folder_project: str | None) -> dict[str, str]:
        """The user's aliases, and the keys Gemini CLI's runs give the client's folder."""
        if folder_project is None or self.folder is None:
            return self.project_aliases
        return folder_aliases(self.folder, folder_project) | self.project_aliases

    @property
    def label(self) -> str:
        version = f"version {self.version}" if self.version else "an unversioned corpus"
        return f"{version} at {self.root}"

    def memory(self) -> Any:
        if self._memory is None:
            from .memory import Memory

            self._memory = Memory.load(self.root)
        return self._memory

    def page(self, rel: str, offset: int = 0, limit: int = READ_LIMIT) -> str:
        """The text of a page the manifest lists, from character `offset`, at most `limit`."""
        clean = rel.strip().removeprefix("./").rstrip("/")
        if clean not in self.files:
            folder = f"{clean}/{INDEX_NAME}" if clean else INDEX_NAME
            if folder in self.files:
                clean = folder  # a layer's folder: its index
            else:
                raise ValueError(
                    f"{_shown(rel)} is not a page of this corpus (paths are relative to its "
                    f"root, as in {INDEX_NAME}: insight/insight-0001.md, raw/_index.md)"
                )
        # The manifest lists it; it must still be a regular file inside the root.
        try:
            real: Path | None = read.contained(self.root, clean)
        except CorpusError:
            real = None
        if real is None or not real.is_file():
            raise ValueError(f"{_shown(rel)} is not a regular file inside the corpus")
        with real.open(encoding="utf-8", errors="replace") as handle:
            skipped = 0
            while skipped < offset:
                step = len(handle.read(min(SKIP_CHUNK, offset - skipped)))
                if not step:
                    raise ValueError(
                        f"offset {offset} is past the end of {clean} ({skipped} characters)"
                    )
                skipped += step
            text = handle.read(limit + 1)
        if len(text) > limit:
            end = offset + limit
            return (
                text[:limit]
                + f"\n[... more: call read_page with path={clean!r} and offset={end} ...]"
            )
        return text


def _shown(text: str, width: int = 80) -> str:
    """User input in a one-line message: quoted, control characters escaped, cut short."""
    shown = repr(text)
    return shown if len(shown) <= width else shown[: width - 4] + "...'"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _tool_errors(function: _Tool) -> Callable[..., Awaitable[str]]:
    """The tool as the server calls it: on its event loop (a coroutine function: the SDK
    runs a plain one in a worker thread, a hop each way that costs more than most tools take
    on a corpus loaded once), errors a caller can act on a one-line tool error, never a
    traceback."""
    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(function)
    async def wrapped(*args: Any, **kwargs: Any) -> str:
        try:
            return function(*args, **kwargs)
        except drilldown.DrillError as error:
            raise ToolError(_one_line(error)) from None
        except (WikitraceError, ValueError, OSError) as error:
            raise ToolError(_one_line(error)) from None

    return wrapped


def build_server(corpus: Corpus) -> Any:
    """An MCPServer (the official SDK's) with the corpus's tools and pages."""
    server = _new_server(corpus)
    tools = _Tools(server)
    _add_first_message(tools, corpus)
    _add_lookup_tools(tools, corpus)
    _add_run_tools(tools, corpus)
    _add_evidence_tools(tools, corpus)
    _add_pages(server, corpus)
    return server


def _new_server(corpus: Corpus) -> Any:
    """The server, yet without tools or pages: its name, instructions and version, and a
    caller's bad arguments reported in one line."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class Server(MCPServer[Any]):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as error:
                cause = error.__cause__
                if isinstance(cause, ValidationError):  # the SDK's check of the arguments
                    problems = "; ".join(
                        f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                        for e in cause.errors()
                    )
                    raise ToolError(f"bad arguments to {name}: {problems}") from None
                raise

        async def run_stdio_async(self) -> None:
            """Over stdin and stdout without a thread hop per message (tools/mcp_stdio.py)."""
            lowlevel = self._lowlevel_server

            async def serve(read_stream: Any, write_stream: Any) -> None:
                options = lowlevel.create_initialization_options()
                await lowlevel.run(read_stream, write_stream, options)

            await mcp_stdio.run_stdio(serve, super().run_stdio_async)

    counts = corpus.manifest.counts
    server: Any = Server(
        name="wikitrace",
        title="wikitrace corpus",
        instructions=INSTRUCTIONS.format(
            runs=counts.get("runs", 0), insights=counts.get("insights", 0), version=corpus.label
        ),
        version=manifest.builder_version(),
        log_level="WARNING",
    )
    # The SDK logs through the root logger to stderr. bm25s sets its own logger to DEBUG when
    # imported, and would log every index it builds: the handlers keep to warnings.
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.WARNING)
    return server


class _Tools:
    """Adds tools to a server: each read-only, described by its docstring, its errors a
    caller can act on one line."""

    def __init__(self, server: Any) -> None:
        from mcp.types import ToolAnnotations

        self.server = server
        self.read_only = ToolAnnotations(
            read_only_hint=True, idempotent_hint=True, open_world_hint=False
        )

    def add(self, function: _Tool) -> _Tool:
        description = inspect.cleandoc(function.__doc__ or "")
        self.server.tool(description=description, annotations=self.read_only)(
            _tool_errors(function)
        )
        return function


# The first_message tool's arguments: each a field of the message's options
# (tools/message_options.py), as the client sees it.
_Task = Annotated[str, Field(description="The task you are about to solve, in full.")]
_TaskType = Annotated[str | None, Field(description="Keep to this task type (default: inferred).")]
_AllTypes = Annotated[bool, Field(strict=True, description="List every task type's entries.")]
_ExcludeTasks = Annotated[
    list[str] | None,
    Field(
        description="Tasks to leave out (leave-one-out evaluations), each named by its id "
        "(every source's task of that id) or SOURCE:ID (that source's alone)."
    ),
]
_Similar = Annotated[
    int,
    Field(strict=True, ge=0, le=SIMILAR_LIMIT, description="Similar past runs to list."),
]
_MaxTokens = Annotated[
    int,
    Field(
        strict=True, ge=0, le=TOKEN_LIMIT, description="Budget in tokens (characters / 4); 0: none."
    ),
]
_Mount = Annotated[
    str | None,
    Field(
        description="Where the corpus is mounted, if the agent also has a shell: the message "
        "then names shell commands there instead of this server's tools."
    ),
]
_Project = Annotated[
    str | None,
    Field(
        description="The code project you work in: its name, git remote URL or folder "
        "(default: the repository of the folder the server was started in). A project with "
        "past runs gets only its own lessons and runs."
    ),
]
_Kind = Annotated[
    str | None,
    Field(
        description="The task's kind of work in a corpus of coding sessions: "
        + ", ".join(KINDS)
        + " (default: inferred from the task's words)."
    ),
]
_FlagConflicts = Annotated[
    bool,
    Field(
        strict=True,
        description="Name the listed lessons whose applicability overlaps and whose source "
        "runs ended differently, as pairs to drill into before relying on either.",
    ),
]


def _add_first_message(tools: _Tools, corpus: Corpus) -> None:
    """`first_message`: what the memory shows an agent at the start of a task."""

    @tools.add
    def first_message(
        task: _Task,
        task_type: _TaskType = None,
        all_types: _AllTypes = False,
        exclude_tasks: _ExcludeTasks = None,
        similar: _Similar = SIMILAR,
        max_tokens: _MaxTokens = BUDGET_TOKENS,
        mount: _Mount = None,
        project: _Project = None,
        kind: _Kind = None,
        flag_conflicts: _FlagConflicts = False,
    ) -> str:
        """The memory's first message for a task: the lessons for its task type (each with its
        source run and that run's outcome), the most similar past runs, when to drill down, and
        how to report which entries you used. Call it once, before acting on the task. The
        same text as `wikitrace prompt`, naming this server's tools where it names shell
        commands (unless `mount` is given)."""
        if not task.strip():
            raise ValueError("the task is empty")
        found = None if project else corpus.folder_project()
        options = MessageOptions(
            task_type=task_type,
            exclude_tasks=exclude_tasks or (),
            similar=similar,
            max_tokens=max_tokens or None,
            mount=mount or DEFAULT_MOUNT,
            access="shell" if mount else "mcp",
            infer_type=not all_types,
            flag_conflicts=flag_conflicts,
            project=project_named(project) if project else found,
            project_aliases=corpus.aliases(found),
            project_found=not project,
            kind=kind_named(kind) if kind else None,
            # A folder the client names is not run git in: the one it started the server in is.
            checkout=None if project else corpus.folder,
        )
        return str(corpus.memory().first_message(task, options).text)


def _add_lookup_tools(tools: _Tools, corpus: Corpus) -> None:
    """`search` and `read_page`: find entries by words, and read any page as written."""

    @tools.add
    def search(
        query: Annotated[str, Field(description="Words to look for.")],
        kind: Annotated[
            Literal["all", "insights", "compilations", "tasks"],
            Field(description="Which layer to search."),
        ] = "all",
        limit: Annotated[
            int, Field(strict=True, ge=1, le=100, description="Hits per kind, at most.")
        ] = 10,
        exclude_tasks: Annotated[
            list[str] | None,
            Field(description="Tasks whose entries to leave out: an id, or SOURCE:ID."),
        ] = None,
        min_score: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description=f"The least score a hit needs (default {MIN_SCORE:g}).",
            ),
        ] = None,
    ) -> str:
        """Search the corpus by words (BM25): insights by title, guideline and applicability;
        compilations by title, claims and their quotes; past runs by task text. Plain words
        find their other forms (refund, refunded) and the parts of a name (transfer to human
        finds transfer_to_human_agents). Each hit starts with its score, from 0 to 1 (the
        share of the query's weight it matches), best first; "no match" when no entry scores
        min_score or more: then the corpus holds nothing on it, do not guess from weak hits.
        Use it to find lessons or runs the first message did not list. Each hit gives the page
        to read_page. The same as `wikitrace search`."""
        from .find import SEARCH_KINDS, no_match

        kinds = SEARCH_KINDS if kind == "all" else (kind,)
        least = MIN_SCORE if min_score is None else min_score
        hits = corpus.memory().search(
            query, kinds, limit=limit, exclude_tasks=exclude_tasks or (), min_score=least
        )
        return "\n".join(hit.line() for hit in hits) or no_match(least)

    @tools.add
    def read_page(
        path: Annotated[
            str,
            Field(
                description="Path relative to the corpus root, as the indexes link it: "
                "_index.md, insight/insight-0001.md, compilation/step-0003.md, "
                "raw/step-0003/metadata.md."
            ),
        ],
        offset: Annotated[
            int,
            Field(strict=True, ge=0, le=OFFSET_LIMIT, description="Start at this character."),
        ] = 0,
    ) -> str:
        """A page of the corpus, as written: an index, an insight, a compilation, a run's
        metadata or its turns (long pages come in parts: the text says the next offset).
        For a run's turns, `actions` and `turn` are easier to read."""
        return corpus.page(path, offset)


def _add_run_tools(tools: _Tools, corpus: Corpus) -> None:
    """`actions` and `turn`: a past run's turns, one line each or in full."""
    root = str(corpus.root)

    @tools.add
    def actions(
        step: Annotated[str, Field(description="The run: step-0042 or 42.")],
    ) -> str:
        """One line per turn of a past run: turn number, role, the action taken and the start
        of what came back. Use it to see what a run did before reading turns in full."""
        return drilldown.actions_text(root, step)

    @tools.add
    def turn(
        step: Annotated[str, Field(description="The run: step-0042 or 42.")],
        turns: Annotated[str, Field(description="A turn N, or turns N-M (from 1).")],
        lines: Annotated[
            str | None, Field(description="Only lines A-B of each turn (numbered).")
        ] = None,
        grep: Annotated[
            str | None,
            Field(description="Only the lines holding these words (any case), with context."),
        ] = None,
    ) -> str:
        """Turns of a past run in full, as logged (reasoning, action, observation): the
        facts a lesson or compilation rests on. Read the turn a lesson cites before you
        trust it. For a long turn, `grep` finds the lines and `lines` shows a window."""
        if lines and grep:
            raise ValueError("give lines or grep, not both")
        return drilldown.turns_text(root, step, turns, lines, grep)


def _add_evidence_tools(tools: _Tools, corpus: Corpus) -> None:
    """`audit` and `check_citations`: the evidence behind a lesson, and a report's citations
    checked."""

    @tools.add
    def audit(
        entry: Annotated[
            str, Field(description="An insight (insight-0007 or 7) or a run (step-0003).")
        ],
    ) -> str:
        """The evidence behind a lesson: the insight, the compilation claims it rests on, and
        each cited raw turn with the quoted words between >>> and <<<. For a run: the lessons
        drawn from it. Call it before relying on a lesson from a failed run or an untested
        one."""
        from .audit import audit_insight, audit_step

        entry = entry.strip()
        if entry.startswith("step-"):
            return audit_step(corpus.root, entry)
        return audit_insight(corpus.root, entry)

    @tools.add
    def check_citations(
        report: Annotated[
            dict[str, Any],
            Field(
                description='Your report: {"used": {"insights": ["insight-0007"], '
                '"compilations": ["step-0003"], "raw": ["step-0003"]}}'
            ),
        ],
    ) -> str:
        """Check a citation report against the corpus before you send it: every id must be an
        entry of this corpus. Returns what the report cites, or the field that is wrong."""
        from .cite import KINDS, check_report

        checked = check_report(corpus.root, report)
        cited = {kind: list(dict.fromkeys(getattr(checked.used, kind))) for kind in KINDS}
        total = sum(map(len, cited.values()))
        parts = [f"{kind}: {', '.join(ids) or 'none'}" for kind, ids in cited.items()]
        entries = "1 entry" if total == 1 else f"{total} entries"
        return f"ok: {entries}, all in the corpus ({corpus.label}); " + "; ".join(parts)


def _add_pages(server: Any, corpus: Corpus) -> None:
    """The pages as resources: the root and each layer's index by name, any page by path."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    async def page(path: str) -> str:  # on the loop, as the tools are (`_tool_errors`)
        try:
            return corpus.page(path)
        except ValueError as error:
            raise ResourceNotFoundError(_one_line(error)) from None

    for folder, description in INDEXES:
        rel = f"{folder}/{INDEX_NAME}" if folder else INDEX_NAME
        server.resource(
            URI_ROOT + rel,
            name=rel,
            description=description,
            mime_type="text/markdown",
        )(functools.partial(page, rel))

    server.resource(
        URI_ROOT + "{+path}",
        name="page",
        description="Any page of the corpus by its path: insight/insight-0001.md, ...",
        mime_type="text/markdown",
    )(page)


def serve(
    path: Path,
    http_port: int | None = None,
    folder: Path | None = None,
    project_aliases: Mapping[str, str] | None = None,
) -> None:
    """Serve the corpus at `path` over stdio, or streamable HTTP on 127.0.0.1:`http_port`;
    `folder` is the client's working folder (first messages are for its project)."""
    corpus = Corpus(path, folder, project_aliases)
    if not os.path.isfile(corpus.root / layout.TOOLS_LAYOUT):
        raise CorpusError(f"{path}: no {layout.TOOLS_LAYOUT}; is it a wikitrace corpus?")
    server = build_server(corpus)
    where = "stdio" if http_port is None else f"http://127.0.0.1:{http_port}/mcp"
    # stderr: over stdio, stdout carries the protocol alone.
    print(f"wikitrace mcp: serving {corpus.label} over {where}, read-only", file=sys.stderr)
    if http_port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=http_port)


def describe(corpus: Corpus) -> dict[str, Any]:
    """What a server on this corpus offers, for `--list`: tools and resources, as JSON."""
    import anyio

    server = build_server(corpus)

    async def listed() -> dict[str, Any]:
        tools = await server.list_tools()
        resources = await server.list_resources()
        return {
            "version": corpus.version,
            "root": str(corpus.root),
            "tools": [{"name": t.name, "description": t.description} for t in tools],
            "resources": [str(r.uri) for r in resources],
            "resource_template": URI_ROOT + "{+path}",
        }

    return dict(anyio.run(listed))


__all__ = ["URI_ROOT", "Corpus", "build_server", "describe", "serve"]
