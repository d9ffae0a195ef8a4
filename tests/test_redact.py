"""Secrets are redacted before anything is sent to a model or written to a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.redact import Redactor, check_pattern

from helpers import FakeLLM, make_run, write_runs

# Fake secrets in each well-known format (none is a live credential).
SECRETS = {
    "openai-api-key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "anthropic-api-key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    "aws-access-key-id": "AKIAIOSFODNN7EXAMPLE",
    "github-token": "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8",
    "gitlab-token": "glpat-AbCdEfGhIjKlMnOpQrSt",
    "google-api-key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "slack-token": "xoxb-1234567890-abcdefghij",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "huggingface-token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_known_format_is_redacted(kind: str) -> None:
    redactor = Redactor()
    text = f"export TOKEN={SECRETS[kind]} # set"
    assert redactor.text(text) == f"export TOKEN=[REDACTED:{kind}] # set"
    assert dict(redactor.counts) == {kind: 1}


def test_context_is_kept_around_the_secret() -> None:
    redactor = Redactor()
    assert (
        redactor.text("Authorization: Bearer abcdefghijklmnopqrstuvwxyz123456")
        == "Authorization: Bearer [REDACTED:bearer-token]"
    )
    assert (
        redactor.text("git clone https://bob:hunter2@example.com/repo.git")
        == "git clone https://bob:[REDACTED:url-password]@example.com/repo.git"
    )
    assert (
        redactor.text('aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"')
        == 'aws_secret_access_key = "[REDACTED:aws-secret-access-key]"'
    )
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"
    assert redactor.text(f"key:\n{key}\nend") == "key:\n[REDACTED:private-key]\nend"


def test_ordinary_log_text_is_left_alone() -> None:
    redactor = Redactor()
    text = (
        "gt_data_hash ea1402bc4f27311c55d06e318cef7d22ed1f33431a33ada16db71c4177283103 "
        "call_oIHazX6yQrB8hUwl4cRilFKj skip-this-step credit_card_4421486 task-sk-12"
    )
    assert redactor.text(text) == text and not redactor.counts


def test_custom_patterns_and_nested_values() -> None:
    redactor = Redactor(custom_patterns=[r"(?i)employee-\d{6}"])
    value = {"a": ["Employee-123456", {"b": "employee-654321 and AKIAIOSFODNN7EXAMPLE"}], "n": 3}
    assert redactor.value(value) == {
        "a": ["[REDACTED:custom-1]", {"b": "[REDACTED:custom-1] and [REDACTED:aws-access-key-id]"}],
        "n": 3,
    }
    assert dict(redactor.counts) == {"custom-1": 2, "aws-access-key-id": 1}


def test_bad_custom_patterns_are_explained() -> None:
    assert check_pattern("(") is not None and "not a valid regular expression" in check_pattern("(")  # type: ignore[operator]
    assert "empty string" in check_pattern("x*")  # type: ignore[operator]
    assert check_pattern(r"\d{6}") is None


def run_with_secret(tmp_path: Path) -> Path:
    turns = [
        {"role": "user", "content": f"My key is {SECRETS['openai-api-key']}"},
        {
            "role": "assistant",
            "tool_calls": [{"name": "login", "arguments": {"token": SECRETS["github-token"]}}],
        },
    ]
    return write_runs(tmp_path / "runs.jsonl", [make_run("a", turns=turns)])


def test_secrets_reach_neither_the_model_nor_the_corpus(tmp_path: Path) -> None:
    path = run_with_secret(tmp_path)
    llm = FakeLLM()
    corpus = tmp_path / "corpus"
    report = build_corpus(
        BuildOptions(inputs=[path], output=corpus, model=llm.model, use_cache=False), llm=llm
    )
    assert report.redactions == {"github-token": 1, "openai-api-key": 1}
    sent = json.dumps(llm.calls)
    written = "".join(p.read_text() for p in corpus.rglob("*") if p.is_file())
    for secret in (SECRETS["openai-api-key"], SECRETS["github-token"]):
        assert secret not in sent and secret not in written
    assert "[REDACTED:openai-api-key]" in (corpus / "raw/step-0001/solver.full.jsonl").read_text()
    assert json.loads((corpus / "manifest.json").read_text())["redactions"] == report.redactions


def test_no_redact_keeps_the_runs_as_logged(tmp_path: Path) -> None:
    path = run_with_secret(tmp_path)
    corpus = tmp_path / "corpus"
    report = build_corpus(BuildOptions(inputs=[path], output=corpus, redact=False))
    assert report.redactions == {}
    assert SECRETS["openai-api-key"] in (corpus / "raw/step-0001/solver.full.jsonl").read_text()
