"""OpenTelemetry GenAI spans: SDK JSON (span objects with flat `attributes`, as
`ConsoleSpanExporter` and many tools write them; a list, `{spans: [...]}`, or one span a line)
and OTLP JSON (`resourceSpans[].scopeSpans[].spans[]`, attributes as key/value lists). One
trace (`trace_id`) is one run.

Spans are ordered by start time. `gen_ai.operation.name` says what a span is: `chat`,
`call_llm`, `text_completion`, `generate_content` are model calls (an assistant turn from
`gen_ai.output.messages`, or `gen_ai.output`); `execute_tool` is a tool execution
(`gen_ai.tool.name`, `gen_ai.tool.call.id`, arguments and result) joined to the call that
asked for it; `invoke_agent` and other spans only give structure. A span whose status is ERROR
is a weak signal, never the label. The task is the first user message of the first
`gen_ai.input.messages` (else of the agent span).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.input_files import read_input

from .base import BOM, SESSION_NOTE, Candidate, Found, Probe, file_aliases
from .spans import Step, first_user_text, steps_to_turns

LLM_OPERATIONS = frozenset(
    {"chat", "call_llm", "text_completion", "generate_content", "completion", "llm"}
)
TOOL_OPERATIONS = frozenset({"execute_tool", "tool"})


def _value(raw: Any) -> Any:
    """An OTLP AnyValue -> a plain value."""
    if not isinstance(raw, dict):
        return raw
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in raw:
            return raw[key]
    if "intValue" in raw:
        try:
            return int(raw["intValue"])
        except (TypeError, ValueError):
            return raw["intValue"]
    if "arrayValue" in raw:
        return [_value(v) for v in (raw["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in raw:
        return _attributes((raw["kvlistValue"] or {}).get("values", []))
    return raw


def _attributes(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list):
        return {
            str(item.get("key")): _value(item.get("value"))
            for item in raw
            if isinstance(item, dict)
        }
    return {}


def _span(raw: dict[str, Any]) -> dict[str, Any]:
    """A span of either layout -> trace, start, name, attributes, error."""
    given_context, given_status = raw.get("context"), raw.get("status")
    context: dict[str, Any] = given_context if isinstance(given_context, dict) else {}
    status: dict[str, Any] = given_status if isinstance(given_status, dict) else {}
    code = status.get("status_code", status.get("code"))
    failed = str(code).upper() in ("ERROR", "2", "STATUS_CODE_ERROR")
    return {
        "trace": str(raw.get("traceId", context.get("trace_id", raw.get("trace_id", "")))),
        "id": raw.get("spanId", context.get("span_id")),
        "start": raw.get("startTimeUnixNano", raw.get("start_time")),
        "name": str(raw.get("name") or "span"),
        "attributes": _attributes(raw.get("attributes")),
        "error": (str(status.get("description") or status.get("message") or "ERROR"))
        if failed
        else None,
        "resource": raw.get("resource"),
    }


def _spans(path: Path, found: Probe) -> tuple[list[dict[str, Any]], list[Any]]:
    """Every span in the file, and the documents they came from. Read with the standard
    library: trace and span ids are 128- and 64-bit integers in SDK JSON, which orjson would
    round."""
    raw_text = read_input(path).removeprefix(BOM).decode("utf-8", "replace")
    documents: list[Any] = []
    if found.kind == "jsonl":
        for line in raw_text.splitlines():
            if line.strip():
                try:
                    documents.append(json.loads(line))
                except ValueError:
                    continue
    else:
        try:
            documents.append(json.loads(raw_text))
        except (ValueError, RecursionError) as error:
            raise InputError(f"not valid JSON ({error})", path=path) from None
    spans: list[dict[str, Any]] = []
    for document in documents:
        if isinstance(document, dict) and "resourceSpans" in document:
            for resource in document.get("resourceSpans") or []:
                for scope in (resource or {}).get("scopeSpans") or []:
                    spans += [s for s in (scope or {}).get("spans") or [] if isinstance(s, dict)]
        elif isinstance(document, dict) and isinstance(document.get("spans"), list):
            spans += [s for s in document["spans"] if isinstance(s, dict)]
        elif isinstance(document, list):
            spans += [s for s in document if isinstance(s, dict)]
        elif isinstance(document, dict):
            spans.append(document)
    return [_span(s) for s in spans], documents


def _step(span: dict[str, Any]) -> Step:
    attributes = span["attributes"]
    operation = str(attributes.get("gen_ai.operation.name") or "")
    metadata = {
        "span": span["name"],
        "start": span["start"],
        **{
            key: value
            for key, value in attributes.items()
            if key.startswith(("gen_ai.usage", "gen_ai.request.model", "gen_ai.response"))
        },
    }
    if operation in LLM_OPERATIONS:
        output = attributes.get("gen_ai.output.messages", attributes.get("gen_ai.output"))
        if output is None:
            output = attributes.get("gen_ai.completion")
        return Step(
            "llm", span["name"], span["start"], output, error=span["error"], metadata=metadata
        )
    if operation in TOOL_OPERATIONS:
        return Step(
            "tool",
            str(attributes.get("gen_ai.tool.name") or span["name"]),
            span["start"],
            attributes.get("gen_ai.tool.call.result", attributes.get("gen_ai.output")),
            tool_args=attributes.get(
                "gen_ai.tool.call.arguments", attributes.get("gen_ai.tool.args")
            ),
            tool_id=None
            if attributes.get("gen_ai.tool.call.id") is None
            else str(attributes["gen_ai.tool.call.id"]),
            error=span["error"],
            metadata=metadata,
        )
    return Step("other", span["name"], span["start"], error=span["error"], metadata=metadata)


def read(path: Path, found: Probe) -> Iterator[Found]:
    spans, documents = _spans(path, found)
    traces: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        traces.setdefault(span["trace"], []).append(span)
    if not traces:
        yield InputError("no spans in the file", path=path)
        return
    final_output = None  # what any-agent's exports keep beside the spans
    if found.kind == "json" and isinstance(documents[0], dict):
        final_output = documents[0].get("final_output")
    for trace_id, members in traces.items():
        members.sort(key=lambda s: int(s["start"]) if str(s["start"]).isdigit() else 0)
        signals: Counter[str] = Counter()
        turns = steps_to_turns([_step(s) for s in members], signals)
        task = None
        for span in members:
            task = first_user_text(span["attributes"].get("gen_ai.input.messages"))
            if task is None:
                task = first_user_text(span["attributes"].get("gen_ai.prompt"))
            if task:
                break
        if not turns or not task:
            yield InputError(
                "no model call or tool span in the trace"
                if not turns
                else "no task: no span holds the user's message (gen_ai.input.messages)",
                path=path,
                at=f"trace {trace_id}",
                hint="spans need gen_ai.* attributes, with message content captured",
            )
            continue
        agent = next(
            (s for s in members if s["attributes"].get("gen_ai.operation.name") == "invoke_agent"),
            None,
        )
        metadata: dict[str, Any] = {"trace_id": trace_id, "spans": len(members)}
        if agent is not None:
            metadata["agent"] = {
                k: v for k, v in agent["attributes"].items() if not k.startswith("gen_ai.input")
            }
        resource = members[0].get("resource")
        if resource:
            metadata["resource"] = resource
        if final_output is not None and len(traces) == 1:
            metadata["final_output"] = final_output
        metadata["counts"] = {"tool_calls": sum(len(t.get("tool_calls") or []) for t in turns)}
        metadata["weak_signals"] = dict(signals)
        run_id = trace_id if len(traces) > 1 else path.stem
        yield Candidate(
            path=str(path),
            at=f"trace {trace_id}" if len(traces) > 1 else None,
            run_id=run_id,
            note=SESSION_NOTE,
            aliases=(trace_id, *file_aliases(path)) if len(traces) == 1 else (trace_id,),
            data={
                "task_id": run_id,
                "task": task,
                "task_type": None,
                "success": None,
                "turns": turns,
                "metadata": metadata,
            },
        )
