"""A bounded slice of benchmarks/realistic_bench.py: two real marot/spotter sessions compiled
through litellm by the local stub from their recorded answers (tests/data/realistic), beside
SWE-bench and τ-bench runs the stub answers with the stand-in; the first message for a spotter
task, its own session left out, shows the project's lessons and no other project's or
domain's (issue 51)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data"
SPOTTER = "github.com/marot/spotter"
BACKGROUND = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
"""The session whose task is "start phoenix in background" (tool_heavy.jsonl)."""
NOT_STARTING = "55604662-cf2a-4331-851a-ec234028f8ca"
"""The session "mix phx.server doesnt seem to start" (short.jsonl), failed as labelled."""

pytestmark = pytest.mark.integration


def _bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        "realistic_bench", ROOT / "benchmarks/realistic_bench.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _bench()


def test_a_spotter_task_gets_its_projects_lessons_and_no_foreign_ones(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(
        DATA / "sessions/claude-code/spotter-main", data / "claude/-home-marco-projects-spotter"
    )
    family = bench.recall_bench.Family
    families = [
        family("tau-bench", str(ROOT / "examples/tau-bench-airline.jsonl"), "airline"),
        family("mini-swe-agent", str(DATA / "importers/mini-swe-agent"), "coding"),
        family("spotter", "claude", "coding", SPOTTER, session=True),
    ]
    answers = bench.load_answers(DATA / "realistic/answers.jsonl")
    work = tmp_path / "work"
    work.mkdir()
    built = bench.build(data, work, answers, None, families)
    # Both recorded answers were asked for (their keys still match what the compiler sends),
    # and every other run was answered by the stand-in, with a lesson that could leak.
    assert built.served.recorded == set(answers) and len(answers) == 2
    assert built.served.stand_in and built.report["unverified_quotes"] == 0

    corpus = str(built.corpus.resolve())
    asked = ["-q", "prompt", corpus, "--json", "--project", "spotter"]
    asked += ["--exclude-task", BACKGROUND, "start phoenix in background"]
    code, printed, error = bench.recall_bench.wikitrace(asked)
    assert code == 0, error
    message = json.loads(printed)
    truth = bench.recall_bench.Truth.of(built.corpus)
    from wikitrace.tools.memory import Memory

    memory = Memory.load(built.corpus)
    by_step = {run.step: run for run in memory.runs}
    by_id = {item.id: item for item in memory.insights}
    shown = [by_id[i] for i in message["insights"]]
    assert [item.title for item in shown] == [
        "Ask for the startup error before starting spotter's Phoenix server yourself"
    ]
    assert all(truth.repo[item.source_step] == SPOTTER for item in shown)
    assert [by_step[step].task_id for step in message["similar"]] == [NOT_STARTING]
    # The corpus holds other projects' and other domains' lessons, none of them shown.
    foreign = [i for i in memory.insights if truth.repo[i.source_step] != SPOTTER]
    assert foreign and not {i.id for i in foreign} & set(message["insights"])
    assert "This task is in the project **spotter**" in message["text"]


def test_a_second_task_list_reads_and_names_what_is_wrong(tmp_path: Path) -> None:
    """`--tasks FILE`: the second reader's committed list reads whole (a task a line of
    benchmarks/data/realistic_tasks_second.json, each with its expected runs), and a file
    with a task missing its text is refused naming the file, the task and the field."""
    items = bench.tasks_from(ROOT / "benchmarks/data/realistic_tasks_second.json")
    assert len(items) == 12
    first = items[0]
    assert (first.project, first.name_given, first.left_out) == (SPOTTER, "spotter", None)
    assert first.remote == "git@github.com:marot/spotter.git"
    assert "fa812bfe-b295-4cca-9c2f-fdf01028cb46" in first.expected
    bad = tmp_path / "tasks.json"
    bad.write_text(json.dumps({"tasks": [{"name": "n", "project": "p"}]}), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"tasks\.json: tasks\[0\]: missing or bad field 'task'"):
        bench.tasks_from(bad)


def test_a_task_of_a_domain_the_corpus_lacks_is_marked_and_coding_is_the_default() -> None:
    """The fourth reader's list marks its four tasks of domains the corpus lacks with
    `"domain": "none"` (every item a message shows for them is another domain's); a task
    that says no domain is coding work, as every task of the earlier lists is."""
    items = bench.tasks_from(ROOT / "benchmarks/data/realistic_tasks_fourth.json")
    foreign = [item for item in items if item.domain == "none"]
    assert len(items) == 16 and len(foreign) == 4
    assert all(item.name.startswith("foreign4") and not item.expected for item in foreign)
    assert {item.domain for item in items} == {"coding", "none"}
    second = bench.tasks_from(ROOT / "benchmarks/data/realistic_tasks_second.json")
    assert {item.domain for item in second} == {"coding"}
