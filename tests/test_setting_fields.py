"""The declared settings (corpus_schema/setting_fields.py): each is one option in each command
that takes it, one settings-file key, its default written once, its manifest field recorded."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

from wikitrace.cli.common import FILE_SETTINGS, FileSetting, file_settings, full_help, options
from wikitrace.cli.main import cli
from wikitrace.cli.settings import REFUSED, SAFE, key_of, settable
from wikitrace.corpus_schema.setting_fields import SETTINGS, Setting, declared, recorded

ROOT = Path(__file__).resolve().parent.parent

MAX_OPTION_INSTANCES = 213
"""277 option instances when the declarations came, less the 62 instances of the 25 tuning
and test knobs that lost their flag (a settings file's key, or WIKITRACE_<KEY>;
docs/settings.md) and prompt's --group-model and --group-api-base (the old spellings of
--embedding-model and --embedding-api-base); issue 57's target is 220. The count may only
fall."""


def counter() -> ModuleType:
    path = ROOT / "benchmarks" / "option_count.py"
    spec = importlib.util.spec_from_file_location("option_count", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("option_count", module)  # its dataclass looks its module up
    spec.loader.exec_module(sys.modules["option_count"])
    return sys.modules["option_count"]


def _command(path: str) -> click.Command:
    command: click.Command = cli
    for name in path.split():
        assert isinstance(command, click.Group), path
        found = command.commands.get(name)
        assert found is not None, path
        command = found
    return command


def test_each_declared_setting_is_one_option_and_one_key_of_each_of_its_commands() -> None:
    count = counter()
    assert len({s.key for s in SETTINGS}) == len(SETTINGS)  # one declaration a key
    for setting in SETTINGS:
        for path in setting.commands:
            command = _command(path)
            options = count.own_options(command) + file_settings(command)
            same = [o for o in options if key_of(o) == setting.key]
            assert len(same) == 1, (path, setting.key)
            if setting.on_command_line:
                assert isinstance(same[0], click.Option), (path, setting.key)
                assert count.flags(same[0]) == setting.flags, (path, setting.key)
            else:
                assert isinstance(same[0], FileSetting), (path, setting.key)
                assert same[0].envvar == setting.variable, (path, setting.key)
            assert same[0].name == setting.param, (path, setting.key)
            assert settable(command)[setting.key] is same[0]


def test_a_key_has_one_meaning_no_command_has_an_undeclared_option_of_a_declared_key() -> None:
    by_key = {setting.key: setting for setting in SETTINGS}
    found = {
        (name, key)
        for name, command in counter().commands(cli)
        for key in settable(command)
        if key in by_key and name not in by_key[key].commands
    }
    assert found == set()


def test_every_option_of_every_command_is_made_from_its_declaration() -> None:
    by_key = {setting.key: setting for setting in SETTINGS}
    for name, command in counter().commands(cli):
        for key, param in settable(command).items():
            assert key in by_key, f"{name}: --{key} is declared nowhere"
            assert name in by_key[key].commands, (name, key)
            assert param.name == by_key[key].param, (name, key)


def test_a_declared_option_says_what_its_declaration_says() -> None:
    build = {p.name: p for p in _command("build").params}
    concurrency = build["concurrency"]
    assert isinstance(concurrency, click.Option)
    assert concurrency.default == declared("concurrency").default
    assert isinstance(concurrency.type, click.IntRange)
    assert (concurrency.type.min, concurrency.type.max) == (1, 512)
    assert concurrency.show_default and not concurrency.hidden
    switch = build["fast_path"]
    assert isinstance(switch, FileSetting) and switch.envvar == "WIKITRACE_FAST_PATH"
    assert switch.type is click.BOOL and switch.default is True
    assert build["redact_patterns"].multiple and build["redact_patterns"].callback is not None


def test_a_setting_with_no_flag_comes_from_its_variable_or_a_file_never_the_command_line() -> None:
    from click.testing import CliRunner

    seen: list[dict[str, object]] = []
    knobs = (declared("timeout"), declared("fast-path"), declared("cache-dir"))

    @click.command()
    @options(knobs, "knobs", dict)
    def probe(knobs: dict[str, object]) -> None:
        seen.append(knobs)

    runner = CliRunner()
    assert runner.invoke(probe, []).exit_code == 0
    variables = {"WIKITRACE_TIMEOUT": "12", "WIKITRACE_FAST_PATH": "false"}
    assert runner.invoke(probe, [], env=variables).exit_code == 0
    from_file = {"timeout": 7.5, "cache_dir": "c"}
    assert runner.invoke(probe, [], default_map=from_file).exit_code == 0
    # The variable wins over a file, as an option's does.
    assert runner.invoke(probe, [], env=variables, default_map=from_file).exit_code == 0
    assert seen == [
        {"timeout": 300.0, "fast_path": True, "cache_dir": None},
        {"timeout": 12.0, "fast_path": False, "cache_dir": None},
        {"timeout": 7.5, "fast_path": True, "cache_dir": Path("c")},
        {"timeout": 12.0, "fast_path": False, "cache_dir": Path("c")},
    ]
    result = runner.invoke(probe, ["--timeout", "3"])
    assert result.exit_code == 2 and "No such option '--timeout'" in result.output
    result = runner.invoke(probe, [], env={"WIKITRACE_TIMEOUT": "0"})
    assert result.exit_code == 2
    assert (
        "Invalid value for setting 'timeout' (a settings file's key, or $WIKITRACE_TIMEOUT): "
        "0.0 is not in the range x>=1." in result.output
    )
    # --help leaves it out; --help-all lists it with its variable and default.
    assert "timeout" not in runner.invoke(probe, ["--help"]).output
    listed = full_help(probe, click.Context(probe, info_name="probe"))
    assert FILE_SETTINGS in listed and "timeout ($WIKITRACE_TIMEOUT)" in listed
    assert "[default: 300.0]" in listed and "[default: true]" in listed


def test_a_user_file_sets_a_setting_with_no_flag_and_a_project_file_may_not_if_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.cli.settings import settings, trust

    user = tmp_path / "user.toml"
    user.write_text("[build]\nworkers = 3\n[update]\nmomentum = 0.5\n")
    monkeypatch.setenv("WIKITRACE_USER_SETTINGS", str(user))
    project = tmp_path / "project"
    project.mkdir()
    (project / "wikitrace.toml").write_text('prompts-dir = "evil"\n[build]\ntimeout = 9\n')
    trust(cli, project)
    mapped, sources = settings(cli, None, project)
    assert mapped is not None
    assert mapped["build"] == {"workers": 3, "timeout": 9}
    assert mapped["update"]["momentum"] == 0.5
    assert "prompts_dir" not in mapped["gate"]
    assert sources.read[-1].endswith("but not its prompts-dir (it runs code)")
    user.write_text('[build]\nworkers = "many"\n')
    with pytest.raises(click.ClickException, match="workers: Invalid value for setting"):
        settings(cli, None, tmp_path)


def test_the_settings_file_keys_are_classified_by_their_declarations() -> None:
    assert set(REFUSED) | SAFE == {s.key for s in SETTINGS}  # one home for each key's class
    for setting in SETTINGS:
        if setting.refused is None:
            assert setting.key in SAFE and setting.key not in REFUSED, setting.key
        else:
            assert REFUSED[setting.key] == setting.refused and setting.key not in SAFE


def _literal_defaults(path: Path, names: set[str]) -> list[str]:
    """Where `path` writes a declared setting again: a click option of a declared flag, or a
    field of a declared setting's name given a literal default."""
    flags = {flag for s in SETTINGS if s.on_command_line for flag in s.flags}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "option"
            and any(isinstance(a, ast.Constant) and a.value in flags for a in node.args)
        ):
            found.append(f"{path.name}:{node.lineno}: a declared option written by hand")
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in names
            and isinstance(node.value, ast.Constant)
            and node.value.value not in (None, False, (), "")  # no value: not a default
        ):
            found.append(f"{path.name}:{node.lineno}: {node.target.id} = {node.value.value!r}")
    return found


ELSEWHERE = {
    "base.py": {"kind"},  # a page kind ('text'), not prompt's --kind
    "setting_fields.py": {"kind"},  # a setting's value kind, the declarations' own field
    "judge.py": {"retries", "quote_repairs"},  # the judge's own, once each
    "figures.py": {"rule"},  # the figures' fixed rules only: bounds, not the gate's sequential
    "probes.py": {"similar"},  # targets by similarity alone, not prompt's similar runs
    "sequential.py": {"alpha"},  # monitoring's Watch: its own level, not the gate's alpha
    "ledger.py": {"encoded", "kind"},  # what an old record meant; a ledger line's kind
    "metrics.py": {"confidence"},  # the bootstrap's, not monitor's
}
"""Fields of a declared setting's name that mean something else where they are, by file."""


def test_each_declared_default_is_written_once() -> None:
    # The core's own names of the settings, where not the parameter's.
    core = {"batch_poll_seconds", "timeout_seconds", "retries", "encoded"}
    names = {s.param for s in SETTINGS} | core
    skipped = {"tests", "benchmarks", "docs", "build", ".venv", "node_modules"}
    files = [p for p in sorted(ROOT.rglob("*.py")) if not skipped & set(p.relative_to(ROOT).parts)]
    assert len(files) > 150 and ROOT / "cli" / "build.py" in files
    found = [
        line
        for path in files
        for line in _literal_defaults(path, names - ELSEWHERE.get(path.name, set()))
    ]
    assert found == []


def test_the_check_finds_a_default_written_again(tmp_path: Path) -> None:
    source = tmp_path / "again.py"
    source.write_text(
        "import click\n"
        "class Options:\n    concurrency: int = 8\n"
        'opt = click.option("--concurrency", default=8)\n'
    )
    assert _literal_defaults(source, {"concurrency"}) == [
        "again.py:3: concurrency = 8",
        "again.py:4: a declared option written by hand",
    ]


def test_the_manifest_records_the_settings_declared_recorded() -> None:
    from wikitrace.compiler import BuildOptions

    options = BuildOptions(inputs=[], output=Path("c"), model="openai/m", reasoning_effort="high")
    assert tuple(options.model_settings()) == recorded()
    assert set(recorded()) == {
        "api_base",
        "context_tokens",
        "max_prompt_tokens",
        "temperature",
        "max_output_tokens",
        "reasoning_effort",
    }
    # reasoning_effort only when given, as manifests written before kept it.
    plain = BuildOptions(inputs=[], output=Path("c"), model="openai/m").model_settings()
    assert (
        "reasoning_effort" not in plain and plain["temperature"] == declared("temperature").default
    )
    assert BuildOptions(inputs=[], output=Path("c")).model_settings() == {}  # offline


def test_a_setting_s_key_and_parameter() -> None:
    switch = Setting(("--fast-path/--no-fast-path",), "h", ("build",), kind="switch")
    assert (switch.key, switch.param) == ("fast-path", "fast_path")
    short = Setting(("-f", "--format"), "h", ("build",), name="input_format")
    assert (short.key, short.param) == ("format", "input_format")


def test_the_count_of_commands_and_option_instances(capsys: object) -> None:
    count = counter()
    rows = count.count()
    total = sum(row.options for row in rows)
    assert len({row.command.split()[0] for row in rows}) <= 22
    assert total <= MAX_OPTION_INSTANCES
    made = sum(row.declared + row.file_settings for row in rows)
    assert made == sum(len(s.commands) for s in SETTINGS)
    print(f"option instances: {total}, declared: {made}")


def test_an_agent_run_s_threshold_is_success_threshold() -> None:
    from click.testing import CliRunner

    from wikitrace.cli.options import runner_options

    seen = []

    @click.command()
    @runner_options()
    def probe(runner: object) -> None:
        seen.append(runner)

    result = CliRunner().invoke(probe, ["--runner", "agent {task_id} {memory}"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        probe, ["--runner", "agent {task_id} {memory}", "--success-threshold", "0.5"]
    )
    assert result.exit_code == 0, result.output
    assert [spec.success_threshold for spec in seen] == [1.0, 0.5]  # type: ignore[attr-defined]
    update = {p.name for p in _command("update").params}
    assert "score_threshold" not in update and "success_threshold" in update


def _another(setting: Setting, step: int) -> object:
    """A value of `setting` other than its default (`step` makes a second one)."""
    if setting.kind == "int":
        return int(setting.default or setting.low or 0) + 1000 * step
    if setting.kind == "float":
        return float(setting.default or 0) + 0.25 * step
    if setting.kind == "choice":
        return [c for c in setting.choices if c != setting.default][step - 1]
    return f"http://127.0.0.1:{step}/v1"


def test_add_calls_the_model_as_the_manifest_recorded_every_declared_recorded_setting() -> None:
    from types import SimpleNamespace

    from wikitrace.compiler import BuildOptions
    from wikitrace.compiler.add import _as_built

    settings = [s for s in SETTINGS if s.recorded]
    base = SimpleNamespace(
        model="openai/m", model_settings={s.param: _another(s, 1) for s in settings}
    )

    def values(options: BuildOptions) -> dict[str, object]:
        return {
            s.param: getattr(options.limits, s.param, getattr(options, s.param, None))
            for s in settings
        }

    plain = BuildOptions(inputs=[], output=Path("c"), model="openai/other")
    built = _as_built(plain, base)  # type: ignore[arg-type]
    assert built.model == "openai/m"
    assert values(built) == base.model_settings  # left at their defaults: as recorded
    given = {s.param: _another(s, 2) for s in settings}
    in_limits = {k: v for k, v in given.items() if hasattr(plain.limits, k)}
    chosen = dataclasses.replace(
        plain,
        limits=dataclasses.replace(plain.limits, **in_limits),
        **{k: v for k, v in given.items() if k not in in_limits},
    )
    # Given anew: as given.
    assert values(_as_built(chosen, base)) == given  # type: ignore[arg-type]


def test_each_variable_sets_one_setting_and_none_is_one_wikitrace_sets_for_a_run() -> None:
    import re

    variables = [s.variable for s in SETTINGS if s.variable is not None]
    assert len(variables) == len(set(variables))
    packages = ("cli", "compiler", "control", "corpus_schema", "integrations", "tools", "versions")
    named = {
        name
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        for name in re.findall(r"WIKITRACE_[A-Z_]+[A-Z]", path.read_text())
    }
    # WIKITRACE_SEED, _MEMORY, _READ_LOG, ...: what a run, a hook or a drill-down tool is given.
    assert {"WIKITRACE_SEED", "WIKITRACE_MEMORY", "WIKITRACE_READ_LOG"} <= named
    # A setting with no flag has its variable made from its key, written nowhere by hand.
    assert {s.variable for s in SETTINGS if not s.on_command_line} & named == set()
