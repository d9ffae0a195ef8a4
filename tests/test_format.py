"""corpus_schema: every header written comes back the same when read."""

from __future__ import annotations

import dataclasses
import os
import random
import stat
from pathlib import Path

import frontmatter
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.corpus_schema import Claim, CorpusError, Evidence, indexes, read, spill, writing
from wikitrace.corpus_schema import manifest as manifest_io
from wikitrace.corpus_schema.history import VersionInfo
from wikitrace.corpus_schema.layout import Layout, id_width, link, parse_step
from wikitrace.corpus_schema.records import CompilationHeader, PromptRef, RawHeader
from wikitrace.corpus_schema.render import with_frontmatter

TRICKY = [
    "plain",
    "yes",
    "null",
    "- a list?",
    "key: value",
    "---",
    "# not a comment",
    "line one\nline two\n",
    "quotes \" and ' and \\ backslash",
    "tab\there",
    "control \x01 \x7f \x85 \x9f \ufffe end",
    "line\u2028separator and emoji \U0001f600",
    "  leading and trailing  ",
    "",
    "x" * 5000,
    "2024-05-20",
    "1e3",
    "0x1F",
    "1:20",
    "~",
    "On",
    "Y",
    ".inf",
    "<<",
    "=",
    "step-0001",
    "a/b.c_d-e",
    "-",
    "_",
]


@pytest.mark.parametrize("text", TRICKY)
def test_headers_round_trip(tmp_path: Path, text: str) -> None:
    raw = RawHeader(
        step="step-0001",
        task_id=text or "t",
        task_type=text,
        attempt=1,
        outcome="failure",
        turns=3,
        source=text,
        turns_file="raw/step-0001/solver.full.jsonl",
        metadata={
            "note": text,
            "nested": [{"deep": text}, 1.5, None, True],
            "numbers": [1e-07, 1e20, -2.5e-10, 3.5e-05, 0.1, 3.0, -7, 2**62, "1e-7"],
        },
    )
    compilation = CompilationHeader(
        step="step-0001",
        outcome="success",
        title=text,
        insights=["insight-0001"],
        compiled_by="llm",
        model="m",
        prompt=PromptRef(template="t.j2", sha256="0" * 64),
        unverified_quotes=0,
        raw="raw/step-0001/",
        claims=[Claim(statement=text, evidence=[Evidence(turn=2, quote=text, verified=False)])],
    )
    for header, rel in ((raw, "raw.md"), (compilation, "compilation.md")):
        written = with_frontmatter(header, f"body\n{text}\n")
        (tmp_path / rel).write_text(written)
        page = read.read_page(tmp_path, rel, type(header))
        assert page.header == header
        assert page.body.strip() == f"body\n{text}".strip()
        # The fast reader of our own headers reads what a YAML parser reads.
        lines = written[4 : written.index("\n---\n", 4)]
        assert read.written_header(lines) == yaml.load(lines, Loader=yaml.SafeLoader)


@pytest.mark.parametrize(
    "header",
    [
        "title: plain # a comment",
        "title: >\n  folded",
        "title: 1e3",
        "title: yes",
        "title: 'single'",
        "title: ~",
        "title:",
        "title: a\ntitle: b",
        "Title: x",
        "title: [1, 2] # c",
    ],
)
def test_a_header_wikitrace_did_not_write_is_left_to_yaml(header: str, tmp_path: Path) -> None:
    assert read.written_header(header) is None
    (tmp_path / "page.md").write_text(f"---\n{header}\nstep: x\n---\nbody\n")
    metadata, _ = frontmatter.parse((tmp_path / "page.md").read_text(), handler=read._HANDLER)
    assert metadata == yaml.load(f"{header}\nstep: x", Loader=yaml.SafeLoader)


def test_ids_sort_numerically_and_parse_back() -> None:
    assert id_width(9999) == 4 and id_width(10_000) == 5
    layout = Layout(Path("/c"), step_width=5)
    assert layout.step(42) == "step-00042" and parse_step("step-00042") == 42
    assert parse_step("42") == 42
    with pytest.raises(ValueError, match="not a step id"):
        parse_step("../42")


def test_links_show_the_root_path_and_resolve_from_the_file() -> None:
    assert link("raw/step-0001/metadata.md", "insight/insight-0001.md") == (
        "[raw/step-0001/metadata.md](../raw/step-0001/metadata.md)"
    )
    assert link("insight/_index.md", "_index.md") == "[insight/_index.md](insight/_index.md)"


# --- the manifest, written a chunk at a time ----------------------------------------------


def manifest_of(files: dict[str, str], **fields: object) -> manifest_io.Manifest:
    return manifest_io.Manifest.model_validate(
        {
            "builder": {"name": "wikitrace", "version": "0"},
            "created": "2026-11-30T00:00:00Z",
            "model": "offline",
            "compiled_by": "offline",
            "step_id_width": 4,
            "insight_id_width": 4,
            "counts": {"runs": len(files)},
            "files": dict(sorted(files.items())),
            **fields,
        }
    )


@settings(max_examples=60, deadline=None)
@given(
    files=st.dictionaries(st.text(min_size=1, max_size=30), st.text(max_size=80), max_size=40),
    build=st.dictionaries(
        st.text(max_size=10), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10)
    ),
)
def test_the_manifest_written_in_chunks_is_byte_for_byte_the_manifest(
    files: dict[str, str], build: dict[str, object]
) -> None:
    made = manifest_of(files, build=build, version=VersionInfo(name="v0001"))
    chunks = manifest_io.dump_chunks(made.model_copy(update={"files": {}}), sorted(files.items()))
    assert b"".join(chunks) == manifest_io.dump(made)


def test_a_manifest_of_many_files_is_written_in_several_chunks(tmp_path: Path) -> None:
    files = {f"raw/step-{n:05d}/metadata.md": f"sha256:{n:064x}" for n in range(10_000)}
    made = manifest_of(files, step_id_width=5)
    chunks = list(manifest_io.dump_chunks(made.model_copy(update={"files": {}}), files.items()))
    assert len(chunks) > 2 and b"".join(chunks) == manifest_io.dump(made)
    (tmp_path / "manifest.json").write_bytes(b"".join(chunks))
    assert manifest_io.manifest_problem(tmp_path) is None


# --- the writer's list of files, kept on disk and read back sorted ---------------------------


@settings(max_examples=80, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"") + b"\n")),
    chunk=st.integers(1, 7),
)
def test_lines_sorted_a_chunk_at_a_time_are_all_the_lines_sorted(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], chunk: int
) -> None:
    import io

    folder = tmp_path_factory.mktemp("sort")
    got = list(writing.sorted_lines(io.BytesIO(b"".join(lines)), folder, chunk))
    assert got == sorted(lines)
    assert not list(folder.iterdir())  # its runs are gone once read


def test_the_writer_lists_every_file_sorted_with_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writing, "SORT_CHUNK_LINES", 7)  # several sorted runs, merged
    root = tmp_path / "staging"
    root.mkdir()
    source = tmp_path / "kept.md"
    source.write_bytes(b"kept")
    rels = [f"raw/step-{n:03d}/metadata.md" for n in range(40)] + ["raw/_index.md", "a.md"]
    random.Random(3).shuffle(rels)
    with writing.CorpusWriter(root) as writer:
        for rel in rels:
            writer.write(rel, rel)
        writer.link("compilation/step-001.md", source, "sha256:given")
        listed = list(writer.files())
        assert writer.count == len(rels) + 1
        assert listed == sorted(listed) and len(listed) == len(rels) + 1
        assert dict(listed) == {
            **{rel: writing.digest(rel.encode()) for rel in rels},
            "compilation/step-001.md": "sha256:given",
        }
        # A file is never written twice, whether written or linked.
        with pytest.raises(CorpusError, match="written twice"):
            writer.write("a.md", "again")
        with pytest.raises(CorpusError, match="written twice"):
            writer.link("raw/_index.md", source, "sha256:given")
        assert (root / "a.md").read_text() == "a.md"
    # The list is no file of the version, nor beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.md", "staging"]


def test_files_written_again_in_place_are_listed_as_removed_and_written(tmp_path: Path) -> None:
    """`NewFiles.rewrite` (a build's worker's, its lines handed to the writer) lists what
    `remove` then `write_files` list, and leaves the same bytes:
    a file written over in place, shorter or longer; one of `written` not given again,
    removed; one given anew, written; a file linked from a frozen version never written
    over (its source keeps its bytes)."""
    source = tmp_path / "frozen.md"
    source.write_bytes(b"the frozen version's bytes")
    old = {"long.md": b"x" * 5000, "short.md": b"y", "gone.md": b"z"}
    new = [("long.md", "short now"), ("short.md", "y" * 9000), ("linked.md", "mine"), ("n.md", "n")]
    lists = []
    for in_place in (True, False):
        root = tmp_path / f"staging-{in_place}"
        root.mkdir()
        with writing.CorpusWriter(root) as writer:
            for rel, data in old.items():
                writer.write(rel, data)
            writer.link("linked.md", source, "sha256:given")
            written = {*old, "linked.md"}
            if in_place:
                writer.listed(writing.NewFiles(root).rewrite(new, written))
                assert written == set()
            else:
                for rel in sorted(written):
                    writer.remove(rel)
                writer.write_files(new)
            lists.append((list(writer.files()), writer.count))
            assert {p.name: p.read_text() for p in root.iterdir()} == dict(new)
    assert lists[0] == lists[1]
    assert source.read_bytes() == b"the frozen version's bytes"


def test_files_written_again_in_place_need_no_root(tmp_path: Path) -> None:
    """Staging files are written read-only; `rewrite` writes over one in place as its owner,
    not root (whom no file mode stops): run as a user who is not root (root's test drops to
    `nobody` in a child), and the file is read-only again after."""
    root = tmp_path / "staging"
    root.mkdir()
    writing.NewFiles(os.fspath(root)).write("page.md", b"old bytes")
    if os.geteuid() != 0:
        _rewrite_page(root)
    else:
        os.chown(root, 65534, 65534)
        os.chown(root / "page.md", 65534, 65534)
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through its exit status
            code = 1
            try:
                os.chdir(root)  # pytest's folders above it are its owner's alone
                os.setgid(65534)
                os.setuid(65534)
                _rewrite_page(Path("."))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "rewrite failed as a user who is not root"
    assert (root / "page.md").read_bytes() == b"new"
    assert stat.S_IMODE((root / "page.md").stat().st_mode) == 0o444


def _rewrite_page(root: Path) -> None:
    writing.NewFiles(os.fspath(root)).rewrite([("page.md", "new")], {"page.md"})


def test_files_a_worker_writes_are_listed_as_the_writer_lists_its_own(tmp_path: Path) -> None:
    """A build's worker writes through `NewFiles` into the staging folder; its lines, handed
    to the writer (`listed`), list what the writer's own `write` lists."""
    files = [("raw/step-1/metadata.md", "page"), ("raw/step-1/turns.jsonl", b"{}\n")]
    lists = []
    for by_worker in (True, False):
        root = tmp_path / f"staging-{by_worker}"
        with writing.CorpusWriter(root) as writer:
            if by_worker:
                writer.listed(writing.NewFiles(root).write_files(files))
            else:
                writer.write_files(files)
            lists.append((list(writer.files()), writer.count))
        with pytest.raises(CorpusError, match="written twice"):
            writing.NewFiles(root).write(*files[0])
    assert lists[0] == lists[1]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_a_new_file_is_read_only_and_keyed_as_it_stays(tmp_path: Path, umask: int) -> None:
    """`write_new` makes a file read-only for everyone whatever the umask, with the hash of
    its bytes and the `stat_key` a later look at it finds (the seal trusts that key)."""
    import hashlib
    import os

    chunks = [b"x" * 70_000, b"", b"the end\n"]
    old = os.umask(umask)
    try:
        file_hash, key = writing.write_new(tmp_path / "page.md", iter(chunks))
    finally:
        os.umask(old)
    path = tmp_path / "page.md"
    assert path.read_bytes() == b"".join(chunks)
    assert file_hash == "sha256:" + hashlib.sha256(b"".join(chunks)).hexdigest()
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert key == writing.stat_key(os.lstat(path))
    with pytest.raises(CorpusError, match="written twice"):
        writing.write_new(path, [b"again"])
    assert path.read_bytes() == b"".join(chunks)


def test_linking_files_together_is_linking_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`link_all` makes the same links and the same list (hashes, and keys kept only for a
    link that is still the file the key was taken from) as `link` called for each file; a
    file that cannot be linked (another device) is copied, and its key dropped."""
    monkeypatch.setattr(writing.CorpusWriter, "LINK_BATCH", 3)  # listed in several batches
    source = tmp_path / "v1"
    rels = [f"raw/step-{n:02d}/{name}.md" for n in range(4) for name in ("metadata", "turns")]
    files = []
    for index, rel in enumerate(rels):
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(rel)
        key = writing.stat_key((source / rel).stat()) if index != 3 else 0
        files.append((rel, f"sha256:{index}", key + 1 if index == 5 else key))  # 5: stale
    made = {}
    for way in ("each", "all"):
        root = tmp_path / way
        root.mkdir()
        with writing.CorpusWriter(root) as writer:
            writer.write("a.md", "a")
            if way == "each":
                for rel, file_hash, key in files:
                    writer.link(rel, source / rel, file_hash, key)
            else:
                writer.link_all(source, iter(files))
            # The file written here is a file of each writer's own (its key differs).
            made[way] = ([e for e in writer.entries() if e[0] != "a.md"], writer.count)
            with pytest.raises(CorpusError, match="written twice"):
                writer.link_all(source, [files[0]])
            assert writer.count == made[way][1]
        for rel in rels:
            assert (root / rel).stat().st_ino == (source / rel).stat().st_ino
    entries, count = made["all"]
    assert made["each"] == made["all"] and count == len(rels) + 1
    assert [key for _, _, key in entries] == [
        0 if index in (3, 5) else key for index, (_, _, key) in enumerate(files)
    ]

    def cross_device(src: str, dst: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(writing.os, "link", cross_device)
    root = tmp_path / "other-device"
    root.mkdir()
    with writing.CorpusWriter(root) as writer:
        writer.link_all(source, files[:1])
        assert list(writer.entries()) == [(rels[0], "sha256:0", 0)]
    assert (root / rels[0]).read_text() == rels[0]
    assert (root / rels[0]).stat().st_ino != (source / rels[0]).stat().st_ino


def test_a_file_taken_back_is_no_longer_listed(tmp_path: Path) -> None:
    """A file written again after `remove` is listed once, with its new hash; one removed and
    not written again is not listed, nor on disk."""
    root = tmp_path / "staging"
    root.mkdir()
    with writing.CorpusWriter(root) as writer:
        for rel in ("a.md", "b.md", "c.md", "d.md"):
            writer.write(rel, rel)
        writer.remove("b.md")
        writer.write("b.md", "b, again")
        writer.remove("c.md")
        writer.remove("d.md")
        writer.write("d.md", "d.md")  # the same bytes as before
        assert dict(writer.files()) == {
            "a.md": writing.digest(b"a.md"),
            "b.md": writing.digest(b"b, again"),
            "d.md": writing.digest(b"d.md"),
        }
        assert len(list(writer.files())) == writer.count == 3
    assert sorted(p.name for p in root.iterdir()) == ["a.md", "b.md", "d.md"]


def test_freezing_makes_files_and_folders_read_only_and_follows_no_link(tmp_path: Path) -> None:
    root = tmp_path / "staging"
    (root / "tools").mkdir(parents=True)
    (root / "page.md").write_text("page")
    (root / "page.md").chmod(0o644)
    (root / "tools" / "turn").write_text("#!/bin/sh\n")
    (root / "tools" / "turn").chmod(0o755)
    (root / "kept.md").write_text("kept")
    (root / "kept.md").chmod(0o444)  # linked from a frozen version
    outside = tmp_path / "outside.md"
    outside.write_text("not the corpus's")
    outside.chmod(0o644)
    (root / "link.md").symlink_to(outside)
    writing.freeze(root)
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]}
    assert modes == {
        "staging": 0o555,
        "tools": 0o555,
        "turn": 0o555,
        "page.md": 0o444,
        "kept.md": 0o444,
        "link.md": 0o777,
    }
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    for path in [root, root / "tools"]:
        path.chmod(0o755)  # so that pytest can remove it


run_rows = st.lists(
    st.builds(
        indexes.RunRow,
        step=st.integers(1, 5),  # gaps between steps, made increasing below
        task_id=st.text(max_size=8),
        task_type=st.none() | st.text(max_size=8),
        outcome=st.sampled_from(["success", "failure"]),
        turns=st.integers(0, 10**6),
        task=st.text(max_size=40),
        judged=st.booleans(),
        compiled=st.booleans(),
        title=st.none() | st.text(max_size=20),
        unverified_quotes=st.integers(0, 9),
        insights=st.lists(st.integers(1, 10**6), max_size=3),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(rows=run_rows, data=st.data())
def test_rows_kept_on_disk_read_back_as_the_rows_kept_in_a_list(
    tmp_path_factory: pytest.TempPathFactory, rows: list[indexes.RunRow], data: st.DataObject
) -> None:
    step = 0
    for row in rows:  # steps increase, with gaps
        step += row.step
        row.step = step
    folder = tmp_path_factory.mktemp("rows")
    with spill.RunRows(folder, rows) as kept:
        assert len(kept) == len(rows) and bool(kept) == bool(rows)
        assert list(kept) == rows
        start = data.draw(st.integers(-70, 70))
        stop = data.draw(st.integers(-70, 70) | st.none())
        assert kept[start:stop] == rows[start:stop]
        assert list(kept.iter_from(max(start, 0))) == rows[max(start, 0) :]
        for row in rows:
            assert kept.by_step(row.step) == row
        with pytest.raises(KeyError):
            kept.by_step(step + 1)
        if rows:
            index = data.draw(st.integers(-len(rows), len(rows) - 1))
            assert kept[index] == rows[index]
            picked = data.draw(st.lists(st.integers(0, len(rows) - 1), unique=True).map(sorted))
            chosen = indexes._Picked(kept, picked)
            assert chosen[:] == [rows[i] for i in picked] and len(chosen) == len(picked)
            assert chosen[1:-1] == [rows[i] for i in picked][1:-1]
        with pytest.raises(ValueError, match="after"):
            kept.append(indexes.RunRow(step, "t", None, "success", 1, ""))
        # Appended after reading: after the rows, not where the last read ended.
        more = [indexes.RunRow(step + n, "t", None, "success", n, "") for n in (1, 2)]
        kept.append(more[0])
        assert kept[len(rows) :] == more[:1]
        kept.append(more[1])
        assert list(kept) == rows + more
    assert not list(folder.iterdir())


@settings(max_examples=30, deadline=None)
@given(rows=run_rows, more=run_rows)
def test_kept_rows_are_copied_as_bytes_both_ways(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[indexes.RunRow],
    more: list[indexes.RunRow],
) -> None:
    """A version's kept rows copied into the rows of one made from it (`RunRows.copied`), and
    rows on disk written as kept rows, give the bytes and rows written row by row."""
    step = 0
    for row in [*rows, *more]:
        step += row.step
        row.step = step
    folder = tmp_path_factory.mktemp("kept")
    insights = [indexes.InsightRow(1, "a lesson", None, 1, "failure")]
    listed, spilled = folder / "listed.rows", folder / "spilled.rows"
    spill.write_version_rows(listed, 7, rows, insights)
    kept = spill.read_version_rows(listed, 7)
    assert kept is not None and kept[0] == rows and kept[1] == insights
    copied = spill.RunRows.copied(folder, kept[2])
    assert copied is not None
    half = len(more) // 2
    with copied:
        assert list(copied) == rows
        copied.extend(more[:half])  # a row of a step not after the last is refused, as ever
        spill.write_version_rows(spilled, 7, copied, insights)
        spill.write_version_rows(listed, 7, [*rows, *more[:half]], insights)
        assert spilled.read_bytes() == listed.read_bytes()
        copied.extend(more[half:])  # after the rows: writing them moved nothing
        assert list(copied) == [*rows, *more]
        spill.write_version_rows(spilled, 7, copied, insights)
    spill.write_version_rows(listed, 7, [*rows, *more], insights)
    assert spilled.read_bytes() == listed.read_bytes()
    # The file replaced since it was read: not copied (the caller writes the rows it read).
    again = spill.read_version_rows(listed, 7)
    assert again is not None
    spill.write_version_rows(listed, 7, rows, insights)
    refused = spill.RunRows.copied(folder, again[2])
    if refused is not None:
        refused.close()
    assert refused is None or not rows  # no rows: nothing to copy
    assert not [path for path in folder.iterdir() if path.suffix != ".rows"]


insight_rows = st.lists(
    st.builds(
        indexes.InsightRow,
        number=st.integers(1, 10**6),
        title=st.text(max_size=20),
        task_type=st.none() | st.text(max_size=8),
        source_step=st.integers(1, 10**6),
        source_outcome=st.sampled_from(["success", "failure"]),
        source_judged=st.booleans(),
        status=st.sampled_from(["ungated", "committed", "rejected", "retired"]),
        verified=st.booleans(),
        guideline=st.text(max_size=40),
        alike=st.none() | st.integers(1, 10**6),
        pattern=st.none() | st.sampled_from(["diverge", "uses:x", "repeat"]),
        goes_with=st.none() | st.sampled_from(["success", "failure"]),
        holds=st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(rows=insight_rows, data=st.data())
def test_insight_rows_kept_on_disk_read_back_as_a_list_with_rows_replaced(
    tmp_path_factory: pytest.TempPathFactory, rows: list[indexes.InsightRow], data: st.DataObject
) -> None:
    """Every field comes back; a row replaced (a parent's mined lesson, recounted) is read
    back as the new row, alone, in a slice and in order, and changing a row read back
    changes nothing kept."""
    folder = tmp_path_factory.mktemp("insight-rows")
    expected = [dataclasses.replace(row) for row in rows]
    with spill.InsightRows(folder, rows[: len(rows) // 2]) as kept:
        kept.extend(rows[len(rows) // 2 :])
        if rows:
            for index in data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=5)):
                new = dataclasses.replace(rows[index], title=f"recounted {index}", holds=False)
                kept[index] = new
                expected[index] = dataclasses.replace(new)
            kept[0].title = "changed after reading"
            with pytest.raises(IndexError):
                kept[len(rows)] = rows[0]
        assert len(kept) == len(rows) and list(kept) == expected
        start = data.draw(st.integers(-70, 70))
        stop = data.draw(st.integers(-70, 70) | st.none())
        assert kept[start:stop] == expected[start:stop]
        if rows:
            index = data.draw(st.integers(-len(rows), len(rows) - 1))
            assert kept[index] == expected[index]
    assert not list(folder.iterdir())


def test_files_linked_together_are_listed_in_path_order_and_may_be_taken_back(
    tmp_path: Path,
) -> None:
    """What `link_all` keeps in memory (`CorpusWriter.linked`: the files that come in path
    order) is listed with the files written and linked otherwise, all in path order; a file
    out of order goes to the list on disk; a linked file taken back is no longer listed."""
    source = tmp_path / "v1"
    rels = ["b/1.md", "b/2.md", "a/0.md", "d/3.md"]  # a/0.md out of order
    for rel in rels:
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(rel)
    root = tmp_path / "staging"
    root.mkdir()
    with writing.CorpusWriter(root) as writer:
        writer.write("c.md", "c")
        hashes = {rel: writing.file_digest(source / rel) for rel in rels}
        writer.link_all(source, [(rel, hashes[rel], 0) for rel in rels])
        assert writer.linked is not None
        assert (writer.linked.rels, writer.linked.folders) == (
            ["b/1.md", "b/2.md", "d/3.md"],
            {"b", "d"},
        )
        assert [rel for rel, _ in writer.files()] == sorted([*rels, "c.md"])
        assert [rel for rel, _, _ in writer.entries(linked=False)] == ["a/0.md", "c.md"]
        writer.remove("b/2.md")
        assert writer.linked is None  # the linked files went to the list on disk
        del hashes["b/2.md"]
        assert dict(writer.files()) == {**hashes, "c.md": writing.digest(b"c")}
        assert writer.count == 4
    assert not (root / "b/2.md").exists()
