"""Narrowing a lesson that failed: one model call cuts its precondition to where it helped."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from wikitrace.compiler.ask import Asker
from wikitrace.corpus_schema.records import InsightHeader
from wikitrace.corpus_schema.tasks import TaskKey

from .figures import Pairs
from .figures import marks as figure_marks
from .gate_inputs import Candidate
from .gate_runs import GateRuns
from .pool import PoolTask


class Narrower:
    """Owns narrowing for one gate call: the model call that narrows a failed lesson's
    precondition from what it did to each task (HELPED, HURT or SAME), the memory view of the
    narrowed lesson, and the narrowed headers (candidate -> header) a committed lesson is
    recorded with."""

    def __init__(self, asker: Asker | None, pool: Sequence[PoolTask], runs: GateRuns) -> None:
        self.asker = asker
        self.pool = pool
        self.runs = runs
        self.narrowed: dict[str, InsightHeader] = {}
        """Candidate -> its header with the narrowed precondition, once narrowed."""

    def narrow(
        self, candidate: Candidate, tasks: Sequence[TaskKey], pairs: Pairs
    ) -> tuple[str, InsightHeader, Path]:
        """One model call narrows the precondition from what the lesson did to each task
        (HELPED, HURT or SAME); the narrowed precondition, header and memory view. Raises
        ValueError or CorpusError when the answer cannot be used."""
        assert self.asker is not None
        marks = figure_marks(pairs)
        texts = {t.key: t.task or t.task_id for t in self.pool}
        listed = [
            {
                "mark": "HURT"
                if "HURT" in marks.get(t, set())
                else "HELPED"
                if "HELPED" in marks.get(t, set())
                else "SAME",
                "task_id": t.name,
                "task": texts.get(t, t.id),
            }
            for t in tasks
        ]
        precondition, applicability = narrow_precondition(self.asker, candidate, listed)
        header = candidate.header
        hypothesis = (
            header.hypothesis.model_copy(update={"precondition": precondition})
            if header.hypothesis
            else None
        )
        narrowed = header.model_copy(
            update={"applicability": applicability, "hypothesis": hypothesis}
        )
        self.narrowed[candidate.ident] = narrowed
        view = self.runs.view(
            f"{candidate.ident}-narrowed",
            hidden=self.runs.hidden - {candidate.ident},
            replaced={candidate.ident: (narrowed, candidate.guideline)},
        )
        return precondition, narrowed, view


class NarrowAnswer(BaseModel):
    """The model's answer to narrow.j2."""

    precondition: str = Field(min_length=1)
    """The narrower precondition."""
    applicability: str = ""
    """When the lesson applies now; the precondition when left empty."""


def narrow_precondition(
    asker: Asker, candidate: Candidate, probes: list[dict[str, str]]
) -> tuple[str, str]:
    """One model call: a narrower precondition (and applicability) from the probes' outcomes."""
    from wikitrace import prompts

    answer = asker.ask(
        prompts.NARROW,
        NarrowAnswer,
        data=probes,
        id=candidate.ident,
        title=candidate.header.title,
        guideline=candidate.guideline,
        precondition=candidate.precondition,
        probes=probes,
    )
    precondition = answer.precondition.strip()
    if not precondition:
        raise ValueError("field 'precondition': it is empty")
    return precondition, answer.applicability.strip() or precondition
