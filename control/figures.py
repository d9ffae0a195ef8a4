"""The gate's figures from probe outcomes: pure arithmetic over (task, seed) pairs, no runs.

G = (pairs better with the lesson - pairs worse) / target pairs; P_fail = falsification pairs
worse with it / falsification pairs; D_reg = pairs (of any kind) solved without it and not with
it / pairs solved without it. Each gets an exact one-sided binomial bound at `confidence`
(control.stats); G's lower bound is the gain rate's lower bound minus the loss rate's upper
bound. Under the `bounds` rule (ours) a candidate passes when G's bound >= eta, P_fail's <=
delta and D_reg's <= beta; under `estimates` (the method as published), when the figures
themselves do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from wikitrace.corpus_schema.ledger import GateFigures
from wikitrace.corpus_schema.setting_fields import default
from wikitrace.corpus_schema.tasks import TaskKey

from . import stats
from .probes import Probe

Pair = tuple[float | None, float | None, bool | None]
"""One (task, seed): the outcome without the lesson, with it (None: the run ended as an error),
and whether it was solved without it (None: not run without it, a falsification probe whose
citation was all the sequential gate still needed; it counts for P_fail alone)."""
Pairs = Mapping[tuple[TaskKey, int], Pair | None]
"""(task, seed) -> its pair; None where a run of it is missing. The task is its source and
id: two sources' task 3 are two tasks."""


Rule = Literal["sequential", "bounds", "estimates"]
"""sequential: anytime-valid tests decide as the pairs come, with stated error rates (ours,
the default: control.sequential); bounds: each figure's exact one-sided bound must pass on a
fixed set of probes; estimates: the figures themselves must pass (the method as published)."""


@dataclass(frozen=True)
class Thresholds:
    eta: float = default("eta")
    """Least transfer gain G (its lower bound) to commit."""
    delta: float = default("delta")
    """Most falsification failure rate P_fail (its upper bound) to commit."""
    beta: float = default("beta")
    """Most regression damage D_reg (its upper bound) to commit."""
    confidence: float = default("bound-confidence")
    rule: Rule = "bounds"


Cited = Mapping[tuple[TaskKey, int], bool]
"""(task, seed) -> whether the run with the lesson cited it; only pairs whose run returned a
citation report are in it."""


def gate_figures(
    probes: Sequence[Probe], pairs: Pairs, thresholds: Thresholds, cited: Cited | None = None
) -> GateFigures:
    """The figures of one candidate. P_fail counts falsification pairs worse with the lesson,
    unless the runs returned citation reports (`cited`): then those that used it, where it
    should not apply, as the method measures it."""
    confidence = thresholds.confidence
    kinds: dict[TaskKey, set[str]] = {}
    for probe in probes:
        kinds.setdefault(probe.key, set()).add(probe.kind)
    values, cited_only, errors = _complete_pairs(pairs, kinds)

    def of(kind: str) -> list[tuple[float, float, bool]]:
        return [v for key, v in values.items() if kind in kinds.get(key[0], ())]

    target = of("target")
    gains = sum(w > b for b, w, _ in target)
    losses = sum(w < b for b, w, _ in target)
    falsify_keys = [key for key in values if "falsify" in kinds.get(key[0], ())]
    falsify_keys += [key for key in cited_only if "falsify" in kinds.get(key[0], ())]
    basis, failures, n_falsify = _falsification(falsify_keys, of("falsify"), cited)
    # Regression damage: every pair solved without the lesson, whatever kind it was.
    solved = [(b, w) for b, w, success in values.values() if success]
    damaged = sum(w < b for b, w in solved)
    by_kind = {}
    for kind in ("target", "falsify", "regress"):
        kind_solved = [(b, w) for b, w, success in of(kind) if success]
        if kind_solved:
            broken = sum(w < b for b, w in kind_solved)
            by_kind[kind] = round(broken / len(kind_solved), 6)
    n_target, n_regress = len(target), len(solved)
    gain_rate_lower = stats.lower(gains, n_target, confidence)
    gain_lower = gain_rate_lower - stats.upper(losses, n_target, confidence)
    p_fail_upper = stats.upper(failures, n_falsify, confidence)
    d_reg_upper = stats.upper(damaged, n_regress, confidence)
    return GateFigures(
        n_target=n_target,
        gains=gains,
        losses=losses,
        gain=round((gains - losses) / n_target, 6) if n_target else 0.0,
        gain_lower=round(gain_lower, 6),
        gain_rate_lower=round(gain_rate_lower, 6),
        n_falsify=n_falsify,
        failures=failures,
        p_fail_basis=basis,
        p_fail=round(failures / n_falsify, 6) if n_falsify else 0.0,
        p_fail_upper=round(p_fail_upper, 6),
        n_regress=n_regress,
        damaged=damaged,
        d_reg=round(damaged / n_regress, 6) if n_regress else 0.0,
        d_reg_upper=round(d_reg_upper, 6),
        errors=errors,
        d_reg_by_kind=by_kind,
        passes=gain_lower >= thresholds.eta
        and p_fail_upper <= thresholds.delta
        and d_reg_upper <= thresholds.beta
        if thresholds.rule == "bounds"
        else bool(n_target)
        and (gains - losses) / n_target >= thresholds.eta
        and (failures / n_falsify if n_falsify else 0.0) <= thresholds.delta
        and (damaged / n_regress if n_regress else 0.0) <= thresholds.beta,
    )


def _complete_pairs(
    pairs: Pairs, kinds: Mapping[TaskKey, set[str]]
) -> tuple[dict[tuple[TaskKey, int], tuple[float, float, bool]], list[tuple[TaskKey, int]], int]:
    """The pairs of the probes' tasks, sorted: (task, seed) -> both outcomes and whether it was
    solved without the lesson, for those run on both sides; those run only with it (their
    citation is all that counts); and how many ended as errors."""
    values: dict[tuple[TaskKey, int], tuple[float, float, bool]] = {}
    cited_only = []
    errors = 0
    for key, pair in pairs.items():
        if pair is None or key[0] not in kinds:
            continue
        without, with_lesson, solved_without = pair
        if solved_without is None and with_lesson is not None:
            cited_only.append(key)
            continue
        if without is None or with_lesson is None or solved_without is None:
            errors += 1
            continue
        values[key] = (without, with_lesson, solved_without)
    return values, cited_only, errors


def _falsification(
    keys: Sequence[tuple[TaskKey, int]],
    falsify: Sequence[tuple[float, float, bool]],
    cited: Cited | None,
) -> tuple[Literal["outcomes", "citations"], int, int]:
    """P_fail's basis, failures and pairs: the falsification pairs (`keys`) whose run returned
    a citation report and cited the lesson, when any returned one; else those (`falsify`, both
    sides run) worse with it."""
    reported = [key for key in keys if cited is not None and key in cited]
    basis: Literal["outcomes", "citations"] = "citations" if reported else "outcomes"
    if basis == "citations":
        assert cited is not None
        return basis, sum(cited[key] for key in reported), len(reported)
    return basis, sum(w < b for b, w, _ in falsify), len(falsify)


def together_passes(figures: GateFigures, thresholds: Thresholds) -> bool:
    """Lessons committed in one call, run side by side, pass unless they break more than beta
    of the pairs the agent solved without them. The estimate decides under either rule: each
    lesson already passed its own bounds, and this test looks for harm they do together."""
    return figures.d_reg <= thresholds.beta


def marks(pairs: Pairs) -> dict[TaskKey, set[str]]:
    """Task -> what the lesson did to its pairs: HELPED, HURT, SAME."""
    found: dict[TaskKey, set[str]] = {}
    for (task, _), pair in pairs.items():
        if pair is None or pair[0] is None or pair[1] is None:
            continue
        b, w = pair[0], pair[1]
        found.setdefault(task, set()).add("HELPED" if w > b else "HURT" if w < b else "SAME")
    return found


def gain_is_real(figures: GateFigures, thresholds: Thresholds) -> bool:
    """The lesson helps somewhere: the gain rate (its lower bound, under the bounds rule)
    reaches eta."""
    if thresholds.rule == "bounds":
        return figures.gain_rate_lower >= thresholds.eta
    if thresholds.rule == "sequential":  # it helped some target (a narrowing may keep those)
        return figures.gains > 0
    return bool(figures.n_target) and figures.gains / figures.n_target >= thresholds.eta


def separable(pairs: Pairs, figures: GateFigures, thresholds: Thresholds) -> bool:
    """A real gain whose failures a precondition could cut away: some task hurt, none both
    helped and hurt."""
    if not gain_is_real(figures, thresholds):
        return False
    found = marks(pairs)
    hurt = any("HURT" in m for m in found.values())
    mixed = any({"HELPED", "HURT"} <= m for m in found.values())
    return hurt and not mixed


def why_not_narrowed(figures: GateFigures, thresholds: Thresholds, *, narrow: bool) -> str:
    eta = thresholds.eta
    if not narrow:
        return "narrowing is off (--no-narrow)"
    if not gain_is_real(figures, thresholds):
        if thresholds.rule == "sequential":
            return f"not narrowed: it helped no target pair ({figures.losses} hurt)"
        if thresholds.rule == "estimates":
            rate = figures.gains / figures.n_target if figures.n_target else 0.0
            return f"not narrowed: the gain is not real (gain rate {rate:.3f}, below eta {eta:g})"
        return (
            f"not narrowed: the gain is not real (gain rate >= {figures.gain_rate_lower:.3f}, "
            f"below eta {eta:g})"
        )
    return (
        "not narrowed: a task it helped was also hurt by it (on another seed), so no "
        "precondition can keep the one and cut away the other"
    )


def summary(figures: GateFigures, thresholds: Thresholds) -> str:
    p_fail = "P_fail" if figures.p_fail_basis == "outcomes" else "P_fail (cited)"
    if figures.tests:
        t = figures.tests
        if "damage_falsify" in t:  # D_reg tested on each kind of probe, help beyond eta
            helps = f"evidence of a net gain above {thresholds.eta:g} {t['help']:.3g}"
            damage = (
                f"evidence below {thresholds.beta:g} on falsification probes "
                f"{t['damage_falsify']:.3g}, on regression probes {t['damage_regress']:.3g}"
            )
        else:  # a decision of an earlier version: one D_reg test, help beyond nothing
            helps = f"evidence it helps {t['help']:.3g}"
            damage = f"evidence below {thresholds.beta:g} {t['damage']:.3g}"
        return (
            f"G {figures.gain:.3f} ({figures.gains} better, {figures.losses} worse of "
            f"{figures.n_target} target pairs; {helps}), "
            f"{p_fail} {figures.p_fail:.3f} ({figures.failures} of {figures.n_falsify}; "
            f"evidence below {thresholds.delta:g} {t['failure']:.3g}), "
            f"D_reg {figures.d_reg:.3f} ({figures.damaged} of {figures.n_regress} solved pairs "
            f"broken; {damage}); "
            f"{figures.runs} agent runs; evidence needed {t['needed']:.3g}"
        )
    if thresholds.rule == "estimates":
        return (
            f"G {figures.gain:.3f} (needs >= {thresholds.eta:g}), "
            f"{p_fail} {figures.p_fail:.3f} (needs <= {thresholds.delta:g}), "
            f"D_reg {figures.d_reg:.3f} (needs <= {thresholds.beta:g}); rule: estimates"
        )
    return (
        f"G {figures.gain:.3f} (>= {figures.gain_lower:.3f}, needs {thresholds.eta:g}), "
        f"{p_fail} {figures.p_fail:.3f} (<= {figures.p_fail_upper:.3f}, "
        f"needs {thresholds.delta:g}), "
        f"D_reg {figures.d_reg:.3f} (<= {figures.d_reg_upper:.3f}, needs {thresholds.beta:g})"
    )
