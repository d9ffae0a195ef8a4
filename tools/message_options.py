"""What the agent's first message shows, and how: one record every front end builds whole.

The CLI (`wikitrace prompt`), the MCP server's `first_message` tool, the Inspect solver, the
Harbor wrapper and the recall hook each build one `MessageOptions` and hand it to
`render_first_message` (tools/first_message.py), so an option such as `flag_conflicts` means
the same wherever it is offered. Each default is declared once, in
corpus_schema/setting_fields.py (the `prompt` command's settings), and named here for the front
ends. Standard library only: `wikitrace --help` shows these without loading a corpus reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from wikitrace.corpus_schema.setting_fields import declared, default

ReportAt = Literal["first", "end"]
"""Where the citation report is asked for: in the first message (ours), or after the episode
(the method as published)."""
Access = Literal["shell", "mcp"]
"""How the agent reads the corpus: a shell where it is mounted (cat, grep, tools/turn), or the
tools of `wikitrace mcp` (read_page, search, turn, ...)."""

DEFAULT_MOUNT: str = default("mount")
"""Where the agent sees the corpus unless told otherwise."""
SIMILAR: int = default("similar")
"""How many similar past runs a message lists unless told otherwise."""
BUDGET_TOKENS: int = default("message-tokens")
"""The budget a front end gives a message unless told otherwise (the record's own default is
none: every lesson)."""
SIMILAR_LIMIT = int(declared("similar").high or 0)
"""The most similar past runs a front end lets its user ask for."""
CODE_SECONDS = 0.25
"""Seconds git is given in all to check the lessons against a checkout."""


@dataclass(frozen=True)
class MessageOptions:
    """Every option of the first message (tools/first_message.py, `render_first_message`).

    An unknown field is a TypeError, as for any dataclass.
    """

    task_type: str | None = None
    """Keep to this task type (an unknown one is an InputError); None: the project's types,
    else inferred from the most similar past runs when `infer_type`."""
    exclude_tasks: Sequence[str] = ()
    """Show nothing drawn from runs of these tasks (an id, or SOURCE:ID)."""
    similar: int = SIMILAR
    """How many similar past runs to list (one per task)."""
    max_tokens: int | None = None
    """The message's budget in tokens (characters / 4); None: every lesson it may list."""
    mount: str = DEFAULT_MOUNT
    """Where the agent sees the corpus; the message's paths and commands use it."""
    prompts_dir: Path | None = None
    """A folder whose first-message.j2 overrides the bundled template."""
    compiled_templates: Path | None = None
    """A folder of the user's own where the template, compiled once, is kept for the next
    process (prompts.CompiledTemplates: a hook's recall is a new process at every prompt);
    None: compiled once a process."""
    infer_type: bool = True
    """Infer the task's type when none is given; False: list every type's lessons."""
    insights_only: bool = False
    """The method's Insights Only control: no mount, no similar runs, no drill-down."""
    report_at: ReportAt = default("report-at")  # noqa: RUF009 (a string, declared once)
    """Ask for the citation report in the message, or leave it for the harness at the end."""
    flag_conflicts: bool = False
    """Name the listed pairs whose applicability overlaps and whose source runs ended
    differently, as pairs to drill into before relying on either."""
    project: str | None = None
    """The task's project (a key as corpus_schema/projects.py makes them): a project with runs
    here gets its own lessons and runs alone."""
    access: Access = "shell"
    """"mcp": the message names the MCP server's tools where it would name shell commands."""
    kind: str | None = None
    """The task's kind of work (corpus_schema/work.py); None: inferred from its words."""
    project_aliases: Mapping[str, str] | None = None
    """Other names joined to a project (the user's `[projects]` table, a folder's remotes)."""
    project_found: bool = False
    """The project was found from the working folder, not given: it counts only when it has
    runs here."""
    checkout: Path | None = None
    """The git checkout the agent works in: the project's own lessons are checked against it
    (stale ones marked, those whose every named file is gone left out)."""
    now: datetime | None = None
    """The time each lesson's age is counted from (None: now)."""
    code_seconds: float = CODE_SECONDS
    """Seconds git is given in all to check the lessons against `checkout`."""

    def __post_init__(self) -> None:
        # Frozen all through: a list of tasks given is kept as a tuple.
        object.__setattr__(self, "exclude_tasks", tuple(self.exclude_tasks))
