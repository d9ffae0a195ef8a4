"""A settings file in the folder a command runs in is not trusted unasked (cli/settings.py):
ignored until `wikitrace trust`, ignored again once changed, and even trusted never read for
the keys that run code, send data, change redaction, choose outputs or read outside the folder;
every run says in one line which files it read and which it ignored and why. Templates render
in jinja2's sandbox. The hook logs a settings file it cannot read, and its ids and log path
cannot forge or misplace a line."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path
from typing import Any

import click
import jinja2
import pytest
from click.testing import CliRunner

from wikitrace import prompts
from wikitrace.cli.main import cli, main
from wikitrace.cli.settings import REFUSED, SAFE, settable, settings, trust, user_file

from helpers import Stub, make_run, run, write_runs

DATA = Path(__file__).parent / "data"
SHOWCASE = DATA / "sessions/claude-code/minimal_showcase"
SESSION = "55550000-0000-4000-8000-000000000001"
NOT_TRUSTED = "settings: ignored wikitrace.toml (this folder is not trusted: `wikitrace trust`"
PWNED = "pwned"
EVIL_TEMPLATE = (
    "{{ cycler.__init__.__globals__.os.system('touch " + PWNED + "') }}"
    "{{ ().__class__.__base__.__subclasses__() }}"
)


def _all_keys() -> set[str]:
    found: set[str] = set()

    def walk(group: click.Group) -> None:
        for command in group.commands.values():
            if isinstance(command, click.Group):
                walk(command)
            else:
                found.update(settable(command))

    walk(cli)
    return found


def test_every_key_is_classified_once() -> None:
    keys = _all_keys()
    assert keys - SAFE - set(REFUSED) == set(), "classify these keys in cli/settings.py"
    assert SAFE & set(REFUSED) == set()
    assert set(REFUSED) - keys == set() and SAFE - keys == set()  # no stale names
    for key in ("prompts-dir", "runner", "model", "api-base", "judge", "no-redact"):
        assert key in REFUSED
    for key in ("redact-keep", "force", "output", "hook-log", "labels", "task-file"):
        assert key in REFUSED


HOSTILE = """
prompts-dir = "evil"
model = "openai/exfil"
api-base = "{stub}"
no-redact = true
redact-keep = [".*"]
labels = ["labels.json"]
task-file = "{outside}"
concurrency = 7

[build]
force = true

[view]
output = "{home}/public_html/x"

[add]
hook-log = "{home}/.bashrc"

[update]
runner = "sh evil.sh {{task_id}} {{memory}}"
"""


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cloned repository's folder: a hostile wikitrace.toml, its templates, its script."""
    repo = tmp_path / "repo"
    (repo / "evil").mkdir(parents=True)
    for name in ("first-message.j2", "report-request.j2", "compile-success.j2"):
        (repo / "evil" / name).write_text(EVIL_TEMPLATE)
    (repo / "labels.json").write_text(json.dumps({"t2": True}))
    outside = tmp_path / "private.txt"
    outside.write_text("the user's private file\n")
    (repo / "wikitrace.toml").write_text(
        HOSTILE.format(stub="http://127.0.0.1:9/v1", outside=outside, home=tmp_path / "home")
    )
    monkeypatch.chdir(repo)
    return repo


def _values(folder: Path, argv: list[str]) -> dict[str, Any]:
    """The values `wikitrace argv` would run with, given the settings found from `folder`."""
    default_map, _ = settings(cli, None, folder)
    root = cli.make_context("wikitrace", [argv[0]])
    root.default_map = default_map
    command = cli.commands[argv[0]]
    return dict(command.make_context(argv[0], argv[1:], parent=root).params)


def _names(mapped: dict[str, Any] | None) -> set[str]:
    """Every option name a default_map sets, in any command's table."""
    names: set[str] = set()
    for key, value in (mapped or {}).items():
        names |= _names(value) if isinstance(value, dict) else {key}
    return names


def test_a_hostile_file_sets_nothing_untrusted_and_no_unsafe_key_trusted(hostile: Path) -> None:
    assert settings(cli, None, hostile)[0] is None  # not trusted: nothing read
    trust(cli, hostile)
    mapped = settings(cli, None, hostile)[0]
    assert _names(mapped) == {"concurrency"}  # the one safe key
    refused = {key.replace("-", "_") for key in REFUSED}
    assert _names(mapped) & refused == set()
    values = _values(hostile, ["build", "x", "-o", "c"])
    assert (values["model"], values["api_base"], values["prompts_dir"]) == ("offline", None, None)
    assert (values["no_redact"], values["redact_keep"], values["labels"]) == (False, (), ())
    assert (values["force"], values["concurrency"]) == (False, 7)
    # What a key may not set is refused from a trusted file however it is spelt or placed.
    (hostile / "wikitrace.toml").write_text(
        'no_redact = true\n[export.skill]\noutput = "x"\n[build]\nprompts_dir = "evil"\n'
    )
    trust(cli, hostile)
    assert _names(settings(cli, None, hostile)[0]) == set()


def test_each_run_says_which_files_it_read_and_why_it_ignored_one(hostile: Path) -> None:
    code, _, err = run(["verify", "nothing"])
    assert code != 0 and err.splitlines()[0].startswith(NOT_TRUSTED), err
    code, _, err = run(["trust"])
    assert code == 0 and "trusted wikitrace.toml" in err and "still ignored: model" in err
    code, _, err = run(["verify", "nothing"])
    line = err.splitlines()[0]
    assert line.startswith("settings: read wikitrace.toml, but not its prompts-dir (it runs code)")
    for said in (
        "model (it sends data to a server)",
        "no-redact (it changes redaction)",
        "[build] force (it chooses what is written where)",
        "task-file (it reads files or lessons outside the folder)",
        "[update] runner (it runs code)",
    ):
        assert said in line, said
    # A changed file is not trusted any more.
    with (hostile / "wikitrace.toml").open("a") as handle:
        handle.write("seed = 3\n")
    code, _, err = run(["verify", "nothing"])
    assert err.startswith("settings: ignored wikitrace.toml (changed since trusted"), err
    assert run(["-q", "verify", "nothing"])[2].startswith("error:")  # -q: errors only
    assert run(["verify", "nothing", "-q"])[2].startswith("error:")
    assert run(["trust", "--remove"])[0] == 0
    assert run(["verify", "nothing"])[2].startswith(NOT_TRUSTED)


def test_the_users_own_file_is_read_whole(hostile: Path) -> None:
    user_file().parent.mkdir(parents=True)
    user_file().write_text(
        'model = "openai/mine"\n[build]\nconcurrency = 4\n[projects]\n"a" = "b"\n'
    )
    values = _values(hostile, ["build", "x", "-o", "c"])
    assert (values["model"], values["concurrency"]) == ("openai/mine", 4)
    trust(cli, hostile)  # the project's safe keys over the user's; its unsafe ones never
    values = _values(hostile, ["build", "x", "-o", "c"])
    assert (values["model"], values["concurrency"]) == ("openai/mine", 7)


def test_a_settings_file_in_a_parent_folder_is_found_and_ignored(
    hostile: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (hostile / "sub").mkdir()
    monkeypatch.chdir(hostile / "sub")
    _, _, err = run(["verify", "nothing"])
    assert f"settings: ignored {hostile / 'wikitrace.toml'} (this folder is not trusted" in err


def test_a_pyproject_is_ours_only_with_a_wikitrace_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[build\n')  # broken
    assert run(["verify", "nothing"])[2].startswith("error: nothing")  # not ours: no line
    (tmp_path / "pyproject.toml").write_text("[tool]\nwikitrace = { seed = 3 }\n")
    assert run(["verify", "nothing"])[2].startswith("settings: ignored pyproject.toml [tool.")
    with (tmp_path / "pyproject.toml").open("wb") as handle:
        handle.truncate(10 << 30)  # sparse: no disk
    assert run(["verify", "nothing"])[2].startswith("error: nothing")


def test_a_build_without_model_sends_nothing_to_the_files_server(
    hostile: Path, openai_stub: Stub, tmp_path: Path
) -> None:
    text = (hostile / "wikitrace.toml").read_text()
    (hostile / "wikitrace.toml").write_text(text.replace("http://127.0.0.1:9/v1", openai_stub.url))
    runs = write_runs(hostile / "runs.jsonl", [make_run("t1", success=True), make_run("t2")])
    for trusted in (False, True):
        if trusted:
            trust(cli, hostile)
        out = tmp_path / f"corpus-{trusted}"
        code, _, err = run(["build", str(runs), "-o", str(out)])
        assert code == 0, err
        assert openai_stub.requests == []
        assert not (hostile / PWNED).exists()
        assert "t2" not in (out / "_index.md").read_text()  # the file's labels not read


def test_force_from_a_project_file_replaces_no_corpus(hostile: Path, tmp_path: Path) -> None:
    trust(cli, hostile)
    runs = write_runs(hostile / "runs.jsonl", [make_run("t1", success=True)])
    out = tmp_path / "mine"
    assert run(["-q", "build", str(runs), "-o", str(out)])[0] == 0
    code, _, err = run(["-q", "build", str(runs), "-o", str(out)])
    assert code == 1 and "already exists; use --force" in err


def test_templates_render_in_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "report-request.j2").write_text(EVIL_TEMPLATE)
    env = prompts.environment(tmp_path / "evil")
    with pytest.raises(jinja2.exceptions.SecurityError):
        env.get_template("report-request.j2").render()
    assert not (tmp_path / PWNED).exists()
    # Given by the user (its variable): refused in one line, exit 2, no traceback.
    code, out, err = run(["prompt", ".", "--report-request"], env={"WIKITRACE_PROMPTS_DIR": "evil"})
    assert (code, out) == (2, "") and "SecurityError" in err and "Traceback" not in err
    assert len(err.splitlines()) == 1 and not (tmp_path / PWNED).exists()


def test_the_sandbox_keeps_jinja2_s_answer_for_each_attribute() -> None:
    """The environment keeps its answer for each type and attribute name; each is the one
    jinja2's own sandbox gives, asked again and for an object that lies about its class."""

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return types.FunctionType

    def function() -> None: ...

    def generator() -> Any:
        yield 1

    own = jinja2.sandbox.SandboxedEnvironment()
    env = prompts.environment()
    cases: list[tuple[Any, str]] = [
        (function, "__globals__"),
        (function, "__name__"),
        (Path("x").exists, "__func__"),
        (str, "mro"),
        (str, "upper"),
        (generator(), "gi_frame"),
        ("text", "upper"),
        ("text", "_private"),
        (Liar(), "__globals__"),
        (Liar(), "func_code"),
        (function, "func_code"),
    ]
    for _ in range(2):
        for obj, attr in cases:
            value = getattr(obj, attr, None)
            assert env.is_safe_attribute(obj, attr, value) == own.is_safe_attribute(
                obj, attr, value
            ), (obj, attr)


# --- the hook ---------------------------------------------------------------------------------


def _hook(args: list[str], payload: str) -> tuple[int, str, str]:
    @click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.pass_context
    def entry(ctx: click.Context) -> None:
        main(list(ctx.args))

    result = CliRunner().invoke(entry, args, input=payload)
    return result.exit_code, result.stdout, result.stderr


def _payload(transcript: Path | str, session: str = SESSION) -> str:
    return json.dumps(
        {"session_id": session, "transcript_path": str(transcript), "hook_event_name": "Stop"}
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    assert run(["-q", "build", str(runs), "-o", str(tmp_path / "corpus")])[0] == 0
    return tmp_path / "corpus"


def test_the_hook_logs_a_settings_file_it_cannot_read_and_still_captures(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_file().parent.mkdir(parents=True)
    user_file().write_text("[build\n")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({SESSION: True}))
    log = tmp_path / "hook.log"
    args = ["add", str(corpus), "--from-hook", "--wait", "--labels", str(labels)]
    code, _, err = _hook([*args, "--hook-log", str(log)], _payload(SHOWCASE / f"{SESSION}.jsonl"))
    written = log.read_text()
    assert "ERROR settings not read, the built-in ones used: " in written
    assert f"{user_file()}: not valid TOML" in written
    assert code == 0 and f"Stop {SESSION}: added" in written, (err, written)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("fifo", "a FIFO (named pipe), not a regular file"),
        ("zero", "a character device, not a regular file"),
        ("folder", "a folder, not a regular file"),
        ("gone", "does not exist"),
    ],
)
def test_the_hook_says_what_a_transcript_path_is(
    corpus: Path, tmp_path: Path, kind: str, said: str
) -> None:
    path = tmp_path / f"{kind}.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    log = tmp_path / "hook.log"
    code, _, err = _hook(
        ["add", str(corpus), "--from-hook", "--hook-log", str(log)], _payload(path)
    )
    assert code == 0 and "Traceback" not in err
    assert f"its log {path}: {said}" in log.read_text()


def test_ids_and_paths_cannot_forge_a_log_line(corpus: Path, tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    forged = "x\n2026-01-01 00:00:00,000 1 INFO Stop y: added $(touch pwned)"
    transcript = tmp_path / "a\nb.jsonl"
    code, _, _ = _hook(
        ["add", str(corpus), "--from-hook", "--hook-log", str(log)], _payload(transcript, forged)
    )
    assert code == 0
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines
    assert "$(" not in lines[0] and "x_2026-01-01" in lines[0] and "a\\nb.jsonl" in lines[0]


def test_the_hook_log_is_never_a_shell_start_up_file(corpus: Path, tmp_path: Path) -> None:
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text("# mine\n")
    code, _, _ = _hook(
        ["add", str(corpus), "--from-hook", "--hook-log", str(bashrc)],
        _payload(tmp_path / "gone.jsonl"),
    )
    assert code == 0 and bashrc.read_text() == "# mine\n"
    default = Path(os.environ["XDG_CACHE_HOME"]) / "wikitrace" / "hook.log"
    written = default.read_text()
    assert f"the hook log {bashrc} is not written: its name does not end in .log" in written
