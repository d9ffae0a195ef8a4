"""The `workers` setting (N processes): an offline build's per-run work in worker processes
(compiler/workers.py) makes the very corpus the build's own process makes (its finish's pages
too, `Farm.map` keeping their order), and a stopped build leaves nothing."""

from __future__ import annotations

import gc
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.compiler.workers import Farm, available_cores, idle_cores, worker_count
from wikitrace.corpus_schema import CorpusError, Layout, verify
from wikitrace.corpus_schema.counts import postings_name
from wikitrace.search import saved
from wikitrace.versions import Store

from helpers import ctrl_c_at_its_default, make_run, write_runs

WIKITRACE = str(Path(sys.executable).parent / "wikitrace")
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's published example key: redacted as an AWS key
VOLATILE = {"created", "checksum"}
"""What two builds of the same runs differ in: when each was made (and so the checksum)."""


def varied_runs(count: int, seed: int) -> list[dict[str, Any]]:
    """Runs unlike each other in the ways a build treats differently: tasks with both
    outcomes (mined divergences), tools that fail, secrets to redact (the task id's too), an
    attempt the log gives, a weak signal, and some runs given twice."""
    rng = random.Random(seed)
    runs: list[dict[str, Any]] = []
    for _ in range(count):
        task = f"task-{rng.randrange(count // 4)}"
        turns: list[dict[str, Any]] = [{"role": "user", "content": f"Solve {task}."}]
        for turn in range(rng.randrange(1, 7)):
            if rng.random() < 0.5:
                failed = rng.random() < 0.3
                turns.append(
                    {
                        "role": "assistant",
                        "content": "running it",
                        "tool_calls": [
                            {
                                "name": rng.choice(["bash", "edit_file", "search"]),
                                "arguments": {"command": f"pytest -q tests/t{turn}.py"},
                                "metadata": {"is_error": failed},
                            }
                        ],
                        "observation": "1 failed" if failed else "3 passed",
                    }
                )
            else:
                action = rng.choice(["go to shelf 1", "open drawer 2", "take mug", "look"])
                seen = rng.choice(["You see a mug.", "Nothing happens.", "Error: no such item"])
                if rng.random() < 0.1:
                    seen += f" export AWS_ACCESS_KEY_ID={AWS_KEY}"
                turns.append({"role": "assistant", "action": action, "observation": seen})
        run = make_run(
            f"{task}-{AWS_KEY}" if rng.random() < 0.02 else task,
            success=rng.random() < 0.45,
            turns=turns,
            task_type=rng.choice(["pick", "clean", "heat", None]),
        )
        if rng.random() < 0.2:
            run["metadata"] = {"attempt": rng.randrange(1, 4)}
        elif rng.random() < 0.1:
            run["metadata"] = {"weak_signals": {"error_words": rng.randrange(3)}}
        runs.append(run)
        if rng.random() < 0.05:
            runs.append(json.loads(json.dumps(run)))  # the same run again: written once
    return runs


def corpus_files(corpus: Path) -> dict[str, bytes]:
    """Every file of the version the pointer names, and the store's rows beside it; the
    manifest as JSON less what differs between two builds of the same runs."""
    root = corpus.resolve()
    files = {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file()
    }
    # A version made from another holds its parent's manifest (manifests/vNNNN.json): each
    # manifest less its times, and less the hashes of those manifests, which hold them.
    for name in [name for name in files if name.startswith("manifests/")] + ["manifest.json"]:
        found = json.loads(files.pop(name))
        for key in VOLATILE:
            found.pop(key)
        found["build"].pop("seconds")
        found["build"].pop("output")
        found["files"] = {
            rel: digest
            for rel, digest in found["files"].items()
            if not rel.startswith("manifests/") and rel != "manifest.json"
        }
        files[f"{name} (less its times)"] = json.dumps(found, indent=1).encode()
    # The rows the store keeps beside it, less the key of the manifest file as written.
    head, rest = Store(corpus).rows_path(root.name).read_bytes().split(b"\n", 1)
    files["rows"] = json.dumps({**json.loads(head), "manifest": None}).encode() + rest
    return files


def differences(one: dict[str, bytes], other: dict[str, bytes]) -> list[str]:
    return sorted(name for name in one.keys() | other.keys() if one.get(name) != other.get(name))


def worker_processes(mark: str) -> list[int]:
    """The processes whose environment holds `mark` (what a build and its workers inherit)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if mark.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:  # gone, or not ours to read
                continue
    return found


def test_workers_build_the_same_bytes_as_the_build_s_own_process(tmp_path: Path) -> None:
    runs = varied_runs(300, seed=3)
    first = write_runs(tmp_path / "first.jsonl", runs)
    # A second file holding some of the same runs: each is written once.
    second = write_runs(tmp_path / "second.jsonl", runs[::7])
    built = {}
    for workers in (1, 2):
        corpus = tmp_path / f"corpus-{workers}"
        report = build_corpus(BuildOptions(inputs=[first, second], output=corpus, workers=workers))
        assert verify(corpus).ok
        built[workers] = corpus_files(corpus)
    assert report.duplicates > len(runs[::7]) and report.redactions, report
    assert report.mined and report.compiled == report.runs
    assert len(built[1]) > 4 * report.runs
    assert differences(built[1], built[2]) == []


def test_an_add_with_workers_is_the_add_made_in_the_build_s_own_process(
    tmp_path: Path,
) -> None:
    runs = varied_runs(160, seed=5)
    old = write_runs(tmp_path / "old.jsonl", runs[:60])
    new = write_runs(tmp_path / "new.jsonl", runs[40:])  # 20 runs the parent holds
    added = {}
    for workers in (1, 2):
        corpus = tmp_path / f"corpus-{workers}"
        build_corpus(BuildOptions(inputs=[old], output=corpus, workers=1))
        report = add_runs(BuildOptions(inputs=[new], output=corpus, workers=workers))
        assert report.version == "v0002" and report.duplicates >= 20
        added[workers] = corpus_files(corpus)
    assert differences(added[1], added[2]) == []


def test_without_workers_given_a_small_build_stays_in_its_own_process() -> None:
    assert worker_count(None, 4999, load=0.0) == 1
    cores = available_cores()
    assert worker_count(None, 5000, load=0.0) == worker_count(None, 10**6, load=0.5) == cores
    assert worker_count(3, 10) == 3 and worker_count(1, 10**6) == 1


def test_without_workers_given_a_build_leaves_busy_cores_alone() -> None:
    assert idle_cores(2, load=0.7) == 2  # the build itself, and an idle core
    assert idle_cores(2, load=1.5) == 1  # another process on the other core
    assert idle_cores(2, load=14.0) == 1  # a busy machine: no worker at all
    assert idle_cores(8, load=3.2) == 5
    assert worker_count(None, 10**6, load=100.0) == 1


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_an_interrupted_build_leaves_nothing_and_stops_its_workers(tmp_path: Path) -> None:
    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(400, seed=7))
    corpus = tmp_path / "corpus"

    from multiprocessing import forkserver

    servers: list[int] = []

    def interrupt(done: int, total: int) -> None:
        if done == 150:
            servers.append(forkserver._forkserver._forkserver_pid)  # type: ignore[attr-defined]
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_corpus(BuildOptions(inputs=[runs_file], output=corpus, workers=2), progress=interrupt)
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]
    assert servers[0] is not None  # the workers were started from it
    assert children_of(servers[0]) == [], "a worker outlived its build"
    assert not Path(f"/proc/{servers[0]}").exists(), "the fork server outlived its build"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_workers_end_with_the_build_and_their_time_is_its(tmp_path: Path) -> None:
    from multiprocessing import forkserver

    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(200, seed=3))
    servers: list[int] = []

    def watch(done: int, total: int) -> None:
        if not servers:
            servers.append(forkserver._forkserver._forkserver_pid)  # type: ignore[attr-defined]

    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    build_corpus(
        BuildOptions(inputs=[runs_file], output=tmp_path / "corpus", workers=2), progress=watch
    )
    assert servers[0] is not None
    assert not Path(f"/proc/{servers[0]}").exists(), "the fork server outlived its build"
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The workers' CPU, counted once the server that forked them was waited for.
    assert after.ru_utime + after.ru_stime > waited.ru_utime + waited.ru_stime


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:  # gone
            continue
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


def building(runs_file: Path, corpus: Path, mark: str) -> subprocess.Popen[str]:
    """`wikitrace build` with 2 workers (WIKITRACE_WORKERS) in a process group of its own, as a
    terminal's Ctrl-C reaches it, once its workers write pages; `mark` in the environment of all its
    processes."""
    build = subprocess.Popen(
        [WIKITRACE, "build", str(runs_file), "-o", str(corpus)],
        env={**os.environ, mark: "1", "WIKITRACE_WORKERS": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=ctrl_c_at_its_default,
    )
    staging = Store(corpus).staging("v0001")
    deadline = time.monotonic() + 120
    # The raw layer's first files, which the workers write as the runs come (the compilation
    # pages are written in the finish, which a busy machine's test may not see in time).
    while not (staging / "raw").is_dir() and build.poll() is None:
        assert time.monotonic() < deadline, "the build never started writing"
        time.sleep(0.05)
    assert build.poll() is None, "the build ended before its workers were seen"
    assert len(worker_processes(mark)) >= 4  # the build, the fork server, its two workers
    return build


def none_left(mark: str) -> None:
    """No process of the build's is left, within a minute (a few seconds on a busy machine)."""
    deadline = time.monotonic() + 60
    while worker_processes(mark):  # the fork server ends once its workers have
        assert time.monotonic() < deadline, "a worker outlived its build"
        time.sleep(0.1)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_ctrl_c_stops_the_build_and_its_workers_and_leaves_nothing(tmp_path: Path) -> None:
    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(1500, seed=11))
    mark = f"WIKITRACE_TEST_{uuid.uuid4().hex}"
    build = building(runs_file, tmp_path / "corpus", mark)
    os.killpg(build.pid, signal.SIGINT)
    _, err = build.communicate(timeout=60)
    assert build.returncode == 130, err
    assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]
    none_left(mark)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_workers_of_a_killed_build_end(tmp_path: Path) -> None:
    runs_file = write_runs(tmp_path / "runs.jsonl", varied_runs(1500, seed=13))
    mark = f"WIKITRACE_TEST_{uuid.uuid4().hex}"
    build = building(runs_file, tmp_path / "corpus", mark)
    build.kill()  # the build alone, with no time to stop anything
    build.communicate(timeout=60)
    none_left(mark)  # its staging folder is the next build's to clear (test_crash_safety)


def test_the_farm_gives_each_result_back_in_order_and_a_worker_s_error_to_the_build(
    tmp_path: Path,
) -> None:
    options = BuildOptions(inputs=[tmp_path], output=tmp_path / "corpus")
    farm = Farm(options, Layout(tmp_path, step_width=3), tmp_path, 2, mine=False)
    try:
        # Pages of texts of unlike sizes, so that the workers finish them out of order.
        jobs: list[tuple[list[str], Path | None, int]] = [
            ([f"text {i} of get_user_details"] * (1 + 40 * (i % 3)), None, i + 1) for i in range(24)
        ]
        assert list(farm.map(saved._page, jobs)) == list(map(saved._page, jobs))
        (tmp_path / postings_name(1)).write_bytes(b"not a postings page")
        with pytest.raises(CorpusError, match=r"postings-0001\.bin"):
            list(farm.map(saved._page, [*jobs[:3], (["a text"], tmp_path, 1)]))
    finally:
        farm.close()


def test_the_indexes_are_written_while_the_rankers_pages_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finish's indexes wait for nothing the workers make: the build's process writes them
    once the rankers' first pages are handed on, while its workers count the rest."""
    from wikitrace.versions import finish

    counted: list[str] = []
    at_indexes: list[int] = []
    count_page, write_indexes = saved._ranker_page, finish._write_indexes

    def ranker_page(job: Any) -> Any:
        counted.append(job[0])
        return count_page(job)

    def indexes(*args: Any, **kwargs: Any) -> None:
        at_indexes.append(len(counted))
        write_indexes(*args, **kwargs)

    monkeypatch.setattr(saved, "_ranker_page", ranker_page)
    monkeypatch.setattr(finish, "_write_indexes", indexes)
    monkeypatch.setattr(saved, "PAGE_TEXTS", 16)  # pages of several rankers to count
    runs = write_runs(tmp_path / "runs.jsonl", varied_runs(120, seed=5))
    build_corpus(BuildOptions(inputs=[runs], output=tmp_path / "corpus", workers=1))
    assert len(at_indexes) == 1 and 0 < at_indexes[0] < len(counted), (at_indexes, counted)


def test_pages_handed_on_in_a_thread_are_listed_once_waited_for(tmp_path: Path) -> None:
    """A new corpus's compilation pages go to the workers from a thread (layers.PagesLater):
    the build goes on at once (to write its catalog), and lists their files once it waits."""
    from wikitrace.compiler import layers
    from wikitrace.corpus_schema.writing import CorpusWriter

    release = threading.Event()

    def farm_map(function: Any, jobs: Any) -> Any:
        assert function is layers._named_pages
        for job in jobs:
            assert release.wait(30), "the build waited for the pages before going on"
            yield [f"compilation/step-{job}.md\tsha256:{job}\t0\n".encode()]

    (tmp_path / "root").mkdir()
    later = layers.PagesLater(farm_map, iter(["0001", "0002", "0003"]), tmp_path)
    release.set()  # reached only if the pages did not hold the build up
    with CorpusWriter(tmp_path / "root") as writer:
        later.list_in(writer)
        assert [rel for rel, *_ in writer.entries()] == [
            f"compilation/step-000{n}.md" for n in (1, 2, 3)
        ]
    assert later._lines.closed  # its file of lines is let go


def test_an_error_writing_pages_in_a_thread_reaches_the_build(tmp_path: Path) -> None:
    from wikitrace.compiler import layers
    from wikitrace.corpus_schema.writing import CorpusWriter

    def farm_map(function: Any, jobs: Any) -> Any:
        yield [b"compilation/step-0001.md\tsha256:1\t0\n"]
        raise OSError(28, "No space left on device")

    (tmp_path / "root").mkdir()
    later = layers.PagesLater(farm_map, iter(["0001", "0002"]), tmp_path)
    with CorpusWriter(tmp_path / "root") as writer, pytest.raises(OSError, match="No space"):
        later.list_in(writer)
    assert later._lines.closed


def test_the_workers_are_let_go_before_the_manifest_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers end while the build writes its manifest (their last work, the rankers'
    pages, taken back), not after it."""
    from wikitrace.versions import finish

    order: list[str] = []
    release, write_manifest = Farm.release, finish._write_manifest

    def released(farm: Farm) -> None:
        order.append("release")
        release(farm)

    def manifest(*args: Any, **kwargs: Any) -> Any:
        order.append("manifest")
        return write_manifest(*args, **kwargs)

    monkeypatch.setattr(Farm, "release", released)
    monkeypatch.setattr(finish, "_write_manifest", manifest)
    runs = write_runs(tmp_path / "runs.jsonl", varied_runs(80, seed=3))
    build_corpus(BuildOptions(inputs=[runs], output=tmp_path / "corpus", workers=2))
    assert order == ["release", "manifest"]
    assert verify(tmp_path / "corpus").ok


@pytest.mark.parametrize("broken", ["catalog_of", "_changes"])
def test_a_build_failing_while_its_workers_write_pages_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    """A build that fails while its workers still write the compilation pages (its catalog,
    or, before the layers are handed on, the list of its changes) removes its staging folder
    and lets go of what it kept of them (an unclosed file would warn when collected)."""
    from wikitrace.compiler import layers
    from wikitrace.versions import finish

    def broken_catalog(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the catalog broke")
        yield  # a generator, as catalog_of is

    def broken_changes(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the changes broke")

    if broken == "catalog_of":
        monkeypatch.setattr(finish, "catalog_of", broken_catalog)
    else:
        monkeypatch.setattr(layers, "_changes", broken_changes)
    runs = write_runs(tmp_path / "runs.jsonl", varied_runs(80, seed=4))
    with pytest.raises(RuntimeError, match="broke"):
        build_corpus(BuildOptions(inputs=[runs], output=tmp_path / "corpus", workers=2))
    assert sorted(os.listdir(tmp_path)) == ["runs.jsonl"]
    gc.collect()
