"""A gate or monitoring call killed once its version is in the store, before the pointer moved
or the history said so: running it again finishes that version, and never makes a second one
with the same decisions (as `add` does: tests/test_crash_safety.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.control.gate import GateReport, gate_insights
from wikitrace.control.gate_inputs import GateOptions
from wikitrace.control.monitor import MonitorOptions, MonitorReport, monitor_corpus
from wikitrace.control.pool import PoolTask
from wikitrace.control.runner import RunnerSpec
from wikitrace.corpus_schema import verify
from wikitrace.corpus_schema.history import HistoryEntry
from wikitrace.corpus_schema.ledger import MonitorState
from wikitrace.versions import Store

from helpers import FakeLLM, good_answer, make_run, write_runs

AGENT = 'import json; print(json.dumps({"success": True}))'


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Two runs, the same lesson from each (ungated)."""
    runs = [make_run("t1"), make_run("t2", success=True)]
    root = tmp_path / "corpus"
    build_corpus(
        BuildOptions(
            inputs=[write_runs(tmp_path / "runs.jsonl", runs)],
            output=root,
            model="fake/compiler",
            cache_dir=tmp_path / "cache",
            mine=False,
        ),
        llm=FakeLLM(answer=lambda m: good_answer(m[0]["content"])),
    )
    return root


def gate(corpus: Path) -> GateReport:
    script = corpus.parent / "agent.py"
    script.write_text(AGENT)
    command = f"{sys.executable} {script} --task {{task_id}} --memory {{memory}}"
    options = GateOptions(
        runner=RunnerSpec(command, concurrency=2, timeout_seconds=60, retries=0),
        pool=[PoolTask("p1", "Put the mug away.", "pick_and_place")],
        given={"target": ["p1"]},
        rule="estimates",
        eta=0.0,
        narrow=False,
    )
    return gate_insights(corpus, [], options)


def killed_at(monkeypatch: pytest.MonkeyPatch, where: str, event: str) -> None:
    """The next `event` dies at `where`: `deploy`, once the version is moved into the store
    (before the pointer moves); `record`, once the pointer moved (before the history says so)."""
    method = getattr(Store, where)

    def dies(self: Store, *args: object, **kw: object) -> object:
        entry = args[0] if args else None
        if where == "deploy" and kw.get("event") == event:
            raise KeyboardInterrupt
        if where == "record" and isinstance(entry, HistoryEntry) and entry.event == event:
            raise KeyboardInterrupt
        return method(self, *args, **kw)

    monkeypatch.setattr(Store, where, dies)


def history(corpus: Path) -> list[tuple[str, str]]:
    return [(entry.event, entry.version) for entry in Store(corpus).history()]


@pytest.mark.parametrize("where", ["deploy", "record"])
def test_a_gate_killed_before_its_version_is_recorded_is_finished_by_running_it_again(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    store = Store(corpus)
    with monkeypatch.context() as patched:
        killed_at(patched, where, "gated")
        with pytest.raises(KeyboardInterrupt):
            gate(corpus)
    assert store.versions() == ["v0001", "v0002"]
    assert store.current() == ("v0001" if where == "deploy" else "v0002")
    assert history(corpus) == [("built", "v0001")]
    runs = store.runs_path.read_text().count("\n")
    report = gate(corpus)  # again
    assert report.version == "v0002" and report.tested_on == "v0001"
    # The two lessons are alike: one decision, which the other follows.
    assert [(d.id, d.insight, d.verdict) for d in report.decisions] == [
        ("gate-0001", "insight-0001", "committed")
    ]
    # One version, recorded once; no probe was run again.
    assert store.versions() == ["v0001", "v0002"] and store.current() == "v0002"
    assert history(corpus) == [("built", "v0001"), ("gated", "v0002")]
    assert "an interrupted gate, finished" in store.history()[-1].reason
    assert store.runs_path.read_text().count("\n") == runs
    assert verify(corpus).ok
    # And once it is finished, the gate has nothing left to test.
    assert gate(corpus).decisions == [] and store.versions() == ["v0001", "v0002"]


def reports(path: Path) -> Path:
    """Ten episodes that used insight-0001 and checked it failed (enough to retire it), four
    good ones that used insight-0002."""
    broken = {"insight-0001": {"effect_observed": False}}
    lines = [
        {"used": {"insights": ["insight-0001"]}, "checks": broken, "episode": f"a{n}"}
        for n in range(10)
    ]
    lines += [
        {"used": {"insights": ["insight-0002"]}, "success": True, "episode": f"b{n}"}
        for n in range(4)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def retired(result: MonitorReport) -> list[str]:
    return [record.insight for record in result.records if record.retire]


@pytest.mark.parametrize("where", ["deploy", "record"])
def test_monitoring_killed_before_its_version_is_recorded_is_finished_by_running_it_again(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    store = Store(corpus)
    given = reports(corpus.parent / "reports.jsonl")
    with monkeypatch.context() as patched:
        killed_at(patched, where, "monitored")
        with pytest.raises(KeyboardInterrupt):
            monitor_corpus(corpus, [given], MonitorOptions())
    assert store.versions() == ["v0001", "v0002"]
    assert history(corpus) == [("built", "v0001")]
    assert not store.monitor_state_path.exists()  # the kill came before it was written
    result = monitor_corpus(corpus, [given], MonitorOptions())  # again
    # The retirement the killed call made is the one kept; nothing is retired twice.
    assert (result.version, retired(result)) == ("v0002", [])
    assert store.versions() == ["v0001", "v0002"] and store.current() == "v0002"
    assert history(corpus) == [("built", "v0001"), ("monitored", "v0002")]
    assert "(an interrupted monitoring call, finished)" in store.history()[-1].reason
    assert (corpus / "gate" / "monitor-0001.md").is_file()
    # Every report counted once: the running record is as one uninterrupted call leaves it.
    state = MonitorState.model_validate_json(store.monitor_state_path.read_text())
    assert len(state.reports) == 14 and state.tallies["insight-0002"].cited == 4
    again = monitor_corpus(corpus, [given], MonitorOptions())
    assert (again.version, again.new_reports) == (None, 0)
    assert verify(corpus).ok


def test_monitoring_not_killed_retires_once(corpus: Path) -> None:
    """The same reports, uninterrupted: the version the tests above expect a rerun to finish."""
    given = reports(corpus.parent / "reports.jsonl")
    result = monitor_corpus(corpus, [given], MonitorOptions())
    assert (result.version, retired(result)) == ("v0002", ["insight-0001"])
    assert history(Path(corpus)) == [("built", "v0001"), ("monitored", "v0002")]
