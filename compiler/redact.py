"""Remove secrets from a run before anything is sent to a model or written to a corpus.

Two rule sets, each behind a fast pre-filter (a rule's regex runs only on text that holds one
of its literal needles):

- detect-secrets' token plugins (Yelp's maintained set: AWS, Azure, GitHub, GitLab, Slack,
  Stripe, SendGrid, Twilio, Mailchimp, Discord, Telegram, Square, npm, PyPI, IBM, ...) and its
  keyword list and false-positive filters (templated `${X}`, indirect `os.environ[...]`, `$X`).
  Its entropy plugins are left out: they would redact every hash in a log.
- Our own rules for what those miss or cut wrongly: current OpenAI, Anthropic, Hugging Face
  and Google keys, whole PEM and PGP blocks (also cut off before their END line), URL
  passwords (any user, `/` and `+` inside), Authorization headers, and keyword assignments
  (`DB_PASSWORD=...`, `"password": "..."`, `SECRET_KEY: ...`).

Object keys are redacted too (a token used as a JSON key). `tests/secret_kinds.py` is the
table of realistic kinds the tests measure this against.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import orjson


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...]
    """Literal text any match must contain: the pattern runs only on text holding one of them."""
    lower: bool = False
    """Look for the needles in the lower-cased text."""
    span: str = "secret"
    """Which part goes: `secret` (the named group `secret` if the pattern has one, else the
    whole match) or `group` (the first non-empty group that starts after the match does, as
    detect-secrets reports it, else the whole match)."""
    check: bool = False
    """Run the false-positive filters on the value (keyword rules)."""
    also: tuple[str, ...] = ()
    """Text any match must contain besides a needle (one of them): `=` or `:` for an
    assignment. A second substring test that spares the regex most texts."""


_KEY_BLOCK = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    # Cut off before its END line: the key's own characters (base64, escaped or real line
    # breaks, header lines such as Proc-Type) up to the first other text.
    r"|(?:\\[nr]|[A-Za-z0-9+/=:,\- \t\r\n])*)"
)

# A group named `secret` is what goes; the rest of the match is context that stays. Order
# matters: a more specific format comes before a more general one it would also match.
_OWN: Sequence[tuple[str, str, tuple[str, ...], bool]] = (
    ("private-key", _KEY_BLOCK, ("PRIVATE KEY",), False),
    ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",), False),
    ("openai-api-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", ("sk-",), False),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", ("_live_", "_test_"), False),
    ("stripe-webhook-secret", r"\bwhsec_[A-Za-z0-9+/=]{24,}", ("whsec_",), False),
    (
        "github-token",
        r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        False,
    ),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", ("AIza",), False),
    ("slack-token", r"\bx(?:ox[abposr]|app)-[A-Za-z0-9\-]{10,}", ("xox", "xapp-"), False),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
        ("hooks.slack.com",),
        False,
    ),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b", ("hf_",), False),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",), False),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
        ("eyJ",),
        False,
    ),
    (
        "authorization-header",
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|basic|token|digest)?\s*"
        r"(?P<secret>[A-Za-z0-9_\-.=~+/]{8,})",
        ("authorization",),
        True,
    ),
    (
        "bearer-token",
        r"\b(?i:bearer)\s+(?P<secret>[A-Za-z0-9_\-.=~+/]{20,})",
        ("bearer",),
        True,
    ),
    (
        "url-password",
        # Any user (none too: redis://:pw@), a password with `/` or `+`; not a port before a
        # path, and not an already masked `***`.
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:(?!\d*(?:/|$))(?!\*+@)(?P<secret>[^\s@]+)(?=@)",
        ("://",),
        False,
    ),
)


@cache
def _keyword_rule() -> str:
    """`NAME=value`, `"name": "value"`, `name: value` where the name holds a secret keyword
    (detect-secrets' list, plus tokens and access keys)."""
    from detect_secrets.plugins.keyword import DENYLIST

    # The match starts at the keyword (the rest of the name before it stays as context), so
    # the scan is linear: a leading [\w.-]* would be tried again at every position.
    words = "|".join([*DENYLIST, "access_?key", "session_?token", "auth_?token", "token"])
    return (
        r"(?i:(?:" + words + r")[\w.\-]*)[\"']?\s*(?::=|=|:)\s*(?P<quote>[\"'])?"
        r"(?P<secret>(?(quote)[^\"'\r\n]{4,}|[^\s\"'`,;()\[\]{}<>\\]{6,}))"
    )


# detect-secrets' token plugins, with the needles our pre-filter looks for. A plugin it adds
# in a new release fails tests/test_redact.py until it is given its needles here.
_PLUGIN_NEEDLES: dict[str, tuple[tuple[str, ...], bool]] = {
    "ArtifactoryDetector": (("AKC", "AP"), False),
    "AWSKeyDetector": (("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "aws"), True),
    "AzureStorageKeyDetector": (("accountkey=",), True),
    "BasicAuthDetector": (("://",), False),
    "CloudantDetector": (("cloudant", "cl_", "cl-", "clou"), True),
    "DiscordBotTokenDetector": (("discord", "bot "), True),
    "GitHubTokenDetector": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False),
    "GitLabTokenDetector": (
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "GR1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ),
        False,
    ),
    "IbmCloudIamDetector": (("ibm", "iam"), True),
    "IbmCosHmacDetector": (("cos", "hmac"), True),
    "JwtTokenDetector": (("eyJ",), False),
    "MailchimpDetector": (("-us",), False),
    "NpmDetector": (("_authtoken",), True),
    "OpenAIDetector": (("T3BlbkFJ",), False),
    "PypiTokenDetector": (("pypi-",), False),
    "SendGridDetector": (("SG.",), False),
    "SlackDetector": (("xox", "hooks.slack.com"), False),
    "SoftlayerDetector": (("softlayer", "sl_", "sl-"), True),
    "SquareOAuthDetector": (("sq0csp-",), False),
    "StripeDetector": (("k_live_",), False),
    "TelegramBotTokenDetector": ((":AA",), False),
    "TwilioKeyDetector": (("AC", "SK"), False),
}
_NOT_TOKEN_PLUGINS = frozenset(
    {
        "Base64HighEntropyString",  # every hash in a log would go
        "HexHighEntropyString",
        "IPPublicDetector",  # an address is no secret, and logs are full of them
        "KeywordDetector",  # its keyword list is used by our keyword rule instead
        "PrivateKeyDetector",  # it finds the BEGIN line only; our rule takes the whole block
    }
)


def _kind(plugin: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(plugin.secret_type).lower()).strip("-")


@cache
def _rules() -> tuple[_Rule, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    # Our rules' needles are case-sensitive literals, but for the words of a header.
    rules = [
        _Rule(kind, re.compile(pattern), needles, lower=check, check=check)
        for kind, pattern, needles, check in _OWN
    ]
    plugin_class: Any
    for plugin_class in get_mapping_from_secret_type_to_class().values():
        name = plugin_class.__name__
        if name in _NOT_TOKEN_PLUGINS:
            continue
        needles, lower = _PLUGIN_NEEDLES[name]  # KeyError: a new plugin wants its needles
        needles = tuple(n.lower() for n in needles) if lower else needles
        plugin = plugin_class()
        for pattern in plugin.denylist:
            rules.append(_Rule(_kind(plugin), pattern, needles, lower=lower, span="group"))
    keywords = ("pass", "pwd", "secret", "key", "token", "contrase")
    rules.append(
        _Rule(
            "secret-assignment",
            re.compile(_keyword_rule()),
            keywords,
            lower=True,
            check=True,
            also=("=", ":"),
        )
    )
    return tuple(rules)


_NUMBERS = re.compile(r"^[0-9]+(?:[-:,./][0-9]+)*$")  # a count, a line range, a date


@cache
def _needles() -> tuple[frozenset[str], frozenset[str]]:
    """Every rule's needles, each once: those sought as written, and those sought in
    lower-cased text."""
    rules = _rules()
    return (
        frozenset(n for rule in rules if not rule.lower for n in rule.needles),
        frozenset(n for rule in rules if rule.lower for n in rule.needles),
    )


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PLACEHOLDER = re.compile(r"^(?:\*+|x+|X+|\.+|-+|<[^>]*>|\[[^\]]*\]|null|none|true|false)$", re.I)


def _plausible(value: str, text: str, match: re.Match[str]) -> bool:
    """False for a value that only looks like a secret: a template, a variable, a name."""
    from detect_secrets.filters import heuristic

    if (
        heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_sequential_string(value)
        or heuristic.is_potential_uuid(value)
        or _PLACEHOLDER.match(value)
        or _NUMBERS.match(value)
        or value.startswith(("{{", "${", "%(", "[REDACTED"))
    ):
        return False
    line_start = text.rfind("\n", 0, match.start()) + 1
    line_end = text.find("\n", match.end())
    line = text[line_start : line_end if line_end != -1 else len(text)]
    if heuristic.is_indirect_reference(line):
        return False
    if not re.search(r"[0-9\W_]", value):
        return False  # a plain word: `token expired`, `password = password`
    # `password = form.password`, `token = settings.TOKEN`: code that names a value, no secret
    assignment = "quote" in match.re.groupindex
    return not (assignment and not match.group("quote") and _IDENTIFIER.match(value))


@dataclass
class Redactor:
    """Replaces secrets with `[REDACTED:kind]` and counts them per kind (never logs them)."""

    custom_patterns: Sequence[str] = ()
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rules = _rules()
        # A user's pattern has no needle: it runs on every text.
        self._custom = [
            (f"custom-{n}", re.compile(pattern))
            for n, pattern in enumerate(self.custom_patterns, start=1)
        ]

    def _sub(self, rule: _Rule, text: str) -> str:
        marker = f"[REDACTED:{rule.kind}]"
        pieces: list[str] = []
        last = position = 0
        while (match := rule.pattern.search(text, position)) is not None:
            start, end = _span(rule, match)
            if (
                start < last
                or start == end
                or (rule.check and not _plausible(text[start:end], text, match))
            ):
                # Not a secret: look again just after where it started, so that a match
                # turned down does not hide one inside it (`Authorization: Authorization: X`).
                position = match.start() + 1
                continue
            pieces += [text[last:start], marker]
            last = position = max(end, match.start() + 1)
            self.counts[rule.kind] += 1
        if not pieces:
            return text
        pieces.append(text[last:])
        return "".join(pieces)

    def text(self, value: str) -> str:
        return self._text(value, self._rules)

    def _text(self, value: str, rules: Sequence[_Rule]) -> str:
        lowered: str | None = None
        for rule in rules:
            haystack = value
            if rule.lower:
                if lowered is None:
                    lowered = value.lower()
                haystack = lowered
            if any(needle in haystack for needle in rule.needles) and (
                not rule.also or any(part in value for part in rule.also)
            ):
                redacted = self._sub(rule, value)
                if redacted is not value:
                    value, lowered = redacted, None
        for kind, pattern in self._custom:
            value, count = pattern.subn(f"[REDACTED:{kind}]", value)
            if count:
                self.counts[kind] += count
        return value

    def value(self, value: Any) -> Any:
        """A JSON value with every string redacted, object keys included.

        The value itself comes back, uncopied, when no rule's needle occurs anywhere in it;
        otherwise each string is tried only with the rules whose needles the whole value holds.
        """
        try:
            blob = orjson.dumps(value).decode()
        except TypeError:  # an integer past 64 bits, from a caller that did not check it
            blob = json.dumps(value, default=str)
        lowered = blob.lower()
        sensitive, insensitive = _needles()
        present = {n for n in sensitive if n in blob} | {n for n in insensitive if n in lowered}
        rules = [rule for rule in self._rules if not present.isdisjoint(rule.needles)]
        if not rules and not self._custom:
            return value
        return self._walk(value, rules)

    def _walk(self, value: Any, rules: Sequence[_Rule]) -> Any:
        if isinstance(value, str):
            return self._text(value, rules)
        if isinstance(value, dict):
            walked: dict[str, Any] = {}
            for key, item in value.items():
                new_key = self._text(key, rules)
                while new_key in walked:  # two secrets as keys: both entries are kept
                    new_key += "'"
                walked[new_key] = self._walk(item, rules)
            return walked
        if isinstance(value, list):
            return [self._walk(item, rules) for item in value]
        return value


def _span(rule: _Rule, match: re.Match[str]) -> tuple[int, int]:
    if rule.span == "group":
        # detect-secrets reports a group as the secret; a group at the very start is only
        # the token's prefix (`(ghp|gho)_...`), so the whole match goes then.
        for index in range(1, (match.re.groups or 0) + 1):
            start, end = match.span(index)
            if start > match.start() and end > start:
                return start, end
        return match.span()
    if "secret" in match.re.groupindex and match.group("secret"):
        return match.span("secret")
    return match.span()


def check_pattern(pattern: str) -> str | None:
    """Why a user's --redact pattern cannot be used, or None."""
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        return f"not a valid regular expression: {error}"
    if compiled.match(""):
        return "it matches the empty string, so it would redact between every character"
    return None
