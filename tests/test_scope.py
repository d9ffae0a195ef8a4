"""What a coding agent is shown: sessions scoped by task type (coding) and by project, the
project's own lessons first, never another domain's; and an inference that says when it is
unsure rather than falling back to every type in silence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers.repository import project_of
from wikitrace.corpus_schema.projects import normal_project, project_at, project_named
from wikitrace.tools.memory import Memory

from helpers import (
    FakeLLM,
    build_lessons,
    good_answer,
    make_run,
    run,
    unpaged_catalog,
    write_runs,
)

TITLES = {
    "p1": "Run the parser tests with -x",
    "p2": "Regenerate the parser fixtures",
    "w1": "Restart the web server after config edits",
    "a1": "Confirm the fare class before booking",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Coding sessions of two projects and an airline run, each with one lesson."""
    base = tmp_path_factory.mktemp("scope")
    runs = [
        make_run(
            "p1",
            task="Fix the failing unit test in the parser",
            task_type="coding",
            project="github.com/acme/parser",
        ),
        make_run(
            "p2",
            task="Update the parser test fixtures",
            task_type="coding",
            project="github.com/acme/parser",
            success=True,
        ),
        make_run(
            "w1",
            task="Fix the web server test that times out",
            task_type="coding",
            project="github.com/acme/web",
        ),
        make_run("a1", task="Book a flight from New York to Seattle", task_type="airline"),
    ]

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0]["title"] = TITLES[task_id]
        return json.dumps(data)

    path = write_runs(base / "runs.jsonl", runs)
    llm = FakeLLM(answer=answer)
    out = base / "corpus"
    build_corpus(
        BuildOptions(inputs=[path], output=out, model=llm.model, cache_dir=base / "c", mine=False),
        llm=llm,
    )
    return out


def titles(message: Any) -> list[str]:
    return [line for line in message.text.splitlines() if line.startswith("- **insight-")]


def test_a_project_with_runs_gets_its_own_lessons_alone_and_another_domain_s_never(
    corpus: Path,
) -> None:
    memory = Memory.load(corpus)
    message = memory.first_message("Fix the flaky test", project="github.com/acme/web")
    assert (message.task_type, message.task_type_inferred) == ("coding", True)
    assert message.project_has_runs
    listed = titles(message)
    assert len(listed) == 1 and TITLES["w1"] in listed[0]  # its own project's alone
    assert "## Insights for coding in github.com/acme/web" in message.text
    assert "other projects" not in message.text
    assert "(the type of this project's past runs)" in message.text
    assert message.similar == ["step-0003"]  # the project's own run alone
    # A project with no runs here: its domain told by the similar runs, as with no project;
    # the coding domain's lessons that bear on the task, the others counted, never airline's.
    new = memory.first_message("Fix the flaky test", project="github.com/acme/new")
    assert not new.project_has_runs and new.task_type == "coding"
    assert "(the domain of the most similar past runs" in new.text
    assert len(titles(new)) + new.unlisted == 3 and titles(new)
    assert not any(TITLES["a1"] in line for line in titles(new))
    assert f"{new.unlisted} more lessons of other projects bear less on this task" in new.text
    # A project named with no runs is no evidence of coding work: a task of no domain here
    # gets nothing, as it does with no project named (from a folder with no runs).
    training = "Plan a strength training session for a beginner"
    named = memory.first_message(training, project="github.com/acme/new")
    assert named.insights == named.similar == [] and named.type_unsure is not None
    assert "lessons and runs of other projects follow" not in named.text
    unnamed = memory.first_message(training)
    assert (unnamed.insights, unnamed.similar, unnamed.unlisted) == ([], [], 0)
    # Without a project, a coding task's type is inferred from its most similar runs.
    plain = memory.first_message("Fix the failing unit test in the parser module")
    assert plain.task_type == "coding" and len(titles(plain)) + plain.unlisted == 3


def test_a_projects_lessons_about_the_task_are_shown_whole_the_others_counted(
    corpus: Path,
) -> None:
    memory = Memory.load(corpus)
    message = memory.first_message("Regenerate the fixtures", project="github.com/acme/parser")
    whole = [line for line in message.text.splitlines() if line.startswith("  - Guideline:")]
    listed = titles(message)
    # The lesson about fixtures alone, whole; the other is counted, not listed by title.
    assert len(listed) == 1 and len(whole) == 1 and TITLES["p2"] in listed[0]
    assert TITLES["p1"] not in message.text and message.insights == [message.insights[0]]
    assert (message.unlisted, message.none_bear) == (1, False)
    assert "1 more lesson of this project bears less on this task and is not listed" in (
        message.text
    )
    assert "grep -i WORD /work/corpus/insight/_index.md" in message.text
    # A task that shares no word with them but the project's name: none listed, and said.
    none = memory.first_message("Work on parser", project="github.com/acme/parser")
    assert (
        titles(none) == []
        and none.insights == []
        and (none.unlisted, none.none_bear)
        == (
            2,
            True,
        )
    )
    assert "No lesson of this project bears on this task" in none.text
    assert "its 2 lessons are in `/work/corpus/insight/_index.md`" in none.text
    assert "No insights apply here" not in none.text


def test_an_unsure_inference_says_so(corpus: Path) -> None:
    memory = Memory.load(corpus)
    # "web server" matches one coding task, "flight to Seattle" the airline one: no majority.
    task = "Open the web server page of the flight to Seattle"
    message = memory.first_message(task)
    assert message.task_type is None and message.type_unsure == {"airline": 1, "coding": 1}
    assert "do not agree on this task's (1 airline, 1 coding)" in message.text
    assert "lists no lessons and no past runs, rather than another domain's" in message.text
    assert titles(message) == [] and message.similar == []  # abstains: no domain's lessons
    code, out, err = run(
        ["prompt", str(corpus), "Open the web server page of the flight to Seattle"]
    )
    assert code == 0 and out == message.text
    assert "could not be told (the most similar past runs: 1 airline, 1 coding)" in err
    # A task with no word in common with any run, or only a stray one: no vote at all, said too.
    for stray in ("zzz qqq", "Open the web page of the flight"):
        nothing = memory.first_message(stray)
        assert nothing.task_type is None and nothing.type_unsure == {}
        assert "no past run is near enough to this task to tell its domain" in nothing.text
    # Given a type, nothing is inferred and nothing is unsure.
    given = memory.first_message("zzz qqq", task_type="airline")
    assert given.type_unsure is None and len(titles(given)) == 1


def test_sessions_are_coding_runs_keyed_by_their_project() -> None:
    codex = {
        "session_meta": {
            "cwd": "/Users/me/app",
            "git": {"repository_url": "git@github.com:me/app.git"},
        }
    }
    assert project_of(codex) == "github.com/me/app"
    assert project_of({"cwd": "e:\\Workspace\\src\\claude-code-log"}) == "claude-code-log"
    assert project_of({"session": {"projectHash": "0123456789abcdef0123"}}) == "gemini:0123456789ab"
    assert project_of({"counts": {"tool_calls": 3}}) is None
    for spelled in (
        "https://github.com/me/app",
        "https://github.com/me/app.git",
        "git@github.com:me/app.git",
        "ssh://git@github.com/me/app",
    ):
        assert normal_project(spelled) == "github.com/me/app", spelled
    assert normal_project("/home/me/app/") == "app"


def test_project_named_reads_a_folder_s_git_remote(tmp_path: Path) -> None:
    repo = tmp_path / "checkout"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    (repo / ".git/config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/parser.git\n'
    )
    assert project_at(repo / "src") == "github.com/acme/parser"
    assert project_named(str(repo)) == "github.com/acme/parser"
    plain = tmp_path.parent.parent.parent / "not-in-tmp"  # pytest's are all under /tmp
    assert project_named(str(tmp_path)) is None  # no repository, in /tmp: no project
    assert project_named(str(plain)) == "not-in-tmp"  # a name (no such folder here)
    assert project_named("github.com/acme/parser") == "github.com/acme/parser"


def test_a_catalog_written_before_runs_had_a_project_still_loads(
    corpus: Path, tmp_path: Path
) -> None:
    import shutil

    from wikitrace.corpus_schema.catalog import read_catalog
    from wikitrace.corpus_schema.layout import CATALOG

    old = tmp_path / "old"
    shutil.copytree(corpus.resolve(), old)
    lines = unpaged_catalog(old)
    head = orjson.loads(lines[0])
    cut = head["run"].index("project")
    assert head["run"][cut:] == ["project", "kind", "origin", "repo"]
    head["run"] = head["run"][:cut]  # no project, kind of work, source or repository state
    rewritten = [orjson.dumps(head)]
    for line in lines[1:]:
        kind, *values = orjson.loads(line)
        rewritten.append(orjson.dumps([kind, *(values[:cut] if kind == "run" else values)]))
    (old / CATALOG).write_bytes(b"\n".join(rewritten) + b"\n")
    runs, _, _, _, _ = read_catalog(old)
    assert len(runs) == 4 and all(run.project is None and run.kind is None for run in runs)
    assert all(run.task_key.origin is None for run in runs)  # a task is its id alone


def test_plain_words_find_a_tool_s_snake_case_name(tmp_path: Path) -> None:
    """`search "transfer to human"` finds the lesson about transfer_to_human_agents, and a
    camelCase name its words; the name itself still finds it."""
    from wikitrace.search.mapped import with_parts

    guidelines = {
        "h1": "Call transfer_to_human_agents only after the user asks twice.",
        "h2": "Use getUserDetails before changing a booking.",
        "h3": "Confirm the fare class before booking.",
    }

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0].update(title=f"Lesson {task_id}", guideline=guidelines[task_id])
        return json.dumps(data)

    path = write_runs(
        tmp_path / "runs.jsonl", [make_run(t, task_type="airline") for t in guidelines]
    )
    llm = FakeLLM(answer=answer)
    build_corpus(
        BuildOptions(
            inputs=[path], output=tmp_path / "c", model=llm.model, use_cache=False, mine=False
        ),
        llm=llm,
    )
    memory = Memory.load(tmp_path / "c")

    def found(query: str) -> list[str]:
        return [hit.title for hit in memory.search(query, ["insights"])]

    assert found("transfer to human") == ["Lesson h1"]
    assert found("transfer_to_human_agents") == ["Lesson h1"]
    assert found("user details")[0] == "Lesson h2"  # h1 says "user" too
    assert with_parts("plain words") == "plain words"


def test_lessons_that_score_low_and_close_are_not_shown_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When more than APART lessons reach half the best, each must score WHOLE_FLOOR too:
    five lessons at 0.026 to 0.041 (the realistic benchmark's "tail worker" task) are all
    counted; two that stand apart from the rest, however low, are still shown."""
    from types import SimpleNamespace

    from wikitrace.tools import bearing

    scores: dict[int, float] = {}
    """Each lesson's score weighed within the project's lessons."""

    def fake_scored(
        ranker: object, query: str, allowed: list[int], *, within: bool = False, **_: object
    ) -> list[tuple[int, float]]:
        found = scores if within else {i: 0.06 for i in allowed}  # any bears, overall
        return sorted(((i, s) for i, s in found.items() if s > 0), key=lambda item: -item[1])

    monkeypatch.setattr(bearing, "scored", fake_scored)
    monkeypatch.setattr(bearing, "common_words", lambda *_, **__: frozenset())
    narrow = SimpleNamespace(applicability="Tail workers of the transcript sync")
    memory = SimpleNamespace(insight_ranker=None, run_of=lambda index: index, insights=[narrow] * 8)
    scope = SimpleNamespace(
        project_has_runs=True, tier=lambda run: 0, projects=["acme"], task="Restart the tail"
    )
    lessons = list(range(8))

    def brief(values: list[float]) -> tuple[frozenset[int], bool]:
        scores.clear()
        scores.update(enumerate(values))
        return bearing.brief(memory, scope, lessons)  # type: ignore[arg-type]

    close = [0.041, 0.039, 0.037, 0.027, 0.026, 0.014, 0.013, 0.005]
    assert brief(close) == (frozenset(lessons), True)
    apart = [0.031, 0.020, 0.014, 0.013, 0.010, 0.005, 0.003, 0.0]
    assert brief(apart) == (frozenset(lessons) - {0, 1}, False)
    # Above the floor, all five are shown; one under it is counted.
    high = [0.09, 0.08, 0.07, 0.06, bearing.WHOLE_FLOOR - 0.001, 0.01, 0.0, 0.0]
    assert brief(high) == (frozenset(lessons) - {0, 1, 2, 3}, False)


def parser_lessons(
    tmp_path: Path, runs: list[dict[str, Any]], lessons: dict[str, tuple[str, str]]
) -> Memory:
    """The memory built from `runs`, the lesson of each run `lessons` names given its title and
    applicability."""

    def fields(task_id: str) -> dict[str, str]:
        if task_id not in lessons:
            return {}
        title, applicability = lessons[task_id]
        return {"title": title, "applicability": applicability}

    return Memory.load(build_lessons(runs, tmp_path, fields))


def test_a_lesson_for_any_change_in_the_project_is_listed_whatever_the_task_s_words(
    tmp_path: Path,
) -> None:
    """A lesson whose applicability opens "Any commit in ..." bears on every task of its
    project: listed when no other lesson bears (the realistic benchmark's xterm scrollback
    task listed none, though "mix format before commit" would help its fix), and when
    others do; the lessons that bear neither way are counted."""
    lessons = {
        "p1": ("Run the parser tests with -x", "Parser test failures; not for fixtures."),
        "p2": ("Regenerate the parser fixtures", "Fixture changes in the parser."),
        "p3": ("Run the formatter before git commit", "Any commit in the parser repository."),
    }
    runs = [
        make_run(task_id, task=f"Parser work {task_id}", task_type="coding", project="acme/parser")
        for task_id in lessons
    ]
    runs[0]["task"] = "Parser work p1: the terminal's output"
    runs.append(make_run("a1", task="Book a flight from New York to Seattle", task_type="airline"))

    memory = parser_lessons(tmp_path, runs, lessons)
    # No lesson shares a word with the task: the one for any commit alone, and said.
    message = memory.first_message("Fix the scrollback of the terminal", project="acme/parser")
    listed = titles(message)
    assert len(listed) == 1 and lessons["p3"][0] in listed[0]
    assert (message.unlisted, message.none_bear) == (2, True)
    assert "No other lesson of this project bears on this task" in message.text
    assert "its 2 other lessons are in `/work/corpus/insight/_index.md`" in message.text
    # One lesson bears by its words: it and the one for any commit.
    fixtures = memory.first_message("Regenerate the fixtures", project="acme/parser")
    shown = {title for title, _ in lessons.values() if any(title in x for x in titles(fixtures))}
    assert shown == {lessons["p2"][0], lessons["p3"][0]}
    assert (fixtures.unlisted, fixtures.none_bear) == (1, False)
    # A task that shares no word but common ones and numbers with the project's runs or
    # lessons is no work in it: not even the lesson for any commit, and no similar run.
    toast = memory.first_message(
        "Write a two-minute toast for my sister's wedding", project="acme/parser"
    )
    assert titles(toast) == [] and toast.similar == []
    assert (toast.unlisted, toast.none_bear) == (3, True)
    assert "No lesson of this project bears on this task" in toast.text


def test_a_run_that_touched_the_task_s_files_is_the_most_similar(tmp_path: Path) -> None:
    """A bead session's task text and compilation name none of the task's subject, but it
    wrote the migration the task is about: the files a run touched count towards its
    likeness, so it comes before a run whose task merely shares "add"."""
    project = {"task_type": "coding", "project": "acme/app"}
    runs = [
        make_run("s1", task="Add a status badge to the server page", **project),
        make_run("s2", task="Create beads for the review page", **project),
        make_run(
            "s3",
            task="Work on bead app-a0y",
            repo={
                "files": ["lib/app/message.ex", "priv/repo/migrations/1_add_message_identity.exs"]
            },
            **project,
        ),
    ]
    out = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[write_runs(tmp_path / "runs.jsonl", runs)], output=out))
    memory = Memory.load(out)
    steps = {run.task_id: run.step for run in memory.runs}
    task = "Add an upsert identity on messages and generate the migration"
    message = memory.first_message(task, project="acme/app")
    assert message.similar[0] == steps["s3"]
    assert message.similar[1] == steps["s1"]  # shares "add"


def test_common_words_never_decide_which_of_a_project_s_lessons_bear(tmp_path: Path) -> None:
    """A lesson that meets the task only in common English words ("which", "after", "when":
    the realistic benchmark's "Confirm the tool list ..." for a status badge) does not bear
    on it; the one that holds its subject does."""
    lessons = {
        "p1": ("Regenerate the parser fixtures", "Fixture changes in the parser."),
        "p2": ("Confirm which tools to use", "After a plan, when choosing which tools to use."),
        "p3": ("Read the server log first", "A server that stops."),
    }
    runs = [
        make_run(task_id, task=f"Parser work {task_id}", task_type="coding", project="acme/parser")
        for task_id in lessons
    ]
    runs.append(make_run("a1", task="Book a flight from New York to Seattle", task_type="airline"))

    memory = parser_lessons(tmp_path, runs, lessons)
    task = "Regenerate the fixtures after the schema changes, which breaks them when it moves"
    message = memory.first_message(task, project="acme/parser")
    assert [line.split("**")[1].split(": ", 1)[1] for line in titles(message)] == [lessons["p1"][0]]
    assert (message.unlisted, message.none_bear) == (2, False)
