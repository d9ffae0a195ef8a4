"""`wikitrace convert`: any supported log in, the native JSON Lines format out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal

import orjson

from wikitrace.corpus_schema import InputError

from ..inputs import Unlabelled
from . import InputPlan


@dataclass
class ConvertReport:
    """What a conversion read and wrote, per format."""

    written: int = 0
    formats: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unlabelled: list[dict[str, Any]] = field(default_factory=list)

    def count(self, fmt: str, key: str) -> None:
        counts = self.formats.setdefault(
            fmt, {"runs": 0, "successes": 0, "failures": 0, "unlabelled": 0}
        )
        counts[key] += 1


def _checked(plan: InputPlan, on_error: Literal["stop", "skip"]) -> int:
    """Read everything once, so a bad record stops the conversion before a line is written."""
    errors = [item for item in plan.items() if isinstance(item, InputError)]
    if errors and on_error == "stop":
        first = errors[0]
        more = f"; {len(errors) - 1} more bad records" if len(errors) > 1 else ""
        raise InputError(
            first.message,
            path=first.path,
            line=first.line,
            at=first.at,
            field=first.field,
            hint=(first.hint + "; " if first.hint else "")
            + f"nothing was written{more}; fix the input, or use --on-error skip",
        )
    return len(errors)


def convert(
    plan: InputPlan,
    out: BinaryIO,
    *,
    on_error: Literal["stop", "skip"] = "stop",
    keep_unlabelled: bool = False,
) -> ConvertReport:
    """Write each run of `plan` to `out` as a native JSON line; unlabelled runs only when kept
    (with `success: null`, to fill in by hand). The input is checked first, so with
    on_error="stop" a bad record raises before anything is written."""
    _checked(plan, on_error)
    report = ConvertReport()
    for item in plan.items():
        if isinstance(item, InputError):
            report.skipped.append(item.as_dict())
            continue
        if isinstance(item, Unlabelled):
            report.unlabelled.append(item.as_dict())
            report.count(item.format, "unlabelled")
            if not keep_unlabelled:
                continue
        else:
            report.count(item.format, "runs")
            report.count(item.format, "successes" if item.record.success else "failures")
        out.write(orjson.dumps(item.data) + b"\n")
        report.written += 1
    return report
