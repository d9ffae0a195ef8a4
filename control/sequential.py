"""Anytime-valid tests for the gate and monitoring: betting e-processes over probe outcomes.

A test of a null hypothesis "E[V] >= 0" bets against it: wealth starts at 1 and each outcome V
multiplies it by 1 - lam * V, for bets lam between 0 and 1 / max(V). Under the null each factor
has expectation at most 1, so wealth is a nonnegative supermartingale and, by Ville's
inequality, reaches 1 / alpha with probability at most alpha, *however long one keeps looking*
and whenever one chooses to stop (Ramdas, Grunwald, Vovk, Shafer: "Game-theoretic statistics
and safe anytime-valid inference", 2023). Wealth at a stopping time is an e-value, so several
can be combined (e-BH across the lessons of one gate call).

Each test bets a fixed stake, chosen before any outcome (for the harm tests, the one under
which its wealth is the likelihood ratio of a design alternative against the null: a sequential
probability ratio test, as a bet); no stake is fitted to the data, so nothing is looked at twice.

The unit is the task: the gate draws every probe task of a kind once before any again
(`probes.TaskDraws`), so while tasks remain each outcome is a new task drawn at random from the
kind's probe tasks, and each null below is about the share of those tasks (the population the
probe tasks stand for, when the pool is a sample of the tasks the lesson will meet).

The figures each test reads (one probe pair: outcome without and with the lesson, same seed):

- help (target pairs): X = [better with it] - [worse with it]. Null "G <= eta": its net gain
  on its targets (tasks helped minus tasks hurt) is at most eta, so a lesson that helps as
  often as it hurts, or by less than eta, is not committed.
- regression damage D_reg, on falsification pairs and on regression pairs, each its own test:
  Z = [solved without it, failed with it] - [failed without it, solved with it] - beta *
  [solved without it]. Null "E[Z] >= 0": it breaks at least beta of what the agent solves on
  those probes, net of what chance undoes as often (run-to-run noise flips outcomes both ways;
  a lesson that does nothing breaks as many pairs as it fixes).
- falsification failure P_fail (falsification runs with the lesson): F = [cited there] - delta
  (the agent's citation report: it used the lesson where it should not apply), or without
  reports [worse with it] - [better with it] - delta. Null "E[F] >= 0". Read first, from runs
  with the lesson alone (`Sequential.needs`).

For each, the opposite test (futility) ends a lesson early: wealth betting on the null's side
shows, at `alpha_miss`, that the gain is below WORTH * eta, or that a damage or failure rate is
above half its threshold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from wikitrace.corpus_schema.setting_fields import default

from .stats import EProcess, Mixture, e_bh, lr_bet


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
    task: Hashable = ""
    """The task it ran, its source and id (the unit the tests count: `Sequential.tasks`)."""
    completed: bool = False
    """A falsification run with the lesson alone, observed before for P_fail, now with its
    run without the lesson (same task and seed) for D_reg: one more agent run."""

    @property
    def runs(self) -> int:
        """Agent runs it took when it came."""
        return (self.without is not None) + (not self.completed)

    @property
    def better(self) -> bool:
        return self.with_lesson and self.without is False

    @property
    def worse(self) -> bool:
        return bool(self.without) and not self.with_lesson


@dataclass(frozen=True)
class Rates:
    """What the sequential gate controls, and what it tests against."""

    eta: float = default("eta")
    """The margin help must beat: a lesson is committed only once its net gain on its targets
    (pairs better with it minus pairs worse) is shown above eta; one whose gain is shown below
    WORTH times eta stops early."""
    delta: float = default("delta")
    """Most falsification failure rate P_fail."""
    beta: float = default("beta")
    """Most regression damage D_reg, on each kind of probe."""
    alpha: float = default("alpha")
    """Chance, at most, that a harmful lesson (D_reg >= beta on its falsification or on its
    regression probes, or P_fail >= delta) or one whose net gain is at most eta is committed."""
    alpha_miss: float = default("alpha-miss")
    """Chance, at most, that a lesson worth committing (gain at least WORTH times eta, each harm
    rate at most half its limit) is stopped early and rejected; one can still be rejected when
    the budget runs out before the evidence is clear (`gate --dry-run` prints how often)."""
    flip_rate: float = 0.0
    """The agent's run-to-run flip rate e: the chance a run's outcome differs from what the
    task and seed would give without noise (`gate --flip-rate`). 0 judges outcomes as the runs
    show them; above 0, each test judges the lesson's noise-free effect, read through that
    noise (`seen_margin`, `seen_solved`), so a lesson that breaks beta of what the agent solves
    is still shown harmful when noise hides part of the damage."""

    @property
    def signal(self) -> float:
        """1 - 2e: what independent flips at rate e leave of a difference between two runs."""
        return 1.0 - 2.0 * self.flip_rate

    def seen_margin(self, margin: float) -> float:
        """A margin on a difference of two runs' outcomes (a gain, or a falsification failure
        read from outcomes) as it shows through independent flips at rate e: (1 - 2e) times
        it, the expected difference of two flipped outcomes whose noise-free difference is
        `margin`."""
        return margin * self.signal

    def seen_solved(self, without: bool) -> float:
        """A pair's solved-without-the-lesson, net of what flips add: E[seen] - e is (1 - 2e)
        times the noise-free chance, as the pair's net damage is (1 - 2e) times its own, so
        a damage test's null (D_reg >= beta, noise-free) stays a test of E[net - beta * (seen
        - e)] >= 0. A stated e above the true one makes the harm tests stricter."""
        return float(without) - self.flip_rate


NARROWED_SHARE = 0.25
"""The share of alpha a narrowed lesson's second test uses: a lesson that fails, is narrowed
and is tested again gets two chances to pass, so the second asks for four times the evidence."""

WORTH = 1.5
"""A lesson whose gain is shown below WORTH * eta is not worth testing further."""

DAMAGE_KINDS = ("falsify", "regress")
"""D_reg is tested on each of these kinds of probe on its own."""

FIRST_LOOK = 0.5
"""P_fail is read alone (from runs with the lesson alone) until its evidence reaches (1 /
alpha) ** FIRST_LOOK, halfway to 1 / alpha in log: a lesson cited where it should not apply
seldom gets there (under its null, at most alpha ** FIRST_LOOK of the time, by Ville's
inequality), and a lesson another test will reject stops paying for P_fail's second half.
Once there, falsification probes run as pairs (the runs read alone completed first), and
P_fail goes on reading their citations until it is shown."""

TIE_ORDER = ("falsify", "target", "regress")
"""Which kind is drawn first when futility tests lean equally (none has read a pair yet):
falsification probes first (a run read for P_fail is completed by one run), then targets
(help is the test most lessons fail), then regression probes."""

Verdict = str
"""committed, rejected or continue."""


def _damage_tests(r: Rates) -> tuple[dict[str, EProcess], dict[str, EProcess]]:
    # an outcome is at most 1 - beta * (1 - e): solved without it and failed with it
    top = 0.9 / (1 - r.beta * (1 - r.flip_rate))
    stake = min(lr_bet(r.beta, r.beta / 3), top) * r.signal**2
    low = {k: EProcess(stake) for k in DAMAGE_KINDS}
    high = {k: EProcess(max(lr_bet(r.beta / 2, r.beta), -0.9) * r.signal**2) for k in DAMAGE_KINDS}
    return low, high


@dataclass
class Sequential:
    """The running tests of one lesson; `observe` pairs as they come, `verdict` after each."""

    rates: Rates = field(default_factory=Rates)
    citations: bool = True
    """P_fail from citation reports when the pair has one (the method's wrong activation)."""
    regress_probes: bool = True
    """False when the task pool has no task the agent solved before: D_reg is then tested on
    the falsification probes alone."""
    help: EProcess = field(init=False)
    """Betting that the lesson's net gain on its targets is above eta (null: G <= eta)."""
    below_worth: Mixture = field(init=False)
    """Betting that the net gain is below WORTH * eta (futility): at half the most a pair's
    gain allows, which stops a lesson that helps as often as it hurts, and at nine tenths,
    which stops one that changes nothing twice as fast."""
    damage: dict[str, EProcess] = field(init=False)
    """Kind of probe -> betting that D_reg on those probes is below beta."""
    damage_high: dict[str, EProcess] = field(init=False)
    failure: EProcess = field(init=False)
    failure_high: EProcess = field(init=False)
    reason: str = ""
    focused: str | None = None
    """The kind of probe the last round drew: the one whose futility test leaned most."""
    reports: int = 0
    """Falsification runs with the lesson that returned a citation report."""
    unreported: int = 0
    """... and those that returned none."""
    scale: float = 1.0
    """The share of alpha this lesson's tests use: below 1 when several
    lessons are decided together (e-BH asks each for more evidence)."""
    tasks: dict[str, set[Hashable]] = field(default_factory=dict)
    """Kind -> the distinct tasks its pairs ran."""
    pairs: dict[str, int] = field(default_factory=dict)
    """Kind -> pairs observed (a falsification run with the lesson alone counts as one)."""

    def __post_init__(self) -> None:
        # Each stake is fixed before any outcome. Help: 0.7 of the most a pair's loss allows,
        # near the best growth for a gain of 0.2 and 0.34 alike. Harm: the likelihood ratio of
        # a rate a third of its limit against it (P_fail: half, which commits a lesson cited on
        # 40% of falsification tasks 0.4% of the time against 1.5%, for 2 more runs on
        # helpful ones). Futility: a harm at its limit against half of it (P_fail from
        # citations exactly so; a damage or an outcome may also be -1, which caps the stake);
        # help, a mixture of half and nine tenths of what a gain of nothing allows. (Stakes
        # fitted to the outcomes so far adapt to noise but, on gate_bench's scenarios, commit
        # helpful lessons less often within the budget, and stop lessons that help as often
        # as they hurt later.) With a stated flip rate e, stakes on outcomes shrink by powers
        # of 1 - 2e: the best stake is about the mean over the variance of what a test reads,
        # and noise shrinks the mean by 1 - 2e while it raises the variance, so the noise-free
        # stakes would overbet: D_reg's test by (1 - 2e)^2, help's by (1 - 2e)^3 (within 2%
        # of the best growth for a noise-free gain of 0.2 at e = 0.15; the former mixture of
        # (1 - 2e)^2 and (1 - 2e)^3 paid log 2 for a faster strong lesson, and committed the
        # modest one 3 points less often at 0.15; at 0.30 the single stake is the slower for a
        # strong lesson, 2,204 runs against 1,488), D_reg's and help's futility tests by
        # (1 - 2e)^2 (a futility test that bets less stops a lesson worth committing less
        # often on noise alone: `tests/test_sequential.py` bounds how often), P_fail's futility
        # on outcomes by 1 - 2e. Chosen on `gate_bench.py --noise 0.15 --flip-rate same` (200
        # to 800 lessons a try): unshrunk, a lesson breaking 40% of the solved falsification
        # tasks was admitted about 5% of the time and a strong lesson committed about 70%;
        # docs/gate.md has the figures of the stakes chosen.
        r = self.rates
        eta = r.seen_margin(r.eta)
        worth = WORTH * eta
        stake = -0.7 / (1 + eta)  # 1 + s * (X - eta), X in {-1, 0, 1}
        self.help = EProcess(stake * r.signal**3)
        self.below_worth = Mixture(
            (0.5 / (1 - worth) * r.signal**2, 0.9 / (1 - worth) * r.signal**2)
        )
        self.damage, self.damage_high = _damage_tests(r)
        self.failure = EProcess(min(lr_bet(r.delta, r.delta / 2), 0.9 / (1 - r.delta)))
        self.failure_high = EProcess(
            max(lr_bet(r.delta / 2, r.delta), -0.9 / (1 + r.delta / 2)) * r.signal
        )

    def observe(self, pair: Pair) -> None:
        """One pair: every test it bears on bets on it. A test that has rejected its null
        stops betting (its wealth, an e-value, stays where it crossed); betting nothing for a
        while, then again, keeps it a test supermartingale, so `scale` may be lowered later
        (e-BH) and the test go on."""
        r = self.rates
        kind = pair.kind
        if not pair.completed:
            self.pairs[kind] = self.pairs.get(kind, 0) + 1
        if pair.task:
            self.tasks.setdefault(kind, set()).add(pair.task)
        if kind == "falsify" and not pair.completed:
            if pair.cited is None:
                self.unreported += 1
            else:
                self.reports += 1
        if kind == "target":
            x = float(pair.better) - float(pair.worse)
            eta = r.seen_margin(r.eta)
            if not self.helps:
                self.help.observe(x - eta)
            self.below_worth.observe(x - WORTH * eta)
            return
        net = float(pair.worse) - float(pair.better)
        if pair.without is not None and kind in self.damage:
            solved = r.seen_solved(pair.without)
            if not self.safe_on(kind):
                self.damage[kind].observe(net - r.beta * solved)
            self.damage_high[kind].observe(net - r.beta / 2 * solved)
        if kind == "falsify" and not pair.completed:
            cited = self.citations and pair.cited is not None
            if not cited and pair.without is None:
                return  # neither a citation nor an outcome to compare: it tells nothing
            failed = float(bool(pair.cited)) if cited else net
            # a citation is not an outcome: noise leaves it alone; an outcome's difference
            # shows (1 - 2e) of the failure rate
            delta = r.delta if cited else r.seen_margin(r.delta)
            if not self.falsification_holds:
                low = self.failure.stake if cited else min(self.failure.stake, 0.9 / (1 - delta))
                self.failure.observe(failed - delta, low * (1.0 if cited else r.signal**2))
            # A citation is 0 or 1, so its futility bet may be the likelihood ratio of P_fail
            # at delta against delta / 2; an outcome may be -1 (better with the lesson),
            # which caps the stake.
            high = self.failure_high.stake if not cited else lr_bet(r.delta / 2, r.delta)
            self.failure_high.observe(failed - delta / 2, high)

    # --- what is shown so far -----------------------------------------------------------

    @property
    def level(self) -> float:
        return self.rates.alpha * self.scale

    @property
    def helps(self) -> bool:
        return self.help.rejects(self.level)

    def safe_on(self, kind: str) -> bool:
        if kind == "regress" and not self.regress_probes:
            return True
        return self.damage[kind].rejects(self.level)

    @property
    def safe(self) -> bool:
        return all(self.safe_on(kind) for kind in DAMAGE_KINDS)

    @property
    def falsification_holds(self) -> bool:
        return self.failure.rejects(self.level)

    def reading_citations(self) -> bool:
        """P_fail is read from citation reports: every falsification run so far returned one."""
        return self.citations and not self.unreported

    def first_look(self) -> bool:
        """P_fail is still read alone: every falsification run so far returned a citation
        report, and P_fail's evidence is below (1 / alpha) ** FIRST_LOOK (alpha as set, not
        scaled: a narrowed lesson, asked for four times the evidence, does not read P_fail
        alone for longer)."""
        threshold = (1 / self.rates.alpha) ** FIRST_LOOK
        return self.reading_citations() and self.failure.wealth < threshold

    def needs(self) -> dict[str, bool]:
        """Which kinds of probe still tell something. While P_fail is read alone
        (`first_look`), falsification runs alone (it is the cheapest test, and the one a
        misfiring lesson fails first). Then one kind a round, among those whose tests are
        not shown yet: the one whose futility test leans most towards rejecting (the log of
        its wealth; ties in TIE_ORDER), so the test that will reject a lesson gets the runs
        first and a lesson failing one test does not pay for the others. A lesson that passes
        needs every test shown whatever the order, so the order costs it no run (its rounds
        hold fewer runs to run at once); which kind is drawn next is decided before its
        outcomes, so every test stays valid."""
        if self.first_look():
            return {"target": False, "falsify": True, "regress": False}
        open_tests = {
            "target": not self.helps,
            "falsify": not self.falsification_holds or not self.safe_on("falsify"),
            "regress": not self.safe_on("regress"),
        }
        lean = {kind: self.leaning(kind) for kind, needed in open_tests.items() if needed}
        self.focused = max(
            lean, key=lambda kind: (lean[kind], -TIE_ORDER.index(kind)), default=None
        )
        return {kind: kind == self.focused for kind in open_tests}

    def leaning(self, kind: str) -> float:
        """How far the futility test a kind of probe feeds leans towards rejecting: the log of
        its wealth (the largest of them for falsification probes, which feed two)."""
        if kind == "target":
            return self.below_worth.log_wealth
        found = self.damage_high[kind].log_wealth
        if kind == "falsify" and not self.falsification_holds:
            found = max(found, self.failure_high.log_wealth)
        return found

    def needs_base(self, kind: str) -> bool:
        """Whether a pair of `kind` drawn now must also run without the lesson. Targets and
        regression probes always do (their tests compare the two sides). A falsification
        probe does not while P_fail is read alone (`first_look`): its citation is all it
        tells then. Decided before the pair is run, so skipping the base run keeps every test
        valid."""
        return kind != "falsify" or not self.first_look()

    def verdict(self) -> Verdict:
        r = self.rates
        if self.helps and self.safe and self.falsification_holds:
            self.reason = "shown to help, and shown not to break or misfire beyond the limits"
            return "committed"
        if self.failure_high.rejects(r.alpha_miss):
            self.reason = f"its falsification failure rate is shown to be above {r.delta / 2:g}"
            return "rejected"
        for kind in DAMAGE_KINDS:
            if self.damage_high[kind].rejects(r.alpha_miss):
                self.reason = (
                    f"its regression damage is shown to be above {r.beta / 2:g} on its "
                    f"{'falsification' if kind == 'falsify' else 'regression'} probes"
                )
                return "rejected"
        if self.below_worth.rejects(r.alpha_miss):
            self.reason = f"its net gain on its targets is shown to be below {WORTH * r.eta:g}"
            return "rejected"
        return "continue"

    def missing(self) -> list[str]:
        """What is not shown yet, in words."""
        found = []
        if not self.helps:
            found.append(f"net gain above {self.rates.eta:g} on its targets not shown")
        for kind in DAMAGE_KINDS:
            if not self.safe_on(kind):
                found.append(f"regression damage below {self.rates.beta:g} on {kind} not shown")
        if not self.falsification_holds:
            found.append(f"falsification failures below {self.rates.delta:g} not shown")
        return found

    def e_value(self) -> float:
        """The evidence against "harmful or not helping beyond eta" (the least wealth of the
        tests): an e-value for that union of nulls, to combine across lessons (e-BH)."""
        kinds = [k for k in DAMAGE_KINDS if k != "regress" or self.regress_probes]
        damage = [self.damage[k].wealth for k in kinds]
        return min(self.help.wealth, self.failure.wealth, *damage)


@dataclass(frozen=True)
class Schedule:
    """How the sequential gate spends agent runs on one lesson."""

    per_round: int = 2
    """Pairs of each kind still needed, run together in one round."""
    max_runs: int = default("max-runs")
    """Agent runs (both sides of each pair) at most; then a lesson not yet shown to pass is
    rejected. The default, 400, is what commits a lesson of net gain 0.20 (twice eta) at least
    80% of the time with a margin: gate_bench's helpful-modest lesson, effects fixed per task,
    87.6% over seeds 0 to 3 (79.5% at 320, where 166 of its 190 misses at seeds 0 and 1 ran
    out of budget with help not yet shown, and 24 were stopped by a futility test;
    docs/gate.md)."""

    def round_of(self, needs: dict[str, bool]) -> dict[str, int]:
        """Kind -> pairs to draw this round, for the kinds whose tests still need them."""
        return {kind: self.per_round for kind, needed in needs.items() if needed}

    def for_evidence(self, scale: float, alpha: float) -> Schedule:
        """The budget of a lesson asked for 1 / (alpha * scale) evidence (e-BH across a call's
        lessons): max_runs times log(1 / (alpha * scale)) / log(1 / alpha), what the tests'
        growth needs to reach it at the rate that reaches 1 / alpha within max_runs."""
        if scale >= 1.0:
            return self
        grown = self.max_runs * math.log(1 / (alpha * scale)) / math.log(1 / alpha)
        return dataclasses.replace(self, max_runs=math.ceil(grown))

    def through_noise(self, flip_rate: float) -> Schedule:
        """The budget for outcomes flipped at rate e: max_runs / (1 - 2e)^4. Noise shrinks
        every difference a test reads to (1 - 2e) of its size, the runs a test needs grow as
        its variance over the square of that difference, and the variance grows too: the
        best procedure's runs on gate_bench's helpful lessons grow 3.9-4.3 times at e = 0.15,
        (1 - 2e)^-4 = 4.2."""
        if flip_rate <= 0.0:
            return self
        grown = self.max_runs / (1.0 - 2.0 * flip_rate) ** 4
        return dataclasses.replace(self, max_runs=math.ceil(grown))


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
        room = schedule.max_runs - runs
        for kind in list(wanted):  # a pair costs two runs, a run with the lesson alone one
            cost = 1 + tests.needs_base(kind)
            take = min(wanted[kind], room // cost)
            room -= take * cost
            wanted[kind] = take
        if not any(wanted.values()):
            break
        got = list(sample({k: n for k, n in wanted.items() if n}))
        if not got:
            break
        runs += sum(pair.runs for pair in got)
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


def together(
    tests: Sequence[Sequential | None],
    committed: list[bool],
    go_on: Callable[[int], bool],
    alpha: float,
) -> list[int]:
    """Across one call's lessons: commit only a set e-BH admits, so that the expected share of
    harmful or not-helping lessons among those committed is at most alpha. A committed lesson
    e-BH does not admit yet goes on (`go_on(i)`, its tests asking for m / (alpha k) evidence, k
    the lessons committed, m those tested) until it does, or is rejected. `committed` is
    updated in place; returns the lessons that went on, in order."""
    m = len(tests)
    went: list[int] = []
    if m < 2:
        return went
    while True:
        chosen = [i for i in range(m) if committed[i]]
        admitted = e_bh([t.e_value() if t else 0.0 for t in tests], alpha)
        short = [i for i in chosen if i not in admitted]
        if not short:
            return went
        for i in short:
            test = tests[i]
            assert test is not None
            test.scale = min(test.scale, len(chosen) / m)
            committed[i] = go_on(i)
            went.append(i)


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

    max_violation_rate: float = default("max-violation-rate")
    alpha: float = 0.05
    """Chance, at most, that a lesson violated no more often than the limit is ever retired."""
    test: EProcess = field(default_factory=EProcess)
    """Its stake is set for each episode, from that episode's limit."""

    def observe(self, violated: bool, base_failure: float = 0.0) -> None:
        """One judged episode. `base_failure`: chance the episode fails without the lesson
        (0 when the report's own check judged it)."""
        limit = base_failure + self.max_violation_rate * (1.0 - base_failure)
        # The likelihood ratio of a rate 30% of the way from the limit to 1, against it: at
        # the limit 0.3, a lesson violated half the time is retired within 100 episodes 95.4%
        # of the time (exactly, over its binomial paths: monitor_bench). A quarter of the way
        # gives 96.7%, but 6 violations in 6 episodes would no longer retire (evidence 15.8);
        # mixtures of two stakes gain at most 0.4 points and need two wealths on record.
        stake = max(lr_bet(limit, limit + 0.3 * (1.0 - limit)), -0.9 / limit)
        self.test.observe(float(violated) - limit, stake)

    def retire(self) -> bool:
        return self.test.rejects(self.alpha)

    @property
    def evidence(self) -> float:
        """The test's wealth: 1 / alpha or more retires."""
        return self.test.wealth
