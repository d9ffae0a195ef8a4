"""`--judge MODEL`: a label for a run whose log carries none (a coding-agent session, a trace).

One model call per unlabelled run reads the run, as a compile prompt shows it (long runs fit
the same way), and answers success or failure, why, and verbatim quotes from numbered turns.
The quotes are checked like a compilation's; quotes not found are sent back once, and a verdict
with no quote found labels nothing (the run stays unlabelled, and says why). A verdict is
recorded in the run's metadata: `outcome_source: judged` and `judge` (model, reason, quotes,
template hash), so every page that shows the outcome can say it was judged.

Calls go through the build's response cache, so a build run again (or resumed after a crash)
asks nothing twice, and a build's two passes over its input ask once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wikitrace import prompts
from wikitrace.corpus_schema import JUDGED, RunRecord
from wikitrace.corpus_schema.errors import first_problem

from .compile import CompileError, QuoteOut, Templates, render_prompt, reply_json
from .evidence import QuoteChecker
from .inputs import SourceRun, Unlabelled, validate
from .llm import LLM, LLMCallError
from .redact import Redactor

log = logging.getLogger(__name__)

JUDGE_OUTPUT_TOKENS = 1024


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success: bool
    reason: str = Field(min_length=1)
    evidence: list[QuoteOut] = Field(min_length=1)


@dataclass
class Judge:
    """Labels unlabelled runs with one model call each (see the module's docstring)."""

    llm: LLM
    model: str
    templates: Templates
    max_prompt_tokens: int
    redactor: Redactor | None = None
    """What the build redacts is redacted before the judge sees it too."""
    retries: int = 1
    decided: dict[tuple[Any, ...], SourceRun | Unlabelled] = field(default_factory=dict)
    judged: int = 0
    declined: int = 0

    def __call__(self, item: Unlabelled) -> SourceRun | Unlabelled:
        key = (item.path, item.line, item.at, item.run_id)
        if key not in self.decided:
            self.decided[key] = self._decide(item)
        return self.decided[key]

    def _decide(self, item: Unlabelled) -> SourceRun | Unlabelled:
        data = self.redactor.value(item.data) if self.redactor else item.data
        if data is item.data:
            data = dict(data)
        data["metadata"] = dict(data.get("metadata") or {})
        shaped = validate(
            {**data, "success": False}, item.path, line=item.line, at=item.at, format=item.format
        )
        try:
            verdict, evidence = self._ask(shaped)
        except (CompileError, LLMCallError) as error:
            if isinstance(error, LLMCallError) and error.fatal:
                raise
            return self._declined(item, f"the judge gave no usable verdict: {error}")
        if not any(quote["verified"] for quote in evidence):
            return self._declined(item, "the judge's quotes were not found in the log")
        self.judged += 1
        data["success"] = verdict.success
        data["metadata"]["outcome_source"] = JUDGED
        data["metadata"]["judge"] = {
            "model": self.model,
            "reason": verdict.reason,
            "evidence": evidence,
            "template": self.templates.hashes.get(prompts.JUDGE),
        }
        log.info("judged %s: %s", item.run_id, "success" if verdict.success else "failure")
        return validate(data, item.path, line=item.line, at=item.at, format=item.format)

    def _declined(self, item: Unlabelled, why: str) -> Unlabelled:
        self.declined += 1
        log.warning("%s: %s", item.run_id, why)
        return Unlabelled(
            path=item.path,
            line=item.line,
            at=item.at,
            task_id=item.task_id,
            run_id=item.run_id,
            format=item.format,
            reason=why,
            data=item.data,
        )

    def _ask(self, run: SourceRun) -> tuple[Verdict, list[dict[str, Any]]]:
        return ask_about_run(
            self.llm,
            self.templates,
            run.record,
            prompts.JUDGE,
            Verdict,
            max_prompt_tokens=self.max_prompt_tokens,
            retries=self.retries,
            shape='{"success": ..., "reason": ..., "evidence": [...]}',
        )


Answer = TypeVar("Answer", bound=BaseModel)


def ask_about_run(
    llm: LLM,
    templates: Templates,
    record: RunRecord,
    template: str,
    answer: type[Answer],
    *,
    max_prompt_tokens: int,
    retries: int,
    shape: str,
    extra: dict[str, Any] | None = None,
) -> tuple[Answer, list[dict[str, Any]]]:
    """One model's verdict on a run (the judge's label, an attribution): the run shown as a
    compile prompt shows it, the answer validated as `answer` (with `evidence`: quotes from
    numbered turns), each quote checked. An answer that is not valid, or none of whose quotes
    is found, is sent back up to `retries` times; then the last valid one is returned with
    its quotes marked, or CompileError raised."""
    prompt = render_prompt(
        templates, record, llm, max_prompt_tokens, template=template, extra=extra
    )
    checker = QuoteChecker(record.turns, list(prompt.view.shown))
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt.text}]
    for attempt in range(retries + 2):
        reply = asyncio.run(llm.complete(messages))
        messages.append({"role": "assistant", "content": reply.text})
        try:
            verdict = answer.model_validate(reply_json(reply.text))
        except ValidationError as error:
            where, message = first_problem(error)
            problem = f"field '{where}': {message}"
        except ValueError as error:
            problem = str(error)
        else:
            evidence = []
            for quote in getattr(verdict, "evidence", []):
                check = checker.check(quote.turn, quote.quote)
                evidence.append(
                    {"turn": check.turn, "quote": quote.quote, "verified": check.verified}
                )
            if any(q["verified"] for q in evidence) or attempt >= retries:
                return verdict, evidence
            problem = (
                "none of your quotes was found in the turn it cites; copy each verbatim "
                "from the log"
            )
        if attempt >= retries:
            raise CompileError(f"the answer is not usable ({problem})")
        messages.append(
            {
                "role": "user",
                "content": f"Your answer cannot be used: {problem}. Answer again with ONE "
                f"JSON object {shape}.",
            }
        )
    raise CompileError("no answer")  # not reached: the loop returns or raises
