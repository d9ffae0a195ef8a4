"""One LLM call per run: render the prompt within budget, validate the answer, check every quote."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wikitrace import prompts
from wikitrace.corpus_schema import (
    Claim,
    Compilation,
    Evidence,
    InsightDraft,
    PromptRef,
    RunRecord,
    WikitraceError,
)
from wikitrace.corpus_schema.records import Hypothesis
from wikitrace.tools.drilldown import format_turn

from .evidence import QuoteChecker, longest_field, turn_fields
from .llm import LLM, Message

MIN_FIELD_CAP = 200


class CompileError(WikitraceError):
    """A run that could not be compiled; the build reports it and goes on with the others."""


# --- what the model must return ----------------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuoteOut(_Out):
    turn: int
    """The 1-based number of the turn quoted."""
    quote: str = Field(min_length=1)
    """Text copied verbatim from that turn."""


class ClaimOut(_Out):
    statement: str = Field(min_length=1)
    evidence: list[QuoteOut] = Field(min_length=1)


class HypothesisOut(_Out):
    precondition: str = Field(min_length=1)
    behaviour: str = Field(min_length=1)
    expected_effect: str = Field(min_length=1)
    verifier: str = Field(min_length=1)


class InsightOut(_Out):
    title: str = Field(min_length=1)
    guideline: str = Field(min_length=1)
    applicability: str = Field(min_length=1)
    supporting_claims: list[int] = Field(default_factory=list)
    hypothesis: HypothesisOut | None = None


class CompilerOutput(_Out):
    """The JSON object the compile prompts ask for."""

    title: str = Field(min_length=1)
    description: str = Field(min_length=1)
    claims: list[ClaimOut] = Field(min_length=1)
    insights: list[InsightOut] = Field(default_factory=list, max_length=3)


_FENCED = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def reply_json(text: str) -> Any:
    """The JSON in a model's answer, bare or in a ```json fence; a ValueError if there is none."""
    fenced = _FENCED.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"it is not a JSON object ({error})") from None


def data_fence(content: bytes) -> str:
    """The marker around untrusted data in a prompt: derived from the data, so it cannot
    appear inside it by chance."""
    return "WIKITRACE-DATA-" + hashlib.sha256(content).hexdigest()[:12]


def parse_output(text: str, turn_count: int, *, hypotheses: bool = False) -> CompilerOutput:
    """The model's answer as a CompilerOutput, or a ValueError that says what to fix."""
    data = reply_json(text)
    try:
        output = CompilerOutput.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc']) or '(top level)'}: {item['msg']}"
            for item in error.errors()[:8]
        )
        raise ValueError(f"it does not match the required shape: {problems}") from None
    for c_index, claim in enumerate(output.claims, start=1):
        for quote in claim.evidence:
            if not 1 <= quote.turn <= turn_count:
                raise ValueError(
                    f"claim {c_index} cites turn {quote.turn}; turns are numbered 1 to {turn_count}"
                )
    for i_index, insight in enumerate(output.insights, start=1):
        if hypotheses and insight.hypothesis is None:
            raise ValueError(
                f"insight {i_index} has no hypothesis (precondition, behaviour, expected_effect, "
                "verifier)"
            )
        for number in insight.supporting_claims:
            if not 1 <= number <= len(output.claims):
                raise ValueError(
                    f"insight {i_index} names claim {number}; claims are numbered "
                    f"1 to {len(output.claims)}"
                )
    return output


# --- prompt -------------------------------------------------------------------------------


@dataclass
class Templates:
    """The compile templates, loaded once per build, with the hashes the corpus records."""

    env: jinja2.Environment
    hashes: dict[str, str]

    @classmethod
    def load(cls, user_dir: Path | None = None) -> Templates:
        env = prompts.environment(user_dir)
        names = (
            prompts.COMPILE_SUCCESS,
            prompts.COMPILE_FAILURE,
            prompts.RETRY_INVALID,
            prompts.REPAIR_QUOTES,
        )
        try:
            hashes = {name: prompts.source_hash(env, name) for name in names}
        except jinja2.TemplateError as error:
            raise CompileError(f"prompt template: {error}") from None
        return cls(env=env, hashes=hashes)

    def render(self, name: str, **context: Any) -> str:
        try:
            return self.env.get_template(name).render(**context)
        except jinja2.TemplateError as error:
            raise CompileError(f"prompt template {name}: {error}") from None


@dataclass
class Prompt:
    template: str
    text: str
    cut_to: int | None
    """The longest a field could stay (in characters), or None when nothing was cut."""


def render_prompt(
    templates: Templates,
    record: RunRecord,
    llm: LLM,
    max_prompt_tokens: int,
    *,
    hypotheses: bool = False,
) -> Prompt:
    """Fit the prompt in the budget by cutting the middles of the longest fields, never a turn."""
    name = prompts.COMPILE_SUCCESS if record.success else prompts.COMPILE_FAILURE
    content = orjson.dumps(record.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    fence = data_fence(content)
    # Dumped once: the search below renders the prompt several times with other caps.
    turns = [turn_fields(turn) for turn in record.turns]

    def render(cap: int | None) -> str:
        return templates.render(
            name,
            success=record.success,
            task_id=record.task_id,
            task_type=record.task_type,
            task=record.task,
            turn_count=len(record.turns),
            turns=[format_turn(turn, cap) for turn in turns],
            fence=fence,
            cut=cap is not None,
            hypotheses=hypotheses,
        )

    text = render(None)
    # Byte-level tokenizers never make more tokens than bytes: most prompts need no count.
    if len(text.encode()) <= max_prompt_tokens:
        return Prompt(template=name, text=text, cut_to=None)
    tokens = llm.count_tokens(text)
    if tokens <= max_prompt_tokens:
        return Prompt(template=name, text=text, cut_to=None)
    # Counting tokens is slow on long runs, so search the cap on an estimate from this
    # prompt's tokens per character, then check with real counts, cutting deeper if needed.
    per_char = tokens / len(text)
    low, high = MIN_FIELD_CAP, max(longest_field(turn) for turn in record.turns) - 1
    cap = MIN_FIELD_CAP
    while low <= high:
        middle = (low + high) // 2
        if len(render(middle)) * per_char <= max_prompt_tokens:
            cap, low = middle, middle + 1
        else:
            high = middle - 1
    while True:
        candidate = render(cap)
        tokens = llm.count_tokens(candidate)
        if tokens <= max_prompt_tokens:
            return Prompt(template=name, text=candidate, cut_to=cap)
        if cap == MIN_FIELD_CAP:
            raise CompileError(
                f"the prompt does not fit in --max-prompt-tokens {max_prompt_tokens} even with "
                f"every field cut to {MIN_FIELD_CAP} characters ({len(record.turns)} turns); "
                "raise the budget or use a model with a longer context"
            )
        cap = max(MIN_FIELD_CAP, int(cap * max_prompt_tokens / tokens * 0.95))


# --- the compile loop ---------------------------------------------------------------------


@dataclass
class CompileLimits:
    invalid_retries: int = 2
    """Times an invalid answer is sent back with the validation error."""
    quote_repairs: int = 1
    """Times unverified quotes are sent back for repair."""
    max_prompt_tokens: int = 24_000
    hypotheses: bool = False
    """Ask for each insight as a falsifiable hypothesis too (and refuse answers without)."""


@dataclass
class CompileStats:
    calls: int = 0
    cache_hits: int = 0
    http_attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    invalid_retries: int = 0
    quote_repairs: int = 0
    cut_prompts: int = 0


@dataclass
class _Checked:
    output: CompilerOutput
    claims: list[Claim]
    unverified: int
    failures: list[dict[str, Any]] = field(default_factory=list)


def _check(output: CompilerOutput, checker: QuoteChecker) -> _Checked:
    claims: list[Claim] = []
    failures: list[dict[str, Any]] = []
    for number, claim in enumerate(output.claims, start=1):
        evidence = []
        for quote in claim.evidence:
            verified = checker.found(quote.turn, quote.quote)
            if not verified:
                failures.append({"claim": number, "turn": quote.turn, "quote": quote.quote})
            evidence.append(Evidence(turn=quote.turn, quote=quote.quote, verified=verified))
        claims.append(Claim(statement=claim.statement, evidence=evidence))
    return _Checked(output=output, claims=claims, unverified=len(failures), failures=failures)


async def compile_with_llm(
    step: int,
    record: RunRecord,
    llm: LLM,
    templates: Templates,
    limits: CompileLimits,
    stats: CompileStats,
) -> Compilation:
    prompt = render_prompt(
        templates, record, llm, limits.max_prompt_tokens, hypotheses=limits.hypotheses
    )
    if prompt.cut_to is not None:
        stats.cut_prompts += 1
    checker = QuoteChecker(record.turns)
    messages: list[Message] = [{"role": "user", "content": prompt.text}]
    best: _Checked | None = None
    invalid = repairs = 0
    last_error = ""
    while True:
        reply = await llm.complete(messages)
        stats.calls += 1
        stats.cache_hits += reply.cached
        stats.http_attempts += reply.attempts
        stats.prompt_tokens += reply.prompt_tokens
        stats.completion_tokens += reply.completion_tokens
        if reply.cost_usd is not None:
            stats.cost_usd += reply.cost_usd
        elif not reply.cached:
            stats.cost_known = False
        messages.append({"role": "assistant", "content": reply.text})
        try:
            output = parse_output(reply.text, len(record.turns), hypotheses=limits.hypotheses)
        except ValueError as error:
            last_error = str(error)
            if invalid >= limits.invalid_retries:
                break
            invalid += 1
            stats.invalid_retries += 1
            messages.append(
                {"role": "user", "content": templates.render(prompts.RETRY_INVALID, error=error)}
            )
            continue
        checked = _check(output, checker)
        if best is None or checked.unverified <= best.unverified:
            best = checked
        if best.unverified == 0 or repairs >= limits.quote_repairs:
            break
        repairs += 1
        stats.quote_repairs += 1
        messages.append(
            {
                "role": "user",
                "content": templates.render(prompts.REPAIR_QUOTES, failures=checked.failures),
            }
        )
    if best is None:
        raise CompileError(
            f"the model's answer stayed invalid after {invalid + 1} tries: {last_error}"
        )
    notes = []
    if prompt.cut_to is not None:
        notes.append(
            f"The prompt was cut to fit {limits.max_prompt_tokens} tokens: fields longer than "
            f"{prompt.cut_to} characters lost their middle. The raw turns are whole."
        )
    if repairs:
        notes.append(f"Unverified quotes were sent back for repair {repairs} time(s).")
    if best.unverified:
        notes.append(
            f"{best.unverified} quote(s) could not be found in the turns they cite; "
            "they are marked UNVERIFIED."
        )
    return Compilation(
        step=step,
        outcome=record.outcome,
        compiled_by="llm",
        model=llm.model,
        prompt=PromptRef(template=prompt.template, sha256=templates.hashes[prompt.template]),
        title=best.output.title,
        description=best.output.description,
        claims=best.claims,
        insights=[
            InsightDraft(
                title=item.title,
                guideline=item.guideline,
                applicability=item.applicability,
                supporting_claims=item.supporting_claims,
                hypothesis=Hypothesis(**item.hypothesis.model_dump()) if item.hypothesis else None,
            )
            for item in best.output.insights
        ],
        notes=notes,
    )
