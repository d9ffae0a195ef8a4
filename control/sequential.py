"""Anytime-valid tests for the gate and monitoring: betting e-processes over probe outcomes.

A test of a null hypothesis "E[V] >= 0" bets against it: wealth starts at 1 and each outcome V
multiplies it by 1 - lam * V, for bets lam between 0 and 1 / max(V). Under the null each factor
has expectation at most 1, so wealth is a nonnegative supermartingale and, by Ville's
inequality, reaches 1 / alpha with probability at most alpha, *however long one keeps looking*
and whenever one chooses to stop (Ramdas, Grunwald, Vovk, Shafer: "Game-theoretic statistics
and safe anytime-valid inference", 2023). Wealth at a stopping time is an e-value, so several
can be combined (e-BH across the lessons of one gate call).

Each test bets a fixed stake, the one under which its wealth is the likelihood ratio of a
design alternative against the null (a sequential probability ratio test, as a bet); no stake
is fitted to the data, so nothing is looked at twice.

The figures each test reads (one probe pair: outcome without and with the lesson, same seed):

- help (target pairs): X = [better with it] - [worse with it]. Null "G <= 0": it helps no more
  often than it hurts its targets (McNemar's sign test, sequentially).
- regression damage D_reg (falsification and regression pairs): Z = [solved without it, failed
  with it] - [failed without it, solved with it] - beta * [solved without it]. Null "E[Z] >=
  0": it breaks at least beta of what the agent solves, net of what chance undoes as often (run
  to run noise flips outcomes both ways; a lesson that does nothing breaks as many pairs as it
  fixes).
- falsification failure P_fail (falsification pairs): F = [cited there] - delta (the agent's
  citation report: it used the lesson where it should not apply), or without reports
  [worse with it] - [better with it] - delta. Null "E[F] >= 0".

For each, the opposite test (futility) ends a lesson early: wealth betting on the null's side
shows, at `alpha_miss`, that the gain is below eta, or that the damage or failure rate is above
half its threshold.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


def lr_bet(null: float, alternative: float) -> float:
    """The bet under which wealth is the likelihood ratio of two rates: betting against the
    null rate `null` on a 0-or-1 outcome X as 1 - bet * (X - null), the wealth after n
    outcomes is P(outcomes | alternative) / P(outcomes | null) (a sequential probability
    ratio test). Negative when the alternative is the higher rate."""
    return (null - alternative) / (null * (1.0 - null))


@dataclass
class EProcess:
    """Wealth betting against the null E[V] >= 0 at a fixed stake: each outcome V multiplies
    it by 1 - stake * V. A stake above 0 bets that E[V] < 0 (it needs V <= 1 / stake), one
    below 0 that E[V] > 0 (against the null E[V] <= 0; it needs V >= 1 / stake)."""

    stake: float = 0.0
    log_wealth: float = 0.0

    def observe(self, value: float, stake: float | None = None) -> None:
        """One outcome; `stake`, if given, is this outcome's own (set before it was seen)."""
        stake = self.stake if stake is None else stake
        factor = 1.0 - stake * value
        if factor < 0:
            raise ValueError(f"outcome {value} out of the range a stake of {stake} allows")
        self.log_wealth += math.log(factor) if factor > 0 else -math.inf

    @property
    def wealth(self) -> float:
        return math.exp(self.log_wealth)

    def rejects(self, alpha: float) -> bool:
        """The null is rejected at level alpha. A test that has rejected stops betting (its
        owner stops feeding it), so its wealth stays where it crossed: an e-value."""
        return self.log_wealth >= -math.log(alpha)


@dataclass(frozen=True)
class Pair:
    """One probe (task, seed) run without and with the lesson on the same seed."""

    kind: str
    """target, falsify or regress."""
    without: bool | None
    """None: not run without the lesson (a falsification probe that only needed its citation,
    see `Sequential.needs_base`)."""
    with_lesson: bool
    cited: bool | None = None
    """Whether the run with the lesson cited it (None: its agent returned no report)."""

    @property
    def better(self) -> bool:
        return self.with_lesson and self.without is False

    @property
    def worse(self) -> bool:
        return bool(self.without) and not self.with_lesson


@dataclass(frozen=True)
class Rates:
    """What the sequential gate controls, and what it tests against."""

    eta: float = 0.1
    """Futility: a lesson whose gain on its targets is confidently below this stops early."""
    delta: float = 0.3
    """Most falsification failure rate P_fail."""
    beta: float = 0.3
    """Most regression damage D_reg."""
    alpha: float = 0.1
    """Chance, at most, that a harmful lesson (D_reg >= beta or P_fail >= delta) or a useless
    one (it helps its targets no more often than it hurts them) is committed."""
    alpha_miss: float = 0.1
    """Chance, at most, that a lesson worth committing (gain at least eta, each harm rate at
    most half its limit) is stopped early and rejected; one can still be rejected when the
    budget runs out before the evidence is clear (`gate --dry-run` prints how often)."""


Verdict = str
"""committed, rejected or continue."""


@dataclass
class Sequential:
    """The running tests of one lesson; `observe` pairs as they come, `verdict` after each."""

    rates: Rates = field(default_factory=Rates)
    citations: bool = True
    """P_fail from citation reports when the pair has one (the method's wrong activation)."""
    help: EProcess = field(init=False)
    """Betting that the lesson helps its targets (null: G <= 0)."""
    below_eta: EProcess = field(init=False)
    damage: EProcess = field(init=False)
    damage_high: EProcess = field(init=False)
    failure: EProcess = field(init=False)
    failure_high: EProcess = field(init=False)
    reason: str = ""
    reports: int = 0
    """Falsification pairs whose run with the lesson returned a citation report."""
    unreported: int = 0
    """... and those whose run returned none."""
    scale: float = 1.0
    """The share of alpha this lesson's tests use: below 1 when several
    lessons are decided together (e-BH asks each for more evidence)."""

    def __post_init__(self) -> None:
        # Each stake is the likelihood ratio of a design alternative against its null. Commit:
        # help, that 9 in 10 target pairs that differ are gains; harm, a rate a third of its
        # limit. Futility: a gain a third of eta; a harm at its limit, against half of it.
        # Capped where an outcome could make wealth negative. (Stakes fitted to the outcomes
        # so far adapt to noise but, on gate_bench's scenarios, commit helpful lessons less
        # often within the budget.)
        r = self.rates
        self.help = EProcess(-0.8)  # 1 + 0.8 * X, X in {-1, 0, 1}
        self.below_eta = EProcess(min(lr_bet(r.eta, r.eta / 3), 0.9 / (1 - r.eta)))
        self.damage = EProcess(min(lr_bet(r.beta, r.beta / 3), 0.9 / (1 - r.beta)))
        self.damage_high = EProcess(max(lr_bet(r.beta / 2, r.beta), -0.9))
        self.failure = EProcess(min(lr_bet(r.delta, r.delta / 3), 0.9 / (1 - r.delta)))
        self.failure_high = EProcess(max(lr_bet(r.delta / 2, r.delta), -0.9 / (1 + r.delta / 2)))

    def observe(self, pair: Pair) -> None:
        """One pair: every test it bears on bets on it. A test that has rejected its null
        stops betting (its wealth, an e-value, stays where it crossed); betting nothing for a
        while, then again, keeps it a test supermartingale, so `scale` may be lowered later
        (e-BH) and the test go on."""
        r = self.rates
        if pair.kind == "falsify":
            if pair.cited is None:
                self.unreported += 1
            else:
                self.reports += 1
        if pair.kind == "target":
            x = float(pair.better) - float(pair.worse)
            if not self.helps:
                self.help.observe(x)
            self.below_eta.observe(x - r.eta)
            return
        net = float(pair.worse) - float(pair.better)
        if pair.without is not None:
            if not self.safe:
                self.damage.observe(net - r.beta * float(pair.without))
            self.damage_high.observe(net - r.beta / 2 * float(pair.without))
        if pair.kind == "falsify":
            cited = self.citations and pair.cited is not None
            if not cited and pair.without is None:
                return  # neither a citation nor an outcome to compare: it tells nothing
            failed = float(bool(pair.cited)) if cited else net
            if not self.falsification_holds:
                self.failure.observe(failed - r.delta)
            self.failure_high.observe(failed - r.delta / 2)

    # --- what is shown so far -----------------------------------------------------------

    @property
    def helps(self) -> bool:
        return self.help.rejects(self.rates.alpha * self.scale)

    @property
    def safe(self) -> bool:
        return self.damage.rejects(self.rates.alpha * self.scale)

    @property
    def falsification_holds(self) -> bool:
        return self.failure.rejects(self.rates.alpha * self.scale)

    def needs(self) -> dict[str, bool]:
        """Which kinds of probe still tell something: targets until help is shown,
        falsification probes until P_fail is (they also count for D_reg), regression probes
        until D_reg is."""
        return {
            "target": not self.helps,
            "falsify": not self.falsification_holds,
            "regress": not self.safe,
        }

    def needs_base(self, kind: str) -> bool:
        """Whether a pair of `kind` drawn now must also run without the lesson. Targets and
        regression probes always do (their tests compare the two sides). A falsification
        probe does not once D_reg is shown and P_fail is read from citation reports that
        every falsification run so far has returned: its citation is all it still tells.
        Decided before the pair is run, so skipping the base run keeps every test valid."""
        if kind != "falsify":
            return True
        return not (self.citations and self.safe and self.reports and not self.unreported)

    def verdict(self) -> Verdict:
        r = self.rates
        if self.helps and self.safe and self.falsification_holds:
            self.reason = "shown to help, and shown not to break or misfire beyond the limits"
            return "committed"
        if self.below_eta.rejects(r.alpha_miss):
            self.reason = f"its gain on its targets is shown to be below eta {r.eta:g}"
            return "rejected"
        if self.damage_high.rejects(r.alpha_miss):
            self.reason = f"its regression damage is shown to be above {r.beta / 2:g}"
            return "rejected"
        if self.failure_high.rejects(r.alpha_miss):
            self.reason = f"its falsification failure rate is shown to be above {r.delta / 2:g}"
            return "rejected"
        return "continue"

    def missing(self) -> list[str]:
        """What is not shown yet, in words."""
        found = []
        if not self.helps:
            found.append("help on its targets not shown")
        if not self.safe:
            found.append(f"regression damage below {self.rates.beta:g} not shown")
        if not self.falsification_holds:
            found.append(f"falsification failures below {self.rates.delta:g} not shown")
        return found

    def e_value(self) -> float:
        """The evidence against "harmful or useless" (the least wealth of the three tests):
        an e-value for that union of nulls, to combine across lessons (e-BH)."""
        return min(self.help.wealth, self.damage.wealth, self.failure.wealth)


def e_bh(e_values: Sequence[float], alpha: float) -> set[int]:
    """The e-Benjamini-Hochberg procedure (Wang and Ramdas, 2022): the indices whose nulls are
    rejected so that the expected share of true nulls among them is at most alpha, under any
    dependence between the e-values."""
    m = len(e_values)
    order = sorted(range(m), key=lambda i: -e_values[i])
    chosen = 0
    for k in range(1, m + 1):
        if e_values[order[k - 1]] >= m / (alpha * k):
            chosen = k
    return set(order[:chosen])


@dataclass(frozen=True)
class Schedule:
    """How the sequential gate spends agent runs on one lesson."""

    per_round: int = 2
    """Target and falsification pairs still needed, run together in one round; regression
    pairs half as many (at least one), since falsification pairs count for D_reg too."""
    max_runs: int = 128
    """Agent runs (both sides of each pair) at most; then a lesson not yet shown to pass is
    rejected."""

    def round_of(self, needs: dict[str, bool]) -> dict[str, int]:
        """Kind -> pairs to draw this round, for the kinds whose tests still need them."""
        share = {"regress": max(1, self.per_round // 2)}
        return {kind: share.get(kind, self.per_round) for kind, needed in needs.items() if needed}


@dataclass
class Outcome:
    verdict: Verdict
    reason: str
    runs: int
    """Agent runs spent: two a pair (without and with the lesson)."""


def decide(
    tests: Sequential,
    sample: Callable[[dict[str, int]], Sequence[Pair]],
    schedule: Schedule,
    *,
    spent: int = 0,
) -> Outcome:
    """Run rounds of probe pairs through `sample` (kind -> how many pairs) until the tests
    decide or the budget is spent. Each pair is looked at in the order given and the tests may
    stop after any of them: a round's order is fixed before its outcomes are seen, so stopping
    inside it keeps every test valid."""
    runs = spent
    verdict = tests.verdict()
    while verdict == "continue":
        wanted = schedule.round_of(tests.needs())
        room = (schedule.max_runs - runs) // 2
        if room <= 0 or not wanted:
            break
        for kind in list(wanted):
            take = min(wanted[kind], room)
            room -= take
            wanted[kind] = take
        got = list(sample({k: n for k, n in wanted.items() if n}))
        if not got:
            break
        runs += sum(1 + (pair.without is not None) for pair in got)
        for pair in got:
            tests.observe(pair)
            verdict = tests.verdict()
            if verdict != "continue":
                break
    if verdict == "continue":
        verdict = "rejected"
        tests.reason = (
            f"not shown to pass within {schedule.max_runs} agent runs "
            f"({'; '.join(tests.missing())})"
        )
    return Outcome(verdict, tests.reason, runs)


@dataclass
class Watch:
    """Monitoring one shown lesson: retire it once its violation rate is shown to be above
    `max_violation_rate`, an anytime-valid test, so checking after every episode costs nothing.

    An episode that used the lesson is a violation when its expected effect was absent. Where
    the episode's report says so (its per-lesson check), that is the violation; where it does
    not, the episode's failure stands in, and the agent fails some tasks whatever it is shown:
    `base_failure` (how often runs of that task failed without the lesson) is allowed for, so
    only failures beyond it count against the lesson (a harmless lesson cited on hard tasks is
    not retired for their difficulty)."""

    max_violation_rate: float = 0.3
    alpha: float = 0.05
    """Chance, at most, that a lesson violated no more often than the limit is ever retired."""
    test: EProcess = field(default_factory=EProcess)
    """Its stake is set for each episode, from that episode's limit."""

    def observe(self, violated: bool, base_failure: float = 0.0) -> None:
        """One judged episode. `base_failure`: chance the episode fails without the lesson
        (0 when the report's own check judged it)."""
        limit = base_failure + self.max_violation_rate * (1.0 - base_failure)
        # The likelihood ratio of a rate 30% of the way from the limit to 1, against it.
        stake = max(lr_bet(limit, limit + 0.3 * (1.0 - limit)), -0.9 / limit)
        self.test.observe(float(violated) - limit, stake)

    def retire(self) -> bool:
        return self.test.rejects(self.alpha)

    @property
    def evidence(self) -> float:
        """The test's wealth: 1 / alpha or more retires."""
        return self.test.wealth


# --- simulation: what the gate commits when the truth is known ---------------------------

SOLVED = {"target": 0.2, "falsify": 0.7, "regress": 0.85}
"""Chance the agent solves a probe without the lesson, by kind, in the simulations."""


def simulated_pair(
    rng: random.Random, kind: str, gain: float, p_fail: float, d_reg: float, noise: float = 0.0
) -> Pair:
    """One probe pair of a lesson with a known net gain on its targets, falsification
    failure rate (cited where it should not apply) and regression damage (share of solved
    pairs it breaks); `noise` flips each side's outcome independently."""
    solved = rng.random() < SOLVED[kind]
    if kind == "target":
        loss = SOLVED[kind] * d_reg
        fixed = min(1.0, (gain + loss) / (1 - SOLVED[kind]))
        with_lesson = rng.random() >= d_reg if solved else rng.random() < fixed
    else:
        with_lesson = solved and rng.random() >= d_reg
    if noise:
        solved = solved != (rng.random() < noise)
        with_lesson = with_lesson != (rng.random() < noise)
    cited = rng.random() < p_fail if kind == "falsify" else None
    return Pair(kind, solved, with_lesson, cited)


def simulate(
    rng: random.Random,
    truth: tuple[float, float, float],
    rates: Rates,
    schedule: Schedule,
    *,
    noise: float = 0.0,
    scale: float = 1.0,
) -> Outcome:
    """One lesson with true (gain, p_fail, d_reg) through `decide`, the loop the gate runs."""

    tests = Sequential(rates, scale=scale)

    def sample(wanted: dict[str, int]) -> list[Pair]:
        pairs = []
        for kind, count in wanted.items():
            base = tests.needs_base(kind)
            for _ in range(count):
                pair = simulated_pair(rng, kind, *truth, noise=noise)
                pairs.append(pair if base else dataclasses.replace(pair, without=None))
        return pairs

    return decide(tests, sample, schedule)


def dry_run_text(rates: Rates, schedule: Schedule, reps: int = 400) -> str:
    """What the sequential gate does with these settings, by simulation (`gate --dry-run`)."""
    rng = random.Random(0)

    def run(truth: tuple[float, float, float]) -> str:
        outcomes = [simulate(rng, truth, rates, schedule) for _ in range(reps)]
        runs = sorted(o.runs for o in outcomes)
        share = sum(o.verdict == "committed" for o in outcomes) / reps
        shares.append(share)
        gain, p_fail, d_reg = truth
        return f"{gain:7.2f} {p_fail:6.2f} {d_reg:5.2f}  {share:9.3f}  {runs[len(runs) // 2]:11d}"

    shares: list[float] = []

    low_harm = (rates.delta / 3, rates.beta / 3)
    lines = [
        f"sequential gate: alpha {rates.alpha:g}, alpha_miss {rates.alpha_miss:g}, eta "
        f"{rates.eta:g}, delta {rates.delta:g}, beta {rates.beta:g}, at most "
        f"{schedule.max_runs} agent runs a lesson ({schedule.per_round} target and "
        f"falsification pairs and {schedule.round_of({'regress': True})['regress']} regression "
        f"pair a round); simulated, {reps} lessons a line (probes solved without the lesson: "
        f"targets {SOLVED['target']:g}, falsification {SOLVED['falsify']:g}, regression "
        f"{SOLVED['regress']:g}; no outcome noise)",
        "",
        f"{'true G':>7} {'P_fail':>6} {'D_reg':>5}  {'committed':>9}  {'median runs':>11}",
    ]
    smallest = None
    for step in range(1, 13):
        gain = step * 0.05
        lines.append(run((gain, *low_harm)))
        if shares[-1] >= 0.8 and smallest is None:
            smallest = gain
        if shares[-1] >= 0.95:
            break
    for truth in (
        (0.34, rates.delta, low_harm[1]),
        (0.34, low_harm[0], rates.beta),
        (0.34, rates.delta + 0.1, low_harm[1]),
        (0.34, low_harm[0], rates.beta + 0.1),
        (0.0, *low_harm),
    ):
        lines.append(run(truth))
    lines.append("")
    if smallest is None:
        lines.append("no gain up to 0.60 is committed 80% of the time: raise --max-runs")
    else:
        lines.append(
            f"smallest true G committed at least 80% of the time (P_fail and D_reg a third of "
            f"their limits): {smallest:.2f}"
        )
    lines.append(
        f"guaranteed whatever the agent: P_fail >= {rates.delta:g}, D_reg >= {rates.beta:g} or "
        f"no help committed at most {rates.alpha:g} of the time (a quarter of that again when "
        "narrowed)"
    )
    return "\n".join(lines)
