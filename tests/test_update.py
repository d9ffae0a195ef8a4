"""The update controller on the bundled toy environment: its scripted agent is the runner, and
the toy's lesson writer answers at our LLM boundary."""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.control.embed import HashingEmbedder, cosine, update_direction
from wikitrace.control.runner import RunnerSpec
from wikitrace.control.update import UpdateOptions, UpdateResult, update_corpus
from wikitrace.corpus_schema.ledger import read_agent_runs
from wikitrace.versions import Store

from helpers import FakeLLM, run
from walk_throughs import WalkThrough

TOY = Path(__file__).resolve().parent.parent / "examples" / "toy"
sys.path.insert(0, str(TOY))
from lessons import answer  # noqa: E402

AGENT = (
    f"{sys.executable} {TOY / 'agent.py'} --task {{task_id}} --memory {{memory}} --seed {{seed}}"
)
MODEL = "openai/toy"


@pytest.fixture
def llm() -> FakeLLM:
    return FakeLLM(answer=lambda messages: answer(messages[0]["content"]), model=MODEL)


@pytest.fixture
def toy(tmp_path: Path, llm: FakeLLM) -> Path:
    """A corpus of the agent's 8 plain runs (4 solved): compiled, no lessons yet."""
    corpus = tmp_path / "toy"
    build_corpus(
        BuildOptions(
            inputs=[TOY / "runs/start.jsonl"],
            output=corpus,
            model=MODEL,
            cache_dir=tmp_path / "cache",
            mine=False,  # the model's lessons only; mined ones in an update: test_mine.py
        ),
        llm=llm,
    )
    return corpus


def update(corpus: Path, runs: str, llm: FakeLLM, **options: Any) -> UpdateResult:
    template = options.pop("template", AGENT)
    build = BuildOptions(
        inputs=[TOY / "runs" / runs],
        output=corpus,
        cache_dir=corpus.parent / "cache",
        mine=options.pop("mine", False),
    )
    spec = RunnerSpec(
        template, concurrency=2, timeout_seconds=60, retries=options.pop("retries", 1)
    )
    return update_corpus(build, UpdateOptions(runner=spec, **options), llm=llm)


def test_refuses_a_harmful_update_and_deploys_helpful_ones(toy: Path, llm: FakeLLM) -> None:
    store = Store(toy)

    # A sound lesson (look under the doormat), with no history yet: compared, and better.
    helpful = update(toy, "mat.jsonl", llm).record
    assert helpful is not None
    assert (helpful.decision, helpful.current, helpful.candidate, helpful.deployed) == (
        "deployed",
        "v0001",
        "v0002",
        "v0002",
    )
    assert helpful.trigger.why == "no deployed update to compare its direction with yet"
    assert helpful.trigger.insights_added == ["insight-0001"]
    # drawer-4 is fresh: this update added its run, and the lesson drawn from it. Each memory
    # is a view without drawer-4, so the candidate cannot show the agent its own task's run:
    # drawer-4 is not solved with it, and the lesson's gain comes from the other locked drawer.
    assert (helpful.score_old, helpful.score_new) == (0.5, 0.625)
    assert [(t.task_id, t.group) for t in helpful.tasks][:1] == [("drawer-4", "fresh")]
    fresh = {t.task_id: t for t in helpful.tasks}["drawer-4"]
    assert (fresh.old, fresh.new) == (0.0, 0.0)
    runs = read_agent_runs(store.runs_path)
    views = {runs[i].memory_path for i in [*fresh.old_runs, *fresh.new_runs]}
    assert all("probes/update-0001/" in str(path) for path in views), views
    assert not (store.dir / "probes").exists()  # removed when the comparison ends
    assert sorted(t.task_id for t in helpful.tasks) == sorted(
        ["drawer-1", "drawer-2", "drawer-4", "drawer-5", "safe-1", "safe-2", "safe-4", "safe-5"]
    )
    # 8 tasks, run with each memory and, for the rerun band, with the old one again: the toy
    # agent is deterministic, so the band is 0 and a gain of one task is beyond it.
    assert store.current() == "v0002" and helpful.agent_runs == 24 and helpful.errors == 0
    assert (helpful.gain, helpful.band, helpful.rerun_seeds) == (1.0, 0.0, [0])
    assert "did better beyond noise" in helpful.reason

    # An over-broad lesson (force every container): it turns away from the past and is refused.
    harmful = update(toy, "force.jsonl", llm).record
    assert harmful is not None
    assert (harmful.decision, harmful.candidate, harmful.deployed) == ("kept", "v0003", "v0002")
    assert harmful.trigger.compared and harmful.trigger.cosine is not None
    assert harmful.trigger.cosine < 0.5
    assert (harmful.score_old, harmful.score_new) == (0.75, 0.125)
    groups = {t.task_id: t.group for t in harmful.tasks}
    assert groups["safe-4"] == "fresh"
    # drawer-5 changed in the first update (drawer-4 did not: judged without its own run)
    assert groups["drawer-5"] == "boundary" and groups["drawer-4"] == "coverage"
    assert store.current() == "v0002"
    assert [(r.name, r.status) for r in _versions(toy)] == [
        ("v0001", "previous"),
        ("v0002", "current"),
        ("v0003", "refused"),
    ]
    # The decision links to the runs behind it, all on record with the memory each was given.
    runs = read_agent_runs(store.runs_path)
    for task in harmful.tasks:
        for ident in task.old_runs:
            assert runs[ident].memory == "v0002" and runs[ident].purpose == harmful.id
        for ident in task.new_runs:
            assert runs[ident].memory == "v0003"
    # 8 tasks x 3 runs: old solves 6 (0.75) and 6 again, the candidate 1 (0.125).
    assert [r.success for r in runs.values() if r.purpose == harmful.id].count(True) == 13
    for task in harmful.tasks:
        assert [runs[ident].seed for ident in task.rerun_runs] == [0]
        assert task.rerun == task.old

    # Another doormat lesson is the same lesson drawn from another run (a near-duplicate): the
    # memory's lessons do not change, only its runs: another locked drawer, a task type the
    # deployed update grew the memory with. It goes the way of past updates, so it only repeats
    # what the memory knows: deployed without a comparison, no agent run.
    similar = update(toy, "mat-again.jsonl", llm).record
    assert similar is not None
    assert (similar.decision, similar.current, similar.deployed) == ("accepted", "v0002", "v0004")
    assert similar.trigger.why.startswith("it goes the way of past updates (cosine 0.")
    assert not similar.trigger.compared and similar.agent_runs == 0 and similar.tasks == []
    assert similar.trigger.insights_added == [] and similar.trigger.runs_added == ["step-0010"]
    assert similar.trigger.encoded == "corpus"
    assert similar.reason.startswith("not compared: it goes the way of past updates")
    assert store.current() == "v0004"
    assert [e.event for e in store.history()] == [
        "built",
        "candidate",
        "deployed",
        "candidate",
        "refused",
        "candidate",
        "deployed",
    ]
    state = json.loads(store.update_state_path.read_text())
    assert state["fresh_tasks"] == ["drawer-6"] and state["last_comparison"] == "update-0002"
    saved = json.loads((store.updates_dir / "update-0002.json").read_text())
    assert saved["decision"] == "kept"
    assert saved["trigger"]["embedder"] == "local-hash-idf-1024 (corpus, by kind)"


def test_a_harmful_first_update_is_refused(toy: Path, llm: FakeLLM) -> None:
    record = update(toy, "force.jsonl", llm).record
    assert record is not None
    # Old memory solves the 4 unlocked containers; forcing solves only old safe-5: safe-4,
    # fresh, is judged with a memory that holds neither its run nor the lesson drawn from it.
    assert (record.decision, record.score_old, record.score_new) == ("kept", 0.5, 0.125)
    assert Store(toy).current() == "v0001"


def test_an_update_of_runs_alone_moves_the_corpus_not_the_insights(
    toy: Path, llm: FakeLLM, tmp_path: Path
) -> None:
    """A run added with no lesson: encoding the insight set, nothing changed and it is accepted
    unexamined; encoding the corpus (the default), the memory moved and the first update is
    compared."""
    plain = tmp_path / "plain.jsonl"
    start = (TOY / "runs/start.jsonl").read_text().splitlines()
    plain.write_text(start[0].replace('"drawer-1"', '"drawer-3"') + "\n")
    build = BuildOptions(inputs=[plain], output=toy, cache_dir=tmp_path / "cache", mine=False)
    options = UpdateOptions(runner=RunnerSpec(AGENT), encoded="insights")
    result = update_corpus(build, options, llm=llm)
    assert result.record is not None
    assert result.record.decision == "accepted" and result.record.agent_runs == 0
    assert result.record.trigger.why == "the insight set did not change"
    assert not Store(toy).runs_path.exists()
    again = tmp_path / "again.jsonl"
    again.write_text(start[0].replace('"drawer-1"', '"drawer-2"') + "\n")
    build = BuildOptions(inputs=[again], output=toy, cache_dir=tmp_path / "cache", mine=False)
    record = update_corpus(build, UpdateOptions(runner=RunnerSpec(AGENT)), llm=llm).record
    assert record is not None and record.trigger.compared and record.agent_runs > 0
    assert record.trigger.why == "no deployed update to compare its direction with yet"
    assert record.trigger.runs_added == ["step-0010"] and record.trigger.insights_added == []


def test_always_compare_with_trials_and_set_sizes(toy: Path, llm: FakeLLM) -> None:
    update(toy, "mat.jsonl", llm)
    record = update(
        toy, "mat-again.jsonl", llm, always_compare=True, trials=2, seed=5, coverage=3, fresh=1
    ).record
    assert record is not None and record.trigger.why == "always-compare"
    assert record.seeds == [5, 6]
    assert [t.group for t in record.tasks] == ["fresh", "boundary", *["coverage"] * 3]
    # The rerun band runs the old memory again on the same seeds, kept apart from its first runs.
    assert record.agent_runs == 3 * 2 * 5 and record.rerun_seeds == [5, 6]
    runs = read_agent_runs(Store(toy).runs_path)
    assert sorted({runs[i].seed for t in record.tasks for i in t.old_runs + t.new_runs}) == [5, 6]
    assert sorted({runs[i].seed for t in record.tasks for i in t.rerun_runs}) == [5, 6]
    for task in record.tasks:
        assert len(task.old_runs) == len(task.rerun_runs) == 2
        assert not set(task.old_runs) & set(task.rerun_runs)
        assert {runs[i].memory for i in task.rerun_runs} == {record.current}
    # Both memories solve the same tasks: a tie keeps the old.
    assert record.score_old == record.score_new and record.decision == "kept"
    assert "a tie keeps the old" in record.reason


def test_the_task_pool_limits_what_is_run(toy: Path, llm: FakeLLM) -> None:
    record = update(toy, "mat.jsonl", llm, task_pool=["drawer-5", "safe-1"]).record
    assert record is not None
    assert sorted(t.task_id for t in record.tasks) == ["drawer-5", "safe-1"]
    assert record.decision == "deployed" and (record.score_old, record.score_new) == (0.5, 1.0)


def test_agent_errors_are_never_scores(toy: Path, llm: FakeLLM, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import sys; print('no result'); sys.exit(0)\n")
    template = f"{sys.executable} {broken} {{task_id}} {{memory}}"
    record = update(toy, "mat.jsonl", llm, template=template, retries=1).record
    assert record is not None
    assert record.decision == "undecided" and record.deployed == "v0001"
    assert record.errors == record.agent_runs == 24 and record.score_new is None
    assert all(not t.compared and t.old is None for t in record.tasks)
    runs = read_agent_runs(Store(toy).runs_path)
    assert all(r.status == "error" and len(r.attempts) == 2 for r in runs.values())
    assert Store(toy).current() == "v0001"


def test_another_embedder_starts_the_average_afresh(toy: Path, llm: FakeLLM) -> None:
    update(toy, "mat.jsonl", llm)
    record = update(toy, "force.jsonl", llm, embedder=HashingEmbedder(dim=64)).record
    assert record is not None and record.trigger.embedder == "local-hash-idf-64 (corpus, by kind)"
    assert record.trigger.why == "no deployed update to compare its direction with yet"
    # So does another encoding: the insight set's directions are another space.
    again = update(
        toy, "mat-again.jsonl", llm, embedder=HashingEmbedder(dim=64), encoded="insights"
    )
    assert again.record is not None
    assert again.record.trigger.embedder == "local-hash-idf-64 (insights, by kind)"
    assert again.record.trigger.encoded == "insights"


def test_deploys_beyond_the_band_and_not_a_reshuffle_when_the_seed_fixes_outcomes() -> None:
    from wikitrace.control.update import deploys, own_band
    from wikitrace.corpus_schema.ledger import TaskResult

    def task(old: float, new: float) -> TaskResult:
        return TaskResult(
            task_id="t", group="coverage", old_runs=[], new_runs=[], old=old, new=new, compared=True
        )

    assert own_band([task(0, 1), task(1, 1)]) is None  # no task done worse
    assert own_band([task(0, 1), task(1, 0), task(0.5, 0)]) == pytest.approx(1.645 * 1.5)
    # A rerun that moved nothing (band 0): the seed fixes outcomes, any gain is beyond noise,
    # unless the candidate also made a task worse (a changed memory reshuffling outcomes):
    # then its gain must pass its own band.
    assert deploys(1.0, 0.0, None) and not deploys(0.0, 0.0, None)
    assert not deploys(1.0, 0.0, 2.3) and deploys(2.4, 0.0, 2.3)
    # A noisy harness: the band stands for the noise, a task done worse is part of it.
    assert deploys(3.0, 2.0, 5.0) and not deploys(2.0, 2.0, None)
    assert deploys(0.5, None, 3.0) and not deploys(0.0, None, None)  # rerun-band = false


def test_directions() -> None:
    embedder = HashingEmbedder()
    mat = {"insight-0001": "Look under the doormat for the key"}
    force = {"insight-0001": "Force containers open instead of opening them"}
    again = {**mat, "insight-0002": "Look under the doormat for the key"}
    assert update_direction(mat, mat, embedder)[0] is None
    one, added, removed = update_direction({}, mat, embedder)
    two, _, _ = update_direction(mat, again, embedder)
    assert (added, removed) == (["insight-0001"], [])
    assert one is not None and two is not None and cosine(one, two) == pytest.approx(1.0)
    other, _, _ = update_direction(
        mat, {**mat, **{"insight-0002": force["insight-0001"]}}, embedder
    )
    assert other is not None and abs(cosine(one, other)) < 0.3
    removal, _, gone = update_direction(mat, {}, embedder)
    assert gone == ["insight-0001"] and removal is not None
    assert cosine(removal, one) == pytest.approx(-1.0)
    assert np.allclose(embedder.embed(["same text"])[0], HashingEmbedder().embed(["same text"])[0])
    # With runs in the memory, runs and insights each count for half: five runs added do not
    # drown the lesson added with them.
    runs = {f"step-{n:04d}": f"Fetch item {n} from the drawer in the study." for n in range(1, 6)}
    both, _, _ = update_direction({}, {**runs, **force}, embedder)
    lesson, _, _ = update_direction({}, force, embedder)
    only_runs, _, _ = update_direction({}, runs, embedder)
    assert both is not None and lesson is not None and only_runs is not None
    assert cosine(both, lesson) == pytest.approx(cosine(both, only_runs), abs=0.05)
    assert cosine(both, lesson) > 0.6


def test_cli_refuses_a_bad_runner_before_compiling(toy: Path) -> None:
    code, out, err = run(
        ["update", str(toy), str(TOY / "runs/mat.jsonl"), "--runner", "agent --task {task_id}"]
    )
    assert (code, out) == (2, "")
    assert err == (
        "error: field '--runner': the command never names {memory} "
        "(every run must be told its task and the memory to use: name them, or read "
        "$WIKITRACE_TASK_ID and $WIKITRACE_MEMORY)\n"
    )
    assert Store(toy).versions() == ["v0001"]


def _versions(corpus: Path) -> list[Any]:
    from wikitrace.versions import list_versions

    return list_versions(Store(corpus))


@pytest.mark.integration
def test_the_readme_walk_through(update_walk_through: WalkThrough) -> None:
    """What docs/growing.md's walk-through left (run once a session, tests/walk_throughs.py):
    the toy model server behind litellm, the toy agent as runner, three updates."""
    assert update_walk_through.returncode == 0, update_walk_through.stderr
    toy = update_walk_through.folder / "toy"
    records = [json.loads(path.read_text()) for path in sorted(Store(toy).updates_dir.iterdir())]
    # The third only repeats what the memory knows: deployed without a comparison.
    assert [(r["decision"], r["deployed"], r["agent_runs"]) for r in records] == [
        ("deployed", "v0002", 24),
        ("kept", "v0002", 24),
        ("accepted", "v0004", 0),
    ]
    code, out, _ = run(["versions", str(toy)])
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["v0001", "previous"],
        ["v0002", "previous"],
        ["v0003", "refused"],
        ["v0004", "current"],
    ]
    code, out, _ = run(["verify", str(toy), "--all"])
    assert code == 0 and out.count(": ok: ") == 4


ROOMS = {
    "kitchen": "a countertop 1, a fridge 1, a microwave 1, a sinkbasin 1, a stoveburner 2",
    "garage": "a workbench 1, a toolbox 2, a rack 1, a car 1, a shelf 3",
}
TASKS = {
    "kitchen": [
        "put a clean mug in cabinet 1",
        "heat an egg and put it on countertop 1",
        "cool a tomato and put it in fridge 1",
        "put a clean pan on stoveburner 2",
        "find two forks and put them in drawer 1",
        "put a saltshaker in cabinet 2",
        "rinse the lettuce and put it in fridge 1",
        "heat a potato and put it on countertop 1",
        "put a clean plate in cabinet 1",
        "heat some bread and put it on countertop 1",
        "put a spatula in drawer 2",
        "cool a bottle and put it in fridge 1",
    ],
    "garage": [
        "put the wrench on shelf 3",
        "find the keychain and put it in toolbox 2",
        "put the bicycle pump on rack 1",
        "put a screwdriver in toolbox 2",
    ],
}


def test_the_first_update_of_a_new_topic_is_compared(tmp_path: Path) -> None:
    """Kitchen, kitchen, kitchen, then garage, built offline and encoded as `update` does.
    Before, a run stood for its task and its offline compilation title ("task ... succeeded
    in 4 turns"), alike for every run: the garage update scored 0.75 and was not compared."""
    from wikitrace.compiler import add_runs
    from wikitrace.control.embed import memory_texts

    def part(room: str, tasks: list[str], number: int) -> Path:
        path = tmp_path / f"part-{number}.jsonl"
        lines = []
        for index, text in enumerate(tasks):
            task = (
                "You are in the middle of a room. Looking quickly around you, you see "
                f"{ROOMS[room]}.\nYour task is to: {text}."
            )
            turns = [
                {"role": "user", "content": task},
                {"role": "assistant", "content": "go to countertop 1"},
                {"role": "user", "content": "Nothing happens."},
            ]
            record = {"task_id": f"{room}-{number}-{index}", "task": task}
            lines.append(json.dumps({**record, "success": index % 2 == 0, "turns": turns}))
        path.write_text("\n".join(lines) + "\n")
        return path

    parts = [part("kitchen", TASKS["kitchen"][4 * n : 4 * n + 4], n) for n in range(3)]
    parts.append(part("garage", TASKS["garage"], 3))
    corpus = tmp_path / "rooms"
    build_corpus(BuildOptions(inputs=[parts[0]], output=corpus))
    for path in parts[1:]:
        add_runs(BuildOptions(inputs=[path], output=corpus))
    store = Store(corpus)
    texts = [memory_texts(store.version_path(name), "corpus") for name in store.versions()]
    embedder = HashingEmbedder()
    average, cosines = None, []
    for old, new in pairwise(texts):
        direction, added, _ = update_direction(old, new, embedder)
        assert direction is not None and all(ident.startswith("step-") for ident in added)
        if average is not None:
            cosines.append(cosine(direction, average))
        average = direction if average is None else 0.9 * average + 0.1 * direction
    kitchen, garage = cosines[0], cosines[1]
    assert garage < UpdateOptions(runner=RunnerSpec(AGENT)).threshold <= kitchen
