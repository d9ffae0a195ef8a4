"""The redaction rules as shipped (`secret_rules/rules.json`) are the rules made from their
sources, and a build reads them without importing detect-secrets."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wikitrace.compiler import redact_match, redact_rules, redact_table


def test_the_shipped_table_is_the_rules_made_from_their_sources() -> None:
    """Fails after a change to a rule, to gitleaks' file or to detect-secrets' version: write
    the table again with `python -m wikitrace.compiler.redact_rules`."""
    assert redact_table.shipped_text() == redact_rules.made_table()


def test_the_shipped_rules_equal_the_made_ones_field_for_field() -> None:
    shipped = redact_rules.all_rules()
    made = redact_rules.compute_rules()
    assert len(shipped) == len(made) > 250
    for ours, theirs in zip(shipped, made, strict=True):
        assert (ours.kind, ours.source, ours.needles, ours.style, ours.flags, ours.also) == (
            theirs.kind,
            theirs.source,
            theirs.needles,
            theirs.style,
            theirs.flags,
            theirs.also,
        )
        assert ours.anchor == theirs.anchor
        assert ours.pattern.pattern == theirs.pattern.pattern
        assert ours.pattern.flags == theirs.pattern.flags
        if theirs.origin is None:
            assert ours.origin is None
            continue
        assert ours.origin is not None
        assert ours.origin.id == theirs.origin.id and ours.origin.regex == theirs.origin.regex
        assert ours.origin.entropy == theirs.origin.entropy
        assert ours.origin.secret_group == theirs.origin.secret_group
        assert ours.origin.keywords == theirs.origin.keywords
        assert ours.origin.path == theirs.origin.path
        assert [
            ([p.pattern for p in a.regexes], [p.flags for p in a.regexes], a.stopwords, a.target)
            for a in ours.origin.allowlists
        ] == [
            ([p.pattern for p in a.regexes], [p.flags for p in a.regexes], a.stopwords, a.target)
            for a in theirs.origin.allowlists
        ]


def test_a_table_of_another_version_is_refused_with_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact_table, "shipped_text", lambda: '{"version": 99}')
    redact_table._shipped.cache_clear()
    try:
        with pytest.raises(
            RuntimeError, match=r"rules\.json is not a table of version.*reinstall wikitrace"
        ):
            redact_table.shipped_rules()
    finally:
        redact_table._shipped.cache_clear()


_EDGES = [
    "",
    "$",
    "${",
    "${}",
    "{",
    "{}",
    "<>",
    "<x>",
    "${X}",
    "$x",
    "abc",
    "ABCDEF",
    "abcdef",
    "123456",
    "0123456789ab",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZABC",
    "=/",
    "xyz=/",
    "89+/",
    "12345678-1234-1234-1234-123456789abc",
    "X12345678-ABCD-1234-1234-123456789ABCx",
    "hunter22",
    "s3cr3t-P@ss",
]


def _theirs(value: str) -> tuple[bool, bool, bool, bool]:
    from detect_secrets.filters import heuristic

    return (
        heuristic.is_templated_secret(value),
        heuristic.is_prefixed_with_dollar_sign(value),
        heuristic.is_sequential_string(value),
        heuristic.is_potential_uuid(value),
    )


def _ours(value: str) -> tuple[bool, bool, bool, bool]:
    return (
        redact_match.is_templated_secret(value),
        value.startswith("$"),
        redact_match.is_sequential_string(value),
        bool(redact_match._UUID.search(value)),
    )


def test_the_false_positive_filters_are_detect_secrets_own_on_edge_cases() -> None:
    for value in _EDGES:
        assert _ours(value) == _theirs(value), value


@given(st.text(alphabet="${}<>abcdefABCDEF0123456789+/=-xyzXYZ", max_size=40))
def test_the_false_positive_filters_are_detect_secrets_own(value: str) -> None:
    assert _ours(value) == _theirs(value)


def test_redacting_in_a_new_process_imports_no_detect_secrets() -> None:
    script = textwrap.dedent(
        """
        import sys
        from wikitrace.compiler.redact import Redactor
        text = "key AKIAIOSFODNN7EXAMPLE password=hunter2xyz9 token: ghp_" + "a" * 36
        out = Redactor().text(text)
        assert "AKIAIOSFODNN7EXAMPLE" not in out and "hunter2xyz9" not in out, out
        print(sorted(m for m in ("detect_secrets", "requests", "tomllib") if m in sys.modules))
        """
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
