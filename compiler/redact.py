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

# (kind, pattern). A group named `keep` is context that stays; the rest of the match goes.
_RULES: Sequence[tuple[str, str]] = (
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-api-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    (
        "aws-secret-access-key",
        r"(?P<keep>(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
    ),
    ("github-token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b"),
    ("github-token", r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
    ("gitlab-token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b"),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("pypi-token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    ("bearer-token", r"(?P<keep>\b(?i:bearer)\s+)[A-Za-z0-9_\-.=~+/]{20,}"),
    ("url-password", r"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+:)[^/\s:@]+(?=@)"),
)


def _combine(rules: Sequence[tuple[str, str]]) -> tuple[re.Pattern[str], list[str]]:
    """One alternation so that each text is scanned once, whatever the number of rules."""
    parts = []
    for index, (_, pattern) in enumerate(rules):
        parts.append(f"(?P<r{index}>{pattern.replace('(?P<keep>', f'(?P<k{index}>')})")
    return re.compile("|".join(parts)), [kind for kind, _ in rules]


@dataclass
class Redactor:
    """Replaces secrets with `[REDACTED:kind]` and counts them per kind (never logs them)."""

    custom_patterns: Sequence[str] = ()
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._pattern, self._kinds = _combine(_RULES)
        # A user's pattern may carry global flags such as (?i), so it is not merged in.
        self._custom = [
            (f"custom-{n}", re.compile(pattern))
            for n, pattern in enumerate(self.custom_patterns, start=1)
        ]

    def _replace(self, match: re.Match[str]) -> str:
        name = match.lastgroup or ""
        # lastgroup names the outermost group that matched: r<index>.
        index = int(name[1:])
        kind = self._kinds[index]
        self.counts[kind] += 1
        keep = match.group(f"k{index}") if f"k{index}" in self._pattern.groupindex else None
        return f"{keep or ''}[REDACTED:{kind}]"

    def text(self, value: str) -> str:
        value = self._pattern.sub(self._replace, value)
        for kind, pattern in self._custom:
            value, count = pattern.subn(f"[REDACTED:{kind}]", value)
            if count:
                self.counts[kind] += count
        return value

    def value(self, value: Any) -> Any:
        """A copy of a JSON value with every string redacted (keys are left as they are)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
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
