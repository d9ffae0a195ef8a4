"""Malformed and hostile input: every case is a one-line error with an exit code, never a
traceback, and nothing is read outside the corpus. Each case failed before it was fixed."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers.base import HEAD_BYTES
from wikitrace.corpus_schema import verify

from helpers import FakeLLM, make_run, run, write_runs


def build(*args: str) -> tuple[int, str, str]:
    return run(["build", *args])


def no_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert err.count("\n") <= 40


# --- input files ----------------------------------------------------------------------------


def test_a_utf8_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(make_run("t1")).encode() + b"\n")
    code, out, err = build(str(path), "-o", str(tmp_path / "c"))
    assert (code, out) == (0, f"{tmp_path / 'c'}\n"), err


def test_a_first_record_longer_than_the_head_is_still_json_lines(tmp_path: Path) -> None:
    long_turn = {"role": "assistant", "action": "cat big.log", "observation": "y" * HEAD_BYTES}
    first = make_run("t1", turns=[{"role": "user", "content": "go"}, long_turn])
    path = write_runs(tmp_path / "long.jsonl", [first, make_run("t2")])
    code, _, err = build(str(path), "-o", str(tmp_path / "c"))
    assert code == 0, err
    assert "reading 1 file as native" in err
    assert "2 runs" in err


def test_a_damaged_first_line_names_itself_and_can_be_skipped(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text('{"task_id": "t0", broken\n' + json.dumps(make_run("t1")) + "\n")
    code, _, err = build(str(path), "-o", str(tmp_path / "c"))
    assert code == 2
    assert f"error: {path}:1: not valid JSON" in err
    code, _, err = build(str(path), "-o", str(tmp_path / "c"), "--on-error", "skip")
    assert code == 0, err
    assert f"skipped {path}:1: not valid JSON" in err
    assert "1 runs" in err


def test_json_nested_too_deep_is_refused_with_its_place(tmp_path: Path) -> None:
    deep: object = "x"
    for _ in range(300):
        deep = [deep]
    path = write_runs(tmp_path / "deep.jsonl", [make_run("t1", metadata={"d": deep})])
    code, _, err = build(str(path), "-o", str(tmp_path / "c"))
    assert code == 2
    assert f"error: {path}:1: field 'metadata.d[0][0]" in err
    assert "nested more than 100 levels deep" in err
    no_traceback(err)
    code, _, err = run(["convert", str(path), "-o", str(tmp_path / "out.jsonl")])
    assert code == 2
    no_traceback(err)


def test_a_lone_surrogate_in_the_head_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "surrogate.json"
    path.write_text('[{"task": "a \\udc00 b", "x": "' + "\\udc00" * 10 + '"}]\n')
    code, _, err = build(str(path), "-o", str(tmp_path / "c"))
    assert code == 2
    assert f"error: {path}: not a trajectory format wikitrace knows" in err
    no_traceback(err)


def test_tool_calls_that_are_null_or_strings_are_kept_as_unknown_calls(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None, "tool_calls": [None, "ls -l"]},
                ],
                "success": True,
            }
        )
        + "\n"
    )
    code, _, err = build(str(chat), "-o", str(tmp_path / "c1"))
    assert code == 0, err
    trial = tmp_path / "trial"
    (trial / "agent").mkdir(parents=True)
    steps = [
        {"step_id": 1, "source": "user", "message": "Fix it."},
        {"step_id": 2, "source": "agent", "message": "ok", "tool_calls": ["bash -lc ls", 7]},
    ]
    (trial / "agent" / "trajectory.json").write_text(
        json.dumps({"schema_version": "ATIF-v1.2", "session_id": "s1", "steps": steps})
    )
    result = {
        "task_name": "fix",
        "trial_name": "trial",
        "verifier_result": {"rewards": {"reward": 1}},
    }
    (trial / "result.json").write_text(json.dumps(result))
    code, _, err = build(str(trial), "-o", str(tmp_path / "c2"))
    assert code == 0, err
    turns = (tmp_path / "c2" / "raw" / "step-0001" / "solver.full.jsonl").read_text()
    assert '"arguments":"bash -lc ls"' in turns


def test_a_damaged_member_of_an_inspect_eval_zip_is_a_record_error(tmp_path: Path) -> None:
    path = tmp_path / "log.eval"
    sample = {"id": 1, "epoch": 1, "input": "2+2?", "messages": [], "scores": {}}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"task": "math"}}))
        archive.writestr("samples/1_epoch_1.json", json.dumps(sample) * 50)
    data = bytearray(path.read_bytes())
    start = data.find(b"samples/1_epoch_1.json") + len("samples/1_epoch_1.json")
    for i in range(start + 10, start + 60):  # the member's deflated bytes
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    code, _, err = build(str(path), "-o", str(tmp_path / "c"), "--on-error", "skip")
    assert code == 2
    assert "samples/1_epoch_1.json" in err
    no_traceback(err)


def test_parser_errors_do_not_copy_the_input_into_messages(tmp_path: Path) -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    path = tmp_path / "tau.json"
    good = {"task_id": 1, "reward": 1.0, "info": {}, "traj": [{"role": "user", "content": "hi"}]}
    path.write_text("[" + json.dumps(good) + ', {"task_id": 2, "traj": ' + secret + " oops}]")
    code, _, err = build(str(path), "-o", str(tmp_path / "c"), "--on-error", "skip")
    assert code == 0, err
    assert "JSON is cut off or broken" in err
    assert secret not in err
    manifest = (tmp_path / "c" / "manifest.json").read_text()
    assert "JSON is cut off or broken" in manifest
    assert secret not in manifest


# --- a finished corpus, tampered with -------------------------------------------------------


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    runs = [make_run("mug"), make_run("mug", success=True)]
    path = write_runs(tmp_path / "runs.jsonl", runs)
    root = tmp_path / "corpus"
    llm = FakeLLM()
    build_corpus(
        BuildOptions(inputs=[path], output=root, model=llm.model, use_cache=False), llm=llm
    )
    return root


def writable(root: Path) -> Path:
    """The version behind a corpus pointer, made writable so a test can tamper with it."""
    real = root.resolve()
    for dirpath, _, filenames in os.walk(real):
        os.chmod(dirpath, stat.S_IRWXU)
        for name in filenames:
            os.chmod(Path(dirpath, name), stat.S_IRUSR | stat.S_IWUSR | stat.S_IXUSR)
    return real


def tool(root: Path, name: str, *args: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [sys.executable, str(root / "tools" / name), *args], capture_output=True, text=True
    )
    return result.returncode, result.stdout, result.stderr


def test_a_damaged_turn_index_is_one_line_from_the_tools(corpus: Path) -> None:
    real = writable(corpus)
    index = real / "raw" / "step-0001" / "solver.index.jsonl"
    lines = index.read_text().splitlines()
    for damaged in ('{"turns": 4, "offsets": [0]}', "{not json", '{"turns": 4}', "[1, 2]"):
        index.write_text("\n".join([damaged, *lines[1:]]) + "\n")
        for args in (("actions", "1"), ("turn", "1", "2")):
            code, _, err = tool(corpus, *args)
            assert code == 1, (damaged, args, err)
            assert err.startswith(f"{args[0]}: the index ") and "is damaged" in err
            assert err.count("\n") == 1
    index.write_text("\n".join([lines[0], '["assistant", 1]', *lines[2:]]) + "\n")
    code, _, err = tool(corpus, "actions", "1")
    assert code == 1 and "is damaged" in err


def test_an_open_turn_range_is_a_usage_error(corpus: Path) -> None:
    code, _, err = tool(corpus, "turn", "1", "1-")
    assert code == 2
    assert "not a turn number or range: '1-'" in err


def test_a_layout_file_linked_out_of_the_corpus_is_refused(corpus: Path, tmp_path: Path) -> None:
    real = writable(corpus)
    outside = tmp_path / "elsewhere.json"
    shutil.copy(real / "tools" / "layout.json", outside)
    (real / "tools" / "layout.json").unlink()
    (real / "tools" / "layout.json").symlink_to(outside)
    code, _, err = tool(corpus, "actions", "1")
    assert code == 1
    assert "refusing to read outside the corpus" in err


@pytest.mark.parametrize("ident", ["\u0661", " 1", "1 ", "insight-\uff11", "insight-", "1e3"])
def test_audit_refuses_ids_that_only_look_like_numbers(corpus: Path, ident: str) -> None:
    code, out, err = run(["audit", str(corpus), ident])
    assert code == 2, err
    assert out == ""
    assert "not an insight id" in err


def test_audit_does_not_follow_a_header_path_out_of_the_corpus(
    corpus: Path, tmp_path: Path
) -> None:
    real = writable(corpus)
    secret = tmp_path / "secret.md"
    secret.write_text("---\nstep: step-0001\n---\nTOP SECRET\n")
    page = real / "insight" / "insight-0001.md"
    text = page.read_text()
    page.write_text(text.replace("compilation: compilation/step-0001.md", f"compilation: {secret}"))
    _, out, err = run(["audit", str(corpus), "insight-0001"])
    assert "TOP SECRET" not in out + err
    assert "leads outside the corpus" in out + err
    no_traceback(err)


def test_a_stray_copy_of_a_page_is_not_read_as_part_of_the_corpus(corpus: Path) -> None:
    real = writable(corpus)
    shutil.copy(real / "insight" / "insight-0001.md", real / "insight" / "insight-0001 copy.md")
    code, out, err = run(["prompt", str(corpus), "put the mug away"])
    assert code == 0, err
    code, out, err = run(["audit", str(corpus)])
    assert code == 0, err
    code, out, err = run(["verify", str(corpus)])
    assert code == 1 and out.startswith("extra insight/insight-0001 copy.md\nFAILED: ")


def test_prompt_for_a_task_with_no_indexable_word(tmp_path: Path) -> None:
    runs = [{**make_run("t1"), "task": "!!! ???"}, {**make_run("t2"), "task": "the a of"}]
    path = write_runs(tmp_path / "runs.jsonl", runs)
    assert build(str(path), "-o", str(tmp_path / "c"))[0] == 0
    for task in ("???", "the", "zebra"):
        code, out, err = run(["prompt", str(tmp_path / "c"), task])
        assert code == 0, err
        # No word to compare by: the runs as listed; a word no run holds: none is like it.
        assert ("step-0001" in out) == (task != "zebra")


def _edit_manifest(root: Path, edit: object) -> None:
    path = root / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data, indent=2) + "\n")


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.update(model="openai/gpt-5"),
        lambda m: m["counts"].update(runs=99),
        lambda m: m.update(prompts={"compile.j2": "sha256:" + "0" * 64}),
        lambda m: m.pop("checksum"),
    ],
    ids=["model", "counts", "prompt-hash", "checksum-removed"],
)
def test_verify_covers_the_manifest_itself(corpus: Path, edit: object) -> None:
    real = writable(corpus)
    _edit_manifest(real, edit)
    report = verify(real)
    assert not report.ok
    assert report.manifest is not None
    code, out, _ = run(["verify", str(corpus)])
    assert code == 1
    assert out.startswith("changed manifest.json: ")


def test_removing_a_file_with_its_manifest_entry_fails_verify(corpus: Path) -> None:
    real = writable(corpus)
    rel = "raw/step-0002/solver.index.jsonl"
    (real / rel).unlink()
    _edit_manifest(real, lambda m: m["files"].pop(rel))
    assert not verify(real).ok
    code, _, err = tool(corpus, "actions", "2")
    assert code == 1 and err.count("\n") == 1


def test_every_bit_flip_in_the_manifest_is_caught(corpus: Path) -> None:
    real = writable(corpus)
    path = real / "manifest.json"
    original = path.read_bytes()
    step = max(1, len(original) // 64)
    for position in range(0, len(original), step):
        for bit in (0, 5):
            flipped = bytearray(original)
            flipped[position] ^= 1 << bit
            path.write_bytes(bytes(flipped))
            try:
                ok = verify(real).ok
            except Exception as error:  # a manifest that no longer parses is refused
                assert type(error).__name__ == "CorpusError", (position, bit, error)
                ok = False
            assert not ok, (position, bit)
    path.write_bytes(original)
    assert verify(real).ok


def test_nan_and_infinity_as_python_json_writes_them_are_read(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    run_text = json.dumps(make_run("t1", metadata={"score": float("nan"), "cap": float("inf")}))
    assert "NaN" in run_text
    path.write_text(run_text + "\n")
    code, _, err = build(str(path), "-o", str(tmp_path / "c"))
    assert code == 0, err


def test_a_whole_file_a_reader_gives_up_on_is_skipped_with_on_error_skip(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    write_runs(folder / "good.jsonl", [make_run("t1")])
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    text = json.dumps(messages)
    (folder / "chat.json").write_text(text[: len(text) // 2] + "}" + text[len(text) // 2 :])
    code, _, err = build(str(folder), "-o", str(tmp_path / "c"), "--on-error", "skip")
    assert code == 0, err
    assert f"skipped {folder / 'chat.json'}" in err


# --- JSON values of the wrong kind where detection expects a string --------------------------


@pytest.mark.parametrize("value", [["user"], {"role": "user"}, [], {}])
def test_a_record_type_that_is_a_list_or_object_is_no_crash(tmp_path: Path, value: object) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"type": value}) + "\n")
    code, out, err = run(["convert", str(path)])
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {path}: not a trajectory format wikitrace knows")
    no_traceback(err)


# Keys the sniffers read and compare with strings (or look up in sets), and records that get a
# sniffer as far as reading them.
SNIFFED_KEYS = (
    "type", "kind", "v", "payload", "role", "id", "schema_version", "trajectory_format",
    "parentUuid", "sessionId", "leafUuid", "attributes", "context", "content", "projectHash",
    "messages", "turns", "task_id", "sessionID", "messageID", "version", "summary", "requests",
)  # fmt: skip
NEAR_MISSES = (
    {},
    {"parentUuid": None, "sessionId": "s", "type": "user"},
    {"type": "session_meta", "payload": {}},
    {"id": "ses_1", "directory": "d", "title": "t", "time": {}, "projectID": "p"},
    {"id": "msg_1", "sessionID": "s", "role": "user"},
    {"kind": 0, "v": {"requests": []}},
)
WRONG_KINDS = (["user"], {"a": 1}, 0, 1.5, True, None, [])


def test_no_sniffer_fails_on_a_value_of_another_kind(tmp_path: Path) -> None:
    from wikitrace.compiler.importers import detect
    from wikitrace.compiler.importers.base import probe

    path = tmp_path / "probe"
    for base in NEAR_MISSES:
        for key in SNIFFED_KEYS:
            for value in WRONG_KINDS:
                record = {**base, key: value}
                lines = json.dumps(record) + "\n"
                for text in (lines, json.dumps({"id": "x"}) + "\n" + lines, json.dumps(record)):
                    path.write_text(text)
                    detect(probe(path))  # may or may not recognise it; never raises


# --- a layout naming ids of any width ---------------------------------------------------------


def test_the_tools_bound_the_id_width_to_the_format_s() -> None:
    from wikitrace.corpus_schema import drilldown
    from wikitrace.corpus_schema.layout import MAX_ID_WIDTH, MIN_ID_WIDTH

    assert drilldown.ID_WIDTHS == (MIN_ID_WIDTH, MAX_ID_WIDTH)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("step_id_width", 1e9),
        ("step_id_width", 10**9),
        ("step_id_width", 10),
        ("step_id_width", 0),
        ("step_id_width", True),
        ("step_id_width", "4"),
        ("raw_dir", ["raw"]),
        ("turns_file", ""),
        ("index_file", "x" * 100_000),
    ],
)
def test_a_tampered_layout_is_one_short_line_from_the_tools(
    corpus: Path, key: str, value: object
) -> None:
    real = writable(corpus)
    layout = real / "tools" / "layout.json"
    layout.write_text(json.dumps({**json.loads(layout.read_text()), key: value}))
    for args in (("actions", "1"), ("turn", "1", "2")):
        code, out, err = tool(corpus, *args)
        assert (code, out) == (1, ""), err
        assert err.startswith(f"{args[0]}: tools/layout.json is damaged (")
        assert err.count("\n") == 1 and len(err) < 200, err


@pytest.mark.parametrize("field", ["step_id_width", "insight_id_width"])
def test_a_manifest_naming_ids_of_any_width_is_refused_in_one_line(
    corpus: Path, field: str
) -> None:
    real = writable(corpus)
    _edit_manifest(real, lambda m: m.update({field: 1e9}))
    code, out, err = run(["verify", str(corpus)])
    assert (code, out) == (1, "")
    assert err == (
        f"error: {corpus / 'manifest.json'}: field '{field}': Input should be less than or "
        "equal to 9\n"
    )
