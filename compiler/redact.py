"""Remove secrets from a run before anything is sent to a model or written to a corpus.

Rules, in the order that names a secret two of them find:

- Our own, for formats the sets below miss or cut wrongly: current OpenAI, Anthropic, Hugging
  Face, Google and Slack keys, whole PEM, PGP and PuTTY private keys (also cut off before their
  end), URL passwords, Azure SAS signatures, connection-string passwords (ODBC, ADO.NET, JDBC),
  Discord webhooks, docker `auth`, kubeconfig `client-key-data`, Authorization headers.
- gitleaks' default rule set (`secret_rules/gitleaks.toml`, read by gitleaks.py: 221 rules, with
  their keywords, entropy thresholds and allowlists).
- detect-secrets' token plugins, for the formats gitleaks lacks (Azure storage keys, Cloudant,
  IBM, SoftLayer, Square OAuth secrets, bare Discord and Telegram tokens, ...).
- Keyword assignments (`DB_PASSWORD=...`, `"password": "..."`, `SECRET_KEY: ...`), with
  detect-secrets' false-positive filters (templated `${X}`, `os.environ[...]`, `$X`).
- Entropy on values under keys that say nothing (`"data": "eyJ..."`, `value=...`): a long
  high-entropy base64 or hex value, not a digest's length (git SHAs, sha256), not a UUID.
- Base64 that holds JSON or PEM (`eyJ...`, `LS0tLS1...`) is decoded and read again: a secret
  inside takes the whole encoded value.

One pass: every text is scanned once, by one Aho-Corasick automaton of all the rules'
keywords, and a rule runs only on a text that holds one of its keywords (gitleaks' own
pre-filter); the rules keyed on a common word (`key`, `token`, a service's name) are tried only
where their word occurs. A JSON object's string value is also read with its key before it
(`"password": "hunter22"`), so a key that names a secret counts. Placeholders (`pass`,
`<password>`, `xxx`, `${TOKEN}`) are never secrets, and `keep` patterns name more.

`tests/secret_kinds.py` is the table of kinds the tests measure this against. The rules are
in redact_rules.py, the matcher that runs them on a text in redact_match.py; this module walks
a run, replaces what they find and counts it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .redact_match import SecretMatcher

PLACES = ("task", "turn text", "tool arguments", "tool results", "metadata")
"""Where in a run a secret was found, as the build report names it."""

_TURN_PLACES = {
    "content": "turn text",
    "reasoning": "turn text",
    "role": "turn text",
    "action": "tool arguments",
    "observation": "tool results",
}
_CALL_PLACES = {
    "arguments": "tool arguments",
    "name": "tool arguments",
    "id": "tool arguments",
    "result": "tool results",
}


@dataclass
class Redactor:
    """Replaces secrets with `[REDACTED:kind]` and counts them per kind and per place (never
    logs them). `custom_patterns` are more to redact (run on every text); a finding that one of
    `keep` matches in full is kept."""

    custom_patterns: Sequence[str] = ()
    keep: Sequence[str] = ()
    counts: Counter[str] = field(default_factory=Counter)
    places: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(kind, place) -> secrets redacted there (see PLACES)."""

    def __post_init__(self) -> None:
        self._custom = [
            (f"custom-{n}", re.compile(pattern))
            for n, pattern in enumerate(self.custom_patterns, start=1)
        ]
        self._keep = [re.compile(pattern) for pattern in self.keep]
        self._clean_keys: set[str] = set()
        """Object keys found to hold no secret (keys repeat: each is read once)."""

    @cached_property
    def _matcher(self) -> SecretMatcher:
        """The rules and their automaton, made when a first text is read (their shipped table,
        about 0.02 s of CPU the first time in a process, and each rule's expression compiled
        when a text first calls for it): a build whose workers redact its runs never makes them
        in its own process, nor does a report with no bad record to redact."""
        return SecretMatcher()

    # --- the public face -------------------------------------------------------------------

    def text(self, value: str, place: str = "text") -> str:
        """`value` with its secrets replaced (the same object when it holds none)."""
        return self._text(value, place)

    def value(self, value: Any) -> Any:
        """A run (or any JSON value) with every string redacted, object keys included; the
        value itself, uncopied, when it holds no secret. A run's places are told apart (its
        task, turn text, tool arguments, tool results, metadata)."""
        if isinstance(value, dict):
            return self._object(value, self._run_place, "metadata")
        if isinstance(value, list):  # a run's turns
            return self._list(value, lambda _: "turn", "turn text")
        return self._any(value, "metadata")

    def where(self) -> dict[str, dict[str, int]]:
        """Per kind, the places its secrets were found in and how many in each."""
        found: dict[str, dict[str, int]] = {}
        for (kind, place), count in sorted(self.places.items()):
            found.setdefault(kind, {})[place] = count
        return found

    # --- walking a run -----------------------------------------------------------------------

    @staticmethod
    def _run_place(key: str) -> str:
        return {"task": "task", "turns": "turns"}.get(key, "metadata")

    def _any(self, value: Any, place: str) -> Any:
        if isinstance(value, str):
            return self._text(value, place)
        if isinstance(value, dict):
            return self._object(value, lambda _: place, place)
        if isinstance(value, list):
            return self._list(value, lambda _: place, place)
        return value

    def _list(self, items: list[Any], place_of: Callable[[int], str], place: str) -> list[Any]:
        walked = []
        changed = False
        for index, item in enumerate(items):
            where = place_of(index)
            if where == "turn" and isinstance(item, dict):
                new = self._object(item, lambda key: _TURN_PLACES.get(key, key), "metadata")
            elif where == "call" and isinstance(item, dict):
                new = self._object(item, lambda key: _CALL_PLACES.get(key, "metadata"), place)
            else:
                new = self._any(item, "turn text" if where in ("turn", "call") else where)
            changed = changed or new is not item
            walked.append(new)
        return walked if changed else items

    def _object(
        self, value: dict[Any, Any], place_of: Callable[[str], str], key_place: str
    ) -> dict[Any, Any]:
        walked: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            place = place_of(key) if isinstance(key, str) else key_place
            if not isinstance(key, str) or key in self._clean_keys:
                new_key = key
            else:
                new_key = self._text(key, key_place)
                if new_key is key and len(self._clean_keys) < 100_000:
                    self._clean_keys.add(key)
            while new_key in walked:  # two secrets as keys: both entries are kept
                new_key += "'"
            if place == "turns" and isinstance(item, list):
                new = self._list(item, lambda _: "turn", "turn text")
            elif place == "tool_calls" and isinstance(item, list):
                new = self._list(item, lambda _: "call", "tool arguments")
            elif place in ("metadata", "tool_calls", "turns") or place not in PLACES:
                new = self._keyed(key, item, "metadata")
            else:
                new = self._keyed(key, item, place)
            changed = changed or new is not item or new_key is not key
            walked[new_key] = new
        return walked if changed else value

    def _keyed(self, key: Any, item: Any, place: str) -> Any:
        if isinstance(item, str) and isinstance(key, str):
            return self._text(item, place, key)
        return self._any(item, place)

    # --- one text ----------------------------------------------------------------------------

    def _text(self, text: str, place: str, key: str | None = None) -> str:
        spans = self._matcher.spans(text, 0)
        if key is not None and text:
            spans += self._matcher.key_spans(key, text)
        for order, (kind, pattern) in enumerate(self._custom, start=len(self._matcher.rules) + 1):
            spans += [(m.start(), m.end(), order, kind) for m in pattern.finditer(text)]
        if not spans:
            return text
        if self._keep:
            spans = [
                s for s in spans if not any(k.fullmatch(text[s[0] : s[1]]) for k in self._keep)
            ]
        return self._replace(text, spans, place)

    def _replace(self, text: str, spans: list[tuple[int, int, int, str]], place: str) -> str:
        """The text with each stretch that one or more findings cover replaced once, named by
        the first rule (in order) that found it."""
        spans.sort(key=lambda s: (s[0], -s[1]))
        merged: list[list[Any]] = []
        for start, end, order, kind in spans:
            if merged and start < merged[-1][1]:
                last = merged[-1]
                last[1] = max(last[1], end)
                if order < last[2]:
                    last[2], last[3] = order, kind
            else:
                merged.append([start, end, order, kind])
        if not merged:
            return text
        pieces: list[str] = []
        position = 0
        for start, end, _, kind in merged:
            pieces += [text[position:start], f"[REDACTED:{kind}]"]
            position = end
            self.counts[kind] += 1
            self.places[kind, place] += 1
        pieces.append(text[position:])
        return "".join(pieces)


def found_by(kind: str, text: str) -> list[str]:
    """The secrets that the rules of one kind find in `text`, each on its own (before the
    findings of all rules are merged): what the tests check every rule against."""
    matcher = SecretMatcher()
    return [text[start:end] for start, end, _, found in matcher.spans(text, 0) if found == kind]


def check_pattern(pattern: str) -> str | None:
    """Why a user's --redact pattern cannot be used, or None."""
    problem = check_keep_pattern(pattern)
    if problem:
        return problem
    if re.compile(pattern).match(""):
        return "it matches the empty string, so it would redact between every character"
    return None


def check_keep_pattern(pattern: str) -> str | None:
    """Why a user's --redact-keep pattern cannot be used, or None."""
    try:
        re.compile(pattern)
    except re.error as error:
        return f"not a valid regular expression: {error}"
    return None
