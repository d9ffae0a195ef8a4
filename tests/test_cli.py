"""The command line: exit codes, what goes to stdout and stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from wikitrace.cli.main import cli

from helpers import make_run, run, write_runs


@pytest.fixture(autouse=True)
def _no_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WIKITRACE_TRACEBACK", raising=False)


def test_build_prints_the_corpus_path_and_a_report(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    code, out, err = run(["build", str(runs_file), "-o", str(corpus)])
    assert code == 0
    assert out == f"{corpus}\n"
    assert f"built {corpus}: 3 runs (2 succeeded, 1 failed), 3 compilations, 0 insights" in err
    assert "processed 3/3 runs" in err


def test_build_json_report(runs_file: Path, tmp_path: Path) -> None:
    code, out, _ = run(["-q", "build", str(runs_file), "-o", str(tmp_path / "c"), "--json"])
    assert code == 0
    report = json.loads(out)
    assert report["runs"] == 3 and report["complete"] is True and report["model"] == "offline"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a", success="yes")])
    code, out, err = run(["build", str(path), "-o", str(tmp_path / "c")])
    assert code == 2 and out == ""
    assert err == (
        "reading 1 file as native (detected from content)\n"
        f"error: {path}:1: field 'success': Input should be a valid boolean (nothing was "
        "written; fix the input, or use --on-error skip)\n"
    )
    assert not (tmp_path / "c").exists()


def test_existing_output_is_exit_1(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    assert run(["build", str(runs_file), "-o", str(corpus)])[0] == 0
    code, _, err = run(["build", str(runs_file), "-o", str(corpus)])
    assert code == 1 and err == f"error: {corpus} already exists; use --force to replace it\n"


def test_bad_redact_pattern_is_usage_error(runs_file: Path, tmp_path: Path) -> None:
    code, _, err = run(["build", str(runs_file), "-o", str(tmp_path / "c"), "--redact", "("])
    assert code == 2 and "Invalid value for '--redact': '(': not a valid regular expression" in err


def test_call_workers_out_of_range_is_a_usage_error(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    argv = ["build", str(runs_file), "-o", str(corpus), "--model", "openai/m"]
    code, _, err = run(argv, env={"WIKITRACE_CALL_WORKERS": "-1"})
    assert code == 2 and "$WIKITRACE_CALL_WORKERS): -1 is not in the range 0<=x<=64" in err
    for gone in ("--no-call-worker", "--call-workers"):  # a setting with no flag now
        code, _, err = run([*argv, gone])
        assert code == 2 and f"No such option '{gone}'" in err
    assert not corpus.exists()


def test_verify_ok_and_failed(runs_file: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    run(["build", str(runs_file), "-o", str(corpus)])
    assert run(["verify", str(corpus)]) == (0, "ok: 36 files match the manifest\n", "")
    target = corpus / "raw/step-0001/metadata.md"
    target.chmod(0o644)
    target.write_text("tampered\n")
    code, out, err = run(["verify", str(corpus)])
    assert (code, err) == (1, "")
    assert out == (
        "changed raw/step-0001/metadata.md\nFAILED: 0 missing, 1 changed, 0 extra (36 checked)\n"
    )
    code, out, _ = run(["verify", str(corpus), "--json"])
    assert code == 1 and json.loads(out)["changed"] == ["raw/step-0001/metadata.md"]


def test_verify_not_a_corpus(tmp_path: Path) -> None:
    code, out, err = run(["verify", str(tmp_path)])
    assert (code, out) == (1, "")
    assert err == f"error: {tmp_path} has no manifest.json: it is not a finished wikitrace corpus\n"


def test_help_explains_each_command() -> None:
    result = CliRunner().invoke(cli, ["build", "--help"])
    assert result.exit_code == 0
    for option in ("--model", "--api-base", "--concurrency", "--on-error", "--help-all"):
        assert option in result.stdout
    assert "--context-tokens" not in result.stdout  # a tuning option: --help-all shows it
    assert "max-prompt-tokens" not in result.stdout  # a setting with no flag: so does it
    result = CliRunner().invoke(cli, ["build", "--help-all"])
    assert result.exit_code == 0 and "--context-tokens" in result.stdout
    assert "max-prompt-tokens ($WIKITRACE_MAX_PROMPT_TOKENS)" in result.stdout


def test_help_starts_without_heavy_imports() -> None:
    code = textwrap.dedent(
        """
        import sys
        from wikitrace.cli.main import main
        try:
            main(["--help"])
        except SystemExit:
            pass
        heavy = ("litellm", "jinja2", "pydantic", "frontmatter")
        print([name for name in heavy if name in sys.modules], file=sys.stderr)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage: wikitrace" in out.stdout
    assert out.stderr.strip() == "[]"


def test_ctrl_c_says_nothing_was_written(
    runs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wikitrace.compiler

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(wikitrace.compiler, "build_corpus", interrupted)
    corpus = tmp_path / "c"
    code, out, err = run(["build", str(runs_file), "-o", str(corpus), "--model", "openai/x"])
    assert (code, out) == (130, "")
    assert err == (
        f"\ninterrupted: nothing was written to {corpus}; the model replies received so far are "
        "cached, so building again resumes without paying for them twice\n"
    )


def test_an_unreachable_model_server_stops_the_build_at_once(
    runs_file: Path, tmp_path: Path
) -> None:
    import socket
    import time

    # A port held, never listened on: connections are refused, and no other test (or xdist
    # worker) can be given it meanwhile.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        corpus = tmp_path / "corpus"
        api_base = f"http://127.0.0.1:{port}/v1"
        started = time.monotonic()
        model = ["--model", "openai/x", "--api-base", api_base]
        code, out, err = run(["build", str(runs_file), "-o", str(corpus), *model])
    # The error below is the check made before any call; the clock adds that nothing slow came
    # first. 60 s: a call's backoff retries would take about 2 minutes (6 retries, 2 s doubling
    # to a 60 s cap); at a load of 14 on 2 cores this build took 4.5 s of wall time.
    assert time.monotonic() - started < 60
    assert (code, out) == (1, "")
    assert (
        f"error: cannot reach --api-base {api_base} (127.0.0.1:{port}: Connection refused)" in err
    )
    assert not corpus.exists() and not (tmp_path / "corpus.versions").exists()


def test_help_lists_every_command_under_a_workflow() -> None:
    from click.testing import CliRunner

    from wikitrace.cli.main import cli as group

    result = CliRunner().invoke(group, ["--help"])
    assert result.exit_code == 0
    out = result.output
    listed = {
        line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()
    }
    shown = {name for name, command in group.commands.items() if not command.hidden}
    assert shown <= listed, shown - listed


MAX_COMMANDS = 22
"""Issue 57: the commands a user meets, old names kept for a release not counted."""


def test_the_commands_a_user_meets_are_few() -> None:
    shown = [name for name, command in cli.commands.items() if not command.hidden]
    assert len(shown) <= MAX_COMMANDS, shown
    listed = CliRunner().invoke(cli, ["--help"]).stdout
    for name, command in cli.commands.items():
        assert (f"\n  {name} " in listed) is not command.hidden, name


def test_an_old_command_name_still_works_and_says_what_it_is_now(tmp_path: Path) -> None:
    from wikitrace.cli.common import COMMON
    from wikitrace.cli.main import DEPRECATED, _command

    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps(
                {"suite": "s", "method": method, "task_id": "t1", "trial": 1, "success": success}
            )
            + "\n"
            for method, success in (("no-memory", True), ("no-memory-rerun", True), ("m", False))
        )
    )
    now = run(["lift", "eval", str(rows), "--json"])
    old = run(["eval", str(rows), "--json"])
    assert old == (
        now[0],
        now[1],
        "warning: `wikitrace eval` is deprecated: it is now `wikitrace lift eval`\n" + now[2],
    )
    assert now[0] == 0 and json.loads(now[1])["results"]
    for target, name, replacement in DEPRECATED:
        command = _command(target)
        alias = cli.commands[name]
        assert alias.hidden and alias.callback is not command.callback
        own = [p.name for p in alias.params if p.name not in COMMON]
        assert own == [p.name for p in command.params if p.name not in COMMON]
        top, *rest = replacement.split()
        assert top in cli.commands and not cli.commands[top].hidden
        if not rest[0].isupper():  # a subcommand, not an option of `top`
            assert cli.commands[top].commands[rest[0]] is command  # type: ignore[attr-defined]
    # An old name's usage error still names it: nothing was run, nothing to warn about.
    code, out, err = run(["deploy", str(tmp_path)])
    assert (code, out) == (2, "") and "Missing argument 'VERSION'" in err
