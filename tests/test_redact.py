"""Secrets are redacted before anything is sent to a model or written to a corpus."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus, gitleaks
from wikitrace.compiler.redact import Redactor, check_keep_pattern, check_pattern, found_by

from helpers import FakeLLM, make_run, run, write_runs
from secret_kinds import KINDS, NOT_SECRET_VALUES, NOT_SECRETS, Kind, gitleaks_kinds

# Fake secrets in each well-known format (none is a live credential), and the kind that
# names each.
SECRETS = {
    "openai-api-key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "anthropic-api-key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "github-token": "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8",
    "gitlab-pat": "glpat-AbCdEfGhIjKlMnOpQrSt",
    "google-api-key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "slack-token": "xoxb-1234567890-abcdefghij",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "huggingface-token": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "digitalocean-pat": "dop_v1_" + "8e1f4c7a0b3d6e92" * 4,
    "shopify-access-token": "shpat_" + "4f9a2c7e1b8d3f6a" * 2,
}

ISSUE_42_LEAKS = (
    "aws-credentials-ini",
    "hex-api-key-40",
    "azure-sas-sig",
    "digitalocean-pat",
    "cloudflare-api-token",
    "cloudflare-global-api-key",
    "alibaba-access-key-id",
    "heroku-api-key",
    "putty-private-key",
    "jwt-secret-plain",
    "export-password",
    "shopify-access-token",
    "databricks-token",
    "odbc-connection-string",
    "jdbc-postgres",
    "jdbc-oracle",
    "pgpassword",
    "discord-webhook",
    "teams-webhook",
    "docker-config-auth",
    "kubeconfig-client-key-data",
    "kubeconfig-token",
    "base64-json-neutral-key",
)
"""The kinds issue 42's attack found reaching the model and the corpus (21, some in two forms)."""

ISSUE_56_LEAKS = tuple(
    kind.name for kind in KINDS[[k.name for k in KINDS].index("mysql-p-attached") :]
)
"""The kinds issue 56 found outside gitleaks' default rules: credentials on command lines and in
client config files, cookies, signed URLs, wallet keys, a SendGrid key and a Teams webhook."""


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
    assert "not a valid regular expression" in str(check_pattern("("))
    assert "empty string" in str(check_pattern("x*"))
    assert check_pattern(r"\d{6}") is None
    assert "not a valid regular expression" in str(check_keep_pattern("("))
    assert check_keep_pattern(".*") is None


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
    assert report.redacted_where == {
        "github-token": {"tool arguments": 1},
        "openai-api-key": {"turn text": 1},
    }
    sent = json.dumps(llm.calls)
    # Every file, the search indexes' binary arrays too: no secret may hide in any of them.
    written = "".join(read_any(p) for p in corpus.rglob("*") if p.is_file())
    for secret in (SECRETS["openai-api-key"], SECRETS["github-token"]):
        assert secret not in sent and secret not in written
    assert "[REDACTED:openai-api-key]" in (corpus / "raw/step-0001/solver.full.jsonl").read_text()
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["redactions"] == report.redactions
    assert manifest["build"]["redacted_where"] == report.redacted_where


def test_no_redact_keeps_the_runs_as_logged(tmp_path: Path) -> None:
    path = run_with_secret(tmp_path)
    corpus = tmp_path / "corpus"
    report = build_corpus(BuildOptions(inputs=[path], output=corpus, redact=False))
    assert report.redactions == {}
    assert SECRETS["openai-api-key"] in (corpus / "raw/step-0001/solver.full.jsonl").read_text()


# --- where in a run ---------------------------------------------------------------------------


def test_the_places_of_a_run_are_told_apart() -> None:
    key = SECRETS["github-token"]
    run_data = make_run(
        "t",
        task=f"use {key}",
        turns=[
            {"role": "user", "content": f"here: {key}", "reasoning": key},
            {
                "role": "assistant",
                "action": f"login {key}",
                "observation": f"ok {key}",
                "tool_calls": [
                    {"name": "x", "arguments": {"t": key}, "result": [key], "metadata": {"k": key}}
                ],
                "metadata": {"env": key},
            },
        ],
        metadata={"token": key},
    )
    redactor = Redactor()
    redacted = redactor.value(run_data)
    assert key not in json.dumps(redacted)
    assert redactor.where() == {
        "github-token": {
            "metadata": 3,
            "task": 1,
            "tool arguments": 2,
            "tool results": 2,
            "turn text": 2,
        }
    }


def test_a_run_without_secrets_comes_back_uncopied() -> None:
    run_data = make_run("t", turns=[{"role": "user", "content": "open the cabinet, take the key"}])
    assert Redactor().value(run_data) is run_data


# --- the table of realistic kinds, in every place a run holds text --------------------------


def _placed(kind: Kind, number: int) -> dict[str, object]:
    """A run holding the kind's line in its task, content, tool arguments and result,
    metadata, and as a JSON object key."""
    line = kind.line.format(kind.secret)
    return make_run(
        f"task-{number}",
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


def test_every_gitleaks_rule_translates_compiles_and_catches_its_own_kind() -> None:
    config = gitleaks.default_config()
    assert len(config.rules) == 221 and config.path_only == ("pkcs12-file",)
    for rule in config.rules:
        gitleaks.compile_re2(rule.regex)
        for allowlist in rule.allowlists:
            assert all(p.pattern for p in allowlist.regexes)
    kinds, failed = gitleaks_kinds()
    assert failed == ()
    assert [k.name for k in kinds] == [f"gitleaks:{rule.id}" for rule in config.rules]
    for kind, rule in zip(kinds, config.rules, strict=True):
        # (our own rules name some kinds as gitleaks does: both find the secret)
        assert set(found_by(rule.id, kind.line.format(kind.secret))) == {kind.secret}


def test_the_shipped_gitleaks_file_is_the_version_noted() -> None:
    text = resources.files("wikitrace.compiler").joinpath("secret_rules", "gitleaks.toml")
    assert hashlib.sha256(text.read_bytes()).hexdigest() == gitleaks.GITLEAKS_SHA256
    notes = resources.files("wikitrace.compiler").joinpath("secret_rules", "README.md")
    assert gitleaks.GITLEAKS_VERSION in notes.read_text()
    assert gitleaks.GITLEAKS_SHA256 in notes.read_text()


@pytest.mark.parametrize(
    ("re2", "python"),
    [
        (r"\b(p8e-(?i)[a-z0-9]{32})", r"\b(p8e-(?i:[a-z0-9]{32}))"),
        (r"(?:\"(?i)a|'(?i)b)", r"(?:\"(?i:a)|(?i:'(?i:b)))"),
        (r"x(?i)a|b", r"x(?i:a)|(?i:b)"),
        (r"(?i)^true|false$", r"(?i)^true|false\Z"),
        (r"a\z", r"a\Z"),
        (r"pat[[:alnum:]]{14}", r"pat[0-9A-Za-z]{14}"),
        (r"[[x&&y~~]", r"[\[x&\&y~\~]"),
        (r"(?<name>x)", r"(?P<name>x)"),
        (r"a{,3}", r"a\{,3}"),
    ],
)
def test_re2_constructs_are_translated(re2: str, python: str) -> None:
    assert gitleaks.translate(re2) == python
    re.compile(python)


def test_an_re2_construct_python_lacks_is_refused() -> None:
    with pytest.raises(gitleaks.TranslationError, match=r"\\p"):
        gitleaks.translate(r"\pL+")
    with pytest.raises(gitleaks.TranslationError, match="rule broken"):
        gitleaks.parse("[[rules]]\nid = \"broken\"\nregex = '''\\Qx\\E'''\nkeywords = [\"x\"]\n")


def test_mid_pattern_flags_mean_what_they_mean_in_re2() -> None:
    # In RE2 a flag set in a group's middle holds to the group's end, across `|`.
    pattern = gitleaks.compile_re2(r"(?:k(?i)ey|tok)=x")
    assert pattern.fullmatch("kEY=x") and pattern.fullmatch("TOK=x")
    assert not pattern.fullmatch("KEY=x") and not pattern.fullmatch("tok=X")


@pytest.mark.parametrize("name", ISSUE_42_LEAKS + ISSUE_56_LEAKS)
def test_the_kinds_found_leaking_are_caught(name: str) -> None:
    kind = next(k for k in KINDS if k.name == name)
    redactor = Redactor()
    out = redactor.text(kind.line.format(kind.secret))
    assert all(piece not in out for piece in _pieces(kind.secret)), out
    assert redactor.counts


def test_every_kind_is_caught_in_the_model_request_the_corpus_and_its_indexes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The coverage figure: every planted kind (the hand-written table and one per gitleaks
    rule), in every place of a run, is gone from every prompt and every file written."""
    planted = [*KINDS, *gitleaks_kinds()[0]]
    path = write_runs(tmp_path / "runs.jsonl", [_placed(k, n) for n, k in enumerate(planted)])
    llm = FakeLLM()
    corpus = tmp_path / "corpus"
    report = build_corpus(
        BuildOptions(inputs=[path], output=corpus, model=llm.model, use_cache=False), llm=llm
    )
    assert report.runs == len(planted) >= 300
    sent = json.dumps(llm.calls, ensure_ascii=False)
    written = {p: read_any(p) for p in corpus.resolve().rglob("*") if p.is_file()}
    assert any("index" in str(p) or p.suffix in (".npy", ".json") for p in written)
    leaked = []
    for kind in planted:
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
                break
    caught = len(planted) - len(leaked)
    with capsys.disabled():
        print(f"\nredaction coverage: {caught}/{len(planted)} kinds caught in every place")
    assert leaked == []
    assert set(report.redacted_where) and all(
        set(places) <= {"task", "turn text", "tool arguments", "tool results", "metadata"}
        for places in report.redacted_where.values()
    )


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_text_that_only_looks_like_a_secret_is_kept(text: str) -> None:
    redactor = Redactor()
    assert redactor.text(text) == text
    assert redactor.value({text: [text]}) == {text: [text]}


@pytest.mark.parametrize("value", NOT_SECRET_VALUES)
def test_values_that_only_look_like_secrets_under_their_keys_are_kept(
    value: dict[str, str],
) -> None:
    assert Redactor().value({"metadata": value}) == {"metadata": value}


def test_a_random_value_under_a_key_that_says_nothing_is_redacted() -> None:
    redactor = Redactor()
    value = {"data": "e+HAqfM9EuiktsXX6PkKGyw9Tl9gcYKTpLXG1+j5oLE=", "hash": "e3b0c44298fc"}
    assert redactor.value({"metadata": value}) == {
        "metadata": {"data": "[REDACTED:high-entropy-value]", "hash": "e3b0c44298fc"}
    }


def test_a_key_that_names_a_secret_counts_for_its_value() -> None:
    redactor = Redactor()
    out = redactor.value({"metadata": {"password": "letmein2024", "note": "letmein2024"}})
    assert out == {"metadata": {"password": "[REDACTED:secret-assignment]", "note": "letmein2024"}}


def test_base64_holding_a_secret_goes_whole() -> None:
    kind = next(k for k in KINDS if k.name == "base64-json-with-secret")
    out = Redactor().text(kind.secret)
    assert out == "[REDACTED:generic-api-key]"


def test_placeholders_in_a_task_about_urls_are_kept() -> None:
    task = "Write validate_url(): it must accept http://user:pass@example.com and reject ftp://"
    assert Redactor().text(task) == task


def test_keep_patterns_keep_named_non_secrets() -> None:
    fixture = "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"
    text = f"stripe.api_key = '{fixture}' and ghp_{'a1B2c3D4e5' * 3}f6G7h8"
    redactor = Redactor(keep=[r"sk_test_\w+"])
    assert redactor.text(text) == f"stripe.api_key = '{fixture}' and [REDACTED:github-token]"


def test_redact_keep_on_the_command_line(tmp_path: Path) -> None:
    fixture = "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"
    turns = [{"role": "user", "content": f"use the test key {fixture} and {SECRETS['jwt']}"}]
    path = write_runs(tmp_path / "runs.jsonl", [make_run("a", turns=turns)])
    corpus = tmp_path / "c"
    code, _, err = run(
        ["build", str(path), "-o", str(corpus), "--redact-keep", r"sk_test_[A-Za-z0-9]+"]
    )
    assert code == 0, err
    assert "secrets redacted: jwt 1 (turn text 1)" in err
    log = (corpus / "raw/step-0001/solver.full.jsonl").read_text()
    assert fixture in log and SECRETS["jwt"] not in log
    code, _, err = run(["build", str(path), "-o", str(tmp_path / "d"), "--redact-keep", "("])
    assert code == 2 and "Invalid value for '--redact-keep': '(': not a valid" in err


def test_every_detect_secrets_token_plugin_is_used_or_said_why_not() -> None:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    from wikitrace.compiler import redact_rules

    names = {c.__name__ for c in get_mapping_from_secret_type_to_class().values()}
    assert names == set(redact_rules._NOT_USED_PLUGINS) | set(redact_rules._PLUGIN_NEEDLES)
    assert not set(redact_rules._NOT_USED_PLUGINS) & set(redact_rules._PLUGIN_NEEDLES)


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


def test_a_redactor_makes_its_rules_when_it_first_reads_a_text() -> None:
    """A build whose workers redact its runs never makes the rules in its own process (about
    0.02 s of CPU), nor does a report with no bad record to redact."""
    from wikitrace.compiler import redact_rules

    redact_rules.all_rules.cache_clear()
    redactor = Redactor()
    assert redact_rules.all_rules.cache_info().currsize == 0
    assert redactor.text("key AKIAIOSFODNN7EXAMPLE here") != "key AKIAIOSFODNN7EXAMPLE here"
    assert redact_rules.all_rules.cache_info().currsize == 1
