"""A process killed at any file-system call (kill -9: no cleanup runs) leaves a corpus that is
whole and current, the old one or the new one, and running the same command again finishes the
job. Each kill point is a forked child that dies with os._exit at its N-th call."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, add_runs, build_corpus
from wikitrace.corpus_schema import CorpusError, manifest, verify
from wikitrace.corpus_schema.writing import remove_tree
from wikitrace.versions import Store

from helpers import make_run, write_runs

# The calls through which a build changes the file system.
_CALLS = ("replace", "rename", "symlink", "unlink", "rmdir", "mkdir", "link", "chmod")


def _calls_then_die(kill_at: int | None) -> list[int]:
    """Patch os so that the kill_at-th call ends the process at once; returns the counter."""
    count = [0]
    for name in _CALLS:
        original = getattr(os, name)

        def wrapped(*args: object, _original: Callable[..., object] = original, **kw: object):
            count[0] += 1
            if kill_at is not None and count[0] == kill_at:
                os._exit(137)
            return _original(*args, **kw)

        setattr(os, name, wrapped)
    return count


def _in_child(work: Callable[[], object], kill_at: int | None) -> tuple[int, int]:
    """Run `work` in a forked child killed at call `kill_at`: (exit code, calls made)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        os.close(read)
        count = _calls_then_die(kill_at)
        try:
            work()
        except BaseException:
            code = 1
        os.write(write, str(count[0]).encode())
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        calls = pipe.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), int(calls or 0)


def _runs(tmp: Path, name: str, tasks: list[str]) -> Path:
    return write_runs(
        tmp / name, [make_run(task, success=i % 2 == 0) for i, task in enumerate(tasks)]
    )


def _current_runs(corpus: Path) -> int:
    """Runs in the version the pointer names, after checking it is whole."""
    report = verify(corpus)
    assert report.ok, report.as_dict()
    return manifest.load(corpus).counts["runs"]


def _store_is_clean(corpus: Path) -> None:
    store = Store(corpus)
    left = sorted(p.name for p in store.dir.iterdir())
    current = store.current()
    assert left == sorted([current, f".{current}.rows", f".{current}.seal", "history.jsonl"]), left


def _kill_points(work: Callable[[], object], setup: Callable[[], None]) -> range:
    setup()
    code, calls = _in_child(work, None)
    assert code == 0 and calls > 10
    return range(1, calls + 1)


def afresh(corpus: Path, runs: Path | None = None) -> None:
    """An empty folder for `corpus` (the last try's read-only folders made writable first, as
    only root could remove them as they are), with a corpus built from `runs` in it when
    given."""
    remove_tree(corpus.parent)
    corpus.parent.mkdir()
    if runs is not None:
        build_corpus(BuildOptions(inputs=[runs], output=corpus))


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    old = _runs(tmp_path, "old.jsonl", ["a", "b"])
    new = _runs(tmp_path, "new.jsonl", ["c", "d", "e"])
    return old, new


# Slow (a kill at every file-system call of a build): CI's full tier runs it; the default
# tier kills a first build anywhere (test_a_first_build_killed_anywhere_...).
@pytest.mark.slow
def test_build_force_killed_anywhere_keeps_a_whole_corpus_current(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    old, new = inputs
    corpus = tmp_path / "w" / "corpus"

    def setup() -> None:
        afresh(corpus, old)
        write_runs(corpus.parent / "notes.md", [])  # a user file beside: never touched

    def rebuild() -> object:
        return build_corpus(BuildOptions(inputs=[new], output=corpus, force=True))

    points = _kill_points(rebuild, setup)
    seen = set()
    for kill_at in points:
        setup()
        code, _ = _in_child(rebuild, kill_at)
        assert code == 137
        seen.add(_current_runs(corpus))  # the old corpus or the new one, whole
        # Whichever version is current, the history names it.
        assert Store(corpus).history()[-1].version == Store(corpus).current(), kill_at
        rebuild()  # the same command again
        assert _current_runs(corpus) == 3
        _store_is_clean(corpus)
        assert (corpus.parent / "notes.md").exists()
    assert seen == {2, 3}  # some kill points came before the switch, some after


def test_a_first_build_killed_anywhere_is_finished_by_running_it_again(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    old, _ = inputs
    corpus = tmp_path / "w" / "corpus"

    def setup() -> None:
        afresh(corpus)

    def first() -> object:
        return build_corpus(BuildOptions(inputs=[old], output=corpus))

    for kill_at in _kill_points(first, setup):
        setup()
        code, _ = _in_child(first, kill_at)
        assert code == 137
        if corpus.is_symlink():  # killed after the pointer was made: it is whole
            assert _current_runs(corpus) == 2
            # and its history says so, even when the kill came before the history's rename
            history = [(e.event, e.version) for e in Store(corpus).history()]
            assert history == [("built", "v0001")], kill_at
            continue
        first()  # no --force needed: nothing was ever current
        assert _current_runs(corpus) == 2
        _store_is_clean(corpus)


# Slow (a kill at every file-system call of a build): CI's full tier runs it; the default
# tier kills a first build anywhere (test_a_first_build_killed_anywhere_...).
@pytest.mark.slow
def test_add_killed_anywhere_keeps_a_whole_corpus_current(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    old, new = inputs
    corpus = tmp_path / "w" / "corpus"

    def setup() -> None:
        afresh(corpus, old)

    def add() -> object:
        return add_runs(BuildOptions(inputs=[new], output=corpus))

    for kill_at in _kill_points(add, setup):
        setup()
        code, _ = _in_child(add, kill_at)
        assert code == 137
        assert _current_runs(corpus) in (2, 5)
        add()  # again: adds what the current version lacks, or finishes what the kill left
        assert _current_runs(corpus) == 5
        store = Store(corpus)
        for name in store.versions():  # every version left behind is whole
            assert verify(store.version_path(name)).ok
        # One version added, never the same one twice, and the history says so once.
        assert store.versions() == ["v0001", "v0002"], kill_at
        history = [(entry.event, entry.version) for entry in store.history()]
        assert history == [("built", "v0001"), ("added", "v0002")], (kill_at, history)
        assert _leftovers(corpus) == [], kill_at


def _leftovers(corpus: Path) -> list[str]:
    """What a killed process wrote beside the pointer or in the store and nobody cleared:
    temporary files and links, staging folders."""
    store = Store(corpus)
    beside = [p.name for p in corpus.parent.iterdir() if p.name.startswith(f".{corpus.name}.")]
    inside = [
        p.name
        for p in store.dir.iterdir()
        if ".tmp-" in p.name or p.name.endswith(".partial") or p.name.startswith(".removing-")
    ]
    return sorted(beside + inside)


def _dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)


def test_leftovers_of_killed_processes_are_cleared_by_the_next_run(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    old, new = inputs
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[old], output=corpus))
    store = Store(corpus)
    dead, alive = _dead_pid(), os.getppid()
    stale = [
        corpus.with_name(f".corpus.pointer-{dead}"),
        store.dir / f".history.jsonl.tmp-{dead}",
        store.dir / f".update-state.json.tmp-{dead}",
        store.dir / f"..v0001.seal.tmp-{dead}",
        store.dir / "updates" / f".update-0001.json.tmp-{dead}",
    ]
    busy = [corpus.with_name(f".corpus.pointer-{alive}"), store.dir / f".runs.jsonl.tmp-{alive}"]
    (store.dir / "updates").mkdir()
    for path in stale + busy:
        if ".pointer-" in path.name:
            path.symlink_to("corpus.versions/v0001")
        else:
            path.write_text("half written")
    notes = tmp_path / ".notes.tmp-1"  # beside the corpus, but not the corpus's
    notes.write_text("mine")
    add_runs(BuildOptions(inputs=[new], output=corpus))
    assert [path for path in stale if os.path.lexists(path)] == []
    assert all(os.path.lexists(path) for path in busy)  # a live process may still be writing
    assert notes.read_text() == "mine"
    assert _current_runs(corpus) == 5


def test_ctrl_c_at_the_pointer_leaves_no_link_behind_and_add_again_finishes(
    tmp_path: Path, inputs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import run

    old, new = inputs
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[old], output=corpus))
    real_symlink = os.symlink

    def interrupted(source: str, link: str, *args: object, **kw: object) -> None:
        real_symlink(source, link)
        if ".pointer-" in os.fspath(link):
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "symlink", interrupted)
    code, _, err = run(["add", str(corpus), str(new)])
    assert code == 130, err
    monkeypatch.setattr(os, "symlink", real_symlink)
    assert _leftovers(corpus) == []
    assert _current_runs(corpus) == 2  # the pointer never moved
    code, out, err = run(["add", str(corpus), str(new)])
    assert code == 0, err
    store = Store(corpus)
    assert out == f"{store.version_path('v0002')}\n"
    assert store.versions() == ["v0001", "v0002"] and _current_runs(corpus) == 5
    assert "v0002 was made by an add of the same inputs that was interrupted" in err


def test_force_never_removes_a_versions_folder_that_is_not_ours(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    old, _ = inputs
    notes = tmp_path / "notes"
    store = tmp_path / "notes.versions"
    store.mkdir()
    (store / "draft.txt").write_text("mine")
    with pytest.raises(CorpusError, match="holds files wikitrace did not write"):
        build_corpus(BuildOptions(inputs=[old], output=notes, force=True))
    assert (store / "draft.txt").read_text() == "mine"
    assert not notes.exists()


def test_a_full_disk_is_one_line_and_leaves_the_old_corpus_current(
    tmp_path: Path, inputs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.corpus_schema import writing

    from helpers import run

    old, new = inputs
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[old], output=corpus))
    real_write = writing.write_new
    writes = [0]

    def fills_up(path: Path, chunks: Iterable[bytes]) -> tuple[str, int]:
        writes[0] += 1
        if writes[0] > 5:
            raise OSError(28, "No space left on device", str(path))
        return real_write(path, chunks)

    monkeypatch.setattr(writing, "write_new", fills_up)
    code, out, err = run(["build", str(new), "-o", str(corpus), "--force"])
    assert (code, out) == (1, "")
    assert err.splitlines()[-1].startswith("error: ")
    assert err.splitlines()[-1].endswith(": No space left on device")
    assert "Traceback" not in err
    assert _current_runs(corpus) == 2
    _store_is_clean(corpus)


def test_ctrl_c_during_build_force_says_the_old_corpus_is_still_current(
    tmp_path: Path, inputs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import wikitrace.compiler.produce as produce_module

    from helpers import run

    old, new = inputs
    corpus = tmp_path / "corpus"
    build_corpus(BuildOptions(inputs=[old], output=corpus))
    real = produce_module.compile_offline
    calls = [0]

    def interrupted(*args: object) -> object:
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(produce_module, "compile_offline", interrupted)
    code, _, err = run(["build", str(new), "-o", str(corpus), "--force"])
    assert code == 130
    assert err.endswith(f"interrupted: {corpus} is as it was (corpus.versions/v0001 is current)\n")
    assert _current_runs(corpus) == 2
    _store_is_clean(corpus)


def test_a_derived_version_killed_anywhere_keeps_a_whole_corpus_current(
    tmp_path: Path, inputs: tuple[Path, Path]
) -> None:
    from wikitrace.corpus_schema.lock import build_lock
    from wikitrace.versions import Derivation, FrozenVersion, derive_version

    old, _ = inputs
    corpus = tmp_path / "w" / "corpus"

    def setup() -> None:
        afresh(corpus, old)

    def derive() -> object:
        store = Store(corpus)
        with build_lock(corpus):
            record = f"gate/decision-{store.next_name()}.md"
            change = Derivation(files={record: b"# a decision\n"}, reason="test")
            return derive_version(store, FrozenVersion.current(store), change, deploy=True)

    for kill_at in _kill_points(derive, setup):
        setup()
        code, _ = _in_child(derive, kill_at)
        assert code == 137
        current = Store(corpus).current()
        assert verify(corpus).ok, current
        derive()  # again: a new version on top of whichever is current
        assert verify(corpus).ok
        assert (corpus / "gate" / f"decision-{Store(corpus).current()}.md").exists()


def test_a_model_server_that_dies_never_makes_an_empty_corpus_current(tmp_path: Path) -> None:
    """The server answers the first call, then refuses every one (it died): a build made of
    failures writes nothing, and an add of them is kept as a candidate, not deployed."""
    from wikitrace.compiler.build import BuildFailed
    from wikitrace.transport.llm import LLMCallError

    from helpers import FakeLLM, good_answer

    answered: list[int] = []

    def dying(messages: list[dict[str, str]]) -> str:
        if answered:
            raise LLMCallError("cannot reach the server (Connection refused)")
        answered.append(1)
        return good_answer(messages[0]["content"])

    runs = write_runs(tmp_path / "runs.jsonl", [make_run(f"t{n}") for n in range(4)])
    corpus = tmp_path / "corpus"
    options = BuildOptions(inputs=[runs], output=corpus, model="fake/compiler", use_cache=False)
    with pytest.raises(
        BuildFailed, match=r"not built: 3 of 4 compilations failed, the model giving no reply"
    ):
        build_corpus(options, llm=FakeLLM(answer=dying))
    assert not corpus.exists() and not Path(f"{corpus}.versions").exists()
    # A corpus whose model answered; then an add while the server is dead.
    build_corpus(options, llm=FakeLLM())
    more = write_runs(tmp_path / "more.jsonl", [make_run(f"u{n}") for n in range(4)])
    answered.clear()
    report = add_runs(
        BuildOptions(inputs=[more], output=corpus, use_cache=False), llm=FakeLLM(answer=dying)
    )
    store = Store(corpus)
    assert report.version == "v0002" and report.held_back and not report.complete
    assert store.current() == "v0001"  # the last good version stays current
    last = store.history()[-1]
    assert (last.event, last.version) == ("candidate", "v0002")
    assert "not deployed: 3 of 4 compilations failed" in last.reason
    # A few failures are not most: such an add is deployed, incomplete, as before.
    calls: list[int] = []

    def flaky(messages: list[dict[str, str]]) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise LLMCallError("a time-out")
        return good_answer(messages[0]["content"])

    third = write_runs(tmp_path / "third.jsonl", [make_run(f"w{n}") for n in range(4)])
    report = add_runs(
        BuildOptions(inputs=[third], output=corpus, use_cache=False), llm=FakeLLM(answer=flaky)
    )
    assert len(report.failed) == 1 and not report.held_back
    assert store.current() == report.version == "v0003"
