"""Corrections: `wikitrace retire` retires a lesson by hand, or marks it superseded by a newer
one, in a new version as monitoring's retirement does; the first message then shows only the
newer lesson, with a link back."""

from __future__ import annotations

import json
from pathlib import Path

import frontmatter
import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema.ledger import GateDecision
from wikitrace.corpus_schema.manifest import verify
from wikitrace.tools.memory import Memory
from wikitrace.versions import Store

from helpers import FakeLLM, good_answer, make_run, run, write_runs

LESSONS = {
    "old": ("Pass --strict to the parser", "Always give the parser its strict flag."),
    "new": ("Set PARSER_MODE in the environment", "Export the mode variable before tests run."),
}


def build(tmp_path: Path) -> Path:
    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0]["title"], data["insights"][0]["guideline"] = LESSONS[task_id]
        return json.dumps(data)

    runs = [make_run("old", task="Fix the parser"), make_run("new", task="Fix the parser again")]
    path = write_runs(tmp_path / "runs.jsonl", runs)
    llm = FakeLLM(answer=answer)
    out = tmp_path / "corpus"
    build_corpus(
        BuildOptions(
            inputs=[path], output=out, model=llm.model, cache_dir=tmp_path / "c", mine=False
        ),
        llm=llm,
    )
    return out


def test_a_lesson_superseded_by_a_newer_one_is_shown_no_more_and_the_newer_links_back(
    tmp_path: Path,
) -> None:
    corpus = build(tmp_path)
    before = Memory.load(corpus).first_message("Fix the parser")
    assert before.insights == ["insight-0001", "insight-0002"]
    code, out, err = run(
        ["retire", str(corpus), "1", "--by", "insight-0002", "--reason", "the flag changed"]
    )
    assert (code, err) == (0, "v0002: 1 retired\n")
    store = Store(corpus)
    assert out == f"{store.version_path('v0002')}\n" and store.current() == "v0002"
    assert verify(corpus).ok
    assert [e.event for e in store.history()][-1] == "retired"
    old = frontmatter.loads((corpus / "insight/insight-0001.md").read_text())
    assert old["status"] == "retired" and old["superseded_by"] == "insight-0002"
    assert old["decisions"] == ["gate/retire-0001.md"]
    assert "- superseded by [insight-0002](../insight/insight-0002.md)" in old.content
    decision = GateDecision.model_validate(
        frontmatter.loads((corpus / "gate/retire-0001.md").read_text()).metadata
    )
    assert (decision.kind, decision.verdict) == ("retire", "retired")
    assert decision.reason == "Retired by hand: the flag changed Superseded by insight-0002."
    assert json.loads((corpus / "gate/retire-0001.jsonl").read_text()) == {
        "insight": "insight-0001",
        "reason": "the flag changed",
        "superseded_by": "insight-0002",
    }
    after = Memory.load(corpus).first_message("Fix the parser")
    assert after.insights == ["insight-0002"]
    assert "  - Supersedes: insight-0001 (retired: this lesson replaces it)" in after.text
    assert "1 more insight failed the gate or later episodes" in after.text


def test_retire_without_a_newer_lesson_and_what_it_refuses(tmp_path: Path) -> None:
    corpus = build(tmp_path)
    assert run(["retire", str(corpus), "insight-0002", "--reason", "wrong"])[0] == 0
    assert Memory.load(corpus).first_message("Fix the parser").insights == ["insight-0001"]
    code, out, err = run(["retire", str(corpus), "2", "--reason", "again"])
    assert (code, out) == (2, "")
    assert "insight-0002 is already retired: it is not shown to agents" in err
    code, _, err = run(["retire", str(corpus), "1", "--by", "2", "--reason", "x"])
    assert code == 2 and "insight-0002 is retired: a lesson that replaces another" in err
    code, _, err = run(["retire", str(corpus), "9", "--reason", "x"])
    assert code == 2 and "no insight 9 in the corpus" in err
    code, _, err = run(["retire", str(corpus), "1", "--by", "1", "--reason", "x"])
    assert code == 2 and "insight-0001 cannot supersede itself" in err
    assert Store(corpus).current() == "v0002"  # nothing refused made a version


def test_the_gate_supersedes_the_near_duplicates_of_a_lesson_it_committed_narrowed() -> None:
    """A lesson committed narrowed supersedes its near-duplicates (the same lesson with the
    broad precondition the gate cut); a lesson committed as it was carries them along."""
    from types import SimpleNamespace

    from wikitrace.control.gate import _change
    from wikitrace.control.gate_inputs import Candidate
    from wikitrace.corpus_schema.read import Page
    from wikitrace.corpus_schema.records import InsightHeader

    def header(ident: str, applicability: str = "Any safe.") -> InsightHeader:
        return InsightHeader(
            id=ident,
            title="Open the safe with the key",
            task_type="safe",
            source_step="step-0001",
            source_outcome="success",
            applicability=applicability,
            source_claims=[1],
            model="m",
            compilation="compilation/step-0001.md",
            raw="raw/step-0001/metadata.md",
        )

    def decision(ident: str, insight: str) -> GateDecision:
        return GateDecision(
            id=ident,
            insight=insight,
            tested_on="v0001",
            time="t",
            verdict="committed",
            reason="Committed.",
            confidence=0.95,
            thresholds={},
            precondition="Any safe.",
            evidence=f"{ident}.runs.jsonl",
        )

    body = "**Guideline.** Use the key.\n\n**Applies when.** Any safe.\n"
    pages = {
        ident: Page(f"insight/{ident}.md", header(ident), body)
        for ident in ("insight-0002", "insight-0004")
    }
    narrowed_one = Candidate(
        "insight-0001", header("insight-0001"), "Use the key.", ["insight-0002"]
    )
    kept_one = Candidate("insight-0003", header("insight-0003"), "Use the key.", ["insight-0004"])
    gate = SimpleNamespace(
        narrower=SimpleNamespace(
            narrowed={"insight-0001": header("insight-0001", "Only a locked safe.")}
        ),
        runs=SimpleNamespace(agent_runs=0, runs_of=lambda decision: []),
        pages=pages,
        asker=None,
        superseded=lambda candidate, deciding: [],
    )
    report = SimpleNamespace(
        decisions=[decision("gate-0001", "insight-0001"), decision("gate-0002", "insight-0003")],
        tested_on="v0001",
    )
    change = _change(gate, report, [narrowed_one, kept_one])  # type: ignore[arg-type]
    narrowed, _ = change.insights["insight-0001"]
    assert (narrowed.status, narrowed.applicability) == ("committed", "Only a locked safe.")
    assert narrowed.supersedes == ["insight-0002"]
    broad, _ = change.insights["insight-0002"]
    assert (broad.status, broad.superseded_by) == ("retired", "insight-0001")
    assert broad.decisions == ["gate/gate-0001.md"]
    assert report.decisions[0].reason.endswith(
        "Its near-duplicates (insight-0002) keep the broad precondition: they are retired, "
        "superseded by it."
    )
    follower, _ = change.insights["insight-0004"]
    assert (follower.status, follower.superseded_by) == ("committed", None)
    assert change.insights["insight-0003"][0].supersedes == []


def test_a_retirement_killed_before_its_version_is_recorded_is_finished_by_running_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.control.retire import retire_insight
    from wikitrace.corpus_schema.history import HistoryEntry

    corpus = build(tmp_path)
    store = Store(corpus)
    record = Store.record

    def dies(self: Store, entry: object, *args: object, **kw: object) -> object:
        if isinstance(entry, HistoryEntry) and entry.event == "retired":
            raise KeyboardInterrupt
        return record(self, entry, *args, **kw)  # type: ignore[arg-type]

    with monkeypatch.context() as patched:
        patched.setattr(Store, "record", dies)
        with pytest.raises(KeyboardInterrupt):
            retire_insight(corpus, "1", "wrong")
    assert store.versions() == ["v0001", "v0002"]
    assert [e.event for e in store.history()] == ["built"]
    assert retire_insight(corpus, "1", "wrong") == "v0002"  # again: finished, not made twice
    assert store.versions() == ["v0001", "v0002"] and store.current() == "v0002"
    assert [e.event for e in store.history()] == ["built", "retired"]
    assert "(interrupted, finished)" in store.history()[-1].reason
    assert verify(corpus).ok
