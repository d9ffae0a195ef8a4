"""The mechanical compilation written when no LLM is used (`--model offline`)."""

from __future__ import annotations

import re

from wikitrace.corpus_schema import Claim, Compilation, Evidence, RunRecord, Turn, is_judged
from wikitrace.tools.drilldown import as_text

from .evidence import QuoteChecker

OFFLINE_MODEL = "offline"
MAX_ERROR_TURNS = 25
FINAL_ACTIONS = 3
QUOTE_LIMIT = 240

_ERROR_WORDS = (
    r"\b(error|exception|traceback|failed|failure|not found|invalid|denied|forbidden|"
    r"cannot|can't|unable to|no such file|command not found|timed out|timeout|"
    r"nothing happens)\b|<returncode>\s*[1-9]"
)
_ERROR_SIGNAL = re.compile("(?i)" + _ERROR_WORDS)
_ERROR_SIGNAL_LOWER = re.compile(_ERROR_WORDS)


def error_signal(text: str) -> re.Match[str] | None:
    """The first word of `text` that says something went wrong (_ERROR_SIGNAL, case
    ignored). ASCII text is searched in lower case, at the same positions: about twice as
    fast as ignoring case (every observation of every run is searched, by the offline
    compiler and by mining)."""
    if text.isascii():
        return _ERROR_SIGNAL_LOWER.search(text.lower())
    return _ERROR_SIGNAL.search(text)


_OBSERVATION_ROLES = {"tool", "function", "ipython", "environment", "observation", "env"}
_ACTING_ROLES = {"assistant", "agent", "ai", "model"}


def _observations(turn: Turn) -> list[str]:
    texts = [turn.observation] if turn.observation else []
    texts += [as_text(call.result) for call in turn.tool_calls or [] if call.result is not None]
    if turn.content and (turn.role or "").lower() in _OBSERVATION_ROLES:
        texts.append(turn.content)
    return texts


def _excerpt(text: str, start: int, end: int) -> str:
    """The line holding text[start:end], cut to QUOTE_LIMIT characters around it: verbatim."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if line_end - line_start > QUOTE_LIMIT:
        line_start = max(line_start, start - QUOTE_LIMIT // 2)
        line_end = min(line_end, line_start + QUOTE_LIMIT)
    return text[line_start:line_end].strip()


def _error_quote(turn: Turn) -> str | None:
    for call in turn.tool_calls or []:  # the log itself marks the call failed (is_error)
        if call.metadata.get("is_error") is True and call.result is not None:
            lines = [line.strip() for line in as_text(call.result).splitlines() if line.strip()]
            if lines:
                return lines[0][:QUOTE_LIMIT]
    for text in _observations(turn):
        match = error_signal(text)
        if match:
            return _excerpt(text, match.start(), match.end())
    return None


def has_error_signal(turn: Turn) -> bool:
    """Whether what came back in the turn says something went wrong."""
    return _error_quote(turn) is not None


def _action_quote(turn: Turn) -> str | None:
    if turn.action:
        return _excerpt(turn.action, 0, 0)
    if turn.tool_calls:
        call = turn.tool_calls[0]
        arguments = "" if call.arguments is None else as_text(call.arguments)
        return f"{call.name}: {arguments}"[:QUOTE_LIMIT].strip()
    if turn.content and (turn.role or "").lower() in _ACTING_ROLES:
        return _excerpt(turn.content, 0, 0)
    return None


def compile_offline(step: int, record: RunRecord) -> Compilation:
    """Outcome, the turns whose observations signal an error, and the final actions."""
    checker = QuoteChecker(record.turns)
    errors: list[tuple[int, str]] = []
    actions: list[tuple[int, str]] = []
    for number, turn in enumerate(record.turns, start=1):
        error = _error_quote(turn)
        if error:
            errors.append((number, error))
        action = _action_quote(turn)
        if action:
            actions.append((number, action))
    final = actions[-FINAL_ACTIONS:]

    # Built from our own values, so without validation: this runs once per run of a build.
    def evidence(turn: int, quote: str) -> Evidence:
        return Evidence.model_construct(turn=turn, quote=quote, verified=checker.found(turn, quote))

    claims = [
        Claim.model_construct(
            statement=f"Turn {turn}: the observation signals an error or a failed action.",
            evidence=[evidence(turn, quote)],
        )
        for turn, quote in errors[:MAX_ERROR_TURNS]
    ]
    if final:
        claims.append(
            Claim.model_construct(
                statement=f"The run's last {len(final)} actions.",
                evidence=[evidence(turn, quote) for turn, quote in final],
            )
        )
    notes = []
    if len(errors) > MAX_ERROR_TURNS:
        rest = ", ".join(str(turn) for turn, _ in errors[MAX_ERROR_TURNS:])
        notes.append(f"Further turns whose observations signal an error: {rest}.")
    weak = record.metadata.get("weak_signals")
    if isinstance(weak, dict) and any(weak.values()):
        counted = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in weak.items() if n)
        notes.append(f"The log's own signals (not its label): {counted}.")
    outcome = record.outcome
    signals = "1 turn has" if len(errors) == 1 else f"{len(errors)} turns have"
    last = f"the last action was at turn {final[-1][0]}" if final else "no action was found"
    description = (
        f"The run {'succeeded' if record.success else 'failed'} after {len(record.turns)} turns. "
        f"{signals} an observation that signals an error or a failed action; {last}. "
        "This is a mechanical reading of the log (keyword matches), not a diagnosis: "
        "build with a model to learn why the run ended as it did."
    )
    return Compilation(
        step=step,
        outcome=outcome,
        judged=is_judged(record.metadata),
        compiled_by="offline",
        model=OFFLINE_MODEL,
        title=f"task {record.task_id} {'succeeded' if record.success else 'failed'} in "
        f"{len(record.turns)} turns ({len(errors)} with an error signal)",
        description=description,
        claims=claims,
        notes=notes,
    )
