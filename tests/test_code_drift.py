"""Lessons checked against today's code: a run's repository state is kept from its log, and
the first message marks a lesson stale (or leaves it out) when a file it names was deleted or
renamed since its run, with the reason; an unchanged checkout adds no mark, and a missing git
leaves the message whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers.repository import repo_state
from wikitrace.corpus_schema.code_names import named_files, named_symbols, safe_path
from wikitrace.corpus_schema.records import RepoState
from wikitrace.tools.memory import Memory

from helpers import FakeLLM, good_answer, make_run, write_runs

PROJECT = "github.com/acme/app"
NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
TITLES = {
    "a": "Run src/a.py's `parse_args` with --strict",
    "b": "Keep src/b.py's defaults in sync",
    "w": "Restart the web server after config edits",
}
_DATES = iter(f"2026-03-0{day}T10:00:00+00:00" for day in range(2, 10))


def git(repo: Path, *arguments: str, date: str = "2026-03-01T10:00:00+00:00") -> str:
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *arguments],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    return done.stdout.strip()


def first_commit(repo: Path) -> str:
    """A repository whose first commit (the run's) holds src/a.py and src/b.py, made the same
    way every time, so that its id is the same in every test."""
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("def parse_args():\n    return 1\n")
    (repo / "src" / "b.py").write_text("DEFAULTS = {}\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", f"https://{PROJECT}.git")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A corpus of two runs of the project (the first with its commit in its log, the second
    with its start time alone) and one of another project, each with one lesson."""
    base = tmp_path_factory.mktemp("drift")
    commit = first_commit(base / "repo")
    touched = ["src/a.py", "src/b.py"]
    runs = [
        make_run("a", task="Fix the parser's flags", task_type="coding", project=PROJECT),
        make_run("b", task="Update the defaults", task_type="coding", project=PROJECT),
        make_run("w", task="Fix the web server", task_type="coding", project="acme/web"),
    ]
    runs[0]["repo"] = {"commit": commit, "branch": "main", "files": touched}
    runs[0]["repo"]["started"] = "2026-03-01T10:05:00Z"
    runs[1]["repo"] = {"started": "2026-03-01T11:00:00+00:00", "files": touched}

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
    return out, commit


@pytest.fixture
def repo(tmp_path: Path, built: tuple[Path, str]) -> Path:
    """The project's checkout, at the run's commit (the very id the runs recorded)."""
    assert first_commit(tmp_path / "repo") == built[1]
    return tmp_path / "repo"


def message(corpus: Path, checkout: Path | None) -> Any:
    memory = Memory.load(corpus)
    return memory.first_message(
        "Fix the parse_args flags and the defaults", project=PROJECT, checkout=checkout, now=NOW
    )


def lines_of(text: str, ident: str) -> list[str]:
    """The lines of the message's entry for `ident`."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(f"- **{ident}:"))
    end = next((n for n in range(start + 1, len(lines)) if not lines[n].startswith("  ")), None)
    return lines[start:end]


def ident_of(corpus: Path, title_start: str) -> str:
    memory = Memory.load(corpus)
    return next(item.id for item in memory.insights if item.title.startswith(title_start))


def test_the_repository_state_is_kept_from_the_log_to_the_catalog(
    built: tuple[Path, str],
) -> None:
    corpus, commit = built
    runs = {run.task_id: run for run in Memory.load(corpus).runs}
    assert runs["a"].repo == {
        "commit": commit,
        "branch": "main",
        "started": "2026-03-01T10:05:00Z",
        "files": ["src/a.py", "src/b.py"],
    }
    assert runs["w"].repo is None
    page = (corpus / "raw" / f"{runs['a'].step}" / "metadata.md").read_text()
    assert f'repo: {{"commit":"{commit}","branch":"main",' in page


def test_an_unchanged_checkout_adds_no_mark_but_each_lesson_s_age(
    built: tuple[Path, str], repo: Path
) -> None:
    shown = message(built[0], repo)
    assert shown.stale == [] and shown.code == {} and shown.left_out_gone == {}
    assert shown.code_unchecked is None
    a = ident_of(built[0], "Run src/a.py")
    assert lines_of(shown.text, a)[0].endswith("(from step-0001, a FAILED run, 1 week ago)")
    assert "STALE" not in shown.text and "  - Code: " not in shown.text


def test_a_deleted_file_leaves_out_the_lesson_that_names_it_alone_with_why(
    built: tuple[Path, str], repo: Path
) -> None:
    git(repo, "rm", "-q", "src/a.py")
    git(repo, "commit", "-q", "-m", "drop a", date=next(_DATES))
    git(repo, "commit", "-q", "--allow-empty", "-m", "later", date=next(_DATES))
    shown = message(built[0], repo)
    a, b = ident_of(built[0], "Run src/a.py"), ident_of(built[0], "Keep src/b.py")
    assert shown.left_out_gone == {a: "src/a.py deleted since the run, 2 commits ago"}
    assert a not in shown.insights and b in shown.insights
    assert (
        f"1 lesson of this project is left out: every file it names is gone from the code you "
        f"work in ({a}: src/a.py deleted since the run, 2 commits ago)." in shown.text
    )
    # b's run named no commit: its commit is the last before it started.
    assert shown.code == {b: "2 commits since the run; src/b.py unchanged"}
    assert "  - Code: 2 commits since the run; src/b.py unchanged" in lines_of(shown.text, b)


def test_a_renamed_file_marks_the_lesson_stale_with_its_new_name(
    built: tuple[Path, str], repo: Path
) -> None:
    git(repo, "mv", "src/a.py", "src/args.py")
    git(repo, "commit", "-q", "-m", "rename", date=next(_DATES))
    shown = message(built[0], repo)
    a = ident_of(built[0], "Run src/a.py")
    assert shown.stale == [a]
    assert shown.code[a] == "src/a.py renamed to src/args.py since the run, 1 commit ago"
    assert (
        "  - STALE: src/a.py renamed to src/args.py since the run, 1 commit ago (check the "
        "code before you rely on it)" in lines_of(shown.text, a)
    )


def test_a_symbol_gone_from_a_changed_file_marks_the_lesson_stale(
    built: tuple[Path, str], repo: Path
) -> None:
    (repo / "src" / "a.py").write_text("def parse_flags():\n    return 2\n")  # not committed
    shown = message(built[0], repo)
    a = ident_of(built[0], "Run src/a.py")
    assert shown.code[a] == "`parse_args` no longer in src/a.py since the run, not committed"
    assert shown.stale == [a]


def test_no_git_or_no_checkout_still_gives_the_message(
    built: tuple[Path, str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = message(built[0], None)
    monkeypatch.setenv("PATH", str(repo))  # no git on it
    shown = message(built[0], repo)
    assert shown.text == plain.text and shown.insights == plain.insights
    assert shown.code_unchecked is not None and "git could not run" in shown.code_unchecked
    not_a_repo = repo.parent / "elsewhere"
    not_a_repo.mkdir()
    monkeypatch.undo()
    assert message(built[0], not_a_repo).text == plain.text


def test_a_slow_git_leaves_the_lessons_unchecked_within_the_budget(
    built: tuple[Path, str], repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "git").write_text("#!/bin/sh\nsleep 5\n")
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")
    started = datetime.now(UTC)
    shown = message(built[0], repo)
    assert (datetime.now(UTC) - started).total_seconds() < 3  # generous: the budget is 0.25 s
    assert shown.code_unchecked == "git took more than 0.25 s"


def test_names_from_logs_are_never_paths_outside_the_repository() -> None:
    assert [safe_path(name) for name in ["src/a.py", "./b.py", "../x.py", "/etc/passwd"]] == [
        "src/a.py",
        "b.py",
        None,
        None,
    ]
    assert [safe_path(name) for name in ["--output=x", "a/-x.py", ".git/config", "a b"]] == [
        None
    ] * 4
    turns = [
        {"tool_calls": [{"name": "Read", "arguments": {"file_path": "/w/app/src/a.py"}}]},
        {"tool_calls": [{"name": "Edit", "arguments": {"file_path": "/etc/hosts"}}]},
        {"tool_calls": [{"name": "Write", "arguments": {"file_path": "../up.py"}}]},
        {
            "tool_calls": [
                {"name": "shell", "arguments": {"command": "*** Update File: src/b.py\n"}}
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "Bash",
                    "arguments": {"command": "sed -n 1,20p src/c.py && cat /etc/passwd ../d.py"},
                }
            ]
        },
    ]
    state = repo_state({"cwd": "/w/app", "gitBranch": "fix"}, turns)
    assert state == {"branch": "fix", "files": ["src/a.py", "src/b.py", "src/c.py"]}
    RepoState.model_validate(state)
    with pytest.raises(ValueError, match="commit"):
        RepoState(commit="--upload-pack=x")


def test_a_codex_rollout_s_git_info_and_a_placeholder_commit() -> None:
    meta = {
        "session_meta": {
            "timestamp": "2025-12-09T19:55:16.295Z",
            "git": {"commit_hash": "1cea5ec49574a868eb98893e46bcb775539f798e", "branch": "codex"},
        }
    }
    assert repo_state(meta, []) == {
        "commit": "1cea5ec49574a868eb98893e46bcb775539f798e",
        "branch": "codex",
        "started": "2025-12-09T19:55:16.295Z",
    }
    zeros = {"session_meta": {"git": {"commit_hash": "0" * 40, "branch": "main"}}}
    assert repo_state(zeros, []) == {"branch": "main"}
    assert repo_state({}, []) is None


def test_what_a_lesson_names() -> None:
    text = "Edit src/a.py (not Memory.load); see https://x.io/y.py, e.g. v1.2 and README.md"
    assert named_files([text]) == ["src/a.py", "README.md"]
    assert named_symbols("Call `Memory.load()` then `parse_args`, not `a.py`") == [
        "Memory.load",
        "parse_args",
    ]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from([*"ab.py/-+@_ :Makefile`1\né", "src/", ".py", "e.g.", "://"]),
        max_size=30,
    ).map("".join)
)
def test_the_quick_look_for_a_file_name_skips_no_text_that_names_one(text: str) -> None:
    # `named_files` skips a text `_MAY_NAME_FILE` does not find in: never one `_FILE` would.
    from wikitrace.corpus_schema import code_names

    assert bool(code_names._MAY_NAME_FILE.search(text)) or not code_names._FILE.search(text)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_is_asked_a_bounded_number_of_times(built: tuple[Path, str], repo: Path) -> None:
    from wikitrace.tools.first_message_drift import MAX_CALLS, check_code

    memory = Memory.load(built[0])
    everything = list(range(len(memory.insights)))
    checked = check_code(memory, everything, everything, repo, now=NOW)
    assert 0 < checked.git_calls <= MAX_CALLS


def test_lessons_past_the_commits_compared_exactly_still_show_what_was_deleted(
    built: tuple[Path, str], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.tools import first_message_drift

    monkeypatch.setattr(first_message_drift, "MAX_BASES", 0)  # every lesson in "the rest"
    git(repo, "rm", "-q", "src/a.py")
    (repo / "src" / "b.py").write_text("DEFAULTS = {'x': 1}\n")
    git(repo, "commit", "-qam", "drop a, change b", date=next(_DATES))
    shown = message(built[0], repo)
    a, b = ident_of(built[0], "Run src/a.py"), ident_of(built[0], "Keep src/b.py")
    assert shown.left_out_gone == {a: "src/a.py deleted since the run, 1 commit ago"}
    # A change is not claimed when counted from an older commit than the run's.
    assert shown.code == {b: "1 commit since the run; src/b.py still in the checkout"}


def test_real_logs_give_their_repository_state() -> None:
    """A Claude Code session (branch, start, the files its tools touched, relative to its
    folder) and a Codex rollout (commit and branch from session_meta.git)."""
    from wikitrace.compiler.importers import plan_inputs

    from helpers import DATA

    sessions = DATA / "sessions"
    claude_log = sessions / "claude-code/spotter-main/tool_heavy.jsonl"
    claude = next(iter(plan_inputs([claude_log], "claude-code").items()))
    state = RepoState.model_validate(claude.data["repo"])
    assert state.branch == "master" and state.commit is None
    assert state.started is not None and state.started.startswith("20")
    assert state.files and all(safe_path(path) == path for path in state.files)
    codex = next(iter(plan_inputs([sessions / "codex/codex_session.jsonl"], "codex").items()))
    assert codex.data["repo"] == {
        "commit": "1cea5ec49574a868eb98893e46bcb775539f798e",
        "branch": "codex",
        "started": "2025-12-09T19:55:16.295Z",
        "files": ["myapp/hoge.py"],
    }


def test_the_catalog_keeps_the_files_a_lesson_s_quotes_name() -> None:
    from wikitrace.corpus_schema.catalog_build import shown_entry
    from wikitrace.corpus_schema.records import Claim, Evidence, InsightHeader

    quotes = ["Traceback: File src/flags.py, line 3", "ok (see README.md and https://x.io/a.py)"]
    header = InsightHeader(
        id="insight-0001",
        title="Mind the flags",
        task_type="coding",
        source_step="step-0001",
        source_outcome="failure",
        applicability="Always.",
        source_claims=[1],
        model="m",
        compilation="compilation/step-0001.md",
        raw="raw/step-0001/metadata.md",
        evidence=[
            Claim(
                statement="It failed.",
                evidence=[Evidence(turn=n, quote=q, verified=True) for n, q in enumerate(quotes)],
            )
        ],
        supersedes=["insight-0000"],
    )
    shown = shown_entry(header, "Mind them.")
    assert shown is not None
    assert shown[0].quoted_files == ["src/flags.py", "README.md"]
    assert shown[0].supersedes == ["insight-0000"]


def test_a_checkout_of_another_repository_checks_nothing(
    built: tuple[Path, str], tmp_path: Path
) -> None:
    other = tmp_path / "other"
    first_commit(other)
    git(other, "remote", "set-url", "origin", "https://github.com/acme/other.git")
    git(other, "rm", "-q", "src/a.py")
    git(other, "commit", "-q", "-m", "drop a", date=next(_DATES))
    shown = message(built[0], other)
    assert shown.code == {} and shown.left_out_gone == {} and shown.code_unchecked is None
    assert shown.text == message(built[0], None).text


def test_prompt_checks_the_lessons_against_the_folder_it_names(
    built: tuple[Path, str], repo: Path
) -> None:
    from helpers import run

    git(repo, "rm", "-q", "src/a.py")
    git(repo, "commit", "-q", "-m", "drop a", date=next(_DATES))
    code, out, _ = run(
        [
            "prompt",
            str(built[0]),
            "Fix the parse_args flags and the defaults",
            "--project",
            str(repo),
        ]
    )
    assert code == 0
    a = ident_of(built[0], "Run src/a.py")
    assert f"({a}: src/a.py deleted since the run, 1 commit ago)." in out
    code, out, _ = run(
        [
            "prompt",
            str(built[0]),
            "Fix the parse_args flags and the defaults",
            "--project",
            PROJECT,
            "--json",
        ]
    )
    shown = json.loads(out)
    assert code == 0 and shown["left_out_gone"] == {} and a in shown["insights"]  # no checkout


def test_the_recall_hook_checks_the_lessons_against_the_agent_s_folder(
    built: tuple[Path, str], repo: Path
) -> None:
    # The hook reads the checkout from the payload's cwd, as `prompt` reads its own folder.
    from wikitrace.tools.hook_recall import RecallPayload, recall

    start = RecallPayload("SessionStart", session_id="s", cwd=str(repo / "src"))
    a, b = ident_of(built[0], "Run src/a.py"), ident_of(built[0], "Keep src/b.py")
    assert {a, b} <= set(recall(built[0], start).insights)
    git(repo, "rm", "-q", "src/a.py")
    git(repo, "commit", "-q", "-m", "drop a", date=next(_DATES))
    said = recall(built[0], start)
    assert a not in said.insights and b in said.insights
    assert f"({a}: src/a.py deleted since the run, 1 commit ago)" in said.text


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_commits_since_are_counted_from_the_history_as_git_counts_them(tmp_path: Path) -> None:
    """`_History.made_since` (no git call) against `git rev-list --count SHA..HEAD`, for every
    commit of a history with branches and merges; and None when the history listed is cut."""
    from wikitrace.tools.first_message_drift import HISTORY, _History

    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    dates = iter(f"2026-03-01T{hour:02d}:00:00+00:00" for hour in range(24))
    git(repo, "commit", "-q", "--allow-empty", "-m", "root", date=next(dates))
    for branch in ("x", "y"):
        git(repo, "checkout", "-q", "-b", branch, "main")
        for n in range(3):
            git(repo, "commit", "-q", "--allow-empty", "-m", f"{branch}{n}", date=next(dates))
        git(repo, "checkout", "-q", "main")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"main-{branch}", date=next(dates))
        git(repo, "merge", "-q", "--no-ff", "-m", f"merge {branch}", branch, date=next(dates))
    git(repo, "commit", "-q", "--allow-empty", "-m", "last", date=next(dates))
    history = _History(git(repo, "log", f"--max-count={HISTORY}", "--format=%H %ct %P", "HEAD"))
    assert len(history.commits) == 12
    for sha, _ in history.commits:
        expected = int(git(repo, "rev-list", "--count", f"{sha}..HEAD"))
        assert history.made_since(sha) == expected, sha
    history._whole = False  # as when HISTORY commits were listed: older ones could count
    assert history.made_since(history.commits[-1][0]) is None


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_many_lessons_left_out_name_five_reasons_and_count_the_rest(tmp_path: Path) -> None:
    """Their reasons would fill a hook's budget: five are named, the rest counted, and the
    lessons left keep their place in the message."""
    from wikitrace.corpus_schema.catalog import InsightEntry, PastRun

    vocabulary = [
        "amber",
        "basil",
        "cedar",
        "delta",
        "ember",
        "fjord",
        "grove",
        "harbor",
        "iris",
        "jasper",
        "kelp",
        "lumen",
        "mica",
        "nectar",
        "opal",
        "pepper",
        "quartz",
        "raven",
        "sage",
        "tulip",
        "umber",
        "violet",
        "willow",
        "xenon",
        "yarrow",
        "zinc",
        "anchor",
        "beacon",
        "canyon",
        "dune",
        "estuary",
        "falcon",
    ]

    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    names = [f"src/m{n}.py" for n in range(8)]
    for name in names:
        (repo / name).write_text("def f():\n    return 1\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", f"https://{PROJECT}.git")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", *names[:7], date="2026-03-02T10:00:00+00:00")
    git(repo, "commit", "-q", "-m", "gone", date="2026-03-02T10:00:00+00:00")
    runs, lessons = [], []
    for n, name in enumerate(names):
        step = f"step-{n + 1:04d}"
        state = {"commit": base, "started": "2026-03-01T11:00:00+00:00", "files": [name]}
        runs.append(
            PastRun(step, str(n), "coding", "failure", f"Fix m{n}", project=PROJECT, repo=state)
        )
        lessons.append(
            InsightEntry(
                f"insight-{n + 1:04d}",
                f"{vocabulary[n]} {name} {vocabulary[n + 8]} {vocabulary[n + 16]}",  # none alike
                "coding",
                f"{vocabulary[n + 24]} {name}.",
                "When it changes.",
                step,
                "failure",
                str(n),
            )
        )
    memory = Memory(Path("."), runs, lessons, offline=False, leaders=list(range(len(names))))
    message = memory.first_message("", project=PROJECT, checkout=repo, now=NOW, max_tokens=1500)
    assert message.insights == ["insight-0008"] and len(message.left_out_gone) == 7
    assert "7 lessons of this project are left out" in message.text
    assert message.text.count("deleted since the run, 1 commit ago") == 5
    assert "deleted since the run, 1 commit ago; and 2 more)." in message.text
