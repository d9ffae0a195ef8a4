"""The pages of the admission gate's and monitoring's decisions (gate/gate-NNNN.md,
gate/monitor-NNNN.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .layout import GATE_DIR, INSIGHT_DIR, link
from .ledger import GateDecision, GateFigures, ProbeResult, TogetherCheck
from .render import table_cell, with_frontmatter
from .tasks import task_key


def gate_page(decision: GateDecision) -> str:
    """gate/gate-NNNN.md (or monitor-NNNN.md): the decision, its figures, the probes behind it."""
    rel = f"{GATE_DIR}/{decision.id}.md"
    lines = _summary(decision, rel)
    for title, figures in (
        ("Figures", decision.figures),
        ("After narrowing", decision.narrowed_figures),
    ):
        if figures is not None:
            lines += _figures(title, figures)
    for check in decision.together:
        lines += _together(check, rel)
    seeds = ", ".join(str(seed) for seed in decision.narrowed_seeds)
    for title, probes in (
        ("Probes", decision.probes),
        (f"Probes of the narrowed lesson (chosen anew; seeds {seeds})", decision.narrowed_probes),
    ):
        if probes:
            lines += _probes(title, probes)
    if decision.monitoring:
        lines += _monitoring(decision.monitoring)
    return with_frontmatter(decision, "\n".join(lines))


def _summary(decision: GateDecision, rel: str) -> list[str]:
    """The heading, the verdict and why, the precondition tested and the thresholds."""
    insight_rel = f"{INSIGHT_DIR}/{decision.insight}.md"
    by_hand = decision.kind in ("retire", "supersede")
    tested = "was retired in" if by_hand else "was tested on"
    lines = [
        f"# {decision.id}: {decision.insight} {decision.verdict}",
        "",
        f"{link(insight_rel, rel, decision.insight)} {tested} {decision.tested_on}. "
        f"{decision.reason}",
        "",
        f"- precondition{'' if by_hand else ' tested'}: {decision.precondition}",
    ]
    if decision.narrowed_precondition:
        lines.append(f"- narrowed to: {decision.narrowed_precondition}")
    lines += [
        "- thresholds: "
        + ", ".join(f"{k} {v:g}" for k, v in decision.thresholds.items())
        + f" (confidence {decision.confidence:g})",
        f"- every run or report behind it: `{GATE_DIR}/{decision.evidence}`",
        "",
    ]
    return lines


def _figures(title: str, figures: GateFigures) -> list[str]:
    """A table of the three estimates (G, P_fail, D_reg), their bounds and their pairs."""
    return [
        f"## {title}",
        "",
        "| estimate | value | bound | pairs |",
        "|---|---|---|---|",
        f"| G, transfer gain | {figures.gain:.3f} | >= {figures.gain_lower:.3f} | "
        f"{figures.n_target} ({figures.gains} better, {figures.losses} worse) |",
        f"| P_fail, falsification failures | {figures.p_fail:.3f} "
        f"| <= {figures.p_fail_upper:.3f} | {figures.n_falsify} ({figures.failures} "
        + ("cited it where it should not apply" if figures.p_fail_basis == "citations" else "worse")
        + ") |",
        f"| D_reg, regression damage | {figures.d_reg:.3f} | <= {figures.d_reg_upper:.3f} | "
        f"{figures.n_regress} solved without it ({figures.damaged} broken) |",
        "",
        f"{figures.errors} pairs were left out because a run errored.",
        "",
    ]


def _together(check: TogetherCheck, rel: str) -> list[str]:
    """The check of the lessons committed in one call, run all at once."""
    figures = check.figures
    return [
        "## Run together with the other lessons committed in this call",
        "",
        "- the set: " + ", ".join(link(f"{INSIGHT_DIR}/{i}.md", rel, i) for i in check.insights),
        f"- {figures.n_regress} pairs solved without them; {figures.damaged} broken with "
        f"them all (D_reg {figures.d_reg:.3f}): "
        + (
            "passed"
            if check.passes
            else "FAILED: the lesson that most likely broke it was left out (its decision says "
            "which and why)"
        ),
        f"- runs with the set: {' '.join(check.runs)}",
        "",
    ]


def _probes(title: str, probes: Sequence[ProbeResult]) -> list[str]:
    """A table of the probes: each task, why it was chosen, and its runs without and with."""
    # `narrowed` runs on the first probes: decisions written before narrowed lessons had
    # probes of their own.
    old = any(probe.narrowed_runs for probe in probes)
    lines = [
        f"## {title}",
        "",
        "| task | kind | why | without | with |" + (" narrowed |" if old else ""),
        "|---|---|---|---|---|" + ("---|" if old else ""),
    ]
    for probe in probes:
        task = task_key(probe.origin, probe.task_id).name
        lines.append(
            f"| {table_cell(task)} | {probe.kind} | {table_cell(probe.why)} | "
            f"{' '.join(probe.base_runs)} | {' '.join(probe.lesson_runs)} |"
            + (f" {' '.join(probe.narrowed_runs)} |" if old else "")
        )
    lines.append("")
    return lines


def _monitoring(monitoring: dict[str, Any]) -> list[str]:
    """What monitoring counted, as JSON."""
    return [
        "## Monitoring",
        "",
        "```json",
        orjson.dumps(monitoring, option=orjson.OPT_INDENT_2).decode(),
        "```",
        "",
    ]
