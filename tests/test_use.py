"""Test time: the first message, citations and the audit, on a corpus built with a fake model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from wikitrace.cli.main import cli
from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema import InputError
from wikitrace.corpus_schema.catalog import InsightEntry
from wikitrace.tools.audit import audit_corpus, audit_insight
from wikitrace.tools.cite import summarize
from wikitrace.tools.memory import Memory

from helpers import FakeLLM, good_answer, make_run, write_runs
from helpers import run as run_cli


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("use")
    runs = [
        make_run("mug", task_type="pick_and_place"),
        make_run("mug", success=True, task_type="pick_and_place"),
        make_run("lamp", success=True, task_type="look_at"),
        {**make_run("kettle", task_type="heat"), "task": "Heat the kettle on the stove burner."},
    ]
    path = write_runs(base / "runs.jsonl", runs)

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt, wrong_quote="kettle" in prompt))
        titles = {"mug": "Open the cabinet first", "lamp": "Use a lamp", "kettle": "Heat it"}
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0]["title"] = titles[task_id]
        return json.dumps(data)

    llm = FakeLLM(answer=answer)
    root = base / "corpus"
    build_corpus(
        BuildOptions(inputs=[path], output=root, model=llm.model, use_cache=False), llm=llm
    )
    return root


def test_an_insight_with_no_verified_quote_is_marked_in_the_first_message(corpus: Path) -> None:
    text = Memory.load(corpus).first_message("Heat the kettle", infer_type=False).text
    heat = next(line for line in text.splitlines() if ": Heat it**" in line)
    assert heat.endswith("; UNVERIFIED: no quote behind it was found in its run)")
    mug = next(line for line in text.splitlines() if ": Open the cabinet first**" in line)
    assert "UNVERIFIED" not in mug


def test_first_message_lists_insights_by_type_and_similar_runs(corpus: Path) -> None:
    message = Memory.load(corpus).first_message(
        "Put a mug in the cabinet", mount="/mnt/memory", infer_type=False
    )
    # The two mug runs drew the same lesson: listed once, with its support.
    assert message.insights == ["insight-0001", "insight-0003", "insight-0004"]
    assert message.alike == {"insight-0001": ["insight-0002"]}
    assert (
        "  - Support: seen in 2 runs: 1 failed, 1 succeeded; the same lesson: insight-0002"
        in message.text
    )
    assert message.similar[0] in {"step-0001", "step-0002"} and len(message.similar) == 3
    text = message.text
    assert text.startswith("# Your task\n\nPut a mug in the cabinet\n")
    assert "## Insights for pick_and_place" in text and "## Insights for look_at" in text
    assert "- **insight-0001: Open the cabinet first** (from step-0001, a FAILED run)" in text
    assert "/mnt/memory/tools/turn step-NNNN 12" in text
    assert '{"used": {"raw": ["step-0003"]' in text
    assert "\n\n\n" not in text


def test_leave_one_task_out_shows_nothing_of_that_task(corpus: Path) -> None:
    memory = Memory.load(corpus)
    message = memory.first_message(
        "Put a mug in the cabinet", exclude_tasks=["mug"], infer_type=False
    )
    assert message.insights == ["insight-0003", "insight-0004"]
    # Inferred, the task's type is that of the one run left that shares its words (look_at).
    inferred = memory.first_message("Put a mug in the cabinet", exclude_tasks=["mug"])
    assert (inferred.task_type, inferred.insights) == ("look_at", ["insight-0003"])
    assert "step-0001" not in message.similar and "step-0002" not in message.similar
    assert "task mug" not in message.text


def test_task_type_filters(corpus: Path) -> None:
    message = Memory.load(corpus).first_message("Warm the kettle", task_type="heat")
    assert message.insights == ["insight-0004"] and message.similar == ["step-0004"]
    # A task that shares no word with the run (but common ones) is not like it.
    unlike = Memory.load(corpus).first_message("anything", task_type="heat")
    assert unlike.insights == ["insight-0004"] and unlike.similar == []


def test_a_budget_keeps_the_most_relevant_insights(corpus: Path) -> None:
    memory = Memory.load(corpus)
    task = "Use a lamp to look at the bowl"
    full = memory.first_message(task, similar=0, infer_type=False)
    budget = full.tokens_estimate - 40  # one insight must go
    message = memory.first_message(task, similar=0, max_tokens=budget, infer_type=False)
    assert message.truncated and message.tokens_estimate <= budget
    assert "insight-0003" in message.insights and len(message.insights) < 4
    assert "the full\nlist is in `/work/corpus/insight/_index.md`" in message.text


def test_a_budget_shows_as_many_insights_as_fit(tmp_path: Path) -> None:
    """At every budget the message fits, and where one more insight first fits, the message
    is within the budget's step of it: the search finds the largest count, not just one."""
    insights = [
        InsightEntry(
            id=f"insight-{n:04d}",
            title=f"Check the {'ab' * n} before the {'cd' * n}",
            task_type="pick",
            guideline=" ".join(f"w{n}x{k}" for k in range(3 + n % 9)),
            applicability=f"Tasks with a {'ef' * n}.",
            source_step=f"step-{n:04d}",
            source_outcome="success" if n % 3 else "failure",
            source_task_id=f"t{n}",
        )
        for n in range(1, 31)
    ]
    memory = Memory(tmp_path, [], insights, offline=False)
    task = "Put the w3x1 from the w7x2 on the abab"
    whole = memory.first_message(task, similar=0).tokens_estimate
    empty = memory.first_message(task, similar=0, max_tokens=1).tokens_estimate
    shown: list[int] = []
    for budget in range(empty, whole + 2, 2):
        message = memory.first_message(task, similar=0, max_tokens=budget)
        assert message.tokens_estimate <= budget
        if shown and len(message.insights) > shown[-1]:
            assert message.tokens_estimate >= budget - 2, budget
        # Each insight is longer than a step of the budget: the count grows one at a time.
        assert not shown or len(message.insights) - shown[-1] in (0, 1), budget
        shown.append(len(message.insights))
    assert shown[0] == 0 and shown[-1] == 30


def test_prompt_command(corpus: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["prompt", str(corpus), "Heat the kettle", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["similar"][0] == "step-0004" and data["truncated"] is False
    task = tmp_path / "task.txt"
    task.write_text("Heat the kettle")
    result = runner.invoke(cli, ["prompt", str(corpus), "--task-file", str(task)])
    assert result.exit_code == 0 and result.stdout.startswith("# Your task\n\nHeat the kettle\n")
    result = runner.invoke(cli, ["prompt", str(corpus)])
    assert (
        result.exit_code == 2
        and "give the task as an argument or with --task-file" in result.stderr
    )


def test_citations_are_checked_and_counted(corpus: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports.jsonl"
    reports.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"used": {"insights": ["insight-0001"], "raw": ["step-0001"]}, "success": True},
                {"used": {"insights": ["insight-0001", "insight-0003"]}, "success": False},
                {"used": {"compilations": ["step-0002"]}, "episode": "e3"},
            ]
        )
    )
    summary = summarize(corpus, [reports])
    assert summary.episodes == 3
    assert vars(summary.insights["insight-0001"]) == {
        "id": "insight-0001",
        "episodes": 2,
        "successes": 1,
        "failures": 1,
        "unknown": 0,
    }
    assert summary.compilations["step-0002"].unknown == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"used": {"insights": ["insight-0099"]}}')
    with pytest.raises(InputError) as caught:
        summarize(corpus, [bad])
    assert str(caught.value) == (
        f"{bad}:1: field 'used.insights': 'insight-0099' is not in the corpus "
        "(ids look like insight-0007)"
    )
    wrong_shape = tmp_path / "shape.json"
    wrong_shape.write_text('{"R": ["step-0001"]}')
    with pytest.raises(InputError, match="field 'used': Field required"):
        summarize(corpus, [wrong_shape])
    result = CliRunner().invoke(cli, ["cite", str(corpus), str(reports)])
    assert result.exit_code == 0
    assert "| insight-0001 | 2 | 1 | 1 | 0 |" in result.stdout


def test_audit_of_one_insight_quotes_the_raw_turns(corpus: Path) -> None:
    text = audit_insight(corpus, "insight-0001")
    assert text.startswith("# insight-0001: Open the cabinet first\n")
    assert "### claim 1: The agent acted on the last turn." in text
    assert "quote from turn 4 (verified, the agent's own action):" in text
    assert "raw turn 4 of step-0001, as logged, the quoted passage between >>> and <<<:" in text
    assert "> === step-0001 turn 4 of 4 ===" in text
    assert "> content: >>>I put the mug in cabinet 1. Done.<<<" in text


def test_audit_shows_the_passage_deep_in_a_long_turn(tmp_path: Path) -> None:
    from wikitrace.tools.audit import _cited_turn

    observation = "seat map: " + "row 9 seat A free; " * 300 + "FLIGHT HAT170: 3 seats left"
    observation += "; row 9 seat B free" * 300
    turns = [{"role": "user", "content": "Book"}, {"role": "tool", "observation": observation}]
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a", turns=turns)])
    build_corpus(BuildOptions(inputs=[path], output=tmp_path / "c"))
    shown = _cited_turn(tmp_path / "c", "step-0001", 2, "FLIGHT HAT170: 3 seats left")
    assert ">>>FLIGHT HAT170: 3 seats left<<<" in shown
    assert shown.startswith("[... `turn step-0001 2` shows the ")
    assert len(shown) < 1200


def test_audit_of_runs_and_several_ids(corpus: Path) -> None:
    code, out, err = run_cli(["audit", str(corpus), "step-0001", "insight-0003"])
    assert code == 0, err
    assert out.startswith(
        "# step-0001: task mug (failure), 4 turns\n\n"
        "## Insights with this run as their source\n\n- insight-0001: "
    )
    assert "# insight-0003: Use a lamp" in out
    code, out, _ = run_cli(["audit", str(corpus)])
    assert "- insight-0001: Open the cabinet first" in out


def test_audit_of_the_corpus(corpus: Path) -> None:
    findings = audit_corpus(corpus)
    assert findings.insights_from_failed_runs == ["insight-0001", "insight-0004"]
    assert findings.unverified_quotes == {"step-0004": 1}
    assert findings.insights_missing_evidence == {
        "insight-0004": "no verified quote backs the claims it rests on"
    }
    assert findings.runs_without_insight == []
    result = CliRunner().invoke(cli, ["audit", str(corpus), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["unverified_quotes"] == {
        "step-0004": 1
    }
    result = CliRunner().invoke(cli, ["audit", str(corpus), "insight-0099"])
    assert "no insight insight-0099" in str(result.exception)


def test_a_leave_one_task_out_view_holds_nothing_of_the_task(corpus: Path, tmp_path: Path) -> None:
    from wikitrace.corpus_schema import verify

    view = tmp_path / "view"
    result = CliRunner().invoke(
        cli, ["view", str(corpus), "--exclude-task", "kettle", "-o", str(view), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["runs_left_out"], report["insights_left_out"]) == (1, ["insight-0004"])
    assert verify(view).ok
    texts = [p.read_text(errors="replace") for p in view.rglob("*") if p.is_file()]
    assert not any("kettle" in text.lower() for text in texts)
    assert any("cabinet" in text for text in texts)  # the other tasks are all there
    memory = Memory.load(view)
    assert {run.task_id for run in memory.runs} == {"mug", "lamp"}
    assert "insight-0004" not in [i.id for i in memory.insights]
    code, _, err = run_cli(
        ["view", str(corpus), "--exclude-task", "nope", "-o", str(tmp_path / "v2")]
    )
    assert code == 2 and "no task 'nope'" in err


def test_the_first_message_keeps_to_the_tasks_type(tmp_path: Path) -> None:
    from helpers import DATA

    corpus = tmp_path / "mixed"
    inputs = [
        DATA / "tau-bench-original-2results.json",
        DATA / "importers" / "mini-swe-agent",
        DATA / "importers" / "alfworld-2episodes.out",
    ]
    build_corpus(BuildOptions(inputs=inputs, output=corpus))
    memory = Memory.load(corpus)
    types = {run.task_type for run in memory.runs}
    assert len(types) >= 3
    airline = next(run for run in memory.runs if run.task_type == "airline")
    message = memory.first_message(
        "I need to change my flight reservation to a later date; my user id is sam_park_1"
    )
    assert (message.task_type, message.task_type_inferred) == ("airline", True)
    shown = {run.step: run.task_type for run in memory.runs if run.step in message.similar}
    assert shown and set(shown.values()) == {"airline"}
    said = "lists only **airline** ones (the domain of the most similar past runs, most of"
    assert said in message.text
    assert airline.step in message.similar
    code, _, err = run_cli(["prompt", str(corpus), "a task", "--task-type", "airlines"])
    assert code == 2
    assert "no task type 'airlines' in this corpus; it has: " in err and "airline" in err


def test_an_insight_page_shows_its_evidence_and_says_when_none_is_verified(
    corpus: Path,
) -> None:
    mug = (corpus / "insight/insight-0001.md").read_text()
    assert "### Claim 1: The agent acted on the last turn." in mug
    assert "- turn 4 (verified; `tools/turn step-0001 4` shows it whole):" in mug
    assert "\n  ```text\n  I put the mug in cabinet 1. Done.\n  ```" in mug
    assert "UNVERIFIED" not in mug
    kettle = (corpus / "insight/insight-0004.md").read_text()
    assert "**UNVERIFIED.** No quote behind this lesson was found in its run." in kettle
    assert "(UNVERIFIED: not found in the turn;" in kettle
    index = (corpus / "insight/_index.md").read_text()
    kettle_row = next(line for line in index.splitlines() if "insight-0004.md" in line)
    assert kettle_row.endswith("| ungated, UNVERIFIED |  |")
    mug_rows = [line for line in index.splitlines() if "insight-000" in line and "mug" not in line]
    assert any(row.endswith("| (first of 2) |") for row in mug_rows)
    assert any("| [insight-0001](../insight/insight-0001.md) |" in row for row in mug_rows[1:])
