"""A model build sends each run's call as soon as that run is written, not after the first
`--concurrency` runs are (compiler/produce.py, `Producer.with_model`)."""

from __future__ import annotations

from pathlib import Path

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.transport.llm import Message

from helpers import FakeLLM, good_answer, make_run, write_runs


def test_the_first_call_leaves_before_the_next_run_is_written(tmp_path: Path) -> None:
    written_at_call: list[int] = []  # raw run folders on disk as each call is made

    def answer(messages: list[Message]) -> str:
        written_at_call.append(len(list(tmp_path.rglob("raw/step-*"))))
        return good_answer(messages[0]["content"])

    runs = write_runs(tmp_path / "runs.jsonl", [make_run(f"t{n}") for n in range(6)])
    llm = FakeLLM(answer=answer)
    options = BuildOptions(
        inputs=[runs], output=tmp_path / "c", model="fake/compiler", use_cache=False,
        concurrency=64, mine=False,
    )  # fmt: skip
    report = build_corpus(options, llm=llm)
    assert report.complete and len(llm.calls) == 6
    # Each call is made before the next run's raw layer is written (all 6 before the change).
    assert written_at_call == [1, 2, 3, 4, 5, 6]
