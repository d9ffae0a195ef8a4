"""The admission gate, monitoring and hypotheses, on the toy environment: its scripted agent is
the runner, and the toy's lesson writer answers at our LLM boundary."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import frontmatter
import pytest
from scipy import stats as scipy_stats

from wikitrace import prompts
from wikitrace.compiler import BuildOptions, CompileLimits, build_corpus
from wikitrace.compiler.hypothesize import hypothesize
from wikitrace.control import stats
from wikitrace.control.gate import GateReport, gate_insights
from wikitrace.control.gate_inputs import GateOptions
from wikitrace.control.monitor import (
    FEED_CONTROLS,
    NO_BASE,
    Base,
    BaseRates,
    MonitorOptions,
    monitor_corpus,
    read_controls,
    report_task,
    tally_failures,
)
from wikitrace.control.pool import read_pool
from wikitrace.control.runner import RunnerSpec
from wikitrace.corpus_schema import InputError, verify
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.tools.cite import CitationReport
from wikitrace.tools.memory import Memory
from wikitrace.versions import Store

from helpers import FakeLLM, good_answer, make_run, run, write_runs
from walk_throughs import WalkThrough

TOY = Path(__file__).resolve().parent.parent / "examples" / "toy"
sys.path.insert(0, str(TOY))
from lessons import answer  # noqa: E402

AGENT = (
    f"{sys.executable} {TOY / 'agent.py'} --task {{task_id}} --memory {{memory}} --seed {{seed}}"
)
MODEL = "openai/toy"
LESSON_RUNS = ["start.jsonl", "mat.jsonl", "force.jsonl", "force-drawer.jsonl"]


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM(answer=lambda messages: answer(messages[0]["content"]), model=MODEL)


def build_toy(tmp_path: Path, llm: FakeLLM, *, hypotheses: bool = True, mine: bool = False) -> Path:
    """8 plain runs and 3 lesson runs: insight-0001 doormat (sound), insight-0002 force every
    container (over-broad), insight-0003 force drawers (harmful)."""
    corpus = tmp_path / "toy"
    build_corpus(
        BuildOptions(
            inputs=[TOY / "runs" / name for name in LESSON_RUNS],
            output=corpus,
            model=MODEL,
            cache_dir=tmp_path / "cache",
            limits=CompileLimits(hypotheses=hypotheses),
            mine=mine,  # by default the model's three lessons only
        ),
        llm=llm,
    )
    return corpus


def gate(
    corpus: Path, llm: FakeLLM | None, ids: list[str] | None = None, **options: Any
) -> GateReport:
    """The gate on the toy. 5 targets: its lessons' types have 6 locked containers each, and a
    lesson's own source task is never a target."""
    options.setdefault("targets", 5)
    options.setdefault("rule", "bounds")  # the fixed-probe rule; sequential: its own tests
    spec = RunnerSpec(AGENT, concurrency=2, timeout_seconds=60, retries=0)
    pool = read_pool(TOY / "tasks.jsonl")
    return gate_insights(corpus, ids or [], GateOptions(runner=spec, pool=pool, **options), llm=llm)


def page(corpus: Path, rel: str) -> frontmatter.Post:
    """A page, its header joined with its data file (what read.read_page reads)."""
    post = frontmatter.load(corpus / rel)
    if "data" in post.metadata:
        post.metadata.update(json.loads((corpus / str(post["data"])).read_text()))
    return post


@pytest.mark.parametrize(("k", "n"), [(0, 8), (1, 8), (6, 8), (8, 8), (3, 20), (17, 40), (0, 1)])
def test_bounds_are_clopper_pearson(k: int, n: int) -> None:
    for confidence in (0.8, 0.9, 0.95):
        expected_upper = 1.0 if k == n else scipy_stats.beta.ppf(confidence, k + 1, n - k)
        expected_lower = 0.0 if k == 0 else scipy_stats.beta.ppf(1 - confidence, k, n - k + 1)
        assert stats.upper(k, n, confidence) == pytest.approx(expected_upper, abs=1e-9)
        assert stats.lower(k, n, confidence) == pytest.approx(expected_lower, abs=1e-9)
    assert stats.upper(0, 0, 0.9) == 1.0 and stats.lower(0, 0, 0.9) == 0.0
    with pytest.raises(ValueError, match="0 <= k <= n"):
        stats.upper(3, 2, 0.9)


def test_the_compiler_states_hypotheses_when_asked(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    header = page(corpus, "insight/insight-0001.md")
    assert header["hypothesis"] == {
        "precondition": "A locked drawer.",
        "behaviour": "Lift the doormat, take the key, unlock the drawer.",
        "expected_effect": "The drawer opens and the item can be taken.",
        "verifier": "The task succeeds.",
    }
    assert header["status"] == "ungated"
    assert "- precondition: A locked drawer." in header.content
    # An answer without hypotheses is sent back when they were asked for.
    plain = FakeLLM(answer=lambda m: good_answer(m[0]["content"]))
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1")])
    report = build_corpus(
        BuildOptions(
            inputs=[runs],
            output=tmp_path / "c",
            model=plain.model,
            cache_dir=tmp_path / "cache",
            limits=CompileLimits(hypotheses=True, invalid_retries=1),
        ),
        llm=plain,
    )
    assert (
        report.invalid_retries == 1
        and report.failed
        and "has no hypothesis" in str(plain.calls[1][-1]["content"])
    )


def test_the_gate_commits_narrows_and_rejects(tmp_path: Path, llm: FakeLLM) -> None:
    from wikitrace.control.embed import insight_texts

    corpus = build_toy(tmp_path, llm)
    assert sorted(insight_texts(corpus)) == ["insight-0001", "insight-0002", "insight-0003"]
    calls = len(llm.calls)
    report = gate(corpus, llm)
    good, broad, harmful = report.decisions
    assert (report.tested_on, report.version) == ("v0001", "v0002")

    # The doormat lesson: the 5 locked drawers it targets (its own source task, drawer-4, is
    # never a target) all gained; nothing else moved.
    assert (good.insight, good.verdict, good.narrowed_precondition) == (
        "insight-0001",
        "committed",
        None,
    )
    assert good.figures is not None
    assert (good.figures.gains, good.figures.losses, good.figures.n_target) == (5, 0, 5)
    assert (good.figures.failures, good.figures.damaged) == (0, 0)
    assert good.figures.p_fail_basis == "citations"  # the toy agent reports what it used
    assert good.figures.gain_lower == pytest.approx(
        stats.lower(5, 5, 0.9) - stats.upper(0, 5, 0.9), abs=1e-6
    )

    # Forcing every container: it opens the locked safes but breaks every open container.
    assert (broad.insight, broad.verdict) == ("insight-0002", "committed")
    assert broad.figures is not None and not broad.figures.passes
    assert broad.figures.gains == 5 and broad.figures.failures > 0 and broad.figures.damaged > 0
    assert broad.precondition == "Any container that holds the item you need."
    assert broad.narrowed_precondition == "A locked safe."
    assert broad.narrowed_figures is not None and broad.narrowed_figures.passes
    assert (broad.narrowed_figures.losses, broad.narrowed_figures.damaged) == (0, 0)
    assert len(llm.calls) == calls + 1  # one call, to narrow

    # Forcing drawers (from a failed run): no gain anywhere, and it breaks open drawers.
    assert (harmful.insight, harmful.verdict) == ("insight-0003", "rejected")
    assert harmful.figures is not None and harmful.figures.gains == 0
    assert "not narrowed: the gain is not real" in harmful.reason

    # The probes: every kind, chosen by type and similarity, each with its runs on record.
    kinds = {p.kind for p in good.probes}
    assert kinds == {"target", "falsify", "regress"}
    targets = [p.task_id for p in good.probes if p.kind == "target"]
    assert set(targets) == {"drawer-5", "drawer-6", "drawer-10", "drawer-11", "drawer-12"}
    whys = {p.why.split(":")[0]: p.task_id for p in good.probes if p.kind == "falsify"}
    assert set(whys) == {"boundary", "precondition violation", "decoy"}
    assert whys["decoy"].startswith("safe-")  # looks alike, needs another behaviour
    assert "drawer-4" not in [p.task_id for p in good.probes if p.kind != "regress"]

    # The new version: statuses, the narrowed precondition, the decisions and their runs.
    store = Store(corpus)
    assert store.current() == "v0002" and verify(corpus).ok
    assert not (store.dir / "probes").exists()
    statuses = {i: page(corpus, f"insight/insight-000{i}.md")["status"] for i in (1, 2, 3)}
    assert statuses == {1: "committed", 2: "committed", 3: "rejected"}
    narrowed = page(corpus, "insight/insight-0002.md")
    assert narrowed["hypothesis"]["precondition"] == "A locked safe."
    assert narrowed["decisions"] == ["gate/gate-0002.md"]
    assert narrowed["applicability"].startswith("Only a locked safe")
    decision = GateDecision.model_validate(page(corpus, "gate/gate-0002.md").metadata)
    assert decision == broad
    runs = [
        json.loads(line) for line in (corpus / "gate/gate-0002.runs.jsonl").read_text().splitlines()
    ]
    ids = {i for p in broad.probes for i in (*p.base_runs, *p.lesson_runs)}
    # The narrowed lesson is judged on probes of its own, on fresh seeds, not on the runs that
    # shaped its precondition.
    assert broad.narrowed_seeds == [1] and broad.seeds == [0]
    fresh = broad.narrowed_probes
    assert {p.kind for p in fresh} == {"target", "falsify", "regress"}
    assert all(p.lesson_runs and p.base_runs for p in fresh)
    assert not {i for p in fresh for i in p.lesson_runs} & {
        i for p in broad.probes for i in p.lesson_runs
    }
    ids |= {i for p in fresh for i in (*p.base_runs, *p.lesson_runs)}
    seeds = {
        json.loads(line)["id"]: json.loads(line)["seed"]
        for line in (corpus / "gate/gate-0002.runs.jsonl").read_text().splitlines()
    }
    assert {seeds[i] for p in fresh for i in p.lesson_runs} == {1}
    # The two lessons committed in this call, run side by side on every probe task of theirs.
    (together,) = broad.together
    assert together.insights == ["insight-0001", "insight-0002"] and together.passes
    assert good.together == [together] and harmful.together == []
    ids |= set(together.runs)
    assert {r["id"] for r in runs} == ids and len(runs) == broad.agent_runs
    assert "insight-0003" in (corpus / "insight/_index.md").read_text()  # on record
    prompts = json.loads((corpus / "manifest.json").read_text())["prompts"]
    assert set(prompts) >= {"compile-success.j2", "narrow.j2"}  # the template that narrowed

    # Withheld insights are not in the memory an update embeds either.
    assert sorted(insight_texts(corpus)) == ["insight-0001", "insight-0002"]

    # At test time: the rejected lesson is not shown, the others say they passed.
    message = Memory.load(corpus).first_message("Fetch the map from the locked drawer.")
    assert "insight-0003" not in message.insights
    assert (
        "insight-0001: Look under the doormat for the key** (from step-0009, a successful run; "
        "passed the admission gate)" in message.text
    )
    assert "1 more insight failed the gate or later episodes" in message.text
    # The precondition the gate tested is what the agent reads too.
    safe = Memory.load(corpus).first_message("Fetch the coin from the locked safe.")
    assert "  - Precondition (what must hold before you act on it): A locked safe.\n" in safe.text


def test_given_probe_lists_and_bad_requests(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    report = gate(
        corpus,
        llm,
        ["1"],
        given={"target": ["drawer-4", "drawer-5"], "falsify": ["safe-4"], "regress": ["drawer-1"]},
    )
    (decision,) = report.decisions
    assert [(p.task_id, p.kind, p.why) for p in decision.probes] == [
        ("drawer-4", "target", "given"),
        ("drawer-5", "target", "given"),
        ("safe-4", "falsify", "given"),
        ("drawer-1", "regress", "given"),
    ]
    # Two targets are too few for the bound on G: rejected, not committed on thin evidence.
    assert decision.verdict == "rejected" and decision.figures is not None
    assert decision.figures.gains == 2 and decision.figures.gain_lower < 0.1
    with pytest.raises(InputError, match="insight-0001 is already rejected"):
        gate(corpus, llm, ["insight-0001"])
    with pytest.raises(InputError, match="no insight insight-0009"):
        gate(corpus, llm, ["insight-0009"])
    with pytest.raises(InputError, match="probe task nowhere-1 is not in the task pool"):
        gate(corpus, llm, ["2"], given={"target": ["nowhere-1"]})


def test_without_a_model_a_separable_lesson_is_rejected(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    (decision,) = gate(corpus, None, ["2"]).decisions
    assert decision.verdict == "rejected" and decision.narrowed_precondition is None
    assert "there is no model to do it" in decision.reason


def _episodes(
    memory: Path, tasks: list[str], seeds: list[int], out: Path, checked: str | None = None
) -> Path:
    """Run the toy agent and keep its citation reports, as a harness would; `checked`: an
    insight whose own effect the harness checks where it was used (the toy's lessons succeed
    exactly when their effect shows)."""
    lines = []
    for task in tasks:
        for seed in seeds:
            done = subprocess.run(
                [
                    sys.executable,
                    str(TOY / "agent.py"),
                    "--task",
                    task,
                    "--memory",
                    str(memory),
                    "--seed",
                    str(seed),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout)
            # A harness that checks only `checked`'s effect: the toy agent's own checks dropped.
            result.pop("checks", None)
            if checked in result["used"]["insights"]:
                result["checks"] = {checked: {"effect_observed": result["success"]}}
            lines.append(json.dumps({**result, "task_id": task, "episode": f"{task}#{seed}"}))
    out.write_text("\n".join(lines) + "\n")
    return out


def test_monitoring_retires_a_lesson_that_starts_to_fail(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    gate(corpus, llm)
    store = Store(corpus)
    memory = store.version_path(store.current())
    # The first world: the doormat lesson keeps working.
    before = _episodes(memory, ["drawer-4", "drawer-10", "safe-4"], [0], tmp_path / "before.jsonl")
    kept = monitor_corpus(corpus, [before], MonitorOptions())
    assert kept.version is None
    assert [(r.insight, r.cited, r.judged, r.violations, r.retire) for r in kept.records] == [
        ("insight-0001", 2, 2, 0, False),
        ("insight-0002", 1, 1, 0, False),
    ]
    # drawer-4 has one run in the corpus and drawer-10 none: for both, the failure rate of the
    # lesson's task type (drawers) in the corpus is allowed for, at its upper bound.
    assert kept.records[0].bases == {"task type": 2}
    # The later world: in the attic the key is not under the doormat. The attic's tasks are
    # new to the corpus, so a failure there may be the task's, not the lesson's: the harness
    # checks the lesson's own effect (was the key under the doormat?).
    later = _episodes(
        memory,
        ["drawer-13", "drawer-14", "drawer-15", "drawer-16"],
        [0, 1],
        tmp_path / "later.jsonl",
        checked="insight-0001",
    )
    result = monitor_corpus(corpus, [before, later], MonitorOptions())
    doormat, force = result.records
    assert (doormat.cited, doormat.judged, doormat.violations) == (10, 10, 8)
    assert doormat.rate_lower == pytest.approx(stats.lower(8, 10, 0.95), abs=1e-6)
    assert doormat.bases == {"checked": 8}  # this call's episodes: the attic's, checked
    # Retired by the anytime test: its evidence passed 1 / 0.05.
    assert doormat.evidence >= 20 and doormat.retire and not force.retire
    assert result.version == "v0003" and store.current() == "v0003" and verify(corpus).ok
    retired = page(corpus, "insight/insight-0001.md")
    assert retired["status"] == "retired"
    assert retired["decisions"] == ["gate/gate-0001.md", "gate/monitor-0004.md"]
    decision = GateDecision.model_validate(page(corpus, "gate/monitor-0004.md").metadata)
    assert decision.kind == "monitor" and decision.verdict == "retired"
    assert decision.monitoring["violations"] == 8
    assert len((corpus / "gate/monitor-0004.reports.jsonl").read_text().splitlines()) == 10
    assert "insight-0001" not in Memory.load(corpus).first_message("Fetch the atlas.").insights
    assert [e.event for e in store.history()][-1] == "monitored"
    # Retired insights are no longer watched.
    assert [r.insight for r in monitor_corpus(corpus, [later], MonitorOptions()).records] == [
        "insight-0002"
    ]


def test_base_rates_for_known_and_new_tasks(tmp_path: Path) -> None:
    a, b, c, d = (TaskKey(None, name) for name in "abcd")
    rates = BaseRates(
        tasks={a: (2, 5), b: (1, 2)},
        types={"drawer": (4, 10)},
        controls={c: (5, 5), d: (0, 1)},
        confidence=0.95,
    )
    assert rates.failure(None, "drawer") == Base(0.0, "none")  # no task named: in full
    assert rates.failure(a, "drawer") == Base(0.4, "task")  # 5 runs of its own, as counted
    assert rates.failure(c, "drawer") == Base(0.95, "controls")  # capped: 5 of 5 failed
    # Fewer than 5 of its own: every control episode, pooled, at its upper bound.
    pooled = Base(0.95, "all controls")  # 5 of 6 failed
    assert rates.failure(b, "drawer") == rates.failure(d, None) == pooled
    # No controls: the lesson's task type, at the upper bound (one estimate for every new task).
    typed = BaseRates(tasks=rates.tasks, types=rates.types)
    new = typed.failure(TaskKey(None, "new"), "drawer")
    assert new.source == "task type" and new.failure == pytest.approx(stats.upper(4, 10, 0.95))
    assert new.failure > 0.4 and typed.failure(b, "drawer") == new
    nothing = typed.failure(TaskKey(None, "new"), "safe")  # nothing known: not judged
    assert nothing == Base(0.0, "none") and not nothing.judged and new.judged
    controls = tmp_path / "controls.jsonl"
    controls.write_text('{"used": {}, "task_id": "a", "success": false}\n{"used": {}}\n')
    with pytest.raises(InputError, match=r"controls.jsonl:2: a control episode needs its task_id"):
        read_controls([controls])


def test_two_sources_task_of_one_id_are_two_tasks_to_monitoring() -> None:
    """τ-bench's task 3 always fails, τ²-bench's task 3 never does: an episode of one is
    allowed for by its own source's runs, never the other's; a report or run that names no
    source (written before sources were read) counts for its id in every source."""
    tau, tau2 = TaskKey("tau-bench/airline", "3"), TaskKey("tau2-bench/airline", "3")
    rates = BaseRates(tasks={tau: (6, 6), tau2: (0, 6)}, types={"airline": (6, 12)})
    assert rates.failure(tau, "airline") == Base(0.95, "task")  # capped
    assert rates.failure(tau2, "airline") == Base(0.0, "task")
    assert rates.failure(TaskKey(None, "3"), "airline") == Base(0.5, "task")  # both, as before
    old = BaseRates(tasks={TaskKey(None, "3"): (3, 6)})  # a corpus without sources
    assert old.failure(tau, None) == old.failure(tau2, None) == Base(0.5, "task")
    # Control episodes: a report names its task's source with `origin`.
    lines = [
        {"used": {}, "task_id": "3", "origin": "tau-bench/airline", "success": False},
        {"used": {}, "task_id": "3", "origin": "tau2-bench/airline", "success": True},
    ]
    reports = [CitationReport.model_validate(line) for line in lines * 5]
    episodes = [(report_task(r), not r.success) for r in reports]
    controls = BaseRates(controls=tally_failures(episodes))
    assert controls.failure(tau, None) == Base(0.95, "controls")
    assert controls.failure(tau2, None) == Base(0.0, "controls")


def test_checks_in_a_report_decide_what_is_judged(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    gate(corpus, llm, ["1"])
    reports = tmp_path / "reports.jsonl"
    used = {"insights": ["insight-0001"]}
    lines = [
        {"used": used, "success": False, "checks": {"insight-0001": {"precondition_met": False}}},
        {"used": used, "success": True, "checks": {"insight-0001": {"effect_observed": False}}},
        {"used": used},  # no outcome: cited, not judged
        {"used": used, "success": False},  # no task, so no base rate: not judged
        {"used": used, "success": False, "task_id": "drawer-4"},  # the task type's base
    ]
    reports.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # Only insight-0001 was gated (committed); the two ungated ones are watched too.
    records = {r.insight: r for r in monitor_corpus(corpus, [reports], MonitorOptions()).records}
    assert sorted(records) == ["insight-0001", "insight-0002", "insight-0003"]
    record = records["insight-0001"]
    assert (record.cited, record.judged, record.violations) == (5, 2, 2)
    assert record.bases == {"checked": 1, "task type": 1}
    assert record.not_judged == {NO_BASE: 1}
    assert not record.retire  # 2 judged is under --min-judged 5
    assert records["insight-0002"].cited == 0


def test_an_episode_without_a_base_rate_is_not_held_against_the_lesson(
    tmp_path: Path, llm: FakeLLM
) -> None:
    """Episodes on tasks nothing is known of may fail for the task's own reasons: a lesson
    that failed in every one of them is kept, the CLI and --json say why and how to judge
    them, and control episodes of those tasks then judge them."""
    corpus = build_toy(tmp_path, llm)
    used = {"insights": ["insight-0003"]}
    reports, controls = tmp_path / "reports.jsonl", tmp_path / "controls.jsonl"
    # Reports that name no task: nothing says how often their tasks fail anyway.
    reports.write_text(
        "".join(
            json.dumps({"used": used, "success": False, "episode": f"e{n}"}) + "\n"
            for n in range(8)
        )
    )
    code, out, err = run(["monitor", str(corpus), str(reports), "--json"])
    assert code == 0, err
    data = json.loads(out)
    assert data["version"] is None
    assert data["not_judged"] == {"episodes": 8, "why": NO_BASE, "how_to_judge": FEED_CONTROLS}
    (record,) = [r for r in data["records"] if r["insight"] == "insight-0003"]
    assert (record["cited"], record["judged"], record["violations"], record["retire"]) == (
        8,
        0,
        0,
        False,
    )
    assert record["not_judged"] == {NO_BASE: 8} and record["bases"] == {}
    assert "insight-0003: cited 8, judged 0, violations 0" in err
    assert ", 8 not judged (no base rate): kept" in err
    assert "8 episodes not judged: no base rate for their tasks" in err
    assert "--controls FILE" in err
    assert page(corpus, "insight/insight-0003.md")["status"] != "retired"
    # Named, with controls: five of each task, which never fails without the lesson, so its
    # failures are its own.
    controls.write_text(
        "".join(
            json.dumps({"used": {}, "task_id": f"attic-{n}", "success": True}) + "\n"
            for n in range(8)
            for _ in range(5)
        )
    )
    again = [
        json.dumps({"used": used, "success": False, "task_id": f"attic-{n}", "episode": f"n{n}"})
        for n in range(8)
    ]
    later = tmp_path / "later.jsonl"
    later.write_text("\n".join(again) + "\n")
    result = monitor_corpus(corpus, [later], MonitorOptions(controls=[controls]))
    (record,) = [r for r in result.records if r.insight == "insight-0003"]
    assert record.bases == {"controls": 8} and record.not_judged == {}
    assert (record.judged, record.violations, record.retire) == (8, 8, True)
    assert result.version is not None


def test_monitoring_keeps_a_running_record_and_watches_ungated_lessons(
    tmp_path: Path, llm: FakeLLM
) -> None:
    """Reports given over several calls add up, each counted once however often it is given;
    an ungated lesson that keeps failing is retired like a committed one."""
    corpus = build_toy(tmp_path, llm)
    used = {"insights": ["insight-0003"]}
    broken = {"insight-0003": {"effect_observed": False}}
    failing = [{"used": used, "checks": broken, "episode": f"e{n}"} for n in range(6)]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in failing[:3]))
    second.write_text("".join(json.dumps(r) + "\n" for r in failing[3:]))
    kept = monitor_corpus(corpus, [first], MonitorOptions())
    (record,) = [r for r in kept.records if r.insight == "insight-0003"]
    assert (record.judged, record.retire, kept.new_reports) == (3, False, 3)
    again = monitor_corpus(corpus, [first], MonitorOptions())  # the same file: nothing new
    (record,) = [r for r in again.records if r.insight == "insight-0003"]
    assert (record.judged, again.new_reports, again.version) == (3, 0, None)
    result = monitor_corpus(corpus, [first, second], MonitorOptions())
    (record,) = [r for r in result.records if r.insight == "insight-0003"]
    assert (record.cited, record.judged, record.violations) == (6, 6, 6) and record.retire
    assert result.new_reports == 3 and result.version == "v0002"
    assert page(corpus, "insight/insight-0003.md")["status"] == "retired"
    evidence = (corpus / "gate/monitor-0001.reports.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["episode"] for line in evidence) == [f"e{n}" for n in range(6)]
    assert verify(corpus).ok
    # Reports that name no episode may say the very same thing: known by file and line.
    alike = tmp_path / "alike.jsonl"
    same = json.dumps({"used": {"insights": ["insight-0001"]}, "success": True})
    alike.write_text(f"{same}\n{same}\n")
    (record,) = [
        r
        for r in monitor_corpus(corpus, [alike], MonitorOptions()).records
        if r.insight == "insight-0001"
    ]
    assert record.cited == 2
    assert monitor_corpus(corpus, [alike], MonitorOptions()).new_reports == 0


def test_hypothesize_states_existing_insights(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm, hypotheses=False)
    assert page(corpus, "insight/insight-0002.md").get("hypothesis") is None
    report = hypothesize(corpus, [], llm)
    assert report.stated == ["insight-0001", "insight-0002", "insight-0003"] and not report.failed
    assert report.version == "v0002" and verify(corpus).ok
    assert page(corpus, "insight/insight-0002.md")["hypothesis"]["precondition"] == (
        "Any container that holds the item you need."
    )
    again = hypothesize(corpus, [], llm)
    assert again.version is None and again.stated == []
    assert "hypothesize.j2" in json.loads((corpus / "manifest.json").read_text())["prompts"]


def test_hypothesize_honours_a_prompts_dir(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm, hypotheses=False)
    mine = tmp_path / "prompts"
    mine.mkdir()
    bundled = Path(prompts.__file__).parent / prompts.HYPOTHESIZE
    (mine / "hypothesize.j2").write_text("MY TEMPLATE " + bundled.read_text())
    before = len(llm.calls)
    hypothesize(corpus, ["insight-0001"], llm, prompts_dir=mine)
    assert llm.calls[before][0]["content"].startswith("MY TEMPLATE ")
    assert not llm.calls[before - 1][0]["content"].startswith("MY TEMPLATE ")
    recorded = json.loads((corpus / "manifest.json").read_text())["prompts"]["hypothesize.j2"]
    assert (
        recorded
        == hashlib.sha256(
            b"hypothesize.j2\0" + (mine / "hypothesize.j2").read_bytes() + b"\0"
        ).hexdigest()
    )


def test_cli_gate_needs_a_runner_and_says_what_it_did(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    code, _, err = run(["gate", str(corpus)])
    assert code == 2 and "Missing option '--runner'" in err
    code, _, err = run(["gate", str(corpus), "--runner", "x {task_id}"])
    assert code == 2 and "never names {memory}" in err


@pytest.mark.integration
def test_the_readme_gate_walk_through(gate_walk_through: WalkThrough) -> None:
    """What docs/gate.md's walk-through left (run once a session, tests/walk_throughs.py):
    build --hypotheses, gate, the toy agent's episodes, monitor, through the toy model server
    and litellm. test_readme.py checks the lines the page shows; these are the rest."""
    assert gate_walk_through.returncode == 0, gate_walk_through.stderr
    gated = gate_walk_through.folder / "gated"
    gated_version = gate_walk_through.folder / "gated.versions" / "v0002"
    verdicts = [
        (name, page(gated_version, f"insight/{name}.md")["status"])
        for name in ("insight-0001", "insight-0002", "insight-0003")
    ]
    assert verdicts == [
        ("insight-0001", "committed"),
        ("insight-0002", "committed"),
        ("insight-0003", "rejected"),
    ]
    # Forcing helped the locked safes and broke the open ones: narrowed to the locked safes.
    assert (
        "- precondition: A locked safe." in page(gated_version, "insight/insight-0002.md").content
    )
    assert "insight-0002 committed: Narrowed, then committed." in gate_walk_through.stderr
    # The task is the unit: its half of the toy's pool has 3 locked drawers, run on new seeds
    # once each was drawn; with 3 lessons in the call, a budget grown for e-BH's evidence.
    (doormat,) = [
        line for line in gate_walk_through.stderr.splitlines() if "insight-0001 co" in line
    ]
    assert "tests read 3 target tasks (6 pairs)" in doormat
    assert "e-BH asked it for evidence 15 within 591 agent runs: reached" in doormat
    # Monitoring retired the doormat lesson in a version of its own (the page says so).
    code, out, _ = run(["versions", str(gated), "--history"])
    events = [line.split()[1:3] for line in out.splitlines()]
    assert code == 0
    assert events == [["built", "v0001:"], ["gated", "v0002"], ["monitored", "v0003"]]
    assert gate_walk_through.stdout.splitlines()[-1].endswith("gated.versions/v0003")
    assert verify(gated).ok


def test_agent_errors_leave_an_insight_undecided(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm)
    broken = tmp_path / "broken.py"
    broken.write_text("import sys; sys.exit(3)\n")
    spec = RunnerSpec(f"{sys.executable} {broken} {{task_id}} {{memory}}", retries=0)
    pool = read_pool(TOY / "tasks.jsonl")
    report = gate_insights(corpus, ["1"], GateOptions(runner=spec, pool=pool), llm=llm)
    (decision,) = report.decisions
    assert decision.verdict == "undecided" and decision.figures is not None
    # The sequential gate's first round (P_fail first: 2 falsification runs with the lesson
    # alone) errored whole: it stops there, and no target runs for a look at narrowing.
    assert (decision.figures.errors, decision.figures.n_target) == (2, 0)
    assert decision.reason.startswith("Undecided: 2 probe pairs ended as errors")
    assert page(corpus, "insight/insight-0001.md")["status"] == "ungated"
    assert page(corpus, "insight/insight-0001.md")["decisions"] == ["gate/gate-0001.md"]


def test_near_duplicate_lessons_are_gated_once(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = tmp_path / "toy"
    # The doormat run again (another attempt, the same turns): the same lesson, from two runs.
    again = tmp_path / "mat-again.jsonl"
    record = json.loads((TOY / "runs" / "mat.jsonl").read_text())
    record.setdefault("metadata", {})["attempt"] = 2
    again.write_text(json.dumps(record) + "\n")
    build_corpus(
        BuildOptions(
            inputs=[TOY / "runs" / "start.jsonl", TOY / "runs" / "mat.jsonl", again],
            output=corpus,
            model=MODEL,
            cache_dir=tmp_path / "cache",
            limits=CompileLimits(hypotheses=True),
            mine=False,
        ),
        llm=llm,
    )
    first, second = (page(corpus, f"insight/insight-000{n}.md") for n in (1, 2))
    assert first["title"] == second["title"]
    report = gate(corpus, llm)
    assert [d.insight for d in report.decisions] == ["insight-0001"]
    assert report.decisions[0].verdict == "committed"
    again = page(corpus, "insight/insight-0002.md")
    assert again["status"] == "committed" and again["decisions"] == ["gate/gate-0001.md"]
    assert verify(corpus).ok


def test_a_mined_lesson_is_gated_like_any_other(tmp_path: Path, llm: FakeLLM) -> None:
    corpus = build_toy(tmp_path, llm, mine=True)
    mined = [
        p.stem
        for p in sorted((corpus / "insight").glob("insight-*.md"))
        if frontmatter.load(p).get("compiled_by") == "mined"
    ]
    assert mined == ["insight-0004", "insight-0005", "insight-0006"]
    report = gate(corpus, llm, ["insight-0005"])
    (decision,) = report.decisions
    assert decision.insight == "insight-0005" and decision.verdict in ("committed", "rejected")
    after = page(corpus, "insight/insight-0005.md")
    assert after["status"] == decision.verdict and after["decisions"] == ["gate/gate-0001.md"]
    # Re-rendered with its decision, it is still the mined lesson with its numbers.
    assert after["mined"]["kind"] == "divergence" and "## The numbers" in after.content
    assert verify(corpus).ok


TOGETHER_AGENT = """
import json, sys, pathlib
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
task, memory = args["--task"], pathlib.Path(args["--memory"])
present = {p.stem: p.read_text() for p in (memory / "insight").glob("insight-*.md")}
has = {letter: [i for i, text in present.items() if f"Lesson {letter}" in text]
       for letter in "AB"}
kind = task.split("-")[0]
if kind in ("a", "b"):
    used = has[kind.upper()]
    success = bool(used)
else:  # solved without memory; A and B together break it
    used = []
    success = not (has["A"] and has["B"])
print(json.dumps({"success": success, "used": {"insights": used}}))
"""


def test_lessons_that_pass_alone_are_run_together(tmp_path: Path) -> None:
    """A helps a-tasks, B helps b-tasks, each harmless alone; together they break the c-tasks
    the agent solved. The gate commits A and rejects B, the last of the set."""
    agent = tmp_path / "agent.py"
    agent.write_text(TOGETHER_AGENT)
    pool = tmp_path / "pool.jsonl"
    pool.write_text(
        "".join(
            json.dumps(
                {"task_id": f"{k}-{n}", "task": f"Do the {k} thing number {n}.", "task_type": k}
            )
            + "\n"
            for k in "abc"
            for n in range(1, 7 if k != "c" else 11)
        )
    )

    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        for letter in "AB":
            if f"Do the {letter.lower()} thing" in prompt:
                words = {"A": "check the alpha register", "B": "reset the beta valve"}[letter]
                data["insights"][0].update(title=f"Lesson {letter}", guideline=words)
                return json.dumps(data)
        data["insights"] = []
        return json.dumps(data)

    runs = [
        make_run(
            f"{k}-1" if k != "c" else f"c-{n}",
            success=True,
            task=f"Do the {k} thing number {1 if k != 'c' else n}.",
            task_type=k,
        )
        for k in "abc"
        for n in ((1,) if k != "c" else range(1, 11))
    ]
    llm = FakeLLM(answer=answer, model=MODEL)
    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(
            inputs=[write_runs(tmp_path / "runs.jsonl", runs)],
            output=corpus,
            model=MODEL,
            cache_dir=tmp_path / "cache",
            mine=False,
        ),
        llm=llm,
    )
    spec = RunnerSpec(
        f"{sys.executable} {agent} --task {{task_id}} --memory {{memory}}",
        concurrency=2,
        timeout_seconds=60,
        retries=0,
    )
    report = gate_insights(
        corpus, [], GateOptions(runner=spec, pool=read_pool(pool), targets=5), llm=llm
    )
    first, second = report.decisions
    assert (first.insight, first.verdict) == ("insight-0001", "committed")
    assert (second.insight, second.verdict) == ("insight-0002", "rejected")
    assert second.reason.startswith("Committed alone, then rejected: run with insight-0001")
    assert "Alone: It passed" in second.reason
    (check,) = first.together
    assert check.insights == ["insight-0001", "insight-0002"] and not check.passes
    assert check.figures.damaged == check.figures.n_regress > 0
    assert second.together == [check]
    assert page(corpus, "insight/insight-0002.md")["status"] == "rejected"
    assert page(corpus, "insight/insight-0001.md")["status"] == "committed"
    shown = (corpus / "gate" / f"{first.id}.md").read_text()
    said = "FAILED: the lesson that most likely broke it was left out (its decision says which"
    assert said in shown
    runs_file = corpus / "gate" / "gate-0002.runs.jsonl"
    assert set(check.runs) <= {
        json.loads(line)["id"] for line in runs_file.read_text().splitlines()
    }
    assert verify(corpus).ok
