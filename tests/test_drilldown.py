"""The drill-down tools, as an agent runs them from a shell in its sandbox."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import frontmatter
import pytest
from click.testing import CliRunner

from wikitrace.cli.main import cli
from wikitrace.compiler import BuildOptions, build_corpus

from helpers import DATA, FakeLLM, read_jsonl, run

SOURCE = DATA / "tau-bench-airline-3runs.jsonl"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("built") / "corpus"
    build_corpus(BuildOptions(inputs=[SOURCE], output=root, redact=False))
    return root


def tool(
    corpus: Path, name: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    result = subprocess.run(
        [sys.executable, str(corpus / "tools" / name), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return result.returncode, result.stdout, result.stderr


def test_actions_lists_every_turn(corpus: Path) -> None:
    code, out, err = tool(corpus, "actions", "step-0001")
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[0] == "step-0001: 24 turns; `turn step-0001 N` shows one whole"
    assert len(lines) == 25
    assert lines[17].startswith("17  assistant  book_reservation(")
    assert lines[17].endswith(
        "=> Error: payment amount does not add up, total price is 305, but paid 255"
    )


def test_turn_shows_whole_turns_as_logged(corpus: Path) -> None:
    turns = read_jsonl(SOURCE)[0]["turns"]
    code, out, _ = tool(corpus, "turn", "1", "16-17")
    assert code == 0
    first, second = out.split("\n\n=== ")
    assert first.startswith("=== step-0001 turn 16 of 24 ===\nrole: user\ncontent: ")
    assert turns[15]["content"] in first
    assert second.startswith("step-0001 turn 17 of 24 ===")
    assert turns[16]["tool_calls"][0]["arguments"] in second  # the whole call, not a preview


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["../../etc/passwd", "1"], 2, "not a step: '../../etc/passwd'"),
        (["/etc/passwd", "1"], 2, "not a step: '/etc/passwd'"),
        (["1", "../../etc/passwd"], 2, "not a turn number or range"),
        (["1", "0"], 2, "bad turn range '0'"),
        (["1", "5-2"], 2, "bad turn range '5-2'"),
        (["1", "-5"], 2, "unknown option '-5'"),
        (["1", "99999999999"], 2, "not a turn number or range: '99999999999'"),
        (["1", "25"], 1, "step-0001 has 24 turns; there is no turn 25"),
        (["9999", "1"], 1, "step-9999 is not in this corpus"),
        (["1"], 2, "usage: turn STEP N[-M]"),
    ],
)
def test_hostile_arguments_get_one_line_and_a_code(
    corpus: Path, args: list[str], code: int, message: str
) -> None:
    got, out, err = tool(corpus, "turn", *args)
    assert (got, out) == (code, "")
    assert message in err and err.startswith("turn: ")


def test_a_planted_link_out_of_the_corpus_is_refused(corpus: Path, tmp_path: Path) -> None:
    copy = tmp_path / "corpus"
    shutil.copytree(corpus, copy, symlinks=True)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"role": "user", "content": "private"}\n')
    target = copy / "raw/step-0002/solver.full.jsonl"
    target.unlink()
    target.symlink_to(secret)
    code, out, err = tool(copy, "turn", "2", "1")
    assert (code, out) == (1, "") and "refusing to read outside the corpus" in err


def test_the_corpus_comes_from_option_env_or_the_tools_location(
    corpus: Path, tmp_path: Path
) -> None:
    lonely = tmp_path / "lonely"
    (lonely / "tools").mkdir(parents=True)
    shutil.copy(corpus / "tools/actions", lonely / "tools/actions")
    code, _, err = tool(lonely, "actions", "1")  # no corpus around this copy
    assert code == 1 and err.startswith("actions: no wikitrace corpus at ")
    assert "WIKITRACE_CORPUS" in err
    assert tool(lonely, "actions", "1", "--corpus", str(corpus))[0] == 0
    assert tool(lonely, "actions", "1", env={"WIKITRACE_CORPUS": str(corpus)})[0] == 0
    assert tool(corpus, "actions", "1")[0] == 0  # from where it sits


def test_the_corpus_tools_run_on_the_standard_library_alone(corpus: Path) -> None:
    # A sandbox has a Python, not wikitrace: -S leaves out site-packages, and wikitrace with it.
    for args in (["actions", "1"], ["turn", "2", "3"]):
        alone = subprocess.run(
            [sys.executable, "-S", str(corpus / "tools" / args[0]), *args[1:]],
            capture_output=True,
            text=True,
        )
        assert (alone.returncode, alone.stderr) == (0, "")
        assert alone.stdout == tool(corpus, *args)[1] != ""


def test_the_cli_runs_the_same_tools(corpus: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["actions", str(corpus), "1"])
    assert result.exit_code == 0 and result.stdout == tool(corpus, "actions", "1")[1]
    result = runner.invoke(cli, ["turn", str(corpus), "2", "3"])
    assert result.exit_code == 0 and result.stdout == tool(corpus, "turn", "2", "3")[1]
    result = runner.invoke(cli, ["turn", str(corpus), "2", "300"])
    assert result.exit_code == 1 and "there is no turn 300" in result.stderr


def test_an_agent_goes_from_an_insight_to_the_turn_behind_it(tmp_path: Path) -> None:
    built = tmp_path / "built"
    llm = FakeLLM()
    build_corpus(
        BuildOptions(inputs=[SOURCE], output=built, model=llm.model, use_cache=False), llm=llm
    )
    # Mounted read-only somewhere else, as in an agent's sandbox.
    mount = tmp_path / "sandbox" / "work" / "corpus"
    shutil.copytree(built, mount)
    for path in [mount, *mount.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    insight = frontmatter.load(mount / "insight/insight-0001.md")
    script = f"""
        set -eu
        cd {mount}
        step=$(grep -h '^source_step:' insight/insight-0001.md | cut -d' ' -f2)
        turn=$(grep -m1 -o '^- turn [0-9]*' compilation/$step.md | cut -d' ' -f3)
        echo "$step $turn"
        {sys.executable} tools/turn "$step" "$turn"
    """
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    header, shown = result.stdout.split("\n", 1)
    step, turn = header.split()
    assert step == insight["source_step"] == "step-0001"
    compilation = frontmatter.load(mount / f"compilation/{step}.md")
    quote = compilation.content.split("(verified):\n\n  ```text\n  ", 1)[1].split("\n", 1)[0]
    assert f"=== {step} turn {turn} of 24 ===" in shown
    assert quote in shown  # the quote the compilation cites is in the turn the tool shows
    assert json.loads((mount / "tools/layout.json").read_text())["step_id_width"] == 4


def test_the_tools_import_only_the_standard_library(corpus: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", str(corpus / "tools/turn"), "1", "17"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
    heavy = {
        "litellm",
        "jinja2",
        "pydantic",
        "yaml",
        "frontmatter",
        "orjson",
        "typing",
        "wikitrace",
    }
    assert imported & heavy == set()
    assert "json" in imported


def test_reads_go_to_the_log_the_harness_names(corpus: Path, tmp_path: Path) -> None:
    """Stay vs Descent: the real tools, as an agent runs them, append each read to
    $WIKITRACE_READ_LOG; `cite` joins the log with the reports by episode."""
    from wikitrace.tools.cite import summarize

    log = tmp_path / "reads.jsonl"
    env = {"WIKITRACE_READ_LOG": str(log), "WIKITRACE_EPISODE": "e1"}
    code, out, _ = tool(corpus, "actions", "step-0001", env=env)
    assert code == 0
    code, _, _ = tool(corpus, "turn", "1", "2-3", env=env)
    assert code == 0
    tool(corpus, "turn", "step-0001", "999", env=env)  # an error reads nothing: not logged
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["episode"], r["tool"], r["step"], r["turns"]) for r in lines] == [
        ("e1", "actions", "step-0001", None),
        ("e1", "turn", "1", "2-3"),
    ]
    assert lines[0]["bytes"] == len(out.encode()) - 1  # the line the tool printed, less "\n"
    # A log inside the corpus is refused, and the read still works.
    inside = {"WIKITRACE_READ_LOG": str(corpus / "raw" / "log.jsonl")}
    code, again, err = tool(corpus, "actions", "step-0001", env=inside)
    assert code == 0 and again == out and "inside the corpus; not logged" in err
    assert not (corpus / "raw" / "log.jsonl").exists()
    # Episode e1 descended (its log); e2 cited only an insight and read nothing: it stayed.
    reports = tmp_path / "reports.jsonl"
    reports.write_text(
        '{"used": {"insights": []}, "episode": "e1", "success": true}\n'
        '{"used": {"insights": []}, "episode": "e2", "success": false}\n'
        '{"used": {"raw": ["step-0001"]}, "episode": "e3", "success": false}\n'
    )
    summary = summarize(corpus, [reports], [log])
    assert (summary.descent.episodes, summary.descent.successes) == (2, 1)
    assert (summary.stay.episodes, summary.stay.failures) == (1, 1)
    first = summary.per_episode[0]
    assert (first.reads, first.bytes) == (2, sum(r["bytes"] for r in lines))
    assert first.tokens_estimate == first.bytes // 4
    assert summary.unmatched_reads == 0
    code, text, err = run(["cite", str(corpus), str(reports), "--read-log", str(log)])
    assert code == 0 and "descent: 2 episodes (1 succeeded, 1 failed, 0 unknown)" in text


def test_a_long_turn_is_read_a_window_at_a_time(corpus: Path) -> None:
    """`turn --grep` finds lines of a long turn (numbered, with 2 around each) and `--lines`
    shows a window; the CLI and the MCP tool read the same."""
    code, whole, _ = tool(corpus, "turn", "1", "1")
    body = whole.split("\n", 1)[1][:-1].split("\n")  # under its header; print adds a newline
    assert code == 0 and len(body) > 10
    code, out, _ = tool(corpus, "turn", "1", "1", "--lines", "3-5")
    header, *shown = out.rstrip("\n").split("\n")
    assert header == f"=== step-0001 turn 1 of 24 === ({len(body)} lines)"
    width = len(str(len(body)))
    assert shown == [f"{n:>{width}}| {body[n - 1]}" for n in (3, 4, 5)]
    word = "baggage"
    hits = [n for n, line in enumerate(body, start=1) if word in line.lower()]
    assert hits
    code, out, _ = tool(corpus, "turn", "1", "1", "--grep", word.upper())
    numbers = [int(line.split("|")[0]) for line in out.split("\n")[1:] if "|" in line]
    assert set(hits) <= set(numbers)
    assert all(any(abs(n - h) <= 2 for h in hits) for n in numbers)
    code, out, _ = tool(corpus, "turn", "1", "1", "--grep", "no-such-word-here")
    assert code == 0 and f"(no line holds 'no-such-word-here'; {len(body)} lines)" in out
    code, _, err = tool(corpus, "turn", "1", "1", "--grep", "a", "--lines", "1-2")
    assert code == 2 and "not both" in err
    result = CliRunner().invoke(cli, ["turn", str(corpus), "1", "1", "--lines", "3-5"])
    assert result.exit_code == 0 and result.output.split("\n")[1:4] == shown


def test_a_quote_of_a_one_line_turn_is_found_in_the_raw_turn() -> None:
    """A long run's prompt shows some turns as one line (`Tool({args}) => result`); a quote
    copied from there verifies, and `audit` finds the same call in the raw turn, which spells
    it `tool call [id] Tool: {args}`."""
    from wikitrace.compiler.evidence import QuoteChecker, render_turn, turn_fields
    from wikitrace.compiler.view import skeleton_line
    from wikitrace.corpus_schema import Turn
    from wikitrace.tools.audit import passage

    turn = Turn.model_validate(
        {
            "role": "assistant",
            "content": "Let me run the failing test again.",
            "tool_calls": [
                {
                    "id": "toolu_01",
                    "name": "Bash",
                    "arguments": {"command": "mix test test/spotter_web | tail -5"},
                    "result": "3 tests, 1 failure",
                }
            ],
        }
    )
    line = skeleton_line(turn_fields(turn))
    assert line == (
        '[one line] assistant: Let me run the failing test again. | Bash({"command":"mix test '
        'test/spotter_web | tail -5"}) => 3 tests, 1 failure'
    )
    raw = render_turn(turn)
    call = 'Bash({"command":"mix test test/spotter_web | tail -5"})'
    for quote, spans in (
        (call, 'Bash: {"command":"mix test test/spotter_web | tail -5"}'),
        (line, raw.split("content: ", 1)[1]),  # the whole line: the agent's text to the result
        (f"{call} => 3 tests, 1 failure", raw.split("tool call [toolu_01] ", 1)[1]),
    ):
        assert QuoteChecker([turn], [line]).check(1, quote).verified
        found = passage(raw, quote)
        assert found is not None, quote
        assert raw[found[0] : found[1]] == spans
    assert passage(raw, 'Bash({"command":"mix test test/other"})') is None
    assert passage(raw, "not in the turn at all") is None
