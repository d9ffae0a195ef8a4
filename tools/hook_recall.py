"""Recall through an agent's hooks: what a session-start or prompt hook answers from a corpus.

Claude Code (SessionStart, UserPromptSubmit), Codex (the same two, same shape) and Gemini CLI
(SessionStart, BeforeAgent) send a JSON object on stdin naming the event, the session, the
working folder and, for a prompt, its text; each reads `hookSpecificOutput.additionalContext`
from the JSON its hook prints. The answer is the first message `wikitrace prompt` renders
(tools/first_message.py), scoped to the folder's repository and, for a prompt, its kind of
work; nothing when nothing applies. Never imports litellm or click.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from wikitrace.corpus_schema.errors import InputError
from wikitrace.corpus_schema.setting_fields import default

from .message_options import SIMILAR, MessageOptions

SESSION_START = "SessionStart"
PROMPT_EVENTS = frozenset({"UserPromptSubmit", "BeforeAgent"})
"""Events that carry the user's prompt: Claude Code's and Codex's, and Gemini CLI's."""
RECALL_EVENTS = frozenset({SESSION_START, *PROMPT_EVENTS})
DEFAULT_MAX_TOKENS: int = default("max-tokens")
"""A hook's answer is read at every start and prompt: shorter than `prompt`'s message
(`hooks recall --max-tokens`, declared in corpus_schema/setting_fields.py)."""


@dataclass(frozen=True)
class RecallPayload:
    """A recall hook's input on stdin (the fields Claude Code, Codex and Gemini CLI share).
    Another program's record, which gains fields release by release: what we do not read is
    ignored, so that an agent's update never breaks the hook."""

    hook_event_name: str
    """SessionStart, UserPromptSubmit (Claude Code, Codex) or BeforeAgent (Gemini CLI)."""
    session_id: str | None = None
    """The session's id (only logged)."""
    cwd: str | None = None
    """The agent's working folder: its repository is the project whose lessons are recalled."""
    prompt: str | None = None
    """The user's prompt (UserPromptSubmit, BeforeAgent): its kind of work scopes the lessons."""


def parse_recall_payload(raw: bytes) -> RecallPayload:
    """The payload as read; InputError for anything that is not a recall hook's input.
    Checked by hand, not by a pydantic model: building one costs the hook's start-up time."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InputError(
            f"the hook payload is not JSON ({error})" if raw.strip() else "no hook payload",
            hint="`hooks recall` reads the agent's hook JSON on stdin",
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"the hook payload is a JSON {type(data).__name__}, not an object")
    given: dict[str, str | None] = {}
    for name in ("hook_event_name", "session_id", "cwd", "prompt"):
        value = data.get(name)
        if value is None and name == "hook_event_name":
            raise InputError(f"hook payload field '{name}': missing")
        if value is not None and not isinstance(value, str):
            raise InputError(
                f"hook payload field '{name}': a JSON {type(value).__name__}, not a string"
            )
        given[name] = value
    event = given.pop("hook_event_name")
    assert event is not None
    return RecallPayload(event, **given)


@dataclass(frozen=True)
class Recall:
    """What a recall hook answers: `text` for the agent, or nothing and why (`reason`)."""

    event: str
    text: str = ""
    insights: list[str] = field(default_factory=list)
    """Ids of the lessons the text lists."""
    project: str | None = None
    reason: str = ""
    """Why nothing is answered (logged), when `text` is empty."""

    def output(self) -> bytes:
        """The JSON the agent reads (one line, no trailing newline added); empty when there
        is nothing to say: every agent takes an empty stdout with exit 0 as no context."""
        if not self.text:
            return b""
        answer = {
            "hookSpecificOutput": {"hookEventName": self.event, "additionalContext": self.text}
        }
        return orjson.dumps(answer) + b"\n"


def recall(
    corpus: Path,
    payload: RecallPayload,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    project_aliases: Mapping[str, str] | None = None,
    compiled_templates: Path | None = None,
) -> Recall:
    """The lessons for the session `payload` names, from the corpus at `corpus`.

    The working folder's repository is the project. At session start, only a project with
    runs in the corpus gets anything (its own lessons, every kind). For a prompt, the scope is
    the `prompt` command's: the project's own lessons when it has runs, else the prompt's kind
    of work's from other coding projects, and nothing when its domain (told by its words: a
    project with no runs is no evidence of coding work) or kind cannot be inferred.

    `compiled_templates`: where the message's template, compiled once, is kept for the next
    call (MessageOptions)."""
    event = payload.hook_event_name
    if event not in RECALL_EVENTS:
        return Recall(event, reason=f"{event} is no recall event")
    folder = Path(payload.cwd) if payload.cwd and Path(payload.cwd).is_absolute() else None
    if folder is None or not folder.is_dir():
        return Recall(event, reason="the payload names no existing working folder (cwd)")

    from wikitrace.corpus_schema.projects import folder_aliases, matching_projects, repository_at

    project = repository_at(folder)
    if project is None:
        return Recall(event, reason=f"{folder} is in no git repository")
    prompt = (payload.prompt or "").strip() if event in PROMPT_EVENTS else ""
    if prompt:
        from wikitrace.corpus_schema.turns import hook_contexts

        # Gemini CLI's prompt holds what the session start's hook (this one) recalled.
        prompt = hook_contexts(prompt)[0]
    if event in PROMPT_EVENTS and not prompt:
        return Recall(event, project=project, reason="the prompt is empty")

    from .memory import Memory

    # Through the catalog's index when it has one: the project's runs and lessons are read,
    # not every line of the catalog.
    memory = Memory.load(corpus.absolute(), indexed=True)
    aliases = folder_aliases(folder, project) | dict(project_aliases or {})
    # At session start, nothing to render for a project with no runs here: said at once.
    if event == SESSION_START and not matching_projects(project, memory.project_keys, aliases):
        return Recall(event, project=project, reason=f"{project} has no runs in {corpus}")
    options = MessageOptions(
        # At a session's start there is no task yet to find similar past runs for.
        similar=SIMILAR if prompt else 0,  # as many as `prompt` lists
        max_tokens=max_tokens or None,
        mount=str(memory.root),
        report_at="end",
        project=project,
        project_aliases=aliases,
        # A coding agent's repository is the task's project even with no runs here (not a
        # folder `prompt` happens to run in): the message then says that the lessons it lists
        # are other projects'.
        project_found=False,
        # Its lessons checked against the code the agent works in: stale ones marked, those
        # whose every named file is gone left out (tools/first_message_drift.py).
        checkout=folder,
        compiled_templates=compiled_templates,
    )
    message = memory.first_message(prompt, options)
    if not message.project_has_runs:
        if event == SESSION_START:
            return Recall(event, project=project, reason=f"{project} has no runs in {corpus}")
        if message.kind is None or message.kind_unsure is not None:
            return Recall(
                event,
                project=project,
                reason=f"{project} has no runs in {corpus} and the prompt's kind of work "
                "could not be inferred",
            )
    if not message.insights:
        return Recall(event, project=project, reason="no lesson applies")
    return Recall(event, _without_task(message.text), message.insights, project)


TASK_HEADING = "# Your task\n"


def _without_task(text: str) -> str:
    """The first message less its task section: the agent has its prompt (or, at session
    start, none yet) already."""
    if not text.startswith(TASK_HEADING):
        return text
    rest = text.find("\n# ", len(TASK_HEADING))
    return text[rest + 1 :] if rest >= 0 else text
