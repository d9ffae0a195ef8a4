"""A model build's per-run work in worker processes while its calls flow
(compiler/model_farm.py): the raw layer, the pages and mining's patterns made there give the
very corpus the build's own process makes, answers coming back in any order; a stopped build
leaves nothing and no worker; a small build starts none."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_build_workers import (
    WIKITRACE,
    children_of,
    corpus_files,
    differences,
    none_left,
    varied_runs,
    worker_processes,
)

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.compiler.model_farm import MIN_RUNS, pool_size
from wikitrace.corpus_schema import verify
from wikitrace.transport.llm import LLMCallError, LLMReply, Message

from helpers import Stub, ctrl_c_at_its_default, good_answer, write_runs


class ShuffledLLM:
    """Answers a run's prompt as its hash says, after a pause of its own (so that answers
    come back out of order): with no insight, one or two, a quote found in no turn, or an
    answer that is no JSON at all (the run fails)."""

    model = "fake/compiler"

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model}

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    async def complete(self, messages: list[Message]) -> LLMReply:
        prompt = messages[0]["content"]
        draw = hashlib.sha256(prompt.encode()).digest()
        await asyncio.sleep(draw[1] / 255 * 0.004)
        kind = draw[0] % 8
        if kind == 0:
            text = "no JSON here"
        else:
            text = good_answer(prompt, insights=kind % 3, wrong_quote=kind == 7)
        return LLMReply(text=text, prompt_tokens=100, completion_tokens=20, cost_usd=0.001)


def model_options(inputs: list[Path], corpus: Path, workers: int) -> BuildOptions:
    return BuildOptions(
        inputs=inputs,
        output=corpus,
        model=ShuffledLLM.model,
        use_cache=False,
        concurrency=32,
        workers=workers,
    )


def test_a_model_build_s_workers_make_the_bytes_its_own_process_makes(tmp_path: Path) -> None:
    runs = varied_runs(120, seed=17)
    first = write_runs(tmp_path / "first.jsonl", runs)
    second = write_runs(tmp_path / "second.jsonl", runs[::9])  # runs given twice: written once
    built = {}
    for workers in (1, 2):
        corpus = tmp_path / f"corpus-{workers}"
        report = build_corpus(model_options([first, second], corpus, workers), llm=ShuffledLLM())
        assert verify(corpus).ok
        built[workers] = corpus_files(corpus)
    assert report.duplicates > len(runs[::9]) and report.redactions, report
    assert report.mined and report.failed and 0 < report.compiled < report.runs, report
    insights = [name for name in built[2] if name.startswith("insight/insight-")]
    assert len(insights) > report.compiled  # the model's, and mined
    assert differences(built[1], built[2]) == []


def test_an_add_with_a_model_build_s_workers_is_the_add_made_without(tmp_path: Path) -> None:
    runs = varied_runs(150, seed=19)
    old = write_runs(tmp_path / "old.jsonl", runs[:50])
    new = write_runs(tmp_path / "new.jsonl", runs[30:])  # 20 runs the parent holds
    added = {}
    for workers in (1, 2):
        corpus = tmp_path / f"corpus-{workers}"
        build_corpus(model_options([old], corpus, 1), llm=ShuffledLLM())
        report = add_runs(model_options([new], corpus, workers), llm=ShuffledLLM())
        assert report.version == "v0002" and report.duplicates >= 20
        added[workers] = corpus_files(corpus)
    assert differences(added[1], added[2]) == []


def test_a_small_model_build_starts_no_worker() -> None:
    assert pool_size(None, MIN_RUNS - 1) == 0
    assert pool_size(None, MIN_RUNS) == pool_size(None, 10**6) == 1
    assert pool_size(1, 10**6) == 0  # 1: all in the build's own process
    assert pool_size(3, 10) == 3


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, and those they started: a build's workers are its own
    children when forked from it, its fork server's otherwise (model_farm.start_method)."""
    found = [child for child in children_of(pid) if not _resource_tracker(child)]
    return found + [grandchild for child in found for grandchild in descendants(child)]


def _resource_tracker(pid: int) -> bool:
    """Whether `pid` is multiprocessing's resource tracker, which a fork server starts and
    which lives as long as the process that started it (here, pytest)."""
    try:
        return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone
        return False


class RevokedMidway(ShuffledLLM):
    """The key is revoked after `answers` answers (a fatal error: the build stops, as on
    Ctrl-C), noting the build's processes as it is (its workers)."""

    def __init__(self, answers: int) -> None:
        self.answers = answers
        self.workers: list[int] = []
        # What this process started before the build (an earlier test's, still ending) is
        # not the build's.
        self.before = set(descendants(os.getpid()))

    async def complete(self, messages: list[Message]) -> LLMReply:
        self.answers -= 1
        if self.answers < 0:
            self.workers = self.workers or [
                pid for pid in descendants(os.getpid()) if pid not in self.before
            ]
            raise LLMCallError("the key was revoked", fatal=True)
        return await super().complete(messages)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_model_build_stopped_leaves_nothing_and_no_worker(tmp_path: Path) -> None:
    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(200, seed=23))
    llm = RevokedMidway(answers=100)
    with pytest.raises(LLMCallError, match="revoked"):
        build_corpus(model_options([runs_file], tmp_path / "corpus", 2), llm=llm)
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]
    assert llm.workers  # its workers (or, still starting, their fork server) while it ran
    # Gone within a few seconds (one that is still ending may show in /proc a moment): one
    # that outlived its build would stay, its parent (this process) alive.
    deadline = time.monotonic() + 10
    while left := [pid for pid in llm.workers if Path(f"/proc/{pid}").exists()]:
        assert time.monotonic() < deadline, f"a worker outlived its build: {_described(left)}"
        time.sleep(0.1)


def _described(pids: list[int]) -> list[str]:
    """Each process's command line and state, for a failure's message."""
    found = []
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()[0]
        except OSError:
            command, state = "gone", ""
        found.append(f"{pid} {state} {command[:120]}")
    return found


FAILS_ONCE = """
import sys
from pathlib import Path

import test_model_farm
from wikitrace.compiler import build_corpus, model_farm, produce

folder, at = Path(sys.argv[1]), int(sys.argv[2])
now, raised = folder / "now", folder / "raised"
write_pages, add = model_farm.write_pages, produce.Compiled.add
answers = 0


def fails_once(job):  # in the worker, forked from this process with these changes
    if now.exists() and not raised.exists():
        raised.touch()
        raise OSError(28, "No space left on device")
    return write_pages(job)


def counted(self, *args):
    global answers
    answers += 1
    if answers == at:
        now.touch()
    return add(self, *args)


model_farm.write_pages, produce.Compiled.add = fails_once, counted
if __name__ == "__main__":
    assert model_farm.start_method() == "fork", "the worker would not have these changes"
    options = test_model_farm.model_options([folder / "runs.jsonl"], folder / "corpus", 2)
    build_corpus(options, llm=test_model_farm.ShuffledLLM())
"""


@pytest.mark.parametrize("at", [20, 40, 60, 100])
def test_a_worker_s_error_fails_the_model_build(tmp_path: Path, at: int) -> None:
    """A chunk of pages the worker fails to write (a full disk, once, after `at` answers)
    fails the build, whichever of its tasks takes the error first, and leaves no corpus: not a
    build that ends well with the pages of that chunk and of every run after it missing."""
    write_runs(tmp_path / "runs.jsonl", varied_runs(300, seed=5))
    script = tmp_path / "fails_once.py"
    script.write_text(FAILS_ONCE)
    tests = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(at)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": tests, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert (tmp_path / "raised").exists(), done.stderr
    assert done.returncode != 0 and "No space left on device" in done.stderr, done.stderr
    assert not (tmp_path / "corpus").exists()


def test_a_model_build_s_forked_worker_makes_the_bytes_its_own_process_makes(
    tmp_path: Path, openai_stub: Stub
) -> None:
    """In a new process (as the command runs) the worker is forked from the build; in this
    test's process, whose earlier builds started threads, it comes from a fork server."""
    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(120, seed=37))
    built = {}
    for workers in ("1", "2"):
        corpus = tmp_path / f"corpus-{workers}"
        command = [WIKITRACE, "-q", "build", str(runs_file), "-o", str(corpus)]
        env = {**os.environ, "WIKITRACE_WORKERS": workers}
        env["WIKITRACE_CACHE_DIR"] = str(tmp_path / f"cache-{workers}")
        done = subprocess.run(
            [*command, "--model", "openai/stub", "--api-base", openai_stub.url],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        built[workers] = corpus_files(corpus)
    assert differences(built["1"], built["2"]) == []


def model_building(tmp_path: Path, stub: Stub, mark: str) -> subprocess.Popen[str]:
    """`wikitrace build` of 1,200 runs with a model (`stub`) in a process group of its own,
    as a terminal's Ctrl-C reaches it, once its worker writes pages; `mark` in the
    environment of all its processes."""
    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(1200, seed=31))
    command = [WIKITRACE, "build", str(runs_file), "-o", str(tmp_path / "corpus")]
    build = subprocess.Popen(
        [*command, "--model", "openai/stub", "--api-base", stub.url],
        env={**os.environ, mark: "1", "WIKITRACE_CACHE_DIR": str(tmp_path / "cache")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=ctrl_c_at_its_default,
    )
    deadline = time.monotonic() + 120
    # The pages the worker writes as the answers come.
    while not list(tmp_path.glob("corpus.versions/*/compilation")) and build.poll() is None:
        assert time.monotonic() < deadline, "the build never wrote a page"
        time.sleep(0.05)
    assert build.poll() is None, "the build ended before it was stopped"
    assert len(worker_processes(mark)) >= 3  # the build, its call worker, its worker
    return build


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_ctrl_c_stops_a_model_build_and_its_worker_and_leaves_nothing(
    tmp_path: Path, openai_stub: Stub
) -> None:
    mark = f"WIKITRACE_TEST_{uuid.uuid4().hex}"
    build = model_building(tmp_path, openai_stub, mark)
    os.killpg(build.pid, signal.SIGINT)
    _, err = build.communicate(timeout=60)
    assert build.returncode == 130, err
    assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["cache", "runs.jsonl"]
    none_left(mark)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_worker_of_a_killed_model_build_ends(tmp_path: Path, openai_stub: Stub) -> None:
    mark = f"WIKITRACE_TEST_{uuid.uuid4().hex}"
    build = model_building(tmp_path, openai_stub, mark)
    build.kill()  # the build alone, with no time to stop anything
    build.communicate(timeout=60)
    none_left(mark)  # its staging folder is the next build's to clear (test_crash_safety)
