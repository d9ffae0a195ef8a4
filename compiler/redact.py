"""Remove secrets from a run before anything is sent to a model or written to a corpus.

The rules follow the token formats providers publish (and that gitleaks' rules encode). We
keep our own table rather than use detect-secrets: its scanner flags lines in source files,
returns wrong spans for some token kinds (`ghp` for a whole GitHub token), misses current
OpenAI and Anthropic keys, and its entropy plugins would redact every hash in a log.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: str
    needles: tuple[str, ...]
    """Literal text any match must contain: the pattern runs only on text holding one of them."""
    lower: bool = False
    """Look for the needles in the lower-cased text."""


# A group named `keep` is context that stays; the rest of the match goes. Order matters:
# a more specific format comes before a more general one it would also match.
_RULES: Sequence[_Rule] = (
    _Rule(
        "private-key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        ("PRIVATE KEY-----",),
    ),
    _Rule("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",)),
    _Rule("openai-api-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", ("sk-",)),
    _Rule("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", ("_live_", "_test_")),
    _Rule(
        "aws-access-key-id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _Rule(
        "aws-secret-access-key",
        r"(?P<keep>(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?)"
        r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
        ("secret",),
        lower=True,
    ),
    _Rule(
        "github-token",
        r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _Rule("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}", ("glpat-",)),
    _Rule("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", ("AIza",)),
    _Rule("slack-token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", ("xox",)),
    _Rule(
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
        ("hooks.slack.com",),
    ),
    _Rule("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b", ("hf_",)),
    _Rule("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",)),
    _Rule("pypi-token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", ("pypi-AgEIcHlwaS5vcmc",)),
    _Rule(
        "jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}", ("eyJ",)
    ),
    _Rule(
        "bearer-token",
        r"(?P<keep>\b(?i:bearer)\s+)[A-Za-z0-9_\-.=~+/]{20,}",
        ("bearer",),
        lower=True,
    ),
    _Rule(
        "url-password",
        r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+:)[^/\s:@]+(?=@)",
        ("://",),
    ),
)


@dataclass
class Redactor:
    """Replaces secrets with `[REDACTED:kind]` and counts them per kind (never logs them).

    Each rule's regex runs only on text that holds one of its literal needles: a substring
    test is far cheaper than a regex scan, and almost no text holds a secret.
    """

    custom_patterns: Sequence[str] = ()
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rules = [(rule, re.compile(rule.pattern)) for rule in _RULES]
        # A user's pattern has no needle: it runs on every text.
        self._custom = [
            (f"custom-{n}", re.compile(pattern))
            for n, pattern in enumerate(self.custom_patterns, start=1)
        ]

    def _sub(self, kind: str, pattern: re.Pattern[str], text: str) -> str:
        marker = f"[REDACTED:{kind}]"
        keeps = "keep" in pattern.groupindex

        def replace(match: re.Match[str]) -> str:
            return (match.group("keep") or "") + marker if keeps else marker

        text, count = pattern.subn(replace, text)
        if count:
            self.counts[kind] += count
        return text

    def text(self, value: str) -> str:
        return self._text(value, self._rules)

    def _text(self, value: str, rules: list[tuple[_Rule, re.Pattern[str]]]) -> str:
        lowered: str | None = None
        for rule, pattern in rules:
            haystack = value
            if rule.lower:
                if lowered is None:
                    lowered = value.lower()
                haystack = lowered
            if any(needle in haystack for needle in rule.needles):
                value = self._sub(rule.kind, pattern, value)
                lowered = None
        for kind, pattern in self._custom:
            value = self._sub(kind, pattern, value)
        return value

    def value(self, value: Any) -> Any:
        """A JSON value with every string redacted (keys are left as they are).

        The value itself comes back, uncopied, when no rule's needle occurs anywhere in it.
        """
        blob = orjson.dumps(value).decode()
        lowered = blob.lower()
        rules = [
            (rule, pattern)
            for rule, pattern in self._rules
            if any(needle in (lowered if rule.lower else blob) for needle in rule.needles)
        ]
        if not rules and not self._custom:
            return value
        return self._walk(value, rules)

    def _walk(self, value: Any, rules: list[tuple[_Rule, re.Pattern[str]]]) -> Any:
        if isinstance(value, str):
            return self._text(value, rules)
        if isinstance(value, dict):
            return {key: self._walk(item, rules) for key, item in value.items()}
        if isinstance(value, list):
            return [self._walk(item, rules) for item in value]
        return value


def check_pattern(pattern: str) -> str | None:
    """Why a user's --redact pattern cannot be used, or None."""
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        return f"not a valid regular expression: {error}"
    if compiled.match(""):
        return "it matches the empty string, so it would redact between every character"
    return None
