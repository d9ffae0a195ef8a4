"""Benchmark logs that lost or distorted runs when tried on logs the tests had not seen: each
case on a small excerpt written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun, Unlabelled
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


# --- issue 39: logs shaped as they are found, and what the CLI says about them ---------------


def test_a_mini_swe_agent_file_whose_messages_come_after_a_megabyte_of_patch(
    tmp_path: Path,
) -> None:
    """mini-swe-agent writes `info` (with the submitted patch) before `messages`: a patch past
    the probe's head hid both `info.mini_version` and `messages` from detection."""
    source = DATA / "importers/mini-swe-agent/trajs/django__django-10999.traj.json"
    traj = json.loads(source.read_text())
    traj["info"]["submission"] = "diff --git a/big.py b/big.py\n" + "+x = 1\n" * 180_000
    trajs = tmp_path / "trajs"
    trajs.mkdir()
    big = trajs / "django__django-10999.traj.json"
    big.write_text(json.dumps(traj))
    assert list(traj)[:2] == ["info", "messages"]
    assert big.read_bytes().index(b'"messages"') > 1_000_000
    # Something else that opens with a big `info` is still no mini-swe-agent file.
    (trajs / "other.json").write_text(json.dumps({"info": {"blob": "y" * 400_000}, "n": 1}))
    plan = plan_inputs([trajs])
    assert [(f.path.name, f.format) for f in plan.files] == [(big.name, "mini-swe-agent")]
    assert [Path(i["path"]).name for i in plan.ignored] == ["other.json"]
    (run_read,) = plan.items()
    assert isinstance(run_read, Unlabelled) and run_read.task_id == "django__django-10999"
    assert len(run_read.data["turns"]) == len(items(source)[0].data["turns"])
    assert plan_inputs([big]).files[0].format == "mini-swe-agent"  # given on its own too


def _keys_sent(*sends: list[str]) -> str:
    """commands.txt as Terminal-Bench 1.0 writes it: `repr(keys)` of each send_keys call."""
    return "".join(f"{keys!r}\n" for keys in sends)


def test_terminal_bench_harness_keystrokes_are_no_agent_turns(tmp_path: Path) -> None:
    trial = tmp_path / "runs/2025-08-07__20-46-16/hello-world/hello-world.1-of-1"
    (trial / "sessions").mkdir(parents=True)
    (trial / "results.json").write_text(
        json.dumps(
            {
                "trial_name": "hello-world.1-of-1",
                "task_id": "hello-world",
                "instruction": "Create hello.txt containing Hello, world!",
                "is_resolved": True,
                "failure_mode": "unset",
            }
        )
    )
    agent = [
        ["mini -m anthropic/claude-sonnet-4-0 -t 'Create hello.txt' -y", "Enter"],
        ["clear", "Enter"],  # the agent's own: not right after a recording starts
        ["python3", "Enter"],
        ["C-d"],  # the agent leaves python: not at the end of the file
        ["cat hello.txt", "Enter"],
    ]
    (trial / "commands.txt").write_text(
        _keys_sent(
            ["asciinema rec --stdin /logs/agent.cast", "Enter"],  # TmuxSession.start
            ["clear", "Enter"],
            ["source /installed-agent/setup-env.sh", "Enter"],  # AbstractInstalledAgent
            ["source /installed-agent/install-agent.sh && echo 'INSTALL_SUCCESS'", "Enter"],
            *agent,
            ["asciinema rec --stdin /logs/tests.cast", "Enter"],  # the tests' session
            ["clear", "Enter"],
            ["bash ", "/tests/run-tests.sh", "Enter"],  # Harness._run_tests
            ["C-d"],  # TmuxSession.stop, once a session
            ["C-d"],
        )
    )
    (trial / "sessions/agent.log").write_text("$ cat hello.txt\nHello, world!\n")
    (found,) = items(tmp_path / "runs")
    assert isinstance(found, SourceRun) and found.record.success is True
    assert [t.action for t in found.record.turns if t.role == "agent"] == [
        repr(keys) for keys in agent
    ]
    assert found.record.metadata["harness_keystrokes_left_out"] == 9
    assert found.record.turns[-1].observation == "$ cat hello.txt\nHello, world!\n"


HARBOR_GOLDEN = DATA / "importers/atif-harbor-golden"


def test_atif_results_without_ids_pair_by_place_and_sub_agents_join_their_step() -> None:
    """Harbor's golden Terminus-2 trajectory logs no `source_call_id`, and delegates its context
    summarization to three sub-agents whose trajectories lie beside it."""
    plan = plan_inputs([HARBOR_GOLDEN])
    assert [f.path.name for f in plan.files] == ["trajectory.json"]
    assert sorted(Path(i["path"]).name for i in plan.ignored) == [
        "trajectory.summarization-1-answers.json",
        "trajectory.summarization-1-questions.json",
        "trajectory.summarization-1-summary.json",
    ]
    assert {i["reason"] for i in plan.ignored} == {
        "atif: a sub-agent's trajectory, read with trajectory.json, which delegated to it"
    }
    (found,) = plan.items()
    assert isinstance(found, Unlabelled)  # no trial result.json beside it
    turns = found.data["turns"]
    main = [t for t in turns if "subagent" not in (t.get("metadata") or {})]
    calls = [call for t in main for call in t.get("tool_calls", [])]
    assert len(calls) == 7 and all("result" in call for call in calls)
    assert {call["metadata"]["result_paired_by"] for call in calls} == {"position"}
    assert calls[0]["result"].startswith("New Terminal Output:")
    # The sub-agents' turns come right after the system step (5) that handed off to them.
    at = next(i for i, t in enumerate(turns) if t["metadata"].get("step_id") == 5)
    joined = [t["metadata"]["subagent"] for t in turns[at + 1 : at + 15]]
    assert [link["source"] for link in joined] == (
        ["trajectory.summarization-1-summary.json"] * 5
        + ["trajectory.summarization-1-questions.json"] * 2
        + ["trajectory.summarization-1-answers.json"] * 7
    )
    assert {(link["step"], link["call"]) for link in joined} == {(5, None)}
    assert turns[at + 15]["metadata"] == {"step_id": 6}
    assert found.data["metadata"]["subagents"] == {"joined": 3, "unresolved": 0}


def _atif_step(step_id: int, **fields: Any) -> dict[str, Any]:
    return {"step_id": step_id, "source": "agent", "message": "", **fields}


def test_atif_one_output_for_several_calls_answers_none_and_embedded_sub_agents_join_a_call(
    tmp_path: Path,
) -> None:
    bash = {"function_name": "bash_command", "arguments": {"keystrokes": "ls\n"}}
    trajectory = {
        "schema_version": "ATIF-v1.7",
        "session_id": "s1",
        "agent": {"name": "terminus-2", "version": "2.0.0"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "List the files"},
            _atif_step(  # Terminus-2: one terminal output after all of a step's commands
                2,
                tool_calls=[{"tool_call_id": "c1", **bash}, {"tool_call_id": "c2", **bash}],
                observation={"results": [{"content": "a.txt b.txt"}]},
            ),
            _atif_step(
                3,
                tool_calls=[{"tool_call_id": "d1", "function_name": "delegate", "arguments": {}}],
                observation={
                    "results": [
                        {
                            "source_call_id": "d1",
                            "subagent_trajectory_ref": [{"trajectory_id": "helper"}],
                        }
                    ]
                },
            ),
        ],
        "subagent_trajectories": [
            {
                "schema_version": "ATIF-v1.7",
                "trajectory_id": "helper",
                "agent": {"name": "helper", "version": "1"},
                "steps": [
                    {"step_id": 1, "source": "user", "message": "Count the files"},
                    _atif_step(2, message="2 files"),
                ],
            }
        ],
    }
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(trajectory))
    (found,) = items(path)
    turns = found.data["turns"]
    assert [c.get("result") for c in turns[1]["tool_calls"]] == [None, None]
    assert turns[1]["observation"] == "a.txt b.txt"
    assert [t["content"] for t in turns[3:]] == ["Count the files", "2 files"]
    link = {"id": "helper", "source": "subagent_trajectories", "step": 3, "call": "d1"}
    assert [t["metadata"]["subagent"] for t in turns[3:]] == [link, link]
    assert "subagent_trajectories" not in found.data["metadata"]  # joined, not kept twice


def test_convert_v_lists_the_files_it_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "runs.jsonl").write_bytes((DATA / "tau-bench-airline-3runs.jsonl").read_bytes())
    (folder / "notes.txt").write_text("not a log\n")
    said = (
        "reading 1 file as native (detected from content)\nignored 1 other files (-v lists them)\n"
    )
    done = "native: 3 runs (2 succeeded, 1 failed), 0 unlabelled\nwrote 3 runs\n"
    listed = f"  ignored {folder / 'notes.txt'}: not a known trajectory format\n"
    code, _, err = run(["convert", str(folder)])
    assert (code, err) == (0, said + done)
    for args in (["convert", "-v", str(folder)], ["-v", "convert", str(folder)]):
        code, out, err = run(args)
        assert (code, err) == (0, said + listed + done)
        assert len(out.splitlines()) == 3


def test_convert_names_label_keys_that_match_no_run(tmp_path: Path) -> None:
    runs = DATA / "tau-bench-airline-3runs.jsonl"
    labels = tmp_path / "labels.json"
    labels.write_text('{"12": true, "task-12": true, "13": false}\n')
    code, _, err = run(["convert", str(runs), "--labels", str(labels)])
    assert code == 0
    assert err == (
        "reading 1 file as native (detected from content)\n"
        "labels from 1 file given with --labels\n"
        "native: 3 runs (2 succeeded, 1 failed), 0 unlabelled\n"
        "2 label keys matched no run: 'task-12', '13' (a label is keyed by a run id, a task "
        "id, or a session's file name)\n"
        "wrote 3 runs\n"
    )


def test_build_names_label_keys_that_match_no_run(tmp_path: Path) -> None:
    labels = tmp_path / "labels.json"
    labels.write_text('{"0": false, "a": true, "b": true, "c": true, "d": true, "e": true, "f": 1}')
    corpus = tmp_path / "corpus"
    code, _, err = run(
        [
            "build",
            str(DATA / "tau-bench-airline-3runs.jsonl"),
            "--labels",
            str(labels),
            "-o",
            str(corpus),
        ]
    )
    assert code == 0
    assert (
        "\n  6 label keys matched no run: 'a', 'b', 'c', 'd', 'e' and 1 more (a label is keyed "
        "by a run id, a task id, or a session's file name)\n"
    ) in err
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["build"]["unmatched_labels"] == ["a", "b", "c", "d", "e", "f"]


def test_convert_writes_a_run_given_twice_once(tmp_path: Path) -> None:
    runs = DATA / "tau-bench-airline-3runs.jsonl"
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(runs.read_bytes())
    code, out, err = run(["convert", str(runs), str(runs), str(copy)])
    assert code == 0
    assert [json.loads(line)["task_id"] for line in out.splitlines()] == ["0", "12", "1"]
    assert err.endswith("wrote 3 runs (6 duplicate runs of the input left out)\n")
