"""Fuzzing the readers and the build (bounded here; `benchmarks/fuzz_bench.py` runs it long).

Every importer reads damaged copies of real samples, and the build takes runs of any JSON
shape: the only outcomes allowed are runs, record errors and one-line errors. A traceback, a
hang or a corpus that does not verify is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.importers import plan_inputs
from wikitrace.corpus_schema import CorpusError, InputError, verify

from helpers import DATA, make_run

EXAMPLES = int(os.environ.get("WIKITRACE_FUZZ_EXAMPLES", "40"))
SAMPLES = sorted(
    p
    for p in [*(DATA / "importers").rglob("*"), *DATA.glob("*.json*")]
    if p.is_file() and p.suffix != ".md"
)
_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _mutate(data: bytes, edits: list[tuple[int, int, bytes]], cut: int | None) -> bytes:
    out = bytearray(data)
    for position, span, insert in edits:
        at = position % (len(out) + 1)
        out[at : at + span] = insert
    if cut is not None:
        out = out[: cut % (len(out) + 1)]
    return bytes(out)


_INSERTS = st.sampled_from(
    [
        b"",
        b"null",
        b"[",
        b"]",
        b"{",
        b"}",
        b'"',
        b",",
        b"\n",
        b"\xef\xbb\xbf",
        b"\\udc00",
        b"\xff\xfe",
        b"[[[[[[[[[[[[[[[[[[[[",
        b'{"tool_calls": [null]}',
        b"99999999999999999999999999999",
        b"-----BEGIN PRIVATE KEY-----",
        b"Act 1: ",
        b"Obs 1: ",
        b"\x00",
    ]
)
_EDITS = st.lists(
    st.tuples(st.integers(0, 10**7), st.integers(0, 64), _INSERTS), min_size=1, max_size=6
)


def _read_all(path: Path) -> int:
    """Read `path` as a build would: the number of runs, record errors and unlabelled runs."""
    try:
        plan = plan_inputs([path])
    except InputError:
        return 0
    return sum(1 for _ in plan.items())


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_damaged_samples_never_crash_a_reader(sample: Path, tmp_path: Path) -> None:
    data = sample.read_bytes()[:200_000]

    @_SETTINGS
    @given(edits=_EDITS, cut=st.none() | st.integers(0, 10**7))
    def check(edits: list[tuple[int, int, bytes]], cut: int | None) -> None:
        damaged = tmp_path / sample.name
        damaged.write_bytes(_mutate(data, edits, cut))
        _read_all(damaged)

    check()


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_TURN = st.dictionaries(
    st.sampled_from(
        ["role", "content", "action", "observation", "reasoning", "tool_calls", "metadata", "x"]
    ),
    _JSON,
    max_size=5,
)


@_SETTINGS
@given(
    turns=st.lists(_TURN, min_size=0, max_size=5),
    task=_JSON,
    success=_JSON,
    metadata=_JSON,
    extra=st.dictionaries(st.text(max_size=6), _JSON, max_size=2),
)
def test_runs_of_any_shape_build_or_are_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    turns: list[dict[str, Any]],
    task: Any,
    success: Any,
    metadata: Any,
    extra: dict[str, Any],
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    run = {**make_run("t1"), "turns": turns, "task": task, "success": success}
    run["metadata"] = metadata
    run.update(extra)
    path = folder / "runs.jsonl"
    path.write_text(json.dumps(make_run("t0")) + "\n" + json.dumps(run) + "\n")
    corpus = folder / "corpus"
    for on_error in ("stop", "skip"):
        try:
            report = build_corpus(
                BuildOptions(inputs=[path], output=corpus, on_error=on_error, force=True)
            )
        except (InputError, CorpusError) as error:
            assert "\n" not in str(error)
            continue
        assert report.runs in (1, 2)
        assert verify(corpus).ok
    shutil.rmtree(folder, ignore_errors=True)


def _parsed(sample: Path) -> tuple[str, list[Any]] | None:
    """A JSON sample as ("json", [document]) or ("jsonl", records); None for other kinds."""
    text = sample.read_text(errors="replace")
    try:
        return "json", [json.loads(text)]
    except ValueError:
        pass
    try:
        return "jsonl", [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return None


def _nodes(value: Any, limit: int = 4000) -> list[tuple[Any, Any]]:
    """(container, key) of every value inside `value`, breadth first, up to `limit`."""
    found: list[tuple[Any, Any]] = []
    queue = [value]
    while queue and len(found) < limit:
        current = queue.pop(0)
        items = current.items() if isinstance(current, dict) else enumerate(current)
        for key, item in items:
            found.append((current, key))
            if isinstance(item, (dict, list)):
                queue.append(item)
    return found


JSON_SAMPLES = [p for p in SAMPLES if _parsed(p) is not None]


@pytest.mark.parametrize("sample", JSON_SAMPLES, ids=lambda p: p.name)
def test_samples_with_values_of_another_shape_never_crash_a_reader(
    sample: Path, tmp_path: Path
) -> None:
    parsed = _parsed(sample)
    assert parsed is not None
    kind, documents = parsed

    @_SETTINGS
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        copy = json.loads(json.dumps(documents))
        nodes = _nodes(copy)
        for _ in range(data.draw(st.integers(1, 5))):
            container, key = nodes[data.draw(st.integers(0, len(nodes) - 1))]
            container[key] = data.draw(_JSON)
        damaged = tmp_path / sample.name
        if kind == "json":
            damaged.write_text(json.dumps(copy[0]))
        else:
            damaged.write_text("".join(json.dumps(record) + "\n" for record in copy))
        _read_all(damaged)

    check()


# --- text helpers every page and prompt goes through ---------------------------------------


@_SETTINGS
@given(text=st.text(max_size=300))
def test_inline_text_folds_escapes_and_reads_back(text: str) -> None:
    from wikitrace.corpus_schema.render import inline, unescape

    shown = inline(text)
    assert "\n" not in shown and "\r" not in shown
    assert unescape(shown) == " ".join(text.split())


@_SETTINGS
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=300))
def test_verbatim_blocks_read_back_exactly(text: str) -> None:
    from wikitrace.corpus_schema.read import _unfence
    from wikitrace.corpus_schema.render import verbatim

    assert _unfence(verbatim(text)) == text


_SECRETISH = st.lists(
    st.sampled_from(
        [
            "sk-proj-",
            "AKIA",
            "password=",
            '"password": "',
            "://user:",
            "@host",
            "-----BEGIN PRIVATE KEY-----",
            "\\n",
            "Bearer ",
            "Authorization: ",
            "${TOKEN}",
            "ghp_",
            "eyJ",
            ".",
            "=",
            "\n",
        ]
    )
    | st.text("abcXYZ0189_-+/=", min_size=1, max_size=40),
    max_size=12,
).map("".join)


@_SETTINGS
@given(text=_SECRETISH | st.text(max_size=400))
def test_redaction_never_fails_and_is_stable(text: str) -> None:
    from wikitrace.compiler.redact import Redactor

    once = Redactor().text(text)
    assert Redactor().text(once) == once
    assert Redactor().value({text: [text]}) == {once: [once]}
