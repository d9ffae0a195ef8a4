"""Project identity is the repository, and the first message's scope abstains: real Claude
Code sessions of one repository (its main checkout and two git worktrees) are one project;
a coding task in it gets its lessons whether the user names it by name, remote, path or not at
all (run from inside a checkout or a worktree of it); a household or coding task in a corpus
that mixes SWE-bench, ALFWorld and sessions never gets another domain's lessons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema.projects import (
    claude_folder_project,
    folder_aliases,
    gemini_key,
    matching_projects,
    project_named,
    project_of_folder,
    repository_at,
)
from wikitrace.corpus_schema.work import domain_of
from wikitrace.tools.memory import Memory

from helpers import DATA, FakeLLM, good_answer, run, turns_in_prompt

SPOTTER = DATA / "sessions/claude-code/spotter-worktrees"
REMOTE = "git@github.com:marot/spotter.git"
CODING_TASK = "mix phx.server fails to start: fix the Phoenix server start-up"
HOUSEHOLD_TASK = "Your task is to: cool some mug and put it in countertop."


# --- identity ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "project"),
    [
        ("/home/marco/projects/spotter", "spotter"),
        ("/home/USER/projects/spotter-worktrees/spotter-4te", "spotter"),  # the real case
        ("/home/USER/projects/spotter-worktrees/spotter-a0y/lib", "spotter"),
        ("/home/me/app.worktrees/feature", "app"),
        ("/home/me/app/.worktrees/feature", "app"),
        ("/home/me/app/worktrees/feature", "app"),
        ("/home/me/app/.claude/worktrees/fix-login", "app"),
        ("/home/me/.codex/worktrees/1a2b/app", "app"),
        ("/Users/me/conductor/workspaces/app/berlin", "app"),
        ("C:\\src\\app", "app"),
        ("/tmp/tmpqwh7888i", None),  # the real case: a temporary folder is no project
        ("/tmp", None),
        ("/private/var/folders/x1/abc/T/tmpab12cd34", None),
        ("C:\\Users\\me\\AppData\\Local\\Temp\\work", None),
        ("/home/me/tmpab12cd34", None),
    ],
)
def test_a_log_s_folder_is_its_repository(folder: str, project: str | None) -> None:
    assert project_of_folder(folder) == project


def test_a_claude_code_folder_name_is_decoded_to_its_path(tmp_path: Path) -> None:
    assert claude_folder_project("-home-marco-projects-spotter-worktrees-spotter-4te") == "spotter"
    assert claude_folder_project("-home-marco-projects-spotter") == "spotter"
    assert claude_folder_project("not-one") is None
    # A folder that exists here is found, dashes in its names and all, and read as a repository.
    repo = tmp_path / "my-app"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git/config").write_text(f'[remote "origin"]\n\turl = {REMOTE}\n')
    name = "".join(c if c.isalnum() else "-" for c in str(repo))
    assert claude_folder_project(name) == "github.com/marot/spotter"


def _checkout(tmp_path: Path, remote: str | None = REMOTE) -> tuple[Path, Path]:
    """A repository with a remote (or none) and a git worktree of it, as git lays them out."""
    main = tmp_path / "spotter"
    (main / ".git/worktrees/spotter-b12").mkdir(parents=True)
    (main / "lib").mkdir()
    config = "[core]\n\tbare = false\n"
    if remote is not None:  # origin wins over a remote listed before it
        config += '[remote "upstream"]\n\turl = https://example.org/x/y\n'
        config += f'[remote "origin"]\n\turl = {remote}\n'
    (main / ".git/config").write_text(config)
    tree = tmp_path / "spotter-worktrees/spotter-b12"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {main}/.git/worktrees/spotter-b12\n")
    (main / ".git/worktrees/spotter-b12/commondir").write_text("../..\n")
    return main, tree


def test_a_worktree_belongs_to_its_main_repository(tmp_path: Path) -> None:
    main, tree = _checkout(tmp_path)
    assert repository_at(main / "lib") == "github.com/marot/spotter"
    assert repository_at(tree) == "github.com/marot/spotter"
    assert project_named(str(tree)) == project_named(str(main)) == "github.com/marot/spotter"
    assert repository_at(tmp_path) is None  # no repository above it
    # A worktree removed since (as an old log names it): its main checkout's remote.
    assert project_of_folder(str(tmp_path / "spotter-worktrees/gone")) == "github.com/marot/spotter"
    assert project_of_folder(str(main / ".claude/worktrees/gone")) == "github.com/marot/spotter"
    bare = tmp_path / "bare"
    main, tree = _checkout(bare, remote=None)
    assert repository_at(tree) == repository_at(main) == "spotter"  # the main folder's name


def test_a_name_a_remote_and_an_alias_find_the_same_project() -> None:
    known = {"spotter", "github.com/marot/spotter", "github.com/other/spotter", "web", "tmp1"}
    assert matching_projects("spotter", known) == {
        "spotter",
        "github.com/marot/spotter",
        "github.com/other/spotter",
    }
    assert matching_projects("github.com/marot/spotter", known) == {
        "spotter",
        "github.com/marot/spotter",
    }
    assert matching_projects("nothing", known) == set()
    assert matching_projects("https://github.com/marot/spotter.git", known) == {
        "spotter",
        "github.com/marot/spotter",
    }
    aliases = {"tmp1": "web", "https://github.com/marot/spotter.git": "spotter-app"}
    assert matching_projects("web", known, aliases) == {"web", "tmp1"}
    assert "github.com/marot/spotter" in matching_projects("spotter-app", known, aliases)


def test_aliases_come_from_the_user_s_settings_file_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.cli.settings import user_projects

    user = tmp_path / "user.toml"
    monkeypatch.setenv("WIKITRACE_USER_SETTINGS", str(user))
    assert user_projects() == {}
    user.write_text('[projects]\n"spotter-a0y" = "spotter"\n')
    assert user_projects() == {"spotter-a0y": "spotter"}
    user.write_text('[projects]\n"spotter-a0y" = 3\n')
    with pytest.raises(Exception, match=r"\[projects\] spotter-a0y: give the project it is"):
        user_projects()
    user.write_text('[projects]\n"spotter-a0y" = "spotter"\n')
    # A settings file in the working folder may not say which project is which: ignored while
    # the folder is not trusted, and its [projects] refused once it is.
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "wikitrace.toml").write_text('[projects]\n"web" = "spotter"\n')
    monkeypatch.chdir(folder)
    code, _, err = run(["prompt", str(folder), "x"])
    assert "ignored wikitrace.toml (this folder is not trusted" in err
    assert "[projects] is read only" not in err
    code, _, err = run(["trust"])
    assert code == 0, err
    code, _, err = run(["prompt", str(folder), "x"])
    assert code == 2 and "[projects] is read only from the user's settings file" in err


# --- the first message ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real logs: four spotter sessions (main checkout, two worktrees), a Codex session of
    another project, two SWE-bench (Django) runs and two ALFWorld episodes; one lesson each,
    titled by its run's task id."""
    base = tmp_path_factory.mktemp("projects")
    labels = base / "labels.json"
    labels.write_text(
        json.dumps(
            {
                "short.jsonl": True,
                "tool_heavy.jsonl": False,
                "ae4a77f8-aedd-4bc1-888f-c94edc91af04": True,
                "fa812bfe-b295-4cca-9c2f-fdf01028cb46": False,
                "codex_session.jsonl": True,
                "django__django-10999": True,
                "django__django-16255": False,
            }
        )
    )

    def answer(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        data = json.loads(good_answer(prompt))
        evidence = data["claims"][0]["evidence"][0]
        if not evidence["quote"].strip():  # a last line that is blank: another line of it
            lines = turns_in_prompt(prompt)[evidence["turn"]].splitlines()
            evidence["quote"] = next(line for line in lines if line.strip()).split(": ", 1)[-1][:40]
        task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
        data["insights"][0]["title"] = f"Lesson of {task_id}"
        return json.dumps(data)

    llm = FakeLLM(answer=answer)
    out = base / "corpus"
    inputs = [
        SPOTTER,
        DATA / "sessions/codex/codex_session.jsonl",
        DATA / "importers/mini-swe-agent/trajs",
        DATA / "importers/alfworld-2episodes.out",
    ]
    options = BuildOptions(
        inputs=inputs, output=out, model=llm.model, cache_dir=base / "c", labels=[labels]
    )
    build_corpus(options, llm=llm)
    return out


def _sources(memory: Memory, ids: list[str]) -> list[tuple[str | None, str | None]]:
    """The project and domain of each listed insight's source run."""
    by_id = {item.id: i for i, item in enumerate(memory.insights)}
    found = []
    for insight in ids:
        source = memory.run_of(by_id[insight])
        assert source is not None
        found.append((source.project, domain_of(source.task_type)))
    return found


def test_one_repository_with_worktrees_is_one_project(corpus: Path) -> None:
    memory = Memory.load(corpus)
    projects = {run.project for run in memory.runs if run.task_type == "coding"}
    assert projects == {"spotter", "agent-sample"}
    assert sum(run.project == "spotter" for run in memory.runs) == 4
    domains = {domain_of(run.task_type) for run in memory.runs}
    assert domains == {"coding", "swe-bench", "household"}
    lessons = {domain_of(item.task_type) for item in memory.insights}
    assert lessons == domains  # each domain has lessons another domain's task could be shown


def test_a_project_is_found_however_the_user_names_it(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory.load(corpus)
    by_name = memory.first_message(CODING_TASK, project=project_named("spotter"))
    # Its 4 lessons, listed or (none of them about the task's subject) counted, no other.
    assert by_name.project_has_runs and len(by_name.insights) + by_name.unlisted == 4
    assert set(_sources(memory, by_name.insights)) <= {("spotter", "coding")}
    assert "lessons are in `/work/corpus/insight/_index.md`" in by_name.text
    assert all(
        step in {r.step for r in memory.runs if r.project == "spotter"}
        for step in (by_name.similar)
    )
    by_remote = memory.first_message(CODING_TASK, project=project_named(REMOTE))
    main, tree = _checkout(tmp_path)
    by_path = memory.first_message(CODING_TASK, project=project_named(str(tree)))
    assert by_remote.insights == by_path.insights == by_name.insights
    assert by_remote.unlisted == by_path.unlisted == by_name.unlisted
    # Nothing named: `prompt` run inside the checkout, or inside a worktree of it.
    for folder in (main / "lib", tree):
        monkeypatch.chdir(folder)
        code, out, err = run(["prompt", str(corpus.resolve()), CODING_TASK, "--json"])
        assert code == 0, err
        shown = json.loads(out)
        assert shown["insights"] == by_name.insights
        assert shown["unlisted"] == by_name.unlisted
        assert shown["project"] == "github.com/marot/spotter" and shown["project_has_runs"]
        assert "This task is in the project **github.com/marot/spotter**" in shown["text"]


def test_no_task_is_shown_another_domain_s_lessons(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory.load(corpus)
    monkeypatch.chdir(tmp_path)  # in no repository: nothing is found from the folder
    for task, domain, project in (
        (HOUSEHOLD_TASK, "household", None),
        (CODING_TASK, "coding", "spotter"),
        (CODING_TASK, "coding", "github.com/someone/new-app"),  # a project with no runs
        ("Work on bead spotter-b12. Run bd show spotter-b12", "coding", None),
    ):
        message = memory.first_message(task, project=project)
        shown = _sources(memory, message.insights)
        # Shown, or (a project's lessons none of which bears on the task) counted.
        assert shown or message.unlisted, (task, project)
        assert {d for _, d in shown} <= {domain}, (task, project, shown)
        similar = {r.step: domain_of(r.task_type) for r in memory.runs}
        assert {similar[step] for step in message.similar} <= {domain}
        assert "this project's past runs" not in message.text or project is not None
    # A task no past run's words decide: said, and no lesson of any domain.
    unsure = memory.first_message("Summarise the quarterly figures for the board")
    assert unsure.type_unsure is not None and unsure.insights == [] and unsure.similar == []
    assert "lists no lessons and no past runs, rather than another domain's" in unsure.text


def test_similar_runs_put_the_identical_task_first(corpus: Path) -> None:
    memory = Memory.load(corpus)
    spotter = [r for r in memory.runs if r.project == "spotter"]
    task = next(r.task for r in spotter if r.task.startswith("start phoenix"))
    message = memory.first_message(task, project="spotter")
    first = next(r for r in memory.runs if r.step == message.similar[0])
    assert first.task == task
    # Among the project's runs by similarity, not in corpus order.
    bead = memory.first_message("Work on bead spotter-4te: bd show spotter-4te", project="spotter")
    first = next(r for r in memory.runs if r.step == bead.similar[0])
    assert "spotter-4te" in first.task


def test_the_mcp_server_s_first_message_is_for_the_client_s_folder(
    corpus: Path, tmp_path: Path
) -> None:
    """A stdio server starts in its client's working folder: a call that names no project
    gets that repository's (here a worktree of it); one that names it gets the same."""
    import anyio
    from mcp import Client

    from wikitrace.tools.mcp_server import Corpus, build_server

    _, tree = _checkout(tmp_path)

    async def ask(folder: Path | None, arguments: dict[str, str]) -> str:
        async with Client(build_server(Corpus(corpus, folder))) as client:
            result = await client.call_tool("first_message", {"task": CODING_TASK, **arguments})
            return "".join(block.text for block in result.content)

    from_folder = anyio.run(ask, tree, {})
    named = anyio.run(ask, None, {"project": "spotter"})
    assert "This task is in the project **github.com/marot/spotter**" in from_folder
    assert from_folder.replace("github.com/marot/spotter", "spotter") == named
    assert "This task is in the project" not in anyio.run(ask, tmp_path, {})


def test_a_hostile_folder_neither_blocks_nor_misleads(tmp_path: Path) -> None:
    """A log names any folder: a FIFO where git's config would be, a `.git` file pointing
    nowhere, a loop of links; each is read as no remote, and nothing blocks."""
    import os

    fifo = tmp_path / "fifo-repo"
    (fifo / ".git").mkdir(parents=True)
    os.mkfifo(fifo / ".git/config")
    assert repository_at(fifo) == "fifo-repo"
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / ".git").write_text("gitdir: /nowhere/.git/worktrees/x\n")
    assert repository_at(dangling) == "nowhere"  # the main folder it names, gone or not
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert project_of_folder(str(loop / "deeper")) is None  # under /tmp, and no repository


def test_gemini_cli_runs_are_found_by_the_folder_they_ran_in(tmp_path: Path) -> None:
    """Gemini CLI keys a project by the sha256 of its folder: working in the repository (or
    a folder in it), its runs are the repository's."""
    main, _ = _checkout(tmp_path)
    aliases = folder_aliases(main / "lib", "github.com/marot/spotter")
    assert set(aliases) == {gemini_key(main / "lib"), gemini_key(main)}  # up to the root
    known = {gemini_key(main), gemini_key(tmp_path), "web"}
    assert matching_projects("github.com/marot/spotter", known, aliases) == {gemini_key(main)}
    # sha256("/home/me/app"), as Gemini CLI's getProjectHash makes it
    assert gemini_key(Path("/home/me/app")) == "gemini:fd865ce82eb8"
