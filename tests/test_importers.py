"""Importers: each format detected from content, read into native runs with nothing dropped,
labelled from the log, a side-car or a reward, and bad input named by file and position."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from wikitrace.cli.input_options import FORMAT_NAMES
from wikitrace.cli.main import cli
from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import READABLE, plan_inputs, zipped
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled
from wikitrace.corpus_schema import InputError

from helpers import DATA, read_jsonl
from helpers import run as run_cli

HERE = DATA / "importers"


def items(*paths: Path, **kwargs: Any) -> list[SourceRun | Unlabelled | InputError]:
    return list(plan_inputs(list(paths), **kwargs).items())


def runs(*paths: Path, **kwargs: Any) -> list[SourceRun]:
    found = items(*paths, **kwargs)
    problems = [i for i in found if not isinstance(i, SourceRun)]
    assert problems == []
    return [i for i in found if isinstance(i, SourceRun)]


def outcomes(found: list[SourceRun]) -> list[bool]:
    return [run.record.success for run in found]


def test_the_cli_lists_every_format_the_importers_read() -> None:
    assert FORMAT_NAMES == READABLE
    from click.testing import CliRunner

    from wikitrace.cli.main import cli

    shown = CliRunner().invoke(cli, ["convert", "--help-all"]).output
    listed = {
        line.split()[0] for line in shown.splitlines() if line.startswith("  ") and line.split()
    }
    assert set(READABLE) <= listed, set(READABLE) - listed  # convert --help-all names each one
    formats = (Path(__file__).parent.parent / "docs" / "formats.md").read_text()
    for name in READABLE:
        assert f"`{name}`" in formats, name  # and the docs' table of formats


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("tau2-telecom-2sims.json", "tau2-bench"),
        ("inspect-log_streaming.eval", "inspect-eval"),
        ("inspect-popularity.json", "inspect"),
        ("openhands-prontoqa-2runs.jsonl", "openhands"),
        ("alfworld-2episodes.out", "alfworld"),
        ("hotpotqa-trial1-excerpt.txt", "hotpotqa"),
        ("mini-swe-agent/trajs/django__django-10999.traj.json", "mini-swe-agent"),
        ("../tau-bench-original-2results.json", "tau-bench"),
        ("../tau-bench-airline-3runs.jsonl", "native"),
    ],
)
def test_the_format_is_detected_from_content_not_the_name(
    name: str, expected: str, tmp_path: Path
) -> None:
    renamed = tmp_path / "log.data"  # no telling extension
    renamed.write_bytes((HERE / name).read_bytes())
    (item,) = plan_inputs([renamed]).files
    assert (item.format, item.detected) == (expected, True)


def test_tau_bench_results_keep_every_message_and_label_by_reward() -> None:
    source = DATA / "tau-bench-original-2results.json"
    results = json.loads(source.read_text())
    found = runs(source)
    assert [r.record.task_id for r in found] == [str(x["task_id"]) for x in results]
    for run, result in zip(found, results, strict=True):
        assert run.record.success is (result["reward"] == 1.0)
        assert run.record.task_type == "airline"  # from the policy's title
        assert run.record.metadata["attempt"] == result["trial"] + 1
        assert run.record.metadata["info"] == result["info"]
        shown = json.dumps(run.data["turns"])
        for message in result["traj"]:
            if message.get("content"):
                assert json.dumps(message["content"])[1:-1] in shown
        calls = [c for t in run.data["turns"] for c in t.get("tool_calls") or []]
        answered = [m for m in result["traj"] if m["role"] == "tool"]
        assert len([c for c in calls if "result" in c]) == len(answered)
        assert not any(t["role"] == "tool" for t in run.data["turns"])


def test_tau2_simulations_are_labelled_by_reward_and_typed_by_domain() -> None:
    found = runs(HERE / "tau2-telecom-2sims.json")
    assert outcomes(found) == [True, False]
    assert {r.record.task_type for r in found} == {"telecom"}
    first = found[0]
    assert first.at == "simulations[0]" and first.source.endswith(":simulations[0]")
    assert first.record.task.startswith("Reason for call: ")
    # a tool result joins the call it answers (tau2 puts the call id under "id")
    call = first.record.turns[4].tool_calls[0]  # type: ignore[index]
    assert call.name == "get_customer_by_phone" and "C1001" in call.result
    assert call.metadata["result_message"]["requestor"] == "assistant"


def test_a_reward_below_the_threshold_is_a_failure_and_the_threshold_is_yours() -> None:
    source = HERE / "tau2-telecom-2sims.json"
    assert outcomes(runs(source, threshold=0.0)) == [True, True]
    run = runs(source, threshold=0.0)[1]
    assert run.record.metadata["success_threshold"] == 0.0


def test_a_truncated_json_log_yields_what_came_before_then_names_the_item(tmp_path: Path) -> None:
    whole = (HERE / "tau2-telecom-2sims.json").read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(whole[: whole.rindex(b'"messages"') + 100])  # into the second simulation
    found = items(cut)
    assert isinstance(found[0], SourceRun) and found[0].record.success
    error = found[-1]
    assert isinstance(error, InputError)
    assert str(error).startswith(f"{cut} at simulations[1]: JSON is cut off or broken")


def test_mini_swe_agent_is_labelled_by_the_swe_bench_reports_beside_it() -> None:
    plan = plan_inputs([HERE / "mini-swe-agent"])
    assert [f.format for f in plan.label_files] == ["swebench-report", "swebench-report"]
    found = [i for i in plan.items() if isinstance(i, SourceRun)]
    assert {r.record.task_id: r.record.success for r in found} == {
        "django__django-10999": False,
        "django__django-16255": True,
    }
    turn = found[0].record.turns[2]
    assert turn.role == "assistant" and turn.action and turn.observation
    assert turn.observation.startswith("<returncode>")
    assert "```bash" in (turn.content or "")


def test_without_its_reports_a_swe_run_is_unlabelled_not_failed() -> None:
    found = items(HERE / "mini-swe-agent/trajs")
    assert all(isinstance(i, Unlabelled) for i in found) and len(found) == 2
    assert "SWE-bench report" in found[0].reason  # type: ignore[union-attr]


def test_inspect_logs_map_letter_scores_and_keep_epochs_as_attempts() -> None:
    found = runs(HERE / "inspect-log_streaming.eval")
    assert [(r.record.task_id, r.record.metadata["attempt"]) for r in found] == [
        ("popularity/1", 1),
        ("popularity/1", 2),
        ("popularity/2", 1),
        ("popularity/2", 2),
    ]
    assert all(r.at and r.at.startswith("samples/") for r in found)
    popularity = runs(HERE / "inspect-popularity.json")
    assert [r.record.metadata["scores"]["match"]["value"] for r in popularity] == ["C", "C", "I"]
    assert outcomes(popularity) == [True, True, False]


def test_a_damaged_eval_zip_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "x.eval"
    with zipfile.ZipFile(broken, "w") as archive:
        archive.writestr("header.json", json.dumps({"eval": {"task": "t"}}))
        archive.writestr("samples/1_epoch_1.json", '{"id": 1, "messages": [')
    (error,) = items(broken)
    assert str(error).startswith(f"{broken} at samples/1_epoch_1.json: cannot read this member")


def test_a_zstd_eval_zip_is_read_by_wikitrace_itself_and_damage_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zipfile_zstd = pytest.importorskip("zipfile_zstd")  # how inspect_ai writes method 93
    path = tmp_path / "log.eval"
    sample = {
        "id": 1,
        "epoch": 1,
        "input": "2+2?",
        "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
        "scores": {"match": {"value": "C"}},
    }
    with zipfile.ZipFile(path, "w", compression=zipfile_zstd.ZIP_ZSTANDARD) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"task": "math"}}))
        archive.writestr("samples/1_epoch_1.json", json.dumps(sample) * 1 + " " * 5000)
    # wikitrace's own reader, as in a process that never imported inspect_ai
    monkeypatch.setattr(zipped, "zipfile_reads_zstd", lambda: False)
    with zipfile.ZipFile(path) as archive:
        assert {info.compress_type for info in archive.infolist()} == {93}
    (found,) = runs(path)
    assert found.record.task_id == "math/1" and found.record.success is True
    data = bytearray(path.read_bytes())
    start = data.find(b"samples/1_epoch_1.json") + len("samples/1_epoch_1.json")
    for i in range(start + 12, start + 30):  # the member's zstd bytes
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    (error,) = items(path)
    assert isinstance(error, InputError)
    assert str(error).startswith(f"{path} at samples/1_epoch_1.json: cannot read this member")


def test_openhands_events_pair_actions_with_their_observations() -> None:
    found = runs(HERE / "openhands-prontoqa-2runs.jsonl")
    assert outcomes(found) == [False, True]
    assert [r.line for r in found] == [1, 2]
    assert found[0].record.task_type == "ProntoQA"
    step = found[0].record.turns[1]
    assert step.action == "run_ipython: %pip install scitools-pyke"
    assert step.observation and "Package installed successfully" in step.observation
    assert step.reasoning and step.reasoning.startswith("Let's start by installing")


def test_a_bad_jsonl_line_is_named_and_reading_goes_on(tmp_path: Path) -> None:
    lines = (HERE / "openhands-prontoqa-2runs.jsonl").read_text().splitlines()
    bad = tmp_path / "out.jsonl"
    bad.write_text(lines[0] + "\n" + lines[1][:500] + "\n" + lines[1] + "\n")
    found = items(bad)
    assert [type(i).__name__ for i in found] == ["SourceRun", "InputError", "SourceRun"]
    assert str(found[1]).startswith(f"{bad}:2: not valid JSON")


def test_alfworld_episodes_become_typed_runs_with_thoughts_as_reasoning() -> None:
    found = runs(HERE / "alfworld-2episodes.out")
    assert outcomes(found) == [False, True]
    assert [r.record.task_type for r in found] == ["look_at_obj", "pick_cool_then_place"]
    first = found[0]
    assert first.line == 9  # the game id line, counted as grep -n counts
    # The goal leads (indexes and the first message show a task's start), the room follows.
    assert first.record.task.startswith("Your task is to: examine the cd with the desklamp.\n\n")
    assert "You are in the middle of a room" in first.record.task
    assert first.record.turns[0].reasoning and first.record.turns[0].action is None
    assert (first.record.turns[1].action, first.record.turns[1].observation) == (
        "go to drawer 1",
        "The drawer 1 is closed.",
    )
    # The few-shot prompt and completion go with the act they produced, not into the run's
    # metadata (the frontmatter grep reads): grep there matches only what the run did.
    produced = first.record.turns[0].metadata["llm_outputs"]
    assert produced[0]["text"].startswith("\n<bos>Interact")
    assert first.record.metadata["llm_outputs"] == sum(
        len(t.metadata.get("llm_outputs", [])) for t in first.record.turns
    )


def test_an_alfworld_episode_cut_off_is_reported_unlabelled() -> None:
    (item,) = items(HERE / "alfworld-cut-episode.out")
    assert isinstance(item, Unlabelled)
    assert item.task_id.startswith("pick_and_place_simple-SaltShaker")
    assert "no result line" in item.reason


def test_hotpotqa_trials_are_attempts_and_sections_are_outcomes() -> None:
    found = runs(HERE / "hotpotqa-trial1-excerpt.txt")
    assert outcomes(found) == [True, True, True, True, False, False]
    assert {r.record.metadata["attempt"] for r in found} == {1}
    creed = found[2].record.turns[1].observation or ""
    assert creed.count("\n") >= 2  # a multi-line observation kept whole
    assert found[0].record.metadata["correct_answer"] == 'Jonny" Craig'
    assert found[0].record.task_id == runs(HERE / "hotpotqa-trial1-excerpt.txt")[0].record.task_id


# --- formats we hold no sample of: written here from their documentation ------------------


def write_atif(trial: Path, *, reward: float | None, version: str = "ATIF-v1.2") -> Path:
    steps = [
        {
            "step_id": 1,
            "source": "agent",
            "message": "sub-agent warm-up",
            "extra": {"is_sidechain": True},
        },
        {"step_id": 2, "source": "user", "message": "Fix the queue."},
        {
            "step_id": 3,
            "source": "agent",
            "message": "Reading it.",
            "reasoning_content": "The worker never awaits.",
            "tool_calls": [
                {"tool_call_id": "t1", "function_name": "Read", "arguments": {"p": "q.py"}}
            ],
            "observation": {"results": [{"source_call_id": "t1", "content": "def worker(): ..."}]},
            "metrics": {"prompt_tokens": 10},
        },
    ]
    path = trial / "agent" / "trajectory.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": version, "session_id": "s1", "steps": steps}))
    if reward is not None:
        result = {
            "task_name": "fix-queue",
            "trial_name": trial.name,
            "verifier_result": {"rewards": {"reward": reward}},
        }
        (trial / "result.json").write_text(json.dumps(result))
    return path


def test_atif_steps_keep_calls_with_results_and_take_the_reward_from_the_trial(
    tmp_path: Path,
) -> None:
    write_atif(tmp_path / "fix-queue__a", reward=1.0)
    write_atif(tmp_path / "fix-queue__b", reward=0.0)
    plan = plan_inputs([tmp_path])
    assert [f.format for f in plan.files] == ["atif", "atif"]
    assert [i["reason"] for i in plan.ignored] == ["harbor-result: read with its trajectory"] * 2
    found = [i for i in plan.items() if isinstance(i, SourceRun)]
    assert [(r.record.task_id, r.record.success) for r in found] == [
        ("fix-queue", True),
        ("fix-queue", False),
    ]
    run = found[0].record
    assert run.task == "Fix the queue."  # not the sub-agent's step
    call = run.turns[2].tool_calls[0]  # type: ignore[index]
    assert (call.name, call.arguments, call.result) == ("Read", {"p": "q.py"}, "def worker(): ...")
    assert run.turns[2].reasoning == "The worker never awaits."
    assert run.turns[2].metadata["metrics"] == {"prompt_tokens": 10}


def test_atif_without_a_result_is_unlabelled_and_other_majors_are_refused(tmp_path: Path) -> None:
    (item,) = items(write_atif(tmp_path / "t1", reward=None))
    assert isinstance(item, Unlabelled) and "result.json" in item.reason
    (error,) = items(write_atif(tmp_path / "t2", reward=1.0, version="ATIF-v2.0"))
    assert "ATIF schema ATIF-v2.0 is not supported (1.x is)" in str(error)


def test_swe_agent_steps_and_json_labels(tmp_path: Path) -> None:
    traj = {
        "trajectory": [
            {
                "response": "ls it",
                "thought": "look first",
                "action": "ls\n",
                "observation": "a.py",
                "state": "{}",
            },
        ],
        "history": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Fix bug 7"}],
        "info": {"exit_status": "submitted"},
    }
    path = tmp_path / "org__repo-7.traj"
    path.write_text(json.dumps(traj))
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"org__repo-7": {"resolved": True}}))
    (run,) = runs(path, labels=[labels])
    assert (run.format, run.record.task_id, run.record.task, run.record.success) == (
        "swe-agent",
        "org__repo-7",
        "Fix bug 7",
        True,
    )
    turn = run.record.turns[0]
    assert (turn.content, turn.reasoning, turn.action, turn.observation) == (
        "ls it",
        "look first",
        "ls\n",
        "a.py",
    )
    assert turn.metadata == {"state": "{}"} and run.record.metadata["label_source"] == labels.name


def chat_line(task_id: str, **extra: Any) -> str:
    messages = [
        {"role": "user", "content": "What is 2+2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calc", "arguments": '{"x": "2+2"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "assistant", "content": [{"type": "text", "text": "4"}], "refusal": None},
    ]
    return json.dumps({"task_id": task_id, "messages": messages, **extra}) + "\n"


def test_openai_messages_and_side_car_labels_in_csv(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(chat_line("a", reward=1) + chat_line("b") + chat_line("c", success=False))
    labels = tmp_path / "labels.csv"
    labels.write_text("task_id,reward\nb,0.5\nc,1\n")
    found = runs(path, labels=[labels], threshold=0.5)
    assert [(r.record.task_id, r.record.success) for r in found] == [
        ("a", True),
        ("b", True),
        ("c", True),
    ]
    turns = found[0].record.turns
    assert len(turns) == 3 and turns[1].tool_calls[0].result == "4"  # type: ignore[index]
    assert turns[1].tool_calls[0].arguments == '{"x": "2+2"}'  # type: ignore[index]
    assert turns[2].content == "4" and turns[2].metadata == {"refusal": None}


def test_a_label_that_is_not_one_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(chat_line("a"))
    labels = tmp_path / "labels.csv"
    labels.write_text("task_id,success\na,maybe\n")
    with pytest.raises(InputError) as caught:
        plan_inputs([path], labels=[labels])
    assert str(caught.value) == (
        f"{labels}:2: field 'success': 'maybe' is not a label (true/false, a number, C/I)"
    )


def test_an_unknown_file_lists_what_was_expected(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}')
    with pytest.raises(InputError) as caught:
        plan_inputs([path])
    message = str(caught.value)
    assert message.startswith(
        f"{path}: not a trajectory format wikitrace knows (expected one of: native ("
    )
    assert all(name in message for name in READABLE)


def test_an_explicit_format_wins_over_detection(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(chat_line("a", success=True, history=[], instance_id="a"))  # openhands-like
    assert plan_inputs([path]).files[0].format == "openhands"
    (run,) = runs(path, fmt="openai")
    assert run.format == "openai" and run.record.metadata == {"history": [], "instance_id": "a"}


# --- round trip and the CLI -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "tau2-telecom-2sims.json",
        "inspect-log_streaming.eval",
        "alfworld-2episodes.out",
        "mini-swe-agent",
    ],
)
def test_round_trip_import_convert_build_keeps_every_raw_turn(name: str, tmp_path: Path) -> None:
    from click.testing import CliRunner

    source = HERE / name
    result = CliRunner().invoke(cli, ["convert", str(source)], catch_exceptions=False)
    assert result.exit_code == 0
    converted = tmp_path / "runs.jsonl"
    converted.write_text(result.stdout)
    direct = build_corpus(BuildOptions(inputs=[source], output=tmp_path / "a", redact=False))
    again = build_corpus(BuildOptions(inputs=[converted], output=tmp_path / "b", redact=False))
    assert (direct.runs, direct.successes) == (again.runs, again.successes)
    expected = [run.data["turns"] for run in runs(source)]
    assert [json.loads(line)["turns"] for line in result.stdout.splitlines()] == expected
    for step, turns in enumerate(expected, start=1):
        for corpus in ("a", "b"):
            assert read_jsonl(tmp_path / corpus / f"raw/step-{step:04d}/solver.full.jsonl") == turns


def test_convert_says_what_it_detected_and_counts_per_format(tmp_path: Path) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(
        cli,
        ["convert", str(HERE / "alfworld-cut-episode.out"), str(HERE / "alfworld-2episodes.out")],
    )
    assert result.exit_code == 0
    assert result.stderr.splitlines()[0] == "reading 2 files as alfworld (detected from content)"
    assert "alfworld: 2 runs (1 succeeded, 1 failed), 1 unlabelled" in result.stderr
    assert len(result.stdout.splitlines()) == 2
    kept = CliRunner().invoke(
        cli, ["convert", "--unlabelled", "keep", str(HERE / "alfworld-cut-episode.out")]
    )
    assert json.loads(kept.stdout)["success"] is None


def test_a_build_of_only_unlabelled_runs_asks_for_labels(tmp_path: Path) -> None:
    code, out, err = run_cli(
        ["build", str(HERE / "mini-swe-agent/trajs"), "-o", str(tmp_path / "c")]
    )
    assert (code, out) == (2, "") and not (tmp_path / "c").exists()
    assert "none of the 2 runs found has a label (give their outcomes with --labels FILE" in err
