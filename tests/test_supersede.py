"""Corrections found when lessons are added: a newer lesson that contradicts or narrows an
older one of the same scope supersedes it (judged by the corpus's model; with none, flagged
for review), and the first message shows the newer alone with a link back. The mechanical
filter (search/contradict.py) on a slice of benchmarks/supersede_pairs.py's pairs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import frontmatter
import pytest

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.compiler.supersede import review_new_lessons
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.manifest import verify
from wikitrace.search.contradict import Lesson, candidates, compare
from wikitrace.tools.memory import Memory
from wikitrace.versions import FrozenVersion, Store

from helpers import FakeLLM, good_answer, make_run, run, write_runs


def _pairs() -> ModuleType:
    """benchmarks/supersede_pairs.py: the benchmark's hand-written pairs, a slice used here."""
    path = Path(__file__).parents[1] / "benchmarks" / "supersede_pairs.py"
    spec = importlib.util.spec_from_file_location("supersede_pairs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAIRS = _pairs()
CONTRADICTS, NARROWS, SIMILAR = PAIRS.CONTRADICTS, PAIRS.NARROWS, PAIRS.SIMILAR

LESSONS = {
    "old": ("Pass --strict to the parser", "Always give the parser its --strict flag."),
    "new": (
        "Do not pass --strict to the parser",
        "Do not give the parser its --strict flag; it rejects valid files.",
    ),
    "alike": ("Pass --verbose to the linter", "Always give the linter its --verbose flag."),
}


def _lesson(pair: tuple[str, tuple[str, str, str], tuple[str, str, str]]) -> tuple[Lesson, ...]:
    task_type, old, new = pair
    return Lesson("insight-0002", *new, task_type=task_type), Lesson(
        "insight-0001", *old, task_type=task_type
    )


@pytest.mark.parametrize("index", range(0, 25, 4))
def test_the_filter_finds_contradictions_and_narrowings_and_not_shared_words(index: int) -> None:
    newer, older = _lesson(CONTRADICTS[index])
    found = compare(newer, older)
    assert found is not None and found.relation == "contradicts", found
    newer, older = _lesson(NARROWS[index % len(NARROWS)])
    found = compare(newer, older)
    assert found is not None and found.relation == "narrows", found
    newer, older = _lesson(SIMILAR[index])
    found = compare(newer, older)
    assert found is None or not found.likely, found


def test_the_filter_compares_lessons_of_one_scope_only() -> None:
    newer, older = _lesson(CONTRADICTS[0])
    assert [flag.relation for flag in candidates([newer], [older])] == ["contradicts"]
    for other in (
        Lesson(older.id, older.title, older.guideline, task_type="retail"),
        Lesson(older.id, older.title, older.guideline, task_type="airline", project="a/b"),
    ):
        assert candidates([newer], [other]) == []
    # The kind of work splits only when both name one.
    kinded = Lesson(older.id, older.title, older.guideline, task_type="airline", kind="debug")
    assert len(candidates([newer], [kinded])) == 1
    assert candidates([Lesson(**{**newer.__dict__, "kind": "refactor"})], [kinded]) == []


def test_the_same_lesson_again_is_no_pair() -> None:
    """A near-duplicate (search/consolidate.py groups those) is not worth a judge's call."""
    older = Lesson("insight-0001", "Check the receptacle", "Check the receptacle before acting.")
    assert compare(Lesson("insight-0002", older.title, older.guideline), older) is None


def _answer(judged: list[str]) -> FakeLLM:
    """The compiler's fake: each run's lesson by its task id; the judge's: contradicts when
    the newer says not to pass --strict, else neither."""

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        if prompt.startswith("You are comparing two lessons"):
            newer = prompt.split("\nNEWER LESSON ", 1)[1].split(":", 1)[0]
            older = prompt.split("\nOLDER LESSON ", 1)[1].split(":", 1)[0]
            judged.append(f"{newer} against {older}")
            if "NEWER LESSON insight-0002: Do not pass --strict" in prompt:
                relation, reason = "contradicts", "One passes --strict, the other forbids it."
            else:
                relation, reason = "neither", "Different tools."
            return json.dumps({"relation": relation, "reason": reason})
        data = json.loads(good_answer(prompt))
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0]["title"], data["insights"][0]["guideline"] = LESSONS[task_id]
        return json.dumps(data)

    return FakeLLM(answer=answer)


def _build(tmp_path: Path, llm: FakeLLM) -> Path:
    path = write_runs(tmp_path / "old.jsonl", [make_run("old", task="Fix the parser")])
    out = tmp_path / "corpus"
    options = BuildOptions(
        inputs=[path], output=out, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    build_corpus(options, llm=llm)
    return out


def test_an_added_lesson_that_contradicts_an_older_one_supersedes_it(tmp_path: Path) -> None:
    """End to end: add a contradicting lesson and an unrelated similar one; the judge is
    asked about both pairs; the next first message shows only the newer of the contradicting
    pair, with a link back, and the similar one beside it."""
    judged: list[str] = []
    llm = _answer(judged)
    corpus = _build(tmp_path, llm)
    assert Memory.load(corpus).first_message("Fix the parser").insights == ["insight-0001"]
    runs = [
        make_run("new", task="Fix the parser again"),
        make_run("alike", task="Fix the linter"),
    ]
    path = write_runs(tmp_path / "new.jsonl", runs)
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    report = add_runs(options, llm=llm)
    # insight-0003 (similar words) is not asked about insight-0001, superseded already.
    assert judged == ["insight-0002 against insight-0001"]
    review = report.supersede
    assert review is not None and review["version"] == "v0003" and review["flagged"] == []
    [item] = review["superseded"]
    assert (item["older"], item["newer"], item["relation"]) == (
        "insight-0001",
        "insight-0002",
        "contradicts",
    )
    store = Store(corpus)
    assert store.current() == "v0003" and verify(corpus).ok
    assert [e.event for e in store.history()] == ["built", "added", "superseded"]
    after = Memory.load(corpus).first_message("Fix the parser")
    assert after.insights == ["insight-0002", "insight-0003"]
    assert "  - Supersedes: insight-0001 (retired: this lesson replaces it)" in after.text
    old = frontmatter.loads((corpus / "insight/insight-0001.md").read_text())
    assert (old["status"], old["superseded_by"]) == ("retired", "insight-0002")
    assert old["decisions"] == ["gate/supersede-0001.md"]
    assert "- superseded by [insight-0002](../insight/insight-0002.md)" in old.content
    decision = GateDecision.model_validate(
        frontmatter.loads((corpus / "gate/supersede-0001.md").read_text()).metadata
    )
    assert (decision.kind, decision.verdict) == ("supersede", "retired")
    assert decision.reason.startswith(
        "Superseded by insight-0002, which contradicts it (said by the judge (fake/compiler): "
        "One passes --strict, the other forbids it.). The filter found "
    )
    evidence = json.loads((corpus / "gate/supersede-0001.jsonl").read_text())
    assert evidence["judge"]["relation"] == "contradicts"
    assert evidence["filter"]["relation"] == "contradicts"
    made = json.loads((corpus / "manifest.json").read_text())
    assert made["prompts"]["supersede.j2"] == evidence["judge"]["template"]
    newer = frontmatter.loads((corpus / "insight/insight-0002.md").read_text())
    assert newer["supersedes"] == ["insight-0001"] and newer["status"] == "ungated"


def test_a_lesson_that_only_shares_words_leaves_both_shown(tmp_path: Path) -> None:
    judged: list[str] = []
    llm = _answer(judged)
    corpus = _build(tmp_path, llm)
    path = write_runs(tmp_path / "alike.jsonl", [make_run("alike", task="Fix the linter")])
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    report = add_runs(options, llm=llm)
    assert judged == ["insight-0002 against insight-0001"]
    assert report.supersede == {
        "superseded": [],
        "flagged": [],
        "asked": 1,
        "declined": 0,
        "version": None,
    }
    assert Store(corpus).current() == "v0002"
    shown = Memory.load(corpus).first_message("Fix the parser")
    assert shown.insights == ["insight-0001", "insight-0002"]
    assert "Supersedes" not in shown.text


def test_with_no_judge_a_likely_pair_is_flagged_not_retired(tmp_path: Path) -> None:
    """Offline (no model to judge), the filter flags the contradicting pair for review and
    the add's lines say how to act on it; nothing is retired."""
    llm = _answer([])
    corpus = _build(tmp_path, llm)
    path = write_runs(tmp_path / "new.jsonl", [make_run("new", task="Fix the parser again")])
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    made = Store(corpus)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("wikitrace.compiler.add._pair_judge", lambda *args: None)
        report = add_runs(options, llm=llm)
    assert report.supersede is not None and report.supersede["superseded"] == []
    [flag] = report.supersede["flagged"]
    assert (flag["newer"], flag["older"], flag["relation"]) == (
        "insight-0002",
        "insight-0001",
        "contradicts",
    )
    assert made.current() == "v0002"
    assert Memory.load(corpus).first_message("Fix the parser").insights == [
        "insight-0001",
        "insight-0002",
    ]
    from wikitrace.cli.versions import superseding_lines

    assert superseding_lines(corpus, report.supersede) == [
        f"review: insight-0002 may contradict insight-0001 ({flag['why']}); no model judged "
        f"it. If so: wikitrace retire {corpus} insight-0001 --by insight-0002 --reason '...'"
    ]
    # The same review, as the gate does once it commits the newer: the filter decides.
    version = FrozenVersion.current(made)
    decided = review_new_lessons(version, ["insight-0002"], None, filter_decides=True)
    assert [(s.flag.older, s.relation) for s in decided.superseded] == [
        ("insight-0001", "contradicts")
    ]


def test_the_add_command_says_what_it_superseded(tmp_path: Path) -> None:
    """The CLI's lines: the version that retires the older lesson, printed on stdout."""
    llm = _answer([])
    corpus = _build(tmp_path, llm)
    path = write_runs(tmp_path / "new.jsonl", [make_run("new", task="Fix the parser again")])
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    report = add_runs(options, llm=llm)
    from wikitrace.cli.versions import superseding_lines

    assert superseding_lines(corpus, report.supersede or {}) == [
        "v0003: insight-0001 retired, superseded by insight-0002 (it contradicts it: One "
        "passes --strict, the other forbids it.)"
    ]
    code, out, _ = run(["versions", str(corpus), "--current"])
    assert code == 0 and out.strip().endswith("v0003")


def _commit(corpus: Path, ident: str) -> None:
    """A version in which `ident` is committed, as a gate's decision would make it."""
    from wikitrace.corpus_schema import read as corpus_read
    from wikitrace.versions import Derivation, derive_version

    store = Store(corpus)
    base = FrozenVersion.current(store)
    page = base.insights[ident]
    decision = GateDecision(
        id="gate-0001",
        insight=ident,
        tested_on=base.name,
        time="2026-12-07T00:00:00Z",
        verdict="committed",
        reason="Committed.",
        confidence=0.95,
        thresholds={},
        precondition=page.header.precondition,
        evidence="gate-0001.runs.jsonl",
    )
    change = Derivation(reason=f"gate: {ident} committed", report={"gate": ["gate-0001"]})
    change.record(decision, page.header, corpus_read.guideline(page), b"")
    derive_version(store, base, change, deploy=True)


@pytest.mark.parametrize("replaced", [True, False])
def test_monitoring_names_the_lesson_that_replaces_one_it_retires(
    tmp_path: Path, replaced: bool
) -> None:
    """A lesson monitoring retires is superseded by a committed lesson of its scope added
    later about the same action (the first message shows that one with a link back); with
    none, the decision says so."""
    from wikitrace.control.monitor import MonitorOptions, monitor_corpus

    llm = _answer([])
    corpus = _build(tmp_path, llm)
    later = "new" if replaced else "alike"
    with pytest.MonkeyPatch.context() as patched:  # both kept: no judge at the add
        patched.setattr("wikitrace.compiler.add._pair_judge", lambda *args: None)
        path = write_runs(tmp_path / "later.jsonl", [make_run(later, task="Fix it again")])
        options = BuildOptions(
            inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
        )
        add_runs(options, llm=llm)
    _commit(corpus, "insight-0002")
    reports = tmp_path / "reports.jsonl"
    failing = {"insight-0001": {"precondition_met": True, "effect_observed": False}}
    reports.write_text(
        "".join(
            json.dumps(
                {
                    "episode": f"e{n}",
                    "used": {"insights": ["insight-0001"]},
                    "success": False,
                    "checks": failing,
                }
            )
            + "\n"
            for n in range(10)
        )
    )
    result = monitor_corpus(corpus, [reports], MonitorOptions())
    [record] = [r for r in result.records if r.retire]
    assert record.insight == "insight-0001"
    decision = GateDecision.model_validate(
        frontmatter.loads((corpus / "gate/monitor-0002.md").read_text()).metadata
    )
    old = frontmatter.loads((corpus / "insight/insight-0001.md").read_text())
    shown = Memory.load(corpus).first_message("Fix the parser")
    if replaced:
        assert record.replaced_by == "insight-0002" and old["superseded_by"] == "insight-0002"
        assert decision.reason.split(" (anytime-valid).")[1].startswith(
            " Replaced by insight-0002, a committed lesson of its scope added later (it "
            "contradicts it: "
        )
        assert shown.insights == ["insight-0002"]
        assert "  - Supersedes: insight-0001 (retired: this lesson replaces it)" in shown.text
    else:
        assert record.replaced_by is None and old.get("superseded_by") is None
        assert decision.reason.endswith(
            " No committed lesson of its scope added later replaces it."
        )
        assert shown.insights == ["insight-0002"] and "Supersedes" not in shown.text
    assert verify(corpus).ok


def test_the_gate_committing_a_newer_lesson_retires_the_one_it_supersedes(
    tmp_path: Path,
) -> None:
    """When the gate commits a lesson, the shown lessons it contradicts (here as the filter
    finds them: the gate has no model) are retired, superseded by it, and its decision says
    so; a lesson it rejects supersedes nothing."""
    from types import SimpleNamespace

    from wikitrace.control.gate import _change, _Gate
    from wikitrace.control.gate_inputs import Candidate
    from wikitrace.corpus_schema import read as corpus_read

    llm = _answer([])
    corpus = _build(tmp_path, llm)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("wikitrace.compiler.add._pair_judge", lambda *args: None)
        path = write_runs(tmp_path / "new.jsonl", [make_run("new", task="Fix it again")])
        options = BuildOptions(
            inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
        )
        add_runs(options, llm=llm)
    base = FrozenVersion.current(Store(corpus))
    pages = dict(base.insights.items())
    newer = pages["insight-0002"]
    candidate = Candidate("insight-0002", newer.header, corpus_read.guideline(newer), [])
    gate = SimpleNamespace(
        base=base,
        asker=None,
        pages=pages,
        narrower=SimpleNamespace(narrowed={}),
        runs=SimpleNamespace(agent_runs=0, runs_of=lambda decision: []),
    )
    gate.superseded = lambda c, deciding: _Gate.superseded(gate, c, deciding)  # type: ignore[arg-type]
    for verdict in ("committed", "rejected"):
        decision = GateDecision(
            id="gate-0001",
            insight="insight-0002",
            tested_on=base.name,
            time="t",
            verdict=verdict,  # type: ignore[arg-type]
            reason=f"{verdict.title()}.",
            confidence=0.95,
            thresholds={},
            precondition="p",
            evidence="gate-0001.runs.jsonl",
        )
        report = SimpleNamespace(decisions=[decision], tested_on=base.name)
        change = _change(gate, report, [candidate])  # type: ignore[arg-type]
        if verdict == "rejected":
            assert sorted(change.insights) == ["insight-0002"]
            assert change.insights["insight-0002"][0].supersedes == []
            continue
        header, _ = change.insights["insight-0002"]
        assert (header.status, header.supersedes) == ("committed", ["insight-0001"])
        old, _ = change.insights["insight-0001"]
        assert (old.status, old.superseded_by) == ("retired", "insight-0002")
        assert old.decisions == ["gate/gate-0001.md"]
        assert decision.reason.startswith(
            "Committed. It supersedes insight-0001 (it contradicts it: the filter found "
        )
        assert decision.reason.endswith("): retired, superseded by it.")


def test_an_add_killed_as_it_supersedes_is_finished_by_the_next_add(tmp_path: Path) -> None:
    from wikitrace.corpus_schema.history import HistoryEntry

    llm = _answer([])
    corpus = _build(tmp_path, llm)
    path = write_runs(tmp_path / "new.jsonl", [make_run("new", task="Fix the parser again")])
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    store = Store(corpus)
    record = Store.record

    def dies(self: Store, entry: object, *args: object, **kw: object) -> object:
        if isinstance(entry, HistoryEntry) and entry.event == "superseded":
            raise KeyboardInterrupt
        return record(self, entry, *args, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(Store, "record", dies)
        with pytest.raises(KeyboardInterrupt):
            add_runs(options, llm=llm)
    assert store.versions() == ["v0001", "v0002", "v0003"]
    assert [e.event for e in store.history()] == ["built", "added"]
    again = add_runs(options, llm=llm)  # the same runs: nothing new, the supersession finished
    assert again.version is None
    assert store.versions() == ["v0001", "v0002", "v0003"] and store.current() == "v0003"
    assert [e.event for e in store.history()] == ["built", "added", "superseded"]
    assert store.history()[-1].reason == "superseded (interrupted, finished)"
    assert Memory.load(corpus).first_message("Fix the parser").insights == ["insight-0002"]
    assert verify(corpus).ok


def test_a_likely_pair_the_judge_gives_no_usable_answer_on_is_flagged(tmp_path: Path) -> None:
    llm = _answer([])
    corpus = _build(tmp_path, llm)
    compile_answer = llm.answer

    def garbled(messages: list[dict[str, str]]) -> str:
        if messages[0]["content"].startswith("You are comparing two lessons"):
            return "I think they disagree."
        return compile_answer(messages)

    llm.answer = garbled
    path = write_runs(tmp_path / "new.jsonl", [make_run("new", task="Fix the parser again")])
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    review = add_runs(options, llm=llm).supersede
    assert review is not None
    assert (review["asked"], review["declined"], review["superseded"]) == (1, 1, [])
    assert [(f["newer"], f["older"]) for f in review["flagged"]] == [
        ("insight-0002", "insight-0001")
    ]
    assert Store(corpus).current() == "v0002"


def test_an_add_that_leaves_the_comparison_to_later_then_makes_it(tmp_path: Path) -> None:
    """`wikitrace update` adds with supersede=False and compares once it deploys the version
    (compiler.supersede_added), as here."""
    from wikitrace.compiler import add_version, supersede_added
    from wikitrace.corpus_schema.lock import build_lock

    llm = _answer([])
    corpus = _build(tmp_path, llm)
    path = write_runs(tmp_path / "new.jsonl", [make_run("new", task="Fix the parser again")])
    options = BuildOptions(
        inputs=[path], output=corpus, model=llm.model, cache_dir=tmp_path / "c", mine=False
    )
    store = Store(corpus)
    with build_lock(corpus):
        added = add_version(options, deploy=False, llm=llm, supersede=False)
        assert added.supersede is None and store.versions() == ["v0001", "v0002"]
        store.deploy("v0002", reason="an update did better")
        review = supersede_added(store, "v0002", options, llm=llm)
    assert review["version"] == "v0003" and store.current() == "v0003"
    assert Memory.load(corpus).first_message("Fix the parser").insights == ["insight-0002"]
