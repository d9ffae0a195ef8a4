"""Langfuse trace exports: `{trace, observations[]}` (or a trace holding its `observations`, or
a list of either). One trace is one run.

Observations are ordered by `startTime`: a GENERATION is an assistant turn, a TOOL joins the
call the generation asked for; spans, agents and chains only give structure, and show as a
turn only when they failed (`level` ERROR). Fields some SDKs store JSON-encoded are decoded.
The task is the first user message of `trace.input` (else of the first generation's input).
The outcome is a score whose name says success (success, resolved, passed, correct, ...);
other scores (toxicity, hallucination, ...) are kept in metadata and label nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError

from .base import SESSION_NOTE, Candidate, Found, Probe, jsonl_objects, load_json, rest, text
from .labels import parse_value
from .spans import Step, decoded, first_user_text, steps_to_turns

SUCCESS_SCORES = frozenset(
    {"success", "resolved", "passed", "pass", "correct", "is_correct", "task_success", "outcome"}
)
_TOOL_PREFIXES = ("running tool:", "execute_tool")


def _tool_name(name: str) -> str:
    for prefix in _TOOL_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :].strip() or name
    return name


def _step(observation: dict[str, Any]) -> Step:
    kind = observation.get("type")
    name = str(observation.get("name") or kind or "observation")
    failed = observation.get("level") == "ERROR"
    error = (str(observation.get("statusMessage") or "ERROR")) if failed else None
    metadata = {
        k: observation[k]
        for k in ("id", "type", "startTime", "model", "usageDetails", "level")
        if observation.get(k) is not None
    }
    if kind == "GENERATION":
        return Step(
            "llm",
            name,
            observation.get("startTime"),
            observation.get("output"),
            error=error,
            metadata=metadata,
        )
    if kind == "TOOL":
        return Step(
            "tool",
            _tool_name(name),
            observation.get("startTime"),
            observation.get("output"),
            tool_args=observation.get("input"),
            error=error,
            metadata=metadata,
        )
    return Step("other", name, observation.get("startTime"), error=error, metadata=metadata)


def _traces(data: Any) -> list[tuple[dict[str, Any], list[Any], str]]:
    """(trace, observations, where) of each trace in an export."""
    items = data if isinstance(data, list) else [data]
    found = []
    for index, item in enumerate(items):
        where = f"[{index}]" if isinstance(data, list) else ""
        if not isinstance(item, dict):
            continue
        given = item.get("trace")
        trace: dict[str, Any] = given if isinstance(given, dict) else item
        observations = item.get("observations", trace.get("observations"))
        found.append((trace, observations if isinstance(observations, list) else [], where))
    return found


def _label(scores: Any) -> tuple[bool | float | None, dict[str, Any] | None]:
    for score in scores if isinstance(scores, list) else []:
        if isinstance(score, dict) and str(score.get("name", "")).lower() in SUCCESS_SCORES:
            value = score.get("value", score.get("stringValue"))
            return parse_value(value), score
    return None, None


def read(path: Path, found: Probe) -> Iterator[Found]:
    data = load_json(path) if found.kind == "json" else None
    if found.kind == "jsonl":
        data = []
        for item in jsonl_objects(path, unit="trace"):
            if isinstance(item, InputError):
                yield item
                continue
            data.append(item[1])
    for trace, observations, where in _traces(data):
        try:
            yield _run(path, trace, observations, where)
        except InputError as error:
            yield error


def _run(path: Path, trace: dict[str, Any], observations: list[Any], where: str) -> Candidate:
    ordered = sorted(
        (o for o in observations if isinstance(o, dict)),
        key=lambda o: str(o.get("startTime") or ""),
    )
    signals: Counter[str] = Counter()
    turns = steps_to_turns([_step(o) for o in ordered], signals)
    trace_input = decoded(trace.get("input"))
    task = first_user_text(trace_input)
    if task is None:
        task = next(
            (
                first_user_text(o.get("input"))
                for o in ordered
                if o.get("type") == "GENERATION" and first_user_text(o.get("input"))
            ),
            None,
        )
    if task is None and trace_input is not None:
        task = text(trace_input)
    trace_id = str(trace.get("id") or path.stem)
    if not turns or not task:
        raise InputError(
            "no model call or tool in the trace" if not turns else "no task: no user input",
            path=path,
            at=where or None,
            hint="a Langfuse export holds the trace and its observations",
        )
    metadata = rest(trace, {"input", "observations"})
    kinds = Counter(str(o.get("type")) for o in ordered)
    metadata["counts"] = {
        "observations": dict(kinds),
        "tool_calls": sum(len(t.get("tool_calls") or []) for t in turns),
    }
    metadata["weak_signals"] = dict(signals)
    label, score = _label(trace.get("scores"))
    success = label if isinstance(label, bool) else None
    reward = label if isinstance(label, float) else None
    if score is not None:
        metadata["label_score"] = score.get("name")
    return Candidate(
        path=str(path),
        at=where or None,
        run_id=trace_id,
        reward=reward,
        note=None if label is not None else SESSION_NOTE,
        aliases=(str(trace["sessionId"]),) if trace.get("sessionId") else (),
        data={
            "task_id": trace_id,
            "task": task,
            "task_type": str(trace["name"]) if trace.get("name") else None,
            "success": success,
            "turns": turns,
            "metadata": metadata,
        },
    )
