"""wikitrace inside inspect_ai: a small task (tests/data/inspect_task/door_codes.py) run four
ways with inspect's mock model scripted as an agent that follows the lesson it is shown, then
`wikitrace lift` and `attribute` on the logs; no key, no network."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from inspect_ai import Task, eval
from inspect_ai.agent import as_solver, react
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import match
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver
from inspect_ai.tool import ToolDef, ToolError, ToolInfo
from inspect_ai.util import sandbox

from wikitrace import prompts
from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.compile import Templates
from wikitrace.evaluation import EvalOptions, read_rows
from wikitrace.evaluation.attribute import Attributor, attribute
from wikitrace.evaluation.lift import lift, markdown
from wikitrace.integrations.inspect import (
    MEMORY_TOOLS,
    METADATA_KEY,
    first_message,
    memory_tools,
    with_memory,
)
from wikitrace.integrations.inspect_runs import RESULTS, run_methods
from wikitrace.tools.mcp_server import Corpus, build_server
from wikitrace.tools.memory import insights_shown

from helpers import (
    CONFLICT_PAIR,
    CONFLICT_TASK,
    FakeLLM,
    Stub,
    attribution_answer,
    conflicting_lessons,
    good_answer,
    make_run,
    run,
    write_runs,
)

pytestmark = [
    # inspect_ai's own call of tenacity's wait (inspect_ai 0.3.285 with tenacity 9)
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
    # inspect_ai leaves an anyio stream a sample for the garbage collector to close.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObjectReceiveStream.__del__"
        ":pytest.PytestUnraisableExceptionWarning"
    ),
]


@pytest.fixture(autouse=True)
def _collect_inspect_streams() -> Any:
    """Collect what inspect_ai left while this module's filters apply: otherwise the stream is
    closed later, inside whichever test the worker runs next, which then errors on it."""
    yield
    gc.collect()


TASK = Path(__file__).parent / "data" / "inspect_task" / "door_codes.py"
LESSON = "The door code is the room number written backwards: room 27 opens with 72."
OWN = "OWN-TASK-LESSON: room 34 opens with 43."


def _compiled(messages: list[dict[str, Any]]) -> str:
    """The compiler's answer, its lesson the door-code rule (or, for room 34's own run, a
    lesson that names the answer: leave-one-task-out must hide it)."""
    prompt = messages[0]["content"]
    answer = json.loads(good_answer(prompt))
    if "insights" in answer:
        own = "room 34" in prompt
        answer["insights"] = [
            {
                "title": "Room 34's own run" if own else "Door codes are the room number backwards",
                "guideline": OWN if own else LESSON,
                "applicability": "Questions about a room's door code.",
                "supporting_claims": [1],
            }
        ]
    return json.dumps(answer)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two past runs of the task type: room 27 (task door_codes/9) and room 34, the eval's own
    sample 1 (door_codes/1); each failed, and each left a lesson."""
    root = tmp_path_factory.mktemp("inspect")

    def past(task_id: str, room: int, code: int) -> dict[str, Any]:
        question = f"What is the door code of room {room}?"
        return make_run(
            task_id,
            task=question,
            task_type="door_codes",
            turns=[
                {"role": "user", "content": question},
                {
                    "role": "assistant",
                    "action": f"enter code {room}",
                    "observation": f"Wrong code. The right one was {code}.",
                },
            ],
        )

    runs = write_runs(
        root / "runs.jsonl", [past("door_codes/9", 27, 72), past("door_codes/1", 34, 43)]
    )
    llm = FakeLLM(answer=_compiled)
    options = BuildOptions(
        inputs=[runs], output=root / "corpus", model=llm.model, cache_dir=root / "cache", mine=False
    )
    build_corpus(options, llm=llm)
    return root / "corpus"


def _text(message: ChatMessage) -> str:
    return message.text


def agent(
    messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any, config: Any
) -> ModelOutput:
    """The scripted agent: it follows the door-code lesson when its first message (or a page
    it read) holds it, reads the lesson's page first when it can and the room is 34, and
    reports the insights its first message listed."""
    output = _act(messages, tools)
    size = sum(len(_text(m)) for m in messages) // 4
    output.usage = ModelUsage(input_tokens=size, output_tokens=10, total_tokens=size + 10)
    return output


def _act(messages: list[ChatMessage], tools: list[ToolInfo]) -> ModelOutput:
    first, last = _text(messages[0]), _text(messages[-1])
    if "The episode is over" in last:
        used = sorted(set(re.findall(r"\*\*(insight-\d{4}): ", first)))
        report = {"used": {"insights": used}}
        return ModelOutput.from_content("mockllm", f"```json\n{json.dumps(report)}\n```")
    task = first.split("# Your task", 1)[-1].strip().splitlines()[0]
    room = re.findall(r"room (\d+)\?", task)[0]
    read = [m for m in messages if isinstance(m, ChatMessageTool)]
    if "read_page" in {t.name for t in tools} and room == "34" and not read:
        ident = re.findall(r"\*\*(insight-\d{4}): Door codes", first)[0]
        return ModelOutput.for_tool_call("mockllm", "read_page", {"path": f"insight/{ident}.md"})
    knows = "written backwards" in first or any("written backwards" in _text(m) for m in read)
    return ModelOutput.from_content("mockllm", f"The code is {room[::-1] if knows else room}.")


@pytest.fixture(scope="module")
def runs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    model = get_model("mockllm/model", custom_outputs=agent)
    run_methods(f"{TASK}@door_codes", corpus, model, out, epochs=3)
    return out


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]


def test_four_methods_each_sample_three_times_with_its_memory_in_the_metadata(
    runs: Path, corpus: Path
) -> None:
    rows = _rows(runs)
    by = {(r["method"], r["task_id"], r["trial"]): r for r in rows}
    assert len(rows) == len(by) == 4 * 3 * 3
    outcome = {
        method: {task: [by[(method, task, t)]["score"] for t in (1, 2, 3)] for task in "123"}
        for method in ("no-memory", "no-memory-rerun", "insights-only", "wikitrace")
    }
    # Without memory room 34 fails; with the lesson it is solved, and the annex's room 58,
    # which the lesson does not fit, is broken (a Regression).
    assert (
        outcome["no-memory"]
        == outcome["no-memory-rerun"]
        == {"1": [0.0] * 3, "2": [1.0] * 3, "3": [1.0] * 3}
    )
    assert (
        outcome["insights-only"]
        == outcome["wikitrace"]
        == {"1": [1.0] * 3, "2": [1.0] * 3, "3": [0.0] * 3}
    )
    for row in rows:
        assert row["suite"] == "door_codes" and row["tokens"] > 0 and row["seconds"] > 0
        if row["method"].startswith("no-memory"):
            assert "used" not in row and "drilldowns" not in row
        else:  # the insights its first message listed, checked against the corpus
            assert row["used"]["insights"] and row["used"]["raw"] == []
    drilled = {(r["task_id"], r["drilldowns"]) for r in rows if r["method"] == "wikitrace"}
    assert drilled == {("1", 1), ("2", 0), ("3", 0)}
    assert {r["drilldowns"] for r in rows if r["method"] == "insights-only"} == {0}

    # Leave-one-task-out: sample 1 (door_codes/1) is never shown its own run's lesson.
    own = [p.stem for p in (corpus / "insight").glob("insight-*.md") if OWN in p.read_text()]
    assert len(own) == 1
    log_path, member = by[("wikitrace", "1", 1)]["trajectory"].split("#")
    log = read_eval_log(str(runs / log_path))
    assert log.samples is not None
    for sample in log.samples:
        record = sample.metadata[METADATA_KEY]
        assert record["access"] == "tools" and record["task_type"] == "door_codes"
        assert (own[0] in record["insights_shown"]) == (sample.id != "1")
        assert record["excluded_tasks"] == [f"door_codes/{sample.id}", str(sample.id)]
        # The scorer read the agent's answer, not the citation report after it.
        assert sample.output.completion.startswith("The code is")
    with zipfile.ZipFile(runs / log_path) as archive:
        assert member in archive.namelist()


def test_lift_prints_the_table_and_json(runs: Path) -> None:
    code, out, err = run(["lift", str(runs), "--resamples", "200", "--json"])
    assert code == 0, err
    assert err == ""
    data = json.loads(out)
    got = {r["method"]: r for r in data["results"]}
    assert set(got) == {"no-memory", "no-memory-rerun", "insights-only", "wikitrace"}
    wikitrace = got["wikitrace"]
    assert wikitrace["success_rate"]["value"] == pytest.approx(2 / 3)
    assert got["no-memory"]["success_rate"]["value"] == pytest.approx(2 / 3)
    assert wikitrace["gain"]["value"] == 1.0 and wikitrace["gain_trials"] == 3
    assert wikitrace["regression"]["value"] == 0.5 and wikitrace["regression_trials"] == 6
    assert got["no-memory-rerun"]["regression"]["value"] == 0.0
    assert wikitrace["stay_descent"] == {
        "stayed": 6,
        "stayed_succeeded": 3,
        "descended": 3,
        "descended_succeeded": 3,
    }
    assert got["insights-only"]["stay_descent"]["descended"] == 0
    assert got["no-memory"]["stay_descent"] is None
    assert wikitrace["regression_causes"] is None  # no judge
    usage, plain = wikitrace["usage"], got["no-memory"]["usage"]
    assert usage["episodes"] == usage["tokens_episodes"] == 9
    assert usage["tokens"] > got["insights-only"]["usage"]["tokens"] > plain["tokens"] > 0

    code, table, err = run(["lift", str(runs / RESULTS), "--resamples", "200"])
    assert code == 0, err
    lines = table.splitlines()
    assert lines[0].startswith(
        "| suite | method | tasks | trials | success (95% CI) | Gain (95% CI) |"
    )
    assert lines[0].endswith("| Stay / Descent | tokens / episode | seconds / episode |")
    line = next(x for x in lines if "| wikitrace |" in x)
    assert "stay 6 (50% ok) / descent 3 (100% ok)" in line
    assert "| 1.000 [1.000, 1.000] (1 task, 3 trials) | 0.500 [" in line
    # One task behind the Gain: never "beats noise".
    assert "Gain not judged (1 task, fewer than 20)" in line


def test_attribution_reads_each_episode_from_its_eval_log(runs: Path, corpus: Path) -> None:
    rows = read_rows([runs / RESULTS])
    llm = FakeLLM(answer=lambda messages: attribution_answer(messages[0]["content"]))
    attributor = Attributor(
        corpus=corpus,
        shown=insights_shown(corpus),
        llm=llm,
        templates=Templates.load(also=(prompts.ATTRIBUTE,)),
    )
    report = attribute(rows, attributor, "no-memory", "no-memory-rerun")
    assert report.regressions == 6  # room 58, three trials each of the two memory methods
    assert all(e.problem is None and e.cause == "A" for e in report.episodes), report.episodes
    assert {e.task_id for e in report.episodes} == {"3"}
    # The judge saw room 58's episode: the annex question, from its own sample in the log.
    assert all("annex room 58" in call[0]["content"] for call in llm.calls)

    table = lift(rows, EvalOptions(resamples=200), report)
    line = next(x for x in markdown(table).splitlines() if "| wikitrace |" in x)
    assert "| A 3 |" in line
    by_method = {x.result.method: x for x in table.lines}
    assert by_method["no-memory"].causes is None
    assert by_method["insights-only"].causes == {"A": 3, "B": 0, "C": 0, "D": 0, "E": 0}


def _own_entries(corpus: Path) -> list[str]:
    """What leave-one-task-out must hide from sample 1 (room 34): its run and its lesson."""
    own = [p.stem for p in (corpus / "insight").glob("insight-*.md") if OWN in p.read_text()]
    assert len(own) == 1
    return ["step-0002", own[0], "room 34", OWN]


def test_memory_tools_are_the_mcp_server_s_and_leave_the_own_task_out(corpus: Path) -> None:
    server = build_server(Corpus(corpus))
    pages = ["_index.md", "raw/_index.md", "compilation/_index.md", "insight/_index.md"]

    async def main() -> tuple[list[Any], list[Any], dict[str, str]]:
        listed = await server.list_tools()
        tools = await memory_tools(corpus, ["door_codes/1", "1"])
        answers: dict[str, str] = {}
        defs = {ToolDef(t).name: t for t in tools}
        answers["search"] = await defs["search"](query="door code room 34")
        answers["actions"] = await defs["actions"](step="1")
        answers["audit"] = await defs["audit"](entry="step-0001")
        for page in [*pages, "catalog.jsonl"]:
            answers[page] = await defs["read_page"](path=page)
        for name, args in (
            ("actions", {"step": "step-0002"}),
            ("read_page", {"path": "raw/step-0002/metadata.md"}),
        ):
            try:
                await defs[name](**args)
            except ToolError as error:
                answers[f"{name} refused"] = str(error)
        return listed, [ToolDef(t) for t in tools], answers

    listed, defs, answers = anyio.run(main)
    mcp = {t.name: t for t in listed}
    assert [d.name for d in defs] == ["search", "read_page", "actions", "turn", "audit"]
    for d in defs:
        assert d.description == mcp[d.name].description
        assert "exclude_tasks" not in d.parameters.properties
    assert "room 27" in answers["search"]
    assert answers["actions"].startswith("step-0001:")
    assert "step-0001" in answers["raw/_index.md"] and "room 27" in answers["catalog.jsonl"]
    # Room 34's own run and lesson are in no page, index, catalog line or answer (a refusal
    # repeats the id it was asked for, nothing more).
    read = {name: text for name, text in answers.items() if not name.endswith("refused")}
    for hidden in _own_entries(corpus):
        assert not [name for name, text in read.items() if hidden in text], hidden
    assert answers["actions refused"] == "step-0002 is not in this corpus (see raw/_index.md)"
    assert answers["read_page refused"].startswith("'raw/step-0002/metadata.md' is not a page")


def test_with_a_sandbox_the_corpus_is_copied_read_only_without_the_own_task(
    corpus: Path, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    @solver
    def look() -> Solver:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            mount = state.metadata[METADATA_KEY]["mount"]
            files = await sandbox().exec(["find", mount, "-type", "f"])
            seen["files"] = sorted(
                Path(p).relative_to(mount).as_posix() for p in files.stdout.split()
            )
            texts = await sandbox().exec(
                ["sh", "-c", 'find "$1" -type f -exec cat {} +', "sh", mount]
            )
            seen["text"], seen["mount"] = texts.stdout, mount
            seen["modes"] = {
                p: Path(mount, p).stat().st_mode for p in ("tools/turn", "raw/_index.md")
            }
            return state

        return solve

    task = Task(
        dataset=[Sample(id=1, input="What is the door code of room 34?", target="43")],
        solver=with_memory([look(), generate()], corpus, task_name="door_codes"),
        scorer=match(location="any"),
        sandbox="local",
        name="door_codes",
    )
    model = get_model("mockllm/model", custom_outputs=agent)
    [log] = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and log.samples
    record = log.samples[0].metadata[METADATA_KEY]
    # A local sandbox: the copy went into the sample's own folder, not the shared default.
    assert record["access"] == "sandbox" and record["mount"] == seen["mount"] != "/work/corpus"
    assert record["read_only"] == "permissions" and record["removed"] is True
    assert not Path(seen["mount"]).exists()
    first = log.samples[0].messages[0].text
    assert f"`{seen['mount']}`" in first and "read_page" not in first
    copied = seen["files"]
    assert record["files_copied"] == len(copied)
    assert "tools/turn" in copied and "raw/step-0001/metadata.md" in copied
    assert "raw/_index.md" in copied and "catalog.jsonl" in copied
    # Room 34's own run and lesson: in no file name, page, index, catalog or search index,
    # nor in the first message (which quotes the task, room 34 itself).
    assert "room 27" in seen["text"]
    for hidden in _own_entries(corpus):
        assert hidden not in seen["text"] and not [rel for rel in copied if hidden in rel], hidden
        assert hidden == "room 34" or hidden not in first
    assert not seen["modes"]["raw/_index.md"] & 0o222
    assert seen["modes"]["tools/turn"] & 0o111


@pytest.fixture(scope="module")
def four_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An offline corpus of four tasks, door_codes/1-4, each run's text marked SECRET-N."""
    root = tmp_path_factory.mktemp("four")
    past = [
        make_run(
            f"door_codes/{n}",
            task=f"What is the door code of room {n}? SECRET-{n}",
            task_type="door_codes",
            turns=[
                {"role": "user", "content": f"Room {n}, SECRET-{n}."},
                {"role": "assistant", "action": f"enter code {n}", "observation": f"SECRET-{n}"},
            ],
        )
        for n in range(1, 5)
    ]
    options = BuildOptions(
        inputs=[write_runs(root / "runs.jsonl", past)], output=root / "corpus", mine=False
    )
    build_corpus(options)
    return root / "corpus"


@solver
def snoop(seen: dict[str, dict[str, Any]]) -> Solver:
    """A scripted agent that plants a file in its copy, waits (so that concurrent samples
    overlap), then reads every file under its mount."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        mount = state.metadata[METADATA_KEY]["mount"]
        plant = f'echo PLANTED-{state.sample_id} > "$1/planted"'
        await sandbox().exec(["sh", "-c", plant, "sh", mount])
        await anyio.sleep(0.3)
        read = await sandbox().exec(["sh", "-c", 'find "$1" -type f -exec cat {} +', "sh", mount])
        seen[str(state.sample_id)] = {"mount": mount, "text": read.stdout}
        state.output = ModelOutput.from_content("mockllm", "done")
        return state

    return solve


@pytest.mark.parametrize("at_once", [4, 1])
def test_each_sample_reads_its_own_view_and_an_unknown_task_is_reported(
    four_tasks: Path, tmp_path: Path, at_once: int
) -> None:
    seen: dict[str, dict[str, Any]] = {}
    shared = tmp_path / "shared" / "corpus"  # every sample is given the same mount
    task = Task(
        dataset=[Sample(id=n, input=f"What is the door code of room {n}?") for n in range(1, 6)],
        solver=with_memory(snoop(seen), four_tasks, task_name="door_codes", mount=str(shared)),
        sandbox="local",
        name="door_codes",
    )
    model = get_model("mockllm/model", custom_outputs=agent)
    [log] = eval(
        task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_samples=at_once
    )
    assert log.status == "success" and log.samples and len(seen) == 5
    assert len({view["mount"] for view in seen.values()}) == 5 and not shared.exists()
    records = {str(sample.id): sample.metadata[METADATA_KEY] for sample in log.samples}
    for sample, view in seen.items():
        others = [n for n in "1234" if n != sample]
        assert f"SECRET-{sample}" not in view["text"], sample  # nothing of its own task
        assert all(f"SECRET-{n}" in view["text"] for n in others), sample
        # What another sample planted never reaches it; its own copy is gone after it.
        assert re.findall(r"PLANTED-\d", view["text"]) in ([], [f"PLANTED-{sample}"])
        assert not Path(view["mount"]).exists() and records[sample]["removed"] is True
    # Sample 5's task is not in the corpus: reported, and it reads the whole corpus.
    assert [r["task_not_in_corpus"] for _, r in sorted(records.items())] == [False] * 4 + [True]
    assert records["5"]["problems"] == [
        "the corpus holds no run of this sample's task (door_codes/5 or 5): nothing was left "
        "out; if it is a variant of a task the corpus knows, name that task with task_name"
    ]
    assert all(f"SECRET-{n}" in seen["5"]["text"] for n in "1234")


def test_a_sample_whose_task_is_not_in_the_corpus_can_fail(
    four_tasks: Path, tmp_path: Path
) -> None:
    task = Task(
        dataset=[Sample(id=7, input="What is the door code of room 7?")],
        solver=with_memory(generate(), four_tasks, task_name="door_codes", unknown_task="fail"),
        name="door_codes",
    )
    model = get_model("mockllm/model", custom_outputs=agent)
    [log] = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "error" and log.error is not None
    assert "the corpus holds no run of this sample's task (door_codes/7 or 7)" in log.error.message


def test_a_limit_keeps_the_record_and_a_bad_id_spoils_only_itself(
    corpus: Path, tmp_path: Path
) -> None:
    asked: dict[str, Any] = {}

    def reader(
        messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any, config: Any
    ) -> ModelOutput:
        """Reads the insight index until the message limit stops it; then reports a shown
        insight and one the corpus does not hold."""
        if "The episode is over" in _text(messages[-1]):
            asked["tools"], asked["choice"] = sorted(t.name for t in tools), tool_choice
            shown = sorted(set(re.findall(r"\*\*(insight-\d{4}): ", _text(messages[2]))))
            report = {"used": {"insights": [*shown, "insight-0099"]}}
            output = ModelOutput.from_content("mockllm", json.dumps(report))
        else:
            output = ModelOutput.for_tool_call(
                "mockllm", "read_page", {"path": "insight/_index.md"}
            )
        output.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
        return output

    few_shot = [
        ChatMessageUser(content="What is the door code of room 5?"),
        ChatMessageAssistant(content="The code is 50."),
        ChatMessageUser(content="What is the door code of room 34?"),
    ]
    task = Task(
        dataset=[Sample(id=1, input=few_shot, target="43")],
        solver=with_memory(generate(), corpus, task_name="door_codes"),
        scorer=match(location="any"),
        message_limit=8,
        name="door_codes",
    )
    model = get_model("mockllm/model", custom_outputs=reader)
    # A provider that needs the definitions of the tools the messages call (inspect keeps
    # them, with tool_choice "none", only for such a provider).
    model.api.tools_required = lambda: True  # type: ignore[method-assign]
    [log] = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.samples
    [sample] = log.samples
    assert sample.limit is not None and sample.limit.type == "message"
    # The few-shot example stays; the task (its last user message) gave way to the memory's.
    assert sample.messages[0].text == "What is the door code of room 5?"
    assert sample.messages[1].text == "The code is 50."
    assert "room 34" in sample.messages[2].text and "# Your task" in sample.messages[2].text
    assert "counts against that limit" in sample.messages[2].text
    record = sample.metadata[METADATA_KEY]
    assert record["drilldowns"] == 3  # the limit of 8 messages stopped the fourth read
    assert record["problems"][0].startswith("the message limit: ")
    assert record["problems"][1:] == [
        "citation report: used.insights: 'insight-0099' is not in the corpus"
    ]
    assert record["used"]["insights"] == record["insights_shown"] != []
    assert record["report_tokens"] == 110
    # The report's request carried the tools its messages call, and asked for no call.
    assert asked == {"tools": sorted(MEMORY_TOOLS), "choice": "none"}


@pytest.mark.parametrize("given", [False, True])
def test_react_is_told_of_tools_only_if_it_has_them_and_they_leave_its_task_out(
    corpus: Path, tmp_path: Path, given: bool
) -> None:
    own = _own_entries(corpus)[1]
    replies: list[str] = []

    def scripted(
        messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: Any, config: Any
    ) -> ModelOutput:
        done = [m for m in messages if isinstance(m, ChatMessageTool)]
        if "The episode is over" in _text(messages[-1]):
            output = ModelOutput.from_content("mockllm", '{"used": {}}')
        elif "read_page" in {t.name for t in tools} and not done:
            output = ModelOutput.for_tool_call(
                "mockllm", "read_page", {"path": f"insight/{own}.md"}
            )
        else:
            replies.extend(m.error.message if m.error else m.text for m in done)
            output = ModelOutput.for_tool_call("mockllm", "submit", {"answer": "34"})
        output.usage = ModelUsage(input_tokens=10, output_tokens=1, total_tokens=11)
        return output

    tools = anyio.run(memory_tools, corpus) if given else []  # once, for every sample
    task = Task(
        dataset=[Sample(id=1, input="What is the door code of room 34?", target="43")],
        solver=with_memory(as_solver(react(tools=tools)), corpus, task_name="door_codes"),
        scorer=match(location="any"),
        name="door_codes",
    )
    model = get_model("mockllm/model", custom_outputs=scripted)
    [log] = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and log.samples
    record = log.samples[0].metadata[METADATA_KEY]
    if given:  # the tools served the running sample's view: its own lesson is not there
        assert record["access"] == "tools" and record["problems"] == []
        assert len(replies) == 1
        assert replies[0].startswith(f"'insight/{own}.md' is not a page of this corpus"), replies
    else:
        assert record["access"] is None and replies == []
        assert record["problems"][0].startswith("the agent was never given the memory tools")


def test_run_inspect_says_what_is_wrong(tmp_path: Path, corpus: Path) -> None:
    code, out, err = run(
        [
            "lift",
            "run-inspect",
            str(tmp_path / "nope.py"),
            "--corpus",
            str(corpus),
            "--agent-model",
            "mockllm/model",
            "-o",
            str(tmp_path / "out"),
        ]
    )
    assert (code, out) == (2, "")
    assert (
        err == f"error: {tmp_path / 'nope.py'}: no such file (name a task as file.py@task_name)\n"
    )
    code, out, err = run(["lift", str(tmp_path), "--judge", "openai/x"])
    assert (code, out) == (2, "")
    assert "--judge needs --corpus" in err


def test_the_cli_starts_without_inspect_ai() -> None:
    probe = "import sys, wikitrace.cli.main; print('inspect_ai' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout == "False\n", result.stderr


def _cli_without_inspect(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`wikitrace ARGS` in a fresh process in which inspect_ai cannot be imported (as for a user
    without the inspect extra): the logs must be read by wikitrace alone. `env` adds variables."""
    blocked = "import sys; sys.modules['inspect_ai'] = None; from wikitrace.cli.main import main"
    code = f"{blocked}; sys.argv[0] = 'wikitrace'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.mark.integration
def test_the_cli_reads_today_s_zstd_logs_without_inspect_ai(
    runs: Path, corpus: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    logs = sorted((runs / "wikitrace").glob("*.eval"))
    with zipfile.ZipFile(logs[0]) as archive:  # inspect's default: zstd (method 93)
        assert {info.compress_type for info in archive.infolist()} == {93}

    built = _cli_without_inspect(["build", *map(str, logs), "-o", str(tmp_path / "c")], tmp_path)
    assert built.returncode == 0, built.stderr
    assert "9 runs (6 succeeded, 3 failed)" in built.stderr

    # Stay/Descent from the logs: rows without "drilldowns" send lift to each episode's log.
    rows = [{k: v for k, v in r.items() if k != "drilldowns"} for r in _rows(runs)]
    plain = runs / "no-drilldowns.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lifted = _cli_without_inspect(["lift", str(plain), "--json", "--mount", "insight/"], runs)
    assert lifted.returncode == 0, lifted.stderr
    got = {r["method"]: r for r in json.loads(lifted.stdout)["results"]}
    assert got["wikitrace"]["stay_descent"]["descended"] == 3

    results = str(runs / RESULTS)
    stub = openai_stub.url
    for number, args in enumerate(
        (
            [
                "lift",
                results,
                "--judge",
                "openai/j",
                "--corpus",
                str(corpus),
                "--api-base",
                stub,
            ],
            ["lift", "attribute", str(corpus), results, "--judge", "openai/j", "--api-base", stub],
            [
                "lift",
                "drilldowns",
                results,
                "--judge",
                "openai/j",
                "--api-base",
                stub,
                "--mount",
                "insight/",
            ],
        )
    ):
        before = len(openai_stub.requests)
        cache = {"WIKITRACE_CACHE_DIR": str(tmp_path / f"cache-{number}")}
        done = _cli_without_inspect(args, runs, cache)
        assert done.returncode == 0, (args, done.stderr)
        sent = [r["messages"][0]["content"] for r in openai_stub.requests[before:]]
        # The judge was shown the episodes, read from their zstd logs.
        needle = "room 34" if "drilldowns" in args else "annex room 58"
        assert sent and all(needle in prompt for prompt in sent), (args, done.stderr)


@pytest.mark.parametrize("flag", [False, True])
def test_the_solver_passes_flag_conflicts(tmp_path: Path, flag: bool) -> None:
    """A message option of the solver's reaches the first message (tools/message_options.py)."""
    corpus = conflicting_lessons(tmp_path)
    seen: list[str] = []

    @solver
    def read_first() -> Solver:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            seen.append(state.messages[0].text)
            state.output = ModelOutput.from_content("mockllm", "done")
            return state

        return solve

    options = {"leave_one_out": False, "use_sandbox": False, "flag_conflicts": flag}
    task = Task(
        dataset=[Sample(id=1, input=CONFLICT_TASK)],
        solver=[first_message(str(corpus), **options), read_first()],
        name="refunds",
    )
    [log] = eval(task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and len(seen) == 1
    assert seen[0].startswith("# Your task\n\n" + CONFLICT_TASK)
    assert (CONFLICT_PAIR in seen[0]) is flag
