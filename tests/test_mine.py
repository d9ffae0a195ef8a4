"""Lessons mined without a model (compiler/mine.py): contrasts across runs, divergence within a
task, and how they live in the corpus, the first message, `add`, views and audits."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from array import array
from pathlib import Path
from typing import Any

import frontmatter
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from wikitrace.compiler import BuildOptions, add_runs, build_corpus, layers_mined
from wikitrace.compiler import build as build_module
from wikitrace.compiler import mine as mine_module
from wikitrace.compiler.mine_contrast import (
    FDR,
    MiningReport,
    contrasts,
)
from wikitrace.compiler.mine_exact import benjamini_hochberg, stratified_exact
from wikitrace.compiler.mine_patterns import action_places, actions_of, patterns
from wikitrace.compiler.mine_table import ActionHashes, PatternTable, RunPatterns, action_hashes
from wikitrace.corpus_schema import Turn, verify
from wikitrace.corpus_schema.layout import mined_patterns_page
from wikitrace.corpus_schema.records import MinedFinding
from wikitrace.search import consolidate
from wikitrace.tools.memory import Memory
from wikitrace.transport.llm import LLMCallError
from wikitrace.versions import FrozenVersion, Store, leave_out

from helpers import DATA, FakeLLM, call, good_answer, make_run, planted, run, shop_run, write_runs


def build(tmp_path: Path, runs: list[dict[str, Any]], name: str = "corpus", **options: Any) -> Path:
    corpus = tmp_path / name
    source = write_runs(tmp_path / f"{name}.jsonl", runs)
    build_corpus(BuildOptions(inputs=[source], output=corpus, **options))
    return corpus


def insight_pages(corpus: Path) -> list[frontmatter.Post]:
    """Each insight page, its header (short fields only) joined with its data file, as
    read.read_page reads it."""
    pages = []
    for path in sorted((corpus / "insight").glob("insight-*.md")):
        post = frontmatter.load(path)
        assert not {"evidence", "mined", "hypothesis", "applicability"} & set(post.metadata)
        post.metadata.update(json.loads((corpus / str(post["data"])).read_text()))
        pages.append(post)
    return pages


def flat(text: str) -> str:
    return " ".join(text.split())


# --- the statistics -----------------------------------------------------------------------------


def test_the_stratified_test_and_benjamini_hochberg_agree_with_scipy() -> None:
    rng = random.Random(7)
    for _ in range(300):
        table = [rng.randint(0, 15) for _ in range(4)]
        a, b, c, d = table
        expected = scipy_stats.fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue
        p_value, _ = stratified_exact([(a + b + c + d, a + c, a + b, a)])
        assert p_value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    p_values = [rng.random() ** 3 for _ in range(50)]
    assert benjamini_hochberg(p_values) == pytest.approx(
        list(scipy_stats.false_discovery_control(p_values, method="bh")), rel=1e-12
    )


def test_a_pattern_that_only_marks_harder_tasks_is_no_lesson() -> None:
    """Pooled over tasks the pattern goes with failure (Fisher: p < 1e-6); within each task it
    makes no difference, so the stratified test finds nothing."""
    runs = []
    for task in range(30):
        hard = task < 15  # hard tasks need the tool, and fail more often
        for trial in range(6):
            runs.append(
                RunPatterns(
                    step=len(runs) + 1,
                    task_id=f"t{task}",
                    task_type="air",
                    # Within a hard task, 2 of its 4 runs with the tool fail, 1 of 2 without.
                    success=not (hard and trial in (0, 1, 4)),
                    judged=False,
                    patterns={"uses:transfer": 1} if hard and trial < 4 else {},
                )
            )
    pooled = [
        sum(not r.success for r in runs if ("uses:transfer" in r.patterns) == has)
        for has in (True, False)
    ]
    assert pooled == [30, 15]
    assert scipy_stats.fisher_exact([[30, 30], [15, 105]]).pvalue < 1e-6
    report = MiningReport()
    assert contrasts(runs, report) == []
    assert (
        "nothing significant: the strongest pattern (uses:transfer) has p = 1"
        in (report.task_types["air"])
    )


def test_the_kinds_of_action_come_from_the_log() -> None:
    turns = [
        Turn(role="agent", action="Search[Eljero Elia]", observation="Eljero Elia is ..."),
        Turn(role="agent", action="go to drawer 1", observation="Nothing happens."),
        Turn(role="agent", action="go to drawer 1", observation="Nothing happens."),
        Turn(role="assistant", action="cd /repo && timeout 60 python -m pytest -q"),
        Turn(
            role="assistant",
            tool_calls=[
                {"name": "bash", "arguments": {"command": "FOO=1 sudo grep -rn x ."}},
                {"name": "exec_command", "arguments": {"cmd": ["bash", "-lc", "sed -n 1p a"]}},
                {"name": "<b>odd tool</b>", "arguments": {}},
            ],
        ),
    ]
    actions = actions_of(turns)
    assert [a.kind for a in actions] == [
        "search",
        "go",
        "go",
        "pytest",
        "grep",
        "sed",
        "_b_odd_tool__b_",
    ]
    found = patterns(actions)
    # The second `go to drawer 1` repeats an action whose result was "Nothing happens."
    assert found["repeat"] == 3 and found["retry_after_error"] == 3
    assert found["uses:pytest"] == 4 and "stuck" not in found


# --- contrasts ---------------------------------------------------------------------------------


def test_a_planted_pattern_is_found_with_its_counts(tmp_path: Path) -> None:
    corpus = build(tmp_path, planted())
    pages = insight_pages(corpus)
    mined = [p for p in pages if p["mined"]["kind"] == "contrast"]
    assert len(mined) == 1, [p["title"] for p in pages]
    page = mined[0]
    finding = page["mined"]
    assert (finding["pattern"], finding["with_pattern"], finding["without_pattern"]) == (
        "uses:issue_refund",
        [14, 20],
        [1, 20],
    )
    # Compared within the 8 tasks with both outcomes (task 0 failed 3 of 4, tasks 1-5 2 of
    # 4, both times they refunded, tasks 6 and 7 once, when they did).
    strata = [(4, 3, 2, 2)] + [(4, 2, 2, 2)] * 5 + [(4, 1, 2, 1)] * 2
    assert finding["tasks_compared"] == 8 and finding["tasks_split"] == [8, 0]
    assert (finding["within_with"], finding["within_without"]) == ([14, 16], [1, 16])
    assert finding["expected_failed"] == pytest.approx(2 * 3 / 4 + 5 + 1, rel=1e-3)
    assert finding["p_value"] == pytest.approx(stratified_exact(strata)[0], rel=1e-3)
    assert finding["p_value"] < 1e-3
    assert finding["q_value"] <= FDR and finding["tasks"] == 10
    assert page["compiled_by"] == "mined" and page["status"] == "ungated"
    title = 'shop runs that called "issue_refund" failed more often than others of their task'
    assert page["title"] == title
    assert (
        "failed 14 of 16 within the 8 tasks tried both with and without it, where 7.5 failures "
        "were expected had it made no difference within its task (runs that did not: 1 of 16); "
        "they failed more often in 8 of those tasks, less often in 0. Over all runs, failed 14 "
        "of 20; runs that did not, 1 of 20"
    ) in flat(page.content)
    assert "compared within 8 tasks, each with runs with and without it" in flat(page.content)
    assert "exact test stratified by task, two-sided: p = " in page.content
    assert "a correlation in past runs, counted, not a cause" in flat(page.content)
    # Its evidence: the refund call itself, quoted from failed runs of distinct tasks.
    quotes = [e for claim in page["evidence"] for e in claim["evidence"]]
    assert len(quotes) == 4 and all(e["verified"] for e in quotes)
    assert len({e["step"] for e in quotes}) == 4
    assert all(e["quote"].startswith('issue_refund: {"order_id"') for e in quotes)
    for evidence in quotes:
        header = frontmatter.load(corpus / "raw" / evidence["step"] / "metadata.md")
        assert header["outcome"] == "failure"
    assert page["source_step"] == quotes[0]["step"] and page["raw"].startswith("raw/")
    index = (corpus / "insight" / "_index.md").read_text()
    assert "ungated, mined" in index and "This corpus has no insights" not in index
    assert verify(corpus).ok
    # The agent sees it with its numbers, as a correlation.
    code, out, err = run(["prompt", str(corpus), "Order 3 arrived broken; help the customer."])
    assert code == 0, err
    assert f"**{page['id']}: {title}**" in out
    assert "mined, not drawn by a model: a correlation in past runs, not a cause" in out
    assert 'Guideline: Be wary of this: runs that called "issue_refund" failed 14 of 16' in out
    assert "Numbers: counted over 40 runs; compared within 8 tasks, q = " in out
    # Its audit quotes each raw turn.
    code, out, err = run(["audit", str(corpus), page["id"]])
    assert code == 0 and out.count(">>>issue_refund:") == 4, out


def test_shuffled_labels_find_nothing() -> None:
    """The planted runs' patterns with their labels shuffled: BH at 5% keeps the share of
    shuffles with any (necessarily false) discovery near 5%."""
    runs = [
        RunPatterns(
            step=i + 1,
            task_id=str(r["task_id"]),
            task_type="shop",
            success=bool(r["success"]),
            judged=False,
            patterns=patterns(actions_of([Turn.model_validate(t) for t in r["turns"]])),
        )
        for i, r in enumerate(planted())
    ]
    # More patterns to try: 6 independent coin-flip tools.
    rng = random.Random(11)
    for item in runs:
        for tool in range(6):
            if rng.random() < 0.5:
                item.patterns[f"uses:tool{tool}"] = 9
    assert len(contrasts(runs, MiningReport())) >= 1  # the real labels: the refund pattern
    outcomes = [item.success for item in runs]
    with_discovery = 0
    shuffles = 200
    for _ in range(shuffles):
        rng.shuffle(outcomes)
        for item, outcome in zip(runs, outcomes, strict=True):
            item.success = outcome
        with_discovery += bool(contrasts(runs, MiningReport()))
    assert with_discovery / shuffles <= 0.08, with_discovery


def test_too_few_runs_of_one_outcome_say_so(tmp_path: Path) -> None:
    runs = [r for r in planted() if not r["success"]][:10]
    runs += [r for r in planted() if r["success"]][:2]
    corpus = build(tmp_path, runs)
    report = json.loads((corpus / "manifest.json").read_text())["build"]["mining"]
    assert report["contrasts"] == 0
    assert report["task_types"]["shop"] == "12 runs, 10 failed: too few of one outcome to compare"


def test_one_task_repeated_never_makes_a_lesson_alone(tmp_path: Path) -> None:
    # 10 trials of one task that refunds (all fail) against 10 of others that do not: the
    # pattern is one task's, so it is not a lesson (MIN_TASKS).
    runs = [shop_run(1, t, False, refund=True) for t in range(10)]
    runs += [shop_run(2 + t, 1, True, refund=False) for t in range(10)]
    corpus = build(tmp_path, runs)
    assert not [p for p in insight_pages(corpus) if p["mined"]["kind"] == "contrast"]


# --- divergence --------------------------------------------------------------------------------


def test_where_a_task_s_runs_diverged_is_a_lesson_for_that_task(tmp_path: Path) -> None:
    common = [{"role": "user", "content": "Fetch the letter."}, call("look", where="study")]
    win = make_run(
        "letter",
        success=True,
        task="Fetch the letter from the study.",
        turns=[*common, call("open", what="drawer"), call("take", what="letter")],
    )
    loss = make_run(
        "letter",
        success=False,
        task="Fetch the letter from the study.",
        turns=[*common, call("force", what="drawer", result="Error: it broke")],
    )
    other = make_run("mug", success=True, task="Put the mug away.")
    corpus = build(tmp_path, [loss, win, other])
    (page,) = insight_pages(corpus)
    assert page["mined"]["kind"] == "divergence" and page["mined"]["task_id"] == "letter"
    assert page["mined"]["shared_actions"] == 1 and page["mined"]["task_outcomes"] == [1, 2]
    assert page["source_step"] == "step-0002" and page["source_outcome"] == "success"
    # Titled in words, from the actions that differ: tool names and their arguments' gist.
    assert page["title"] == (
        "On task letter, after 1 action alike, the successful run called open (drawer); "
        "the failed one called force (drawer)"
    )
    assert "step-0002 succeeded, step-0001 failed" in flat(page.content)
    assert "- step-0002 turn 3 (verified;" in page.content
    assert '  open: {"what":"drawer"}' in page.content
    assert [e["step"] for c in page["evidence"] for e in c["evidence"]] == [
        "step-0002",
        "step-0001",
    ]
    memory = Memory.load(corpus)
    same = memory.first_message("Fetch the letter from the  study.", task_type="pick_and_place")
    assert same.insights == [page["id"]]
    # The guideline names the runs to read with the tool the message locates, not by a path
    # relative to the corpus root, which an agent working elsewhere could not run.
    assert "drill-down tool: actions step-0002, actions step-0001." in same.text
    assert " tools/actions" not in same.text and "(tools/" not in same.text
    assert "/work/corpus/tools/actions step-NNNN" in same.text
    assert memory.first_message("Put the mug away.").insights == []


def _a_divergence_and_a_run(tmp_path: Path) -> Path:
    """A task's failed and successful runs that part at their second action (a divergence),
    and a run of another task."""
    common = [{"role": "user", "content": "Fetch the letter."}, call("look", where="study")]
    win = make_run(
        "letter", success=True, task="Fetch.", turns=[*common, call("take", what="letter")]
    )
    loss = make_run(
        "letter", success=False, task="Fetch.", turns=[*common, call("force", what="drawer")]
    )
    return write_runs(tmp_path / "runs.jsonl", [loss, win, make_run("mug", success=True)])


def test_a_model_build_mines_while_its_last_calls_are_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mining needs the runs alone: a model build mines once every run is read, before the
    answers come (here every answer waits for it, 10 s at most), and numbers its lessons after
    the model's all the same."""
    mined = threading.Event()
    real = build_module.premine

    def premine(*args: Any, **kwargs: Any) -> Any:
        made = real(*args, **kwargs)
        mined.set()
        return made

    monkeypatch.setattr(build_module, "premine", premine)
    answered_after_mining: list[bool] = []

    class AfterMining(FakeLLM):
        async def complete(self, messages: list[Any]) -> Any:
            for _ in range(1000):
                if mined.is_set():
                    break
                await asyncio.sleep(0.01)
            answered_after_mining.append(mined.is_set())
            return await super().complete(messages)

    llm = AfterMining()
    corpus = tmp_path / "corpus"
    source = _a_divergence_and_a_run(tmp_path)
    build_corpus(
        BuildOptions(
            inputs=[source], output=corpus, model=llm.model, cache_dir=tmp_path / "c", concurrency=8
        ),
        llm=llm,
    )
    assert answered_after_mining and all(answered_after_mining)
    pages = insight_pages(corpus)
    (divergence,) = [p for p in pages if p.get("mined")]
    model = [p for p in pages if not p.get("mined")]
    assert model and divergence["id"] == f"insight-{len(model) + 1:04d}"
    assert divergence["mined"]["kind"] == "divergence"


@pytest.mark.parametrize("slow", ["divergences", "contrasts"])
def test_a_model_build_that_stops_ends_the_mining_beside_its_last_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: str
) -> None:
    """A fatal model error while mining runs beside the last calls stops the mining at its next
    step: the build fails at once, not when mining would have ended (here twenty slow pieces of
    divergence work, or twenty task types' slow contrast tests, 0.5 s each), and leaves no
    corpus."""
    started = threading.Event()
    real_jobs, real_lessons = layers_mined.divergence_jobs, layers_mined._divergence_lessons
    real_contrasts = mine_module.contrasts_of_types

    def many_jobs(*args: Any) -> Any:
        jobs = list(real_jobs(*args))
        return iter(jobs * 20)

    def slow_lessons(job: Any) -> Any:
        started.set()
        time.sleep(0.5)
        return real_lessons(job)

    def many_types(counts: Any, members_of: Any, *args: Any, **kwargs: Any) -> Any:
        for _ in range(20):  # as if twenty types' tests were made, each asking for its runs
            started.set()
            time.sleep(0.5)
            members_of(None)
        return real_contrasts(counts, members_of, *args, **kwargs)

    if slow == "divergences":
        monkeypatch.setattr(layers_mined, "divergence_jobs", many_jobs)
        monkeypatch.setattr(layers_mined, "_divergence_lessons", slow_lessons)
    else:
        monkeypatch.setattr(mine_module, "contrasts_of_types", many_types)

    class FailsOnceMiningRuns(FakeLLM):
        async def complete(self, messages: list[Any]) -> Any:
            for _ in range(1000):
                if started.is_set():
                    raise LLMCallError("the key was revoked", fatal=True)
                await asyncio.sleep(0.01)
            return await super().complete(messages)

    llm = FailsOnceMiningRuns()
    corpus = tmp_path / "corpus"
    source = _a_divergence_and_a_run(tmp_path)
    options = BuildOptions(
        inputs=[source], output=corpus, model=llm.model, cache_dir=tmp_path / "c", concurrency=8
    )
    began = time.monotonic()
    with pytest.raises(LLMCallError, match="revoked"):
        build_corpus(options, llm=llm)
    assert started.is_set()
    assert time.monotonic() - began < 6  # mining alone would take 10 s
    assert not corpus.exists()


def test_a_divergence_across_versions_reads_the_parent_s_run_from_its_log(tmp_path: Path) -> None:
    """The runs a build streams keep their actions as hashes on disk; a parent's run is read
    from its log. A divergence found by an add, between a parent's run and a new one, is the
    one a build of both finds."""
    common = [{"role": "user", "content": "Fetch the letter."}, call("look", where="study")]
    task = "Fetch the letter from the study."
    loss = make_run(
        "letter", success=False, task=task, turns=[*common, call("force", what="drawer")]
    )
    win = make_run("letter", success=True, task=task, turns=[*common, call("open", what="drawer")])
    corpus = build(tmp_path, [loss])
    assert not insight_pages(corpus)
    add_runs(BuildOptions(inputs=[write_runs(tmp_path / "win.jsonl", [win])], output=corpus))
    (added,) = insight_pages(corpus)
    (built,) = insight_pages(build(tmp_path, [loss, win], name="both"))
    assert added["mined"]["shared_actions"] == built["mined"]["shared_actions"] == 1
    assert added.content == built.content.replace("in v0001", "in v0002")


def test_action_hashes_give_back_each_run_s_actions(tmp_path: Path) -> None:
    turns = [Turn(role="assistant", action=f"go to shelf {n}") for n in range(3)]
    kept = ActionHashes(tmp_path)
    try:
        kept.add(4, actions_of(turns))
        kept.add(5, [])
        kept.add(6, actions_of(turns[1:]))
        assert kept.get(4) == action_hashes(actions_of(turns)) and len(kept.get(4) or []) == 3
        assert kept.get(5) == action_hashes([]) and kept.get(6) == action_hashes(
            actions_of(turns[1:])
        )
        assert kept.places(4) == action_places(actions_of(turns)) == array("i", [2, 4, 6])
        assert kept.places(5) == array("i") and kept.get(6) == action_hashes(actions_of(turns[1:]))
        assert kept.get(3) is None and kept.get(7) is None  # not streamed: read from its log
        assert kept.places(3) is None and kept.places(7) is None
        with pytest.raises(ValueError, match="after run 6"):
            kept.add(9, [])
    finally:
        kept.close()
    assert not list(tmp_path.iterdir())  # unnamed: nothing left beside the staging folder


# --- add, views, leave-one-out ----------------------------------------------------------------


def test_add_recounts_mined_lessons_in_place(tmp_path: Path) -> None:
    runs = planted()
    corpus = build(tmp_path, runs[:28] + runs[32:])  # task 7 left out: 7 tasks compared
    (first,) = [p for p in insight_pages(corpus) if p["mined"]["kind"] == "contrast"]
    assert first["mined"]["with_pattern"] == [13, 18] and first["mined"]["tasks_compared"] == 7
    more = write_runs(tmp_path / "more.jsonl", runs[28:32])
    add_runs(BuildOptions(inputs=[more], output=corpus))
    (again,) = [p for p in insight_pages(corpus) if p["id"] == first["id"]]
    assert again["mined"]["with_pattern"] == [14, 20] and again["mined"]["version"] is None
    assert "counted over this corpus's runs" in again.content
    assert again["mined"]["tasks_compared"] == 8
    assert len([p for p in insight_pages(corpus) if p["mined"]["kind"] == "contrast"]) == 1
    assert len((corpus / mined_patterns_page(1)).read_bytes().splitlines()) == 40
    # Tasks that break the pattern: in each, the runs that refund succeed and those that do
    # not fail. It no longer holds, and is not shown.
    fixes = [
        shop_run(100 + n, trial, trial <= 2, refund=trial <= 2)
        for n in range(10)
        for trial in range(1, 5)
    ]
    add_runs(BuildOptions(inputs=[write_runs(tmp_path / "fixes.jsonl", fixes)], output=corpus))
    (gone,) = [p for p in insight_pages(corpus) if p["id"] == first["id"]]
    assert gone["mined"]["holds"] is False and "**NO LONGER HOLDS.**" in gone.content
    assert "mined, NO LONGER HOLDS" in (corpus / "insight" / "_index.md").read_text()
    message = Memory.load(corpus).first_message("Order 3 arrived broken.")
    assert first["id"] not in message.insights
    assert all(verify(v).ok for v in sorted((tmp_path / "corpus.versions").glob("v*")))


def test_add_to_a_corpus_built_without_mining_reads_its_runs(tmp_path: Path) -> None:
    runs = planted()
    corpus = build(tmp_path, runs[:39], mine=False)
    assert not (corpus / mined_patterns_page(1)).exists() and not insight_pages(corpus)
    add_runs(BuildOptions(inputs=[write_runs(tmp_path / "last.jsonl", runs[39:])], output=corpus))
    (page,) = [p for p in insight_pages(corpus) if p["mined"]["kind"] == "contrast"]
    assert page["mined"]["with_pattern"] == [14, 20] and page["mined"]["without_pattern"] == [1, 20]


def test_no_mine_leaves_the_insight_layer_to_the_model(tmp_path: Path) -> None:
    source = write_runs(tmp_path / "runs.jsonl", planted())
    code, _, err = run(["build", str(source), "-o", str(tmp_path / "c"), "--no-mine"])
    assert code == 0, err
    assert not list((tmp_path / "c" / "insight").glob("insight-*.md"))
    assert "mined:" not in err
    code, _, err = run(["build", str(source), "-o", str(tmp_path / "d")])
    assert code == 0 and "mined: 1 contrast lesson from" in err, err


def test_views_and_leave_one_out_hide_mined_lessons_that_count_the_task(tmp_path: Path) -> None:
    corpus = build(tmp_path, planted())
    (page,) = [p for p in insight_pages(corpus) if p["mined"]["kind"] == "contrast"]
    memory = Memory.load(corpus)
    assert page["id"] in memory.first_message("Order 3 arrived broken.").insights
    # A contrast counts every run of its type: leaving out any shop task leaves it out.
    hidden = memory.first_message("Order 3 arrived broken.", exclude_tasks=["order-9"])
    assert page["id"] not in hidden.insights
    base = FrozenVersion.current(Store(corpus))
    report = leave_out(base, tmp_path / "view", ["order-9"], force=False)
    assert page["id"] in report.insights_left_out
    assert not (tmp_path / "view" / "insight" / f"{page['id']}.md").exists()
    table = (tmp_path / "view" / mined_patterns_page(1)).read_text()
    assert '"order-9"' not in table and table.count("\n") == 36
    assert verify(tmp_path / "view").ok


# --- consolidation -----------------------------------------------------------------------------


def test_a_mined_lesson_joins_the_model_lesson_that_says_the_same() -> None:
    lessons = [
        ("Confirm before refunding", "Do not issue a refund before checking the policy."),
        ("Greet the customer", "Say hello."),
        ('shop runs that called "issue_refund" failed more often', "Be wary of this: ..."),
        ('shop runs that called "issue_refund" succeeded more often', "Consider doing this."),
        ("Task 3: the successful run did x", "Two runs of this task ..."),
        ("Task 4: the successful run did x", "Two runs of this task ..."),
    ]
    mined: list[consolidate.Mined | None] = [
        None,
        None,
        consolidate.Mined("shop", "uses:issue_refund", "failure"),
        consolidate.Mined("shop", "uses:issue_refund", "success"),
        consolidate.Mined("shop", "diverge", "success"),
        consolidate.Mined("shop", "diverge", "success"),
    ]
    outcomes = ["failure", "success", "failure", "success", "success", "success"]
    leaders = consolidate.with_mined(lessons, mined, outcomes, ["shop"] * 6)
    # The harmful refund pattern is the failed run's lesson; the helpful one says otherwise,
    # and divergences of different tasks are never one lesson, however alike their titles.
    assert leaders == [0, 1, 0, 3, 4, 5]


def test_real_telecom_runs_of_one_trial_each_yield_no_contrast(tmp_path: Path) -> None:
    """tau2-bench telecom, 20 real runs of 20 tasks: runs that transferred to a human failed 5
    of 6, those that did not 1 of 14 (Fisher, pooled: p = 0.002), but no task was tried twice,
    so nothing says whether the transfer or the task made them fail: no contrast."""
    corpus = tmp_path / "telecom"
    build_corpus(BuildOptions(inputs=[DATA / "tau2-telecom-20runs.jsonl"], output=corpus))
    assert not insight_pages(corpus)
    report = json.loads((corpus / "manifest.json").read_text())["build"]["mining"]
    assert report["contrasts"] == 0
    assert report["task_types"]["telecom"] == (
        "20 runs, 6 failed, but 0 of their 20 tasks have both outcomes: runs are compared "
        "within a task, and a pattern needs 3 such tasks"
    )
    assert verify(corpus).ok


def test_with_a_model_a_mined_lesson_sits_beside_the_one_that_says_the_same(
    tmp_path: Path,
) -> None:
    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        if "issue_refund" in prompt:
            data["insights"][0].update(
                title="Do not issue a refund at once",
                guideline="Check the damage policy before you call issue_refund.",
            )
        return json.dumps(data)

    llm = FakeLLM(answer=answer)
    corpus = tmp_path / "corpus"
    source = write_runs(tmp_path / "runs.jsonl", planted())
    build_corpus(
        BuildOptions(inputs=[source], output=corpus, model=llm.model, cache_dir=tmp_path / "c"),
        llm=llm,
    )
    pages = insight_pages(corpus)
    (mined,) = [p for p in pages if p.get("mined") and p["mined"]["kind"] == "contrast"]
    model = [p for p in pages if p.get("compiled_by") is None]
    assert len(model) == 40 and mined["id"] == "insight-0041"
    first_refund = next(p for p in model if p["title"] == "Do not issue a refund at once")
    assert first_refund["source_outcome"] == "failure"
    row = next(
        line
        for line in (corpus / "insight" / "_index.md").read_text().splitlines()
        if line.startswith(f"| [{mined['id']}]")
    )
    assert row.endswith(f"| [{first_refund['id']}](../insight/{first_refund['id']}.md) |")
    message = Memory.load(corpus).first_message("Order 3 arrived broken; help the customer.")
    assert mined["id"] not in message.insights
    assert mined["id"] in message.alike[first_refund["id"]]


def test_a_lesson_counted_over_judged_outcomes_says_so(tmp_path: Path) -> None:
    runs = planted()
    for record in runs[:7]:  # as `build --judge` marks a label a model gave
        record["metadata"]["outcome_source"] = "judged"
    corpus = build(tmp_path, runs)
    (page,) = [p for p in insight_pages(corpus) if p["mined"]["kind"] == "contrast"]
    assert page["mined"]["judged_runs"] == 7
    assert "- 7 of these runs have an outcome judged by a model" in page.content
    message = Memory.load(corpus).first_message("Order 3 arrived broken.")
    assert "counted over 40 runs (7 judged by a model)" in message.text


_NAMES = ["uses:search", "uses:book", "repeat", "retry_after_error", "stuck", "errors"]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.builds(
            RunPatterns,
            step=st.integers(1, 10**9),
            task_id=st.sampled_from(["1", "2", "task 3"]),
            task_type=st.sampled_from([None, "airline", "retail"]),
            success=st.booleans(),
            judged=st.booleans(),
            patterns=st.lists(st.sampled_from(_NAMES), unique=True).flatmap(
                lambda names: st.lists(
                    st.integers(0, 2**40), min_size=len(names), max_size=len(names)
                ).map(lambda turns: dict(zip(names, turns, strict=True)))
            ),
        ),
        max_size=12,
    ),
    st.integers(-14, 14),
    st.slices(14),
)
def test_a_pattern_table_gives_back_the_runs_put_in_it(
    runs: list[RunPatterns], index: int, part: slice
) -> None:
    """Each run as it was (its patterns in the order found, so the patterns table is written
    the same), by index, slice and in order; an index past either end is an IndexError."""
    table = PatternTable(runs[:3])
    for more in runs[3:]:
        table.append(more)
    assert len(table) == len(runs)
    assert list(table) == runs
    assert [run.as_json() for run in table] == [run.as_json() for run in runs]
    assert [list(run.patterns) for run in table] == [list(run.patterns) for run in runs]
    assert table[part] == runs[part]
    if -len(runs) <= index < len(runs):
        assert table[index] == runs[index]
    else:
        with pytest.raises(IndexError):
            table[index]


def test_each_mined_lesson_joins_the_first_model_lesson_it_matches() -> None:
    """One pass over the model's lessons finds, for every contrast waiting on the same task
    type and outcome, its first match in corpus order."""
    lessons = [
        ("Look up the order", "Call lookup_order first."),  # another outcome
        ("Retry the payment", "issue_refund retried after an error."),
        ("Use the refund tool", "Call issue_refund once."),
        ("Mind retries", "A failed call repeated with an error: issue_refund."),
        ('shop runs that called "issue_refund" failed more often', "..."),
        ("shop runs that retried a failed action failed more often", "..."),
    ]
    mined: list[consolidate.Mined | None] = [
        None,
        None,
        None,
        None,
        consolidate.Mined("shop", "uses:issue_refund", "failure"),
        consolidate.Mined("shop", "retry_after_error", "failure"),
    ]
    outcomes = ["success", "failure", "failure", "failure", "failure", "failure"]
    leaders = consolidate.with_mined(lessons, mined, outcomes, ["shop"] * 6)
    # issue_refund: lesson 1 is the first failed run's lesson to name it; "repeat" and
    # "error" (retried, an error): lesson 3, as lesson 1 says "retried" but no "repeat".
    assert leaders == [0, 1, 2, 3, 1, 3]


def test_a_lesson_goes_the_way_its_tasks_say_and_old_lessons_read_as_they_were() -> None:
    """Pooled, the pattern goes with failure (the hard tasks use it); within its tasks, with
    success: the lesson says what the tasks say. A lesson mined before issue 54 (no
    `tasks_compared`) keeps its pooled numbers and direction."""
    old = MinedFinding(
        kind="contrast",
        pattern="uses:book",
        description='called "book"',
        with_pattern=[23, 24],
        without_pattern=[93, 176],
        p_value=2.9e-05,
        q_value=0.001,
    )
    assert old.goes_with == "failure"
    assert old.counted() == "failed 23 of 24; runs that did not, 93 of 176"
    new = old.model_copy(
        update={
            "tasks_compared": 3,
            "within_with": [4, 9],
            "within_without": [6, 6],
            "expected_failed": 6.0,
            "tasks_split": [0, 3],
        }
    )
    assert new.goes_with == "success"
    assert new.counted().startswith(
        "failed 4 of 9 within the 3 tasks tried both with and without it, where 6.0 failures "
        "were expected"
    )
    assert MinedFinding.model_validate(old.model_dump(exclude_defaults=True)) == old
