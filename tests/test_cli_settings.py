"""What every command shares: a first --help screen that fits, --help-all for the rest, -v/-q
after the command, one spelling per option, and settings read from a file, with the command
line over the file, the file over --profile, --profile over the defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from wikitrace.cli.common import full_help, hidden_options
from wikitrace.cli.main import cli
from wikitrace.cli.settings import default_map, trust, user_file

from helpers import make_run, run, write_runs

WIDTH = 100
"""The CLI's own max_content_width (docs/cli.md uses it)."""
TERMINAL = 80
"""The narrowest terminal the first help screen must fit (COLUMNS=80)."""
FIRST_SCREEN = 40


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in group.commands.items():
        found.append((*path, name))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*path, name)))
    return found


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", [(), *_commands(cli)], ids=lambda path: " ".join(path) or "root")
def test_each_first_help_screen_fits(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=TERMINAL)
    assert result.exit_code == 0, result.output
    # As a terminal of that width shows them: a longer line takes two.
    lines = sum(-(-len(line) // TERMINAL) or 1 for line in result.output.splitlines())
    assert lines <= FIRST_SCREEN, f"{' '.join(path)} --help: {lines} lines at {TERMINAL} columns"


def test_help_all_shows_every_hidden_option_and_the_rest_of_the_text() -> None:
    runner = CliRunner()
    short = runner.invoke(cli, ["gate", "--help"], terminal_width=WIDTH).output
    full = runner.invoke(cli, ["gate", "--help-all"], terminal_width=WIDTH).output
    hidden = hidden_options(cli.commands["gate"])
    assert len(hidden) >= 15
    for option in hidden:
        assert option.opts[0] not in short and option.opts[0] in full, option.opts
    assert "held-out probes" in full and "held-out probes" not in short  # the text after \f
    assert "{attempt}" in full and "{attempt}" not in short  # the rest of --runner's help
    # What a reference page calls to show the same.
    root = click.Context(cli, info_name="cli", terminal_width=WIDTH, **cli.context_settings)
    ctx = click.Context(cli.commands["gate"], info_name="gate", parent=root)
    assert full_help(cli.commands["gate"], ctx) == full.rstrip("\n")


def test_the_tuning_options_still_work(runs_file: Path, tmp_path: Path) -> None:
    code, out, _ = run(
        ["build", str(runs_file), "-o", str(tmp_path / "c"), "--context-tokens", "9000"]
    )
    assert (code, out) == (0, f"{tmp_path / 'c'}\n")
    # A setting with no flag, from its variable.
    knob = {"WIKITRACE_MAX_OUTPUT_TOKENS": "300"}
    code, out, _ = run(["build", str(runs_file), "-o", str(tmp_path / "d")], env=knob)
    assert (code, out) == (0, f"{tmp_path / 'd'}\n")
    code, _, err = run(
        ["build", str(runs_file), "-o", str(tmp_path / "e")], env={knob.popitem()[0]: "9"}
    )
    assert code == 2 and "9 is not in the range x>=256" in err


def test_verbosity_after_the_command(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    write_runs(folder / "runs.jsonl", [make_run("t1", success=True)])
    (folder / "notes.txt").write_text("not a log\n")
    _, _, err = run(["convert", str(folder)])
    assert "ignored 1 other files (-v lists them)" in err
    assert f"ignored {folder / 'notes.txt'}" not in err
    for argv in (["convert", "-v", str(folder)], ["-v", "convert", str(folder)]):
        code, _, err = run(argv)
        assert code == 0 and f"  ignored {folder / 'notes.txt'}: " in err, argv
    for argv in (["convert", str(folder), "-q"], ["-q", "convert", str(folder)]):
        code, out, err = run(argv)
        assert (code, err) == (0, "") and out.count("\n") == 1, argv
    assert run(["verify", str(tmp_path), "-q"])[0] == 1  # every command takes them


def test_one_spelling_for_the_embedding_model() -> None:
    options = [
        param
        for path in _commands(cli)
        for param in _command(path).params
        if isinstance(param, click.Option)
    ]
    assert {p.name for p in options if "--embedding-model" in p.opts} == {"embedding_model"}
    # The old spellings went: one name for one setting.
    assert not [p for p in options if {"--group-model", "--group-api-base"} & set(p.opts)]
    code, _, err = run(["prompt", ".", "x", "--group-model", "a"])
    assert code == 2 and "No such option '--group-model'" in err


# --- settings in a file ----------------------------------------------------------------------


def parsed(folder: Path, argv: list[str], config: Path | None = None) -> dict[str, Any]:
    """The values `wikitrace COMMAND argv` would run with, given the settings in `folder`."""
    root = cli.make_context("wikitrace", [argv[0]])
    root.default_map = default_map(cli, config, folder)
    command = cli.commands[argv[0]]
    return dict(command.make_context(argv[0], argv[1:], parent=root).params)


GATE = ["gate", "corpus", "--runner", "true {task_id}"]


def test_the_command_line_wins_over_the_file_the_file_over_the_profile(tmp_path: Path) -> None:
    (tmp_path / "wikitrace.toml").write_text(
        'concurrency = 3\nseed = 5\n[gate]\nprofile = "paper"\nfalsify = 4\nseed = 7\n'
    )
    trust(cli, tmp_path)
    values = parsed(tmp_path, [*GATE, "--regress", "2"])
    # falsify: the file over the profile's 16; regress: the command line over the profile's 16;
    # rule: the profile's, nothing else says; seed: [gate] over the top level.
    assert (values["falsify"], values["regress"], values["rule"]) == (4, 2, "estimates")
    assert (values["seed"], values["trials"]) == (7, 1)
    assert parsed(tmp_path, [*GATE, "--falsify", "9"])["falsify"] == 9
    build = parsed(tmp_path, ["build", "x", "-o", "c"])
    assert (build["concurrency"], build["no_mine"]) == (3, False)  # top level; no profile here
    assert parsed(tmp_path, ["update", "c", "x", "--runner", "r {task_id}"])["seed"] == 5


def test_where_the_settings_are_read_from(tmp_path: Path) -> None:
    assert default_map(cli, None, tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert default_map(cli, None, tmp_path) is None  # no [tool.wikitrace]: not ours
    (tmp_path / "pyproject.toml").write_text("[tool.wikitrace.build]\nconcurrency = 2\n")
    assert default_map(cli, None, tmp_path) is None  # not trusted yet
    trust(cli, tmp_path)
    assert parsed(tmp_path, ["build", "x", "-o", "c"])["concurrency"] == 2
    (tmp_path / "wikitrace.toml").write_text("[build]\nconcurrency = 5\n")
    trust(cli, tmp_path)
    assert parsed(tmp_path, ["build", "x", "-o", "c"])["concurrency"] == 5  # before pyproject
    named = tmp_path / "team.toml"
    named.write_text("[build]\nconcurrency = 7\n")
    assert parsed(tmp_path, ["build", "x", "-o", "c"], named)["concurrency"] == 7


def test_the_config_option_and_the_file_reach_a_real_run(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "runs.jsonl", [make_run("t1", success=True)])
    named = tmp_path / "settings.toml"
    named.write_text("[convert]\nunlabelled = 'keep'\non_error = 'skip'\n")
    bad = write_runs(tmp_path / "bad.jsonl", [make_run("t1", success="maybe")])
    code, _, err = run(["--config", str(named), "convert", str(runs), str(bad)])
    assert code == 0 and "skipped" in err  # on-error skip, from the file
    assert run(["convert", str(runs), str(bad)])[0] == 2  # without it: stop


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[build]\nconcurency = 2\n",
            "[build] has no setting 'concurency' (did you mean 'concurrency'?); "
            "the settings of `build` are: api-base, batch, ",
        ),
        (
            "[biuld]\nforce = true\n",
            "[biuld] is no command (did you mean 'build'?)",
        ),
        ("colour = 1\n", "no command has a setting 'colour'"),
        ("[export.skil]\n", "[export.skil] is no command (did you mean 'skill'?)"),
        (
            "[build]\nconcurrency = 'many'\n",
            "[build] concurrency: Invalid value for '--concurrency': 'many'",
        ),
        ("[build]\nlabels = 'x.json'\n", "[build] labels: give a list ([...])"),
        ("[build\n", "not valid TOML"),
    ],
)
def test_a_bad_settings_file_is_named_with_its_table_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, said: str
) -> None:
    # The user's own file: a project's is parsed only once trusted, and is then checked alike.
    user_file().parent.mkdir(parents=True)
    user_file().write_text(text)
    monkeypatch.chdir(tmp_path)
    said = f"{user_file()}: {said}"
    code, out, err = run(["verify", "corpus"])
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {said}"), err


def test_a_lift_table_sets_the_report_and_its_own_tables_the_parts(tmp_path: Path) -> None:
    (tmp_path / "wikitrace.toml").write_text(
        'baseline = "plain"\n[lift]\nmount = "/m"\n[lift.eval]\nstrict = true\n'
    )
    trust(cli, tmp_path)
    lift = default_map(cli, None, tmp_path)["lift"]  # type: ignore[index]
    assert lift["report"] == {"baseline": "plain", "mount": "/m"}
    assert lift["eval"] == {"baseline": "plain", "strict": True}
    (tmp_path / "wikitrace.toml").write_text("[lift]\nstrict = true\n")
    trust(cli, tmp_path)
    with pytest.raises(click.ClickException, match=r"\[lift.report\] has no setting 'strict'"):
        default_map(cli, None, tmp_path)


def test_the_first_screen_is_the_summary_and_the_examples() -> None:
    runner = CliRunner()
    short = runner.invoke(cli, ["monitor", "--help"], terminal_width=TERMINAL).output
    full = runner.invoke(cli, ["monitor", "--help-all"], terminal_width=TERMINAL).output
    assert "Track committed insights" in short and "wikitrace monitor corpus" in short
    assert "anytime-valid test" in full and "anytime-valid test" not in short
    root = runner.invoke(cli, ["--help"], terminal_width=TERMINAL).output
    assert "WIKITRACE_TRACEBACK" not in root and "--help-all" in root


def test_a_model_call_s_defaults_are_declared_once() -> None:
    import re

    from wikitrace.compiler import BuildOptions, CompileLimits
    from wikitrace.corpus_schema import setting_fields as limits
    from wikitrace.transport.llm import LLMSettings

    build = {p.name: p.default for p in cli.commands["build"].params}
    client = LLMSettings(model="m")
    options = BuildOptions(inputs=[], output=Path("c"))
    for name, value, option, core in (
        ("MAX_OUTPUT_TOKENS", 4096, "max_output_tokens", CompileLimits().max_output_tokens),
        ("CONTEXT_TOKENS", 32_768, "context_tokens", CompileLimits().context_tokens),
        ("TEMPERATURE", 0.0, "temperature", options.temperature),
        ("TIMEOUT_SECONDS", 300.0, "timeout", options.timeout_seconds),
        ("MAX_RETRIES", 6, "max_retries", options.max_retries),
    ):
        assert getattr(limits, name) == value == build[option] == core, name
    assert client.max_output_tokens == limits.MAX_OUTPUT_TOKENS
    # The number itself is written nowhere else the options, the client and the build read.
    root = Path(__file__).parent.parent
    for path in ("cli/compile_options.py", "compiler/compile.py", "transport/llm.py"):
        assert not re.search(r"\b(4096|32_?768)\b", (root / path).read_text()), path
