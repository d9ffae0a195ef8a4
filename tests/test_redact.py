"""Secrets are redacted before anything is sent to a model or written to a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.compiler.redact import Redactor, check_pattern

from helpers import FakeLLM, make_run, write_runs
from secret_kinds import KINDS, NOT_SECRETS, Kind

# Fake secrets in each well-known format (none is a live credential).
SECRETS = {
    "openai-api-key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "anthropic-api-key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
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
        == "Authorization: Bearer [REDACTED:authorization-header]"
    )
    assert (
        redactor.text("git clone https://bob:hunter2@example.com/repo.git")
        == "git clone https://bob:[REDACTED:url-password]@example.com/repo.git"
    )
    assert (
        redactor.text('aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"')
        == 'aws_secret_access_key = "[REDACTED:aws-access-key]"'
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
        "a": ["[REDACTED:custom-1]", {"b": "[REDACTED:custom-1] and [REDACTED:aws-access-key]"}],
        "n": 3,
    }
    assert dict(redactor.counts) == {"custom-1": 2, "aws-access-key": 1}


def test_bad_custom_patterns_are_explained() -> None:
    assert check_pattern("(") is not None and "not a valid regular expression" in check_pattern("(")  # type: ignore[operator]
    assert "empty string" in check_pattern("x*")  # type: ignore[operator]
    assert check_pattern(r"\d{6}") is None


def read_any(path: Path) -> str:
    """A corpus file as text, a binary one (a search index's arrays) with its bytes kept."""
    return path.read_bytes().decode("utf-8", "surrogateescape")


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
    # Every file, the search indexes' binary arrays too: no secret may hide in any of them.
    written = "".join(read_any(p) for p in corpus.rglob("*") if p.is_file())
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


# --- the table of realistic kinds, in every place a run holds text --------------------------


def _placed(kind: Kind) -> dict[str, object]:
    """A run holding the kind's line in its task, content, tool arguments and result,
    metadata, and as a JSON object key."""
    line = kind.line.format(kind.secret)
    return make_run(
        f"task-{kind.name}",
        task=f"Deploy the service. {line}",
        turns=[
            {"role": "user", "content": f"Use this: {line}"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"name": "bash", "arguments": {"cmd": line}, "result": f"ok\n{line}\n"}
                ],
            },
            {"role": "assistant", "action": "env", "observation": line},
        ],
        metadata={"env": line, "headers": {line: True}},
    )


def _pieces(secret: str) -> list[str]:
    """What must not appear anywhere: the secret, and each line of it long enough to tell."""
    lines = [part for part in secret.replace("\\n", "\n").splitlines() if len(part) >= 12]
    return [secret, *lines]


def test_every_realistic_kind_is_redacted_in_every_place(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "runs.jsonl", [_placed(kind) for kind in KINDS])
    llm = FakeLLM()
    corpus = tmp_path / "corpus"
    report = build_corpus(
        BuildOptions(inputs=[path], output=corpus, model=llm.model, use_cache=False), llm=llm
    )
    assert report.runs == len(KINDS) >= 40
    sent = json.dumps(llm.calls, ensure_ascii=False)
    written = {p: read_any(p) for p in corpus.resolve().rglob("*") if p.is_file()}
    leaked = []
    for kind in KINDS:
        for piece in _pieces(kind.secret):
            escaped = json.dumps(piece, ensure_ascii=False)[1:-1]
            places = [
                str(p.relative_to(corpus.resolve()))
                for p, text in written.items()
                if piece in text or escaped in text
            ]
            if piece in sent or escaped in sent:
                places.append("a prompt")
            if places:
                leaked.append(f"{kind.name}: {places[:3]}")
    assert leaked == []


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_text_that_only_looks_like_a_secret_is_kept(text: str) -> None:
    redactor = Redactor()
    assert redactor.text(text) == text
    assert redactor.value({text: [text]}) == {text: [text]}


def test_every_detect_secrets_token_plugin_has_needles() -> None:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    from wikitrace.compiler import redact

    names = {c.__name__ for c in get_mapping_from_secret_type_to_class().values()}
    assert names - redact._NOT_TOKEN_PLUGINS == set(redact._PLUGIN_NEEDLES)


def test_a_secret_used_as_a_key_keeps_both_entries() -> None:
    first, second = SECRETS["openai-api-key"], SECRETS["github-token"]
    redactor = Redactor()
    out = redactor.value({first: 1, second: 2})
    assert sorted(out.values()) == [1, 2]
    assert not any(first in key or second in key for key in out)


def test_a_secret_quoted_in_a_skipped_record_message_stays_out_of_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wikitrace.compiler.importers import InputPlan
    from wikitrace.corpus_schema import InputError

    secret = SECRETS["openai-api-key"]
    good = make_run("a")
    path = write_runs(tmp_path / "runs.jsonl", [good])
    real_items = InputPlan.items

    def items_with_a_bad_record(self: InputPlan) -> object:
        yield InputError(f"unexpected key {secret!r}", path=path, line=2)
        yield from real_items(self)

    monkeypatch.setattr(InputPlan, "items", items_with_a_bad_record)
    corpus = tmp_path / "corpus"
    report = build_corpus(BuildOptions(inputs=[path], output=corpus, on_error="skip"))
    assert report.skipped[0]["message"] == "unexpected key '[REDACTED:openai-api-key]'"
    assert secret not in (corpus / "manifest.json").read_text()
