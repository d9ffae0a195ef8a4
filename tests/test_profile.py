"""`--profile paper`: every choice the method descriptions state, pinned, on every command that
takes it; our defaults without it; an option given always wins; the docs' table says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest

from wikitrace.cli.main import cli
from wikitrace.cli.profiles import table

from helpers import make_run, run, write_runs

# The method's values, as the descriptions state them (../shared/method/).
PAPER = {
    ("gate", "rule"): "estimates",
    ("gate", "targets"): 8,
    ("gate", "falsify"): 16,
    ("gate", "regress"): 16,
    ("build", "no_mine"): True,
    ("build", "hypotheses"): True,
    ("add", "hypotheses"): True,
    ("update", "hypotheses"): True,
    ("build", "reasoning_effort"): "high",
    ("build", "unfiltered_insights"): True,
    ("add", "no_mine"): True,
    ("add", "reasoning_effort"): "high",
    ("add", "unfiltered_insights"): True,
    ("update", "no_mine"): True,
    ("update", "reasoning_effort"): "high",
    ("update", "unfiltered_insights"): True,
    ("prompt", "report_at"): "end",
    ("prompt", "message_tokens"): 0,
    ("prompt", "all_insights"): True,
    ("prompt", "all_types"): True,
}
OURS = {
    ("gate", "rule"): "sequential",
    ("gate", "targets"): 8,
    ("gate", "falsify"): 8,
    ("gate", "regress"): 8,
    ("build", "no_mine"): False,
    ("build", "hypotheses"): False,
    ("add", "hypotheses"): False,
    ("update", "hypotheses"): False,
    ("build", "reasoning_effort"): None,
    ("build", "unfiltered_insights"): False,
    ("add", "no_mine"): False,
    ("add", "reasoning_effort"): None,
    ("add", "unfiltered_insights"): False,
    ("update", "no_mine"): False,
    ("update", "reasoning_effort"): None,
    ("update", "unfiltered_insights"): False,
    ("prompt", "report_at"): "first",
    ("prompt", "message_tokens"): 6000,
    ("prompt", "all_insights"): False,
    ("prompt", "all_types"): False,
}


@pytest.fixture(scope="module")
def args(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("profile")
    runs = write_runs(root / "runs.jsonl", [make_run("t1", success=True), make_run("t2")])
    corpus = root / "corpus"
    assert run(["-q", "build", str(runs), "-o", str(corpus)])[0] == 0
    results = root / "results.jsonl"
    results.write_text('{"suite": "s", "method": "no-memory", "task_id": "t1", "success": true}\n')
    return {
        "build": [str(runs), "-o", str(root / "new")],
        "add": [str(corpus), str(runs)],
        "update": [str(corpus), str(runs), "--runner", "true {task_id}"],
        "prompt": [str(corpus), "a task"],
        "gate": [str(corpus), "--runner", "true {task_id}"],
        "eval": [str(results)],
    }


def parsed(command: str, given: list[str]) -> dict[str, Any]:
    """The values the command would run with, without running it."""
    ctx = cli.commands[command].make_context(command, list(given))
    return dict(ctx.params)


@pytest.mark.parametrize(("command", "option"), sorted(PAPER))
def test_the_paper_profile_pins_each_choice(
    args: dict[str, list[str]], command: str, option: str
) -> None:
    assert parsed(command, args[command])[option] == OURS[(command, option)]
    assert (
        parsed(command, [*args[command], "--profile", "paper"])[option] == PAPER[(command, option)]
    )
    assert (
        parsed(command, [*args[command], "--profile", "default"])[option] == OURS[(command, option)]
    )


def test_an_option_given_wins_over_the_profile(args: dict[str, list[str]]) -> None:
    given = ["--profile", "paper", "--rule", "bounds", "--falsify", "4"]
    values = parsed("gate", [*args["gate"], *given])
    assert (values["rule"], values["falsify"], values["regress"]) == ("bounds", 4, 16)
    values = parsed("prompt", [*args["prompt"], "--report-at", "first", "--profile", "paper"])
    assert (values["report_at"], values["message_tokens"]) == ("first", 0)


def choices() -> list[tuple[str, tuple[str, ...], Any, Any]]:
    """The shipped paper profile as the docs' table has it: each option, the commands it is
    set for, the method's value and ours (the option's own default), in the file's order."""
    found: dict[tuple[str, Any], list[str]] = {}
    for command, values in table("paper").items():
        for key, value in values.items():
            found.setdefault((key, value), []).append(command)
    rows = []
    for (key, value), commands in found.items():
        ours = {
            next(
                p.get_default(click.Context(cli.commands[c]))
                for p in cli.commands[c].params
                if f"--{key}" in p.opts
            )
            for c in commands
        }
        assert len(ours) == 1, (key, commands)
        rows.append((f"--{key}", tuple(commands), value, ours.pop()))
    return rows


def test_every_choice_is_pinned_and_every_command_takes_the_profile(
    args: dict[str, list[str]],
) -> None:
    pinned = {
        (c, flag[2:].replace("-", "_")) for flag, commands, _, _ in choices() for c in commands
    }
    assert pinned | {("gate", "targets")} == set(PAPER)
    for command in args:
        assert any(p.name == "profile" for p in cli.commands[command].params), command


def test_the_profile_is_read_as_a_settings_file_is(tmp_path: Path) -> None:
    from wikitrace.cli import profiles

    bad = tmp_path / "paper.toml"
    bad.write_text("[gate]\nrule = 'coin'\n")
    profiles.PROFILES["paper"] = bad
    try:
        code, _, err = run(["gate", str(tmp_path), "--runner", "r {task_id}", "--profile", "paper"])
    finally:
        profiles.PROFILES["paper"] = Path(profiles.__file__).with_name("paper.toml")
    assert (
        code == 2
        and "--profile paper (paper.toml): [gate] rule: Invalid value for '--rule': 'coin'" in err
    )


def test_the_docs_table_is_the_profile() -> None:
    text = (Path(__file__).parent.parent / "docs" / "paper.md").read_text()
    section = text[: text.index("The rest already follows the method")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == len(choices())
    for row, (flag, commands, paper, ours) in zip(rows, choices(), strict=True):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[0] == f"`{flag}`", row
        assert cells[1] == ", ".join(commands), row
        assert re.sub(r"[`*]", "", cells[2]) == _value(paper), row
        assert re.sub(r"[`*]", "", cells[3]) == _value(ours), row


def _value(value: Any) -> str:
    if value is True or value is False:
        return "yes" if value else "no"
    return "the model's" if value is None or value is click.core.UNSET else str(value)


# --- what the profile's choices do ---------------------------------------------------------


@pytest.fixture(scope="module")
def lessons(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three runs, each drawn the same lesson by a model: three near-duplicate insights."""
    from wikitrace.compiler import BuildOptions, build_corpus

    from helpers import FakeLLM

    root = tmp_path_factory.mktemp("lessons")
    runs = write_runs(root / "runs.jsonl", [make_run(f"t{n}") for n in range(3)])
    llm = FakeLLM()
    build_corpus(
        BuildOptions(inputs=[runs], output=root / "corpus", model=llm.model, cache_dir=root / "c"),
        llm=llm,
    )
    return root / "corpus"


def message(corpus: Path, *given: str) -> dict[str, Any]:
    code, out, err = run(
        ["prompt", str(corpus), "Put the t1 mug in the cabinet.", "--json", *given]
    )
    assert code == 0, err
    return dict(json.loads(out))


def test_insights_only_is_the_same_insights_and_nothing_to_drill_into(lessons: Path) -> None:
    full, only = message(lessons), message(lessons, "--insights-only")
    assert only["insights"] == full["insights"] == ["insight-0001"]
    assert full["similar"] and only["similar"] == []
    text = only["text"]
    assert "Lesson 1" in text and "/work/corpus" not in text
    assert "## When to drill down" not in text and "## Past runs" not in text
    assert '{"used": {"insights": ["insight-0007"]}}' in text
    assert "/work/corpus/tools/actions" in full["text"]


def test_the_report_can_wait_for_the_end_of_the_episode(lessons: Path) -> None:
    assert "## When you finish" in message(lessons)["text"]
    assert "## When you finish" not in message(lessons, "--report-at", "end")["text"]
    assert "## When you finish" not in message(lessons, "--profile", "paper")["text"]
    code, out, _ = run(["prompt", str(lessons), "--report-request"])
    assert code == 0 and out.startswith("The episode is over. Report the memory entries")
    assert '"compilations": ["step-0003"]' in out
    code, out, _ = run(["prompt", str(lessons), "--report-request", "--insights-only"])
    assert '{"used": {"insights": ["insight-0007"]}}' in out and "compilations" not in out


def test_all_insights_and_no_budget_list_every_lesson(lessons: Path) -> None:
    assert message(lessons)["alike"] == {"insight-0001": ["insight-0002", "insight-0003"]}
    every = message(lessons, "--all-insights")
    assert every["insights"] == ["insight-0001", "insight-0002", "insight-0003"]
    assert every["alike"] == {}
    assert message(lessons, "--all-insights", "--message-tokens", "400")["truncated"] is True
    assert message(lessons, "--all-insights", "--message-tokens", "0")["truncated"] is False
    assert message(lessons, "--profile", "paper")["insights"] == every["insights"]


def test_unfiltered_insights_leave_out_the_prompt_line(tmp_path: Path) -> None:
    from wikitrace.compiler import BuildOptions, CompileLimits, build_corpus

    from helpers import FakeLLM

    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1")])
    line = "Write no insight rather than a vague or over-broad one."
    for unfiltered, expected in ((False, True), (True, False)):
        llm = FakeLLM()
        build_corpus(
            BuildOptions(
                inputs=[runs],
                output=tmp_path / f"c{unfiltered}",
                model=llm.model,
                use_cache=False,
                limits=CompileLimits(unfiltered_insights=unfiltered),
            ),
            llm=llm,
        )
        assert (line in llm.calls[0][0]["content"]) is expected


def test_lessons_that_apply_alike_from_runs_that_ended_apart_are_flagged(tmp_path: Path) -> None:
    """The method's weak spot, as an option: a pair whose applicability overlaps and whose
    source runs ended differently is a drill-down trigger the first message names."""
    from wikitrace.compiler import BuildOptions, build_corpus

    from helpers import FakeLLM, good_answer

    def answer(messages: list[dict[str, Any]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        data["insights"][0].update(
            title="Refund first" if "t1" in prompt else "Ask before refunding",
            guideline="Refund at once." if "t1" in prompt else "Ask the customer first.",
            applicability="A customer asks for a refund of a damaged order.",
        )
        return json.dumps(data)

    runs = [make_run("t1", success=True), make_run("t2", success=False), make_run("t3")]
    llm = FakeLLM(answer=answer)
    build_corpus(
        BuildOptions(
            inputs=[write_runs(tmp_path / "runs.jsonl", runs)],
            output=tmp_path / "c",
            model=llm.model,
            cache_dir=tmp_path / "cache",
            mine=False,
        ),
        llm=llm,
    )
    plain = message(tmp_path / "c", "--all-insights")["text"]
    flagged = message(tmp_path / "c", "--all-insights", "--flag-conflicts")["text"]
    assert "## Check these pairs first" not in plain
    assert "## Check these pairs first" in flagged
    # t1 succeeded; t2 and t3 failed: two pairs, each naming the successful run's lesson first.
    assert "- insight-0001 (from a successful run) and insight-0002 (from a FAILED run)" in flagged
    assert "- insight-0001 (from a successful run) and insight-0003 (from a FAILED run)" in flagged
    assert "insight-0002 (from a successful run)" not in flagged


def test_the_paper_profile_lists_every_task_type_s_lessons(tmp_path: Path) -> None:
    """Two task types: by default a task keeps to its own type's lessons; the method lists
    all insights grouped by type."""
    from wikitrace.compiler import BuildOptions, build_corpus

    from helpers import FakeLLM

    runs = [make_run(f"p{n}") for n in range(3)]
    runs += [
        make_run(f"c{n}", task=f"Clean the {n} plate in the sink.", task_type="clean")
        for n in range(3)
    ]
    llm = FakeLLM()
    corpus = tmp_path / "corpus"
    build_corpus(
        BuildOptions(
            inputs=[write_runs(tmp_path / "runs.jsonl", runs)],
            output=corpus,
            model=llm.model,
            cache_dir=tmp_path / "c",
        ),
        llm=llm,
    )
    own = message(corpus, "--all-insights")  # the task's type, from its most similar runs
    every = message(corpus, "--profile", "paper")
    assert len(own["insights"]) == 3 and len(every["insights"]) == 6
    assert set(own["insights"]) < set(every["insights"])
    assert "Insights for clean" not in own["text"]
    assert "clean" in every["text"] and "pick_and_place" in every["text"]


def test_a_paper_profile_build_without_a_model_says_it_cannot_state_hypotheses(
    tmp_path: Path,
) -> None:
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1")])
    code, out, err = run(["build", str(runs), "-o", str(tmp_path / "c"), "--profile", "paper"])
    assert code == 2 and out == ""
    assert "--hypotheses needs a model" in err and "--profile paper" in err
    assert not (tmp_path / "c").exists()
    code, _, err = run(["build", str(runs), "-o", str(tmp_path / "c"), "--no-mine"])
    assert code == 0 and "no lesson is mined or written" in err
