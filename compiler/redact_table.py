"""The redaction rules as shipped: `secret_rules/rules.json`, made at development time from
their sources (redact_rules.py's own expressions, gitleaks' file, detect-secrets' plugins).

Making the rules from their sources costs a new process about 0.25 s of CPU: importing
detect-secrets (which imports requests and multiprocessing), reading gitleaks' TOML,
translating and compiling its expressions and finding each rule's anchor. The table holds
the result (each rule's expression as Python reads it, its keywords, anchor and, for a
gitleaks rule, what judges its matches), so a build reads one JSON file and compiles an
expression only when a text calls for its rule. The table is package data, never a cache a
user could write: the rules are what keeps secrets out of a corpus.

tests/test_redact_table.py fails when the table differs from making the rules anew
(redact_rules.compute_rules); after changing a rule, gitleaks' file or detect-secrets' version,
write it again with

    python -m wikitrace.compiler.redact_rules
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from . import gitleaks

TABLE_FILE = "rules.json"
TABLE_VERSION = 1


@dataclass(frozen=True, eq=False)
class Rule:
    """One way to find a secret: an expression, the keywords that let it run, and how a match
    is judged."""

    kind: str
    source: str
    """The expression, as Python's `re` reads it."""
    needles: tuple[str, ...]
    """Lower-cased text any match must hold: the rule runs only on text holding one of them."""
    style: str
    """How a match is judged and which part of it goes:
    `own`: the group named `secret`, else the whole match; `checked`: the same, and the value
    must look like a secret (`_plausible`); `entropy`: the group `secret`, if it is random
    enough (`high_entropy`); `detect-secrets`: the first group after the match's start, else the
    whole match; `gitleaks`: as gitleaks judges it (entropy, allowlists, its secret group)."""
    flags: int = 0
    also: tuple[str, ...] = ()
    """Text any match must hold besides a needle (one of them): `=` or `:` for an assignment."""
    origin: gitleaks.GitleaksRule | None = None
    anchor: tuple[int, tuple[str, ...]] | None = None
    """For a rule every match of which starts with one of a few words (lower-cased): how far
    back before the word the match may start, and the words. The expression is then tried only
    where a word occurs (the automaton finds them), not at every character of the text. A
    gitleaks rule that starts `(?i)[\\w.-]{0,50}?(?:keyword|...)` loses that prefix
    (`source` is the rest) and may start 50 word characters before its keyword."""

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)


def _allowlist_record(allowlist: gitleaks.Allowlist) -> dict[str, Any]:
    return {
        "regexes": [pattern.pattern for pattern in allowlist.regexes],
        "stopwords": list(allowlist.stopwords),
        "target": allowlist.target,
        "all_of": allowlist.all_of,
        "by_path": allowlist.by_path,
    }


def _allowlist(record: dict[str, Any]) -> gitleaks.Allowlist:
    return gitleaks.Allowlist(
        regexes=tuple(re.compile(source, re.ASCII) for source in record["regexes"]),
        stopwords=tuple(record["stopwords"]),
        target=record["target"],
        all_of=record["all_of"],
        by_path=record["by_path"],
    )


def _origin_record(rule: gitleaks.GitleaksRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "description": rule.description,
        "regex": rule.regex,
        "keywords": list(rule.keywords),
        "entropy": rule.entropy,
        "secret_group": rule.secret_group,
        "allowlists": [_allowlist_record(a) for a in rule.allowlists],
        "path": rule.path,
    }


def _origin(record: dict[str, Any]) -> gitleaks.GitleaksRule:
    return gitleaks.GitleaksRule(
        id=record["id"],
        description=record["description"],
        regex=record["regex"],
        keywords=tuple(record["keywords"]),
        entropy=record["entropy"],
        secret_group=record["secret_group"],
        allowlists=tuple(_allowlist(a) for a in record["allowlists"]),
        path=record["path"],
    )


def _rule_record(rule: Rule) -> dict[str, Any]:
    return {
        "kind": rule.kind,
        "source": rule.source,
        "needles": list(rule.needles),
        "style": rule.style,
        "flags": rule.flags,
        "also": list(rule.also),
        "origin": _origin_record(rule.origin) if rule.origin else None,
        "anchor": [rule.anchor[0], list(rule.anchor[1])] if rule.anchor else None,
    }


def _rule(record: dict[str, Any]) -> Rule:
    anchor = record["anchor"]
    return Rule(
        record["kind"],
        record["source"],
        tuple(record["needles"]),
        record["style"],
        flags=record["flags"],
        also=tuple(record["also"]),
        origin=_origin(record["origin"]) if record["origin"] else None,
        anchor=(anchor[0], tuple(anchor[1])) if anchor else None,
    )


def dumps(
    rules: tuple[Rule, ...],
    allowlists: tuple[gitleaks.Allowlist, ...],
    *,
    detect_secrets_version: str,
) -> str:
    """The table's text for these rules and gitleaks' global allowlists."""
    table = {
        "version": TABLE_VERSION,
        "made_by": "python -m wikitrace.compiler.redact_rules",
        "gitleaks": {"version": gitleaks.GITLEAKS_VERSION, "sha256": gitleaks.GITLEAKS_SHA256},
        "detect_secrets": detect_secrets_version,
        "gitleaks_allowlists": [_allowlist_record(a) for a in allowlists],
        "rules": [_rule_record(rule) for rule in rules],
    }
    return json.dumps(table, indent=1, ensure_ascii=True) + "\n"


def table_path() -> Path:
    return Path(__file__).with_name("secret_rules") / TABLE_FILE


def shipped_text() -> str:
    return table_path().read_text()


@cache
def _shipped() -> dict[str, Any]:
    try:
        table: dict[str, Any] = json.loads(shipped_text())
    except (OSError, ValueError) as error:
        raise RuntimeError(
            f"{table_path()} cannot be read ({error}): reinstall wikitrace"
        ) from None
    if not isinstance(table, dict) or table.get("version") != TABLE_VERSION:
        raise RuntimeError(
            f"{table_path()} is not a table of version {TABLE_VERSION}, which this wikitrace "
            "reads: reinstall wikitrace"
        )
    return table


def shipped_rules() -> tuple[Rule, ...]:
    """The rules, in their order (see redact_rules.compute_rules)."""
    return tuple(_rule(record) for record in _shipped()["rules"])


def shipped_allowlists() -> tuple[gitleaks.Allowlist, ...]:
    """gitleaks' global allowlists: they apply to every gitleaks rule."""
    return tuple(_allowlist(record) for record in _shipped()["gitleaks_allowlists"])
