"""The mechanical compilation written when no LLM is used (`--model offline`)."""

from __future__ import annotations

from wikitrace.corpus_schema import Claim, Compilation, Evidence, RunRecord, Turn, is_judged
from wikitrace.corpus_schema.drilldown import as_text
from wikitrace.corpus_schema.turns import ACTING_ROLES

from .evidence import QuoteChecker
from .failure_quotes import QUOTE_LIMIT
from .signals import excerpt, failures

OFFLINE_MODEL = "offline"
MAX_ERROR_TURNS = 25
FINAL_ACTIONS = 3


def _action_quote(turn: Turn) -> str | None:
    if turn.action:
        return excerpt(turn.action, 0, 0)
    if turn.tool_calls:
        call = turn.tool_calls[0]
        arguments = "" if call.arguments is None else as_text(call.arguments)
        return f"{call.name}: {arguments}"[:QUOTE_LIMIT].strip()
    if turn.content and (turn.role or "").lower() in ACTING_ROLES:
        return excerpt(turn.content, 0, 0)
    return None


def compile_offline(step: int, record: RunRecord) -> Compilation:
    """Outcome, the turns that failed (compiler/signals.py), and the final actions."""
    checker = QuoteChecker(record.turns)
    errors = list(failures(record.turns).items())
    actions: list[tuple[int, str]] = []
    for number, turn in enumerate(record.turns, start=1):
        action = _action_quote(turn)
        if action:
            actions.append((number, action))
    final = actions[-FINAL_ACTIONS:]

    # Validated: pydantic-core checks three fields faster than model_construct sets them.
    def evidence(turn: int, quote: str) -> Evidence:
        return Evidence(turn=turn, quote=quote, verified=checker.found(turn, quote))

    claims = [
        Claim(
            statement=f"Turn {turn}: {failure.why}.",
            evidence=[evidence(turn, quote) for quote in failure.quotes],
        )
        for turn, failure in errors[:MAX_ERROR_TURNS]
    ]
    if final:
        claims.append(
            Claim(
                statement=(
                    "The run's last action."
                    if len(final) == 1
                    else f"The run's last {len(final)} actions."
                ),
                evidence=[evidence(turn, quote) for turn, quote in final],
            )
        )
    notes = []
    if len(errors) > MAX_ERROR_TURNS:
        rest = ", ".join(str(turn) for turn, _ in errors[MAX_ERROR_TURNS:])
        notes.append(f"Further turns that failed: {rest}.")
    weak = record.metadata.get("weak_signals")
    if isinstance(weak, dict) and any(weak.values()):
        counted = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in weak.items() if n)
        notes.append(f"The log's own signals (not its label): {counted}.")
    outcome = record.outcome
    signals = "1 turn has" if len(errors) == 1 else f"{len(errors)} turns have"
    last = f"the last action was at turn {final[-1][0]}" if final else "no action was found"
    description = (
        f"The run {'succeeded' if record.success else 'failed'} after {len(record.turns)} turns. "
        f"{signals} an error signal; {last}. This is a mechanical reading of the log (its "
        "error marks, exit codes, test summaries and, where it marks none, error words), not "
        "a diagnosis: build with a model to learn why the run ended as it did."
    )
    return Compilation(
        step=step,
        outcome=outcome,
        judged=is_judged(record.metadata),
        compiled_by="offline",
        model=OFFLINE_MODEL,
        title=f"{record.task_key} {'succeeded' if record.success else 'failed'} in "
        f"{len(record.turns)} turns ({len(errors)} with an error signal)",
        description=description,
        claims=claims,
        notes=notes,
    )
