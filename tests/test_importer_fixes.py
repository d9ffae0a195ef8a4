"""Benchmark logs that lost or distorted runs when tried on logs the tests had not seen: each
case on a small excerpt written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.inputs import SourceRun, Unlabelled
from wikitrace.corpus_schema import InputError

from helpers import DATA, run


def items(*paths: Path, labels: list[Path] | None = None) -> list[Any]:
    return list(plan_inputs(list(paths), labels=labels).items())


def test_swe_bench_reports_named_by_their_folder(tmp_path: Path) -> None:
    trajs = DATA / "importers/mini-swe-agent/trajs"
    logs = tmp_path / "logs"
    for instance, resolved in (("django__django-10999", True), ("django__django-16255", False)):
        (logs / instance).mkdir(parents=True)
        (logs / instance / "report.json").write_text(json.dumps({"resolved": resolved}))
    found = items(trajs, labels=[logs])
    assert [(r.record.task_id, r.record.success) for r in found] == [
        ("django__django-10999", True),
        ("django__django-16255", False),
    ]


REFLEXION = """BEGIN TRIAL 1
------------- BEGIN CORRECT AGENTS -------------
Question: Who wrote Hamlet?
Thought 1: I need to search Hamlet.
Action 1: Search[Hamlet]
Observation 1: Hamlet is a tragedy by William Shakespeare.
Action 2: Finish[William Shakespeare]
Correct answer: William Shakespeare
------------- BEGIN INCORRECT AGENTS -----------
Question: What is the capital of Australia?
Thought 1: It is Sydney.
Action 1: Finish[Sydney]
Correct answer: Canberra
BEGIN TRIAL 2
------------- BEGIN CORRECT AGENTS -------------
Question: Who wrote Hamlet?
Thought 1: I need to search Hamlet.
Action 1: Search[Hamlet]
Observation 1: Hamlet is a tragedy by William Shakespeare.
Action 2: Finish[William Shakespeare]
Correct answer: William Shakespeare
Question: What is the capital of Australia? You have attempted to answer following question \
before and failed. The following reflection(s) give a plan to avoid failing to answer the \
question in the same way you did previously.
Reflections:
- I guessed the largest city instead of checking; search first.
Thought 1: I should search.
Action 1: Search[Australia capital]
Observation 1: Canberra is the capital city of Australia.
Action 2: Finish[Canberra]
Correct answer: Canberra
"""


def test_reflexion_logs_one_task_a_question_reprints_left_out_reflections_kept(
    tmp_path: Path,
) -> None:
    log = tmp_path / "reflexion.txt"
    log.write_text(REFLEXION)
    found = items(log)
    assert [(r.record.task, r.record.metadata["attempt"], r.record.success) for r in found] == [
        ("Who wrote Hamlet?", 1, True),
        ("What is the capital of Australia?", 1, False),
        ("What is the capital of Australia?", 2, True),
    ]
    assert found[0].record.metadata["reprints_left_out"] == [2]
    assert found[1].record.task_id == found[2].record.task_id
    reflection = found[2].record.turns[0]
    assert reflection.role == "user" and "search first" in (reflection.content or "")


def test_the_action_observation_variant_and_fever_claims(tmp_path: Path) -> None:
    log = tmp_path / "fever.txt"
    log.write_text(
        "------------- BEGIN CORRECT AGENTS -------------\n"
        "Claim: Nikolaj Coster-Waldau worked with the Fox Broadcasting Company.\n"
        "Thought: I need to search Nikolaj Coster-Waldau.\n"
        "Action: Search[Nikolaj Coster-Waldau]\n"
        "Observation: He appeared in the Fox television film Virtuality.\n"
        "Action: Finish[SUPPORTS]\n"
        "Observation: Episode finished.\n"
    )
    (found,) = items(log)
    turns = found.record.turns
    assert found.record.task.startswith("Nikolaj Coster-Waldau worked") and found.record.success
    assert [(t.reasoning is not None, t.action, t.observation) for t in turns] == [
        (
            True,
            "Search[Nikolaj Coster-Waldau]",
            "He appeared in the Fox television film Virtuality.",
        ),
        (False, "Finish[SUPPORTS]", "Episode finished."),
    ]


def test_library_warnings_in_an_episode_stay_out_of_the_task(tmp_path: Path) -> None:
    source = (DATA / "importers/alfworld-2episodes.out").read_text().splitlines()
    at = next(i for i, line in enumerate(source) if line.startswith("You are in the middle"))
    warning = "/usr/lib/python3/dist-packages/torch/cuda.py:52: UserWarning: CUDA not found"
    log = tmp_path / "alfworld.out"
    log.write_text("\n".join([*source[:at], warning, *source[at:]]) + "\n")
    first = items(log)[0]
    assert "UserWarning" not in first.record.task
    assert first.record.metadata["unparsed_lines"][0]["text"] == warning


def test_terminal_bench_trials_and_the_run_level_results(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs/2025-06-01"
    trial = run_dir / "hello-world/hello-world.1-of-1"
    (trial / "sessions").mkdir(parents=True)
    (trial / "results.json").write_text(
        json.dumps(
            {
                "id": "a1",
                "trial_name": "hello-world.1-of-1",
                "task_id": "hello-world",
                "instruction": "Create hello.txt containing Hello, world!",
                "is_resolved": True,
                "failure_mode": "unset",
            }
        )
    )
    (trial / "commands.txt").write_text("echo 'Hello, world!' > hello.txt\ncat hello.txt\n")
    (trial / "sessions/agent.log").write_text("$ cat hello.txt\nHello, world!\n")
    (run_dir / "results.json").write_text(
        json.dumps({"id": "r", "results": [], "resolved_ids": ["hello-world"], "accuracy": 1.0})
    )
    (found,) = items(tmp_path / "runs")
    assert isinstance(found, SourceRun) and found.format == "terminal-bench"
    assert found.record.task_id == "hello-world" and found.record.success is True
    assert [t.action for t in found.record.turns[:2]] == [
        "echo 'Hello, world!' > hello.txt",
        "cat hello.txt",
    ]
    assert found.record.turns[-1].observation == "$ cat hello.txt\nHello, world!\n"


def test_openhands_resolver_output(tmp_path: Path) -> None:
    record = {
        "issue": {"owner": "acme", "repo": "api", "number": 42, "title": "Crash on empty body"},
        "instruction": "Fix the crash on an empty request body.",
        "history": [{"id": 1, "source": "agent", "action": "run", "args": {"command": "pytest"}}],
        "success": False,
        "result_explanation": "The tests still fail.",
    }
    output = tmp_path / "output.jsonl"
    output.write_text(json.dumps(record) + "\n")
    (found,) = items(output)
    assert isinstance(found, SourceRun)
    assert (found.record.task_id, found.record.success) == ("acme/api#42", False)


def test_atif_is_error_is_an_error_signal(tmp_path: Path) -> None:
    trajectory = {
        "schema_version": "ATIF-v1.2",
        "session_id": "s1",
        "steps": [
            {"step_id": 1, "source": "user", "message": "Build the project"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "Running make",
                "tool_calls": [
                    {"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "make"}}
                ],
                "observation": {
                    "results": [
                        {
                            "source_call_id": "c1",
                            "content": "make: *** [all] Stop.",
                            "is_error": True,
                        }
                    ]
                },
            },
        ],
    }
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory))
    labels = tmp_path / "labels.json"
    labels.write_text('{"s1": false}\n')
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[path], output=corpus, labels=[labels]))
    assert "make: *** [all] Stop." in (corpus / "compilation/step-0001.md").read_text()


def test_convert_with_a_format_the_file_is_not_in_fails(tmp_path: Path) -> None:
    native = tmp_path / "runs.jsonl"
    native.write_text((DATA / "tau-bench-airline-3runs.jsonl").read_text().splitlines()[0] + "\n")
    code, out, err = run(["convert", "--format", "tau-bench", str(native)])
    assert code == 2 and out == ""
    assert "no runs found reading it as tau-bench; its content looks like native" in err


def test_build_writes_a_run_given_twice_once(tmp_path: Path) -> None:
    source = DATA / "tau-bench-airline-3runs.jsonl"
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(source.read_bytes())
    report = build_corpus(BuildOptions(inputs=[source, copy], output=tmp_path / "corpus"))
    assert report.runs == 3 and report.duplicates == 3
    assert not isinstance(items(source)[0], (Unlabelled, InputError))


def test_an_attempt_listed_in_two_sections_of_a_trial_is_one_run(tmp_path: Path) -> None:
    attempt = (
        "Question: Who directed the 1940 film in which John Arledge appeared?\n"
        "Thought 1: I need to search John Arledge.\n"
        "Action 1: Search[John Arledge]\n"
        "Observation 1: John Arledge was an American actor.\n"
        "Correct answer: John Ford\n"
    )
    log = tmp_path / "react.txt"
    log.write_text(
        "BEGIN TRIAL 1\n"
        "------------- BEGIN INCORRECT AGENTS -----------\n"
        + attempt
        + "------------- BEGIN HALTED AGENTS --------------\n"
        + attempt
    )
    (found,) = items(log)
    assert found.record.success is False
    assert found.record.metadata["section"] == "INCORRECT"
    assert found.record.metadata["also_listed_under"] == ["HALTED"]
