"""One LLM call per run: render the prompt within budget, validate the answer, check every quote."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
    is_judged,
)
from wikitrace.corpus_schema.records import Hypothesis
from wikitrace.corpus_schema.setting_fields import CONTEXT_TOKENS, MAX_OUTPUT_TOKENS, default
from wikitrace.transport.llm import LLM, LLMReply, Message

from .evidence import QuoteChecker, longest_field
from .injection import Addressed, addressing_model
from .view import MIN_FIELD_CAP, Budget, Entry, View, fit_view

MAX_CLAIMS = 6


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
    basis: Literal["observed", "inferred"] = "observed"
    """observed: the quoted turns show it; inferred: a reading of them."""


class HypothesisOut(_Out):
    precondition: str = Field(min_length=1)
    behaviour: str = Field(min_length=1)
    expected_effect: str = Field(min_length=1)
    verifier: str = Field(min_length=1)


class InsightOut(_Out):
    title: str = Field(min_length=1)
    guideline: str = Field(min_length=1)
    applicability: str = Field(min_length=1)
    supporting_claims: list[int] = Field(min_length=1)
    """The claims it rests on: a lesson with no evidence is refused."""
    hypothesis: HypothesisOut | None = None


class CompilerOutput(_Out):
    """The JSON object the compile prompts ask for."""

    title: str = Field(min_length=1)
    description: str = Field(min_length=1)
    claims: list[ClaimOut] = Field(min_length=1, max_length=MAX_CLAIMS)
    insights: list[InsightOut] = Field(default_factory=list, max_length=3)


_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)


def reply_json(text: str) -> Any:
    """The JSON object in a model's answer, wherever it sits: bare, in a ```json fence, or
    after a sentence of preamble; a ValueError if there is none."""
    body = text.strip()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        first_error = error
    for fenced in _FENCED.finditer(text):
        try:
            return orjson.loads(fenced.group(1))
        except orjson.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise ValueError(f"it is not a JSON object ({first_error})") from None


def data_fence(content: bytes) -> str:
    """The marker around untrusted data in a prompt: derived from the data, so it cannot
    appear inside it by chance."""
    return "WIKITRACE-DATA-" + hashlib.sha256(content).hexdigest()[:12]


def record_fence(record: RunRecord) -> str:
    """The fence a prompt about `record` puts around its data (render_prompt): text shown
    beside the run (memory entries) must not hold it."""
    return data_fence(orjson.dumps(record.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS))


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
    def load(cls, user_dir: Path | None = None, *, also: tuple[str, ...] = ()) -> Templates:
        """The compile templates, and `also` these (the judge's)."""
        env = prompts.environment(user_dir)
        names = (
            prompts.COMPILE_SUCCESS,
            prompts.COMPILE_FAILURE,
            prompts.RETRY_INVALID,
            prompts.REPAIR_QUOTES,
            *also,
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
    view: View
    """What the prompt shows of each turn."""
    addressed: Addressed | None = None
    """Where the run's text addresses the model reading it (compiler/injection.py): the
    prompt names it as data, not instructions."""

    @property
    def cut_to(self) -> int | None:
        """None when every turn is shown whole."""
        return None if self.view.mode == "whole" else (self.view.cap or MIN_FIELD_CAP)


TASK_NOTES = {
    "simulated-user": "The TASK is the simulated user's hidden instruction, written for the "
    "benchmark: the agent never saw it, only what the user said in the turns.",
}
"""Framing of the task by where it came from (an importer sets metadata.task_source)."""


def grader_details(record: RunRecord) -> str | None:
    """What the log's grader said about the outcome (tau's reward_info, a test report)."""
    metadata = record.metadata
    given = metadata.get("info")
    info: dict[str, Any] = given if isinstance(given, dict) else {}
    for value in (
        metadata.get("reward_info"),
        info.get("reward_info"),
        metadata.get("test_result"),
        metadata.get("tests_status"),
        metadata.get("report"),
    ):
        if value not in (None, "", {}, []):
            return value if isinstance(value, str) else orjson.dumps(value).decode()
    return None


def _within(text: str, max_prompt_tokens: int, llm: LLM) -> bool:
    """Whether `text` fits the budget. Byte-level tokenizers never make more tokens than bytes,
    and counting is slow on long runs: the byte length decides whenever it can, a count only
    near the budget."""
    if len(text.encode()) <= max_prompt_tokens:
        return True
    if len(text) // 8 > max_prompt_tokens:  # far over: no tokenizer packs 8 chars a token
        return False
    return llm.count_tokens(text) <= max_prompt_tokens


def render_prompt(
    templates: Templates,
    record: RunRecord,
    llm: LLM,
    max_prompt_tokens: int,
    *,
    hypotheses: bool = False,
    outcome_details: bool = False,
    unfiltered: bool = False,
    template: str | None = None,
    extra: dict[str, Any] | None = None,
) -> Prompt:
    """The prompt for one run, within `max_prompt_tokens` whatever the run's length (see
    compiler/view.py for what is shown of long runs); `template` in place of the compile
    template the outcome picks (the judge's), rendered with `extra` too. Text in the run that
    addresses the model reading it (compiler/injection.py) is named in the prompt
    (`addressed`, which `extra` may set)."""
    name = template or (prompts.COMPILE_SUCCESS if record.success else prompts.COMPILE_FAILURE)
    fence = record_fence(record)
    source = record.metadata.get("task_source")
    grader = grader_details(record) if outcome_details else None
    addressed = addressing_model(record)
    named = {"addressed": addressed.describe() if addressed else None, **(extra or {})}

    def render(entries: list[Entry], mode: str = "whole") -> str:
        return templates.render(
            name,
            success=record.success,
            task_id=record.task_id,
            task_type=record.task_type,
            task=record.task,
            task_note=TASK_NOTES.get(source) if isinstance(source, str) else None,
            grader=grader,
            judged=record.metadata.get("outcome_source") == "judged",
            turn_count=len(record.turns),
            turns=entries,
            fence=fence,
            mode=mode,
            hypotheses=hypotheses,
            unfiltered=unfiltered,
            **named,
        )

    def check_bare() -> None:
        if not _within(render([]), max_prompt_tokens, llm):
            raise CompileError(
                f"the prompt's instructions and task alone do not fit in max-prompt-tokens "
                f"{max_prompt_tokens}; raise the budget"
            )

    # Most runs fit whole, fit_view's first try: the prompt without turns is rendered (to say
    # that the instructions alone are too long) only once the whole run does not fit.
    last: dict[str, Any] = {}

    def fits(entries: list[Entry], mode: str) -> bool:
        text = render(entries, mode)
        last.update(entries=entries, mode=mode, text=text)  # the view chosen is the last tried
        if _within(text, max_prompt_tokens, llm):
            return True
        if not last.get("bare_checked"):
            last["bare_checked"] = True
            check_bare()
        return False

    def used(entries: list[Entry], mode: str) -> int:
        text = render(entries, mode)
        last.update(entries=entries, mode=mode, text=text)
        return llm.count_tokens(text)

    budget = Budget(max_prompt_tokens, fits, used, llm.count_tokens)
    longest = max((longest_field(turn) for turn in record.turns), default=0)
    try:
        view = fit_view(record, budget, longest)
    except ValueError as error:
        raise CompileError(f"{error} (max-prompt-tokens {max_prompt_tokens})") from None
    same = last.get("entries") is view.entries and last.get("mode") == view.mode
    text = last["text"] if same else render(view.entries, view.mode)
    return Prompt(template=name, text=text, view=view, addressed=addressed)


# --- the compile loop ---------------------------------------------------------------------


REPAIR_CHARS = 6000
"""The longest a repair or correction message gets (about 1,500 tokens)."""
REPAIR_TOKENS = 1500
_MODES = {
    "cut": "long fields lost their middle",
    "skeleton": "turns that matter in full, the others as one line each",
    "elided": "turns that matter in full, the middle of the rest left out in marked ranges",
}


@dataclass
class CompileLimits:
    invalid_retries: int = default("invalid-retries")
    """Times an invalid answer is sent back with the validation error."""
    quote_repairs: int = default("quote-repairs")
    """Times unverified quotes are sent back for repair."""
    max_prompt_tokens: int | None = None
    """The prompt's budget; None: what the context leaves once the answer and one repair
    round (the answer again and a repair message) are counted."""
    context_tokens: int = CONTEXT_TOKENS
    """The model's context window: every call of a run's conversation fits in it."""
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    hypotheses: bool = False
    """Ask for each insight as a falsifiable hypothesis too (and refuse answers without)."""
    outcome_details: bool = False
    """Show the grader's verdict and details when the log has them (off: see docs/building.md)."""
    unfiltered_insights: bool = False
    """Leave out the prompt's "write no insight rather than a vague one" (the method as
    published keeps up to three insights per run, unfiltered)."""

    @property
    def prompt_tokens(self) -> int:
        if self.max_prompt_tokens is not None:
            return self.max_prompt_tokens
        return max(1000, self.context_tokens - 2 * self.max_output_tokens - REPAIR_TOKENS)


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
    addressed: list[dict[str, Any]] = field(default_factory=list)
    """Runs whose text addresses the model reading them, named in their compile prompt:
    step, task_id, `task` and `turns`, and the patterns found (compiler/injection.py)."""

    def count(self, reply: LLMReply) -> None:
        """Count one call's reply: the call, whether the cache answered, its tokens and cost."""
        self.calls += 1
        self.cache_hits += reply.cached
        self.http_attempts += reply.attempts
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        if reply.cost_usd is not None:
            self.cost_usd += reply.cost_usd
        elif not reply.cached:
            self.cost_known = False


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
            found = checker.check(quote.turn, quote.quote)
            if not found.verified:
                failures.append(
                    {
                        "claim": number,
                        "turn": quote.turn,
                        "quote": quote.quote,
                        "why": found.note,
                        "closest": checker.closest(quote.turn, quote.quote),
                    }
                )
            evidence.append(
                Evidence(
                    turn=found.turn,
                    quote=quote.quote,
                    verified=found.verified,
                    note=found.note,
                    source=found.source,
                )
            )
        claims.append(Claim(statement=claim.statement, evidence=evidence, basis=claim.basis))
    return _Checked(output=output, claims=claims, unverified=len(failures), failures=failures)


def _notes(
    prompt: Prompt, record: RunRecord, limits: CompileLimits, best: _Checked, repairs: int
) -> list[str]:
    """What a compilation's reader should know of how it was made: the run shown cut, text
    in it that addressed the model, quotes moved, repaired or not found."""
    notes = list(prompt.view.notes)
    if prompt.addressed is not None:
        notes.append(
            f"Text in {prompt.addressed.describe()} of the run addresses the model reading it "
            f"({', '.join(prompt.addressed.patterns)}): the prompt named it as data, not "
            "instructions."
        )
    if prompt.view.mode != "whole":
        notes.append(
            f"The run was shown to fit {limits.prompt_tokens} prompt tokens "
            f"({_MODES[prompt.view.mode]}): {prompt.view.whole_turns} of {len(record.turns)} "
            "turns in full. The raw turns are whole."
        )
    moved = [e for c in best.claims for e in c.evidence if e.note and e.note.startswith("cited")]
    if moved:
        notes.append(f"{len(moved)} quote(s) were found in another turn than cited; corrected.")
    if repairs:
        notes.append(f"Unverified quotes were sent back for repair {repairs} time(s).")
    if best.unverified:
        notes.append(
            f"{best.unverified} quote(s) could not be found in the turns they cite; "
            "they are marked UNVERIFIED."
        )
    return notes


def _drafts(output: CompilerOutput) -> list[InsightDraft]:
    """The model's insights as the compilation's drafts."""
    return [
        InsightDraft(
            title=item.title,
            guideline=item.guideline,
            applicability=item.applicability,
            supporting_claims=item.supporting_claims,
            hypothesis=Hypothesis(**item.hypothesis.model_dump()) if item.hypothesis else None,
        )
        for item in output.insights
    ]


async def compile_with_llm(
    step: int,
    record: RunRecord,
    llm: LLM,
    templates: Templates,
    limits: CompileLimits,
    stats: CompileStats,
) -> Compilation:
    prompt = render_prompt(
        templates,
        record,
        llm,
        limits.prompt_tokens,
        hypotheses=limits.hypotheses,
        outcome_details=limits.outcome_details,
        unfiltered=limits.unfiltered_insights,
    )
    if prompt.view.mode != "whole":
        stats.cut_prompts += 1
    if prompt.addressed is not None:
        stats.addressed.append(
            {"step": step, "task_id": record.task_id, **prompt.addressed.as_dict()}
        )
    checker = QuoteChecker(record.turns, list(prompt.view.shown))
    first: Message = {"role": "user", "content": prompt.text}
    messages: list[Message] = [first]
    best: _Checked | None = None
    invalid = repairs = 0
    last_error = ""
    while True:
        reply = await llm.complete(messages)
        stats.count(reply)
        answer: Message = {"role": "assistant", "content": reply.text}
        try:
            output = parse_output(reply.text, len(record.turns), hypotheses=limits.hypotheses)
        except ValueError as error:
            last_error = str(error)
            forget = getattr(llm, "forget", None)
            if forget is not None:  # an answer that cannot be used is not kept for next time
                forget(messages)
            if invalid >= limits.invalid_retries:
                break
            invalid += 1
            stats.invalid_retries += 1
            correction = templates.render(prompts.RETRY_INVALID, error=error)
            # Only the last answer goes back: the conversation never outgrows the budget.
            messages = [first, answer, {"role": "user", "content": correction}]
            continue
        checked = _check(output, checker)
        if best is None or checked.unverified <= best.unverified:
            best = checked
        if best.unverified == 0 or repairs >= limits.quote_repairs:
            break
        repairs += 1
        stats.quote_repairs += 1
        repair = templates.render(prompts.REPAIR_QUOTES, failures=checked.failures)
        messages = [first, answer, {"role": "user", "content": repair[:REPAIR_CHARS]}]
    if best is None:
        raise CompileError(
            f"the model's answer stayed invalid after {invalid + 1} tries: {last_error}"
        )
    return Compilation(
        step=step,
        outcome=record.outcome,
        judged=is_judged(record.metadata),
        compiled_by="llm",
        model=llm.model,
        prompt=PromptRef(template=prompt.template, sha256=templates.hashes[prompt.template]),
        title=best.output.title,
        description=best.output.description,
        claims=best.claims,
        insights=_drafts(best.output),
        notes=_notes(prompt, record, limits, best, repairs),
    )
