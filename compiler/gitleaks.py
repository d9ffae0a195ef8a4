"""gitleaks' default rules (`secret_rules/gitleaks.toml`), read and translated for Python's `re`.

The file is gitleaks' own, unchanged (origin, version and licence in `secret_rules/README.md`).
Its expressions are Go RE2; `translate` rewrites what Python reads differently:

- a flag group in the middle (`p8e-(?i)[a-z0-9]{32}`) applies to the rest of its group, across
  `|`: it becomes scoped groups (`p8e-(?i:[a-z0-9]{32})`), closed and reopened at each `|`;
- `\\z` is `\\Z`, `$` (no multi-line flag in any rule) is `\\Z` (Python's `$` also matches
  before a final newline), `(?<name>` is `(?P<name>`, `x{,n}` is a literal `{` in RE2;
- POSIX classes (`[[:alnum:]]`) are spelled out, and a `[`, `--`, `&&`, `~~` or `||` inside a
  class is escaped (Python warns it may mean a set operation one day);
- `\\w`, `\\d`, `\\s` and `\\b` are ASCII in RE2: every expression is compiled with `re.ASCII`.

What RE2 has and Python's `re` lacks (`\\pL`, `\\Q...\\E`) raises `TranslationError` naming the
rule: tests/test_redact.py translates and compiles every rule of the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

GITLEAKS_VERSION = "v8.30.1"
GITLEAKS_SHA256 = "e163e53b9e7e8a8511e77271e2b323ed057759542a6d988258afe3a1fa329caf"
RULES_FILE = "gitleaks.toml"


class TranslationError(ValueError):
    """An RE2 construct with no counterpart in Python's `re`."""


_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_FLAGS = re.compile(r"\(\?([imsU]*(?:-[imsU]+)?)([):])")


def _escape(pattern: str, i: int) -> tuple[str, int]:
    """The escape at `i` (a backslash), as Python reads it, and where the next token starts."""
    if i + 1 >= len(pattern):
        raise TranslationError("a trailing backslash")
    letter = pattern[i + 1]
    if letter == "z":
        return "\\Z", i + 2
    if letter in "pPQEC":
        raise TranslationError(f"\\{letter} has no counterpart in Python's re")
    if letter == "x" and pattern.startswith("{", i + 2):
        end = pattern.index("}", i + 2)
        return f"\\U{int(pattern[i + 3 : end], 16):08x}", end + 1
    return pattern[i : i + 2], i + 2


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    """The class that opens at `i`, as Python reads it, and where the next token starts."""
    out = ["["]
    j = i + 1
    if pattern.startswith("^", j):
        out.append("^")
        j += 1
    first = True
    previous = ""
    while j < len(pattern):
        char = pattern[j]
        if char == "]" and not first:
            out.append("]")
            return "".join(out), j + 1
        first = False
        if char == "\\":
            piece, j = _escape(pattern, j)
            out.append(piece)
            previous = ""
            continue
        if char == "[" and pattern.startswith("[:", j):
            end = pattern.index(":]", j + 2)
            name = pattern[j + 2 : end]
            negated = name.startswith("^")
            if negated or name not in _POSIX:
                raise TranslationError(f"[:{name}:] has no counterpart in Python's re")
            out.append(_POSIX[name])
            j = end + 2
            previous = ""
            continue
        if char == "[" or (char in "-&~|" and previous == char):
            out.append("\\" + char)
        else:
            out.append(char)
        previous = char
        j += 1
    raise TranslationError("a class that is not closed")


def translate(pattern: str) -> str:
    """A Go RE2 expression as Python's `re` reads it the same way (see the module's docstring)."""
    out: list[str] = []
    # Per open group, the flags of the scoped groups opened in it by a `(?i)` in its middle:
    # closed at each `|` and reopened after it, and closed for good at the group's end.
    scoped: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            piece, i = _escape(pattern, i)
            out.append(piece)
        elif char == "[":
            piece, i = _char_class(pattern, i)
            out.append(piece)
        elif char == "(":
            flags = _FLAGS.match(pattern, i)
            if flags and flags.group(2) == ")":
                if i == 0:  # at the very start: Python reads it as RE2 does
                    out.append(flags.group())
                else:
                    out.append(f"(?{flags.group(1)}:")
                    scoped[-1].append(flags.group(1))
                i = flags.end()
                continue
            if flags:
                out.append(flags.group())
                i = flags.end()
            elif pattern.startswith("(?P<", i):
                out.append("(?P<")
                i += 4
            elif pattern.startswith("(?<", i):
                out.append("(?P<")
                i += 3
            elif pattern.startswith("(?", i):
                raise TranslationError(f"the group {pattern[i : i + 4]!r}... is not RE2's")
            else:
                out.append("(")
                i += 1
            scoped.append([])
        elif char == "|":
            opened = scoped[-1]
            out.append(")" * len(opened) + "|" + "".join(f"(?{f}:" for f in opened))
            i += 1
        elif char == ")":
            if len(scoped) == 1:
                raise TranslationError("a `)` that closes no group")
            out.append(")" * len(scoped.pop()) + ")")
            i += 1
        elif char == "$":
            out.append("\\Z")
            i += 1
        elif char == "{" and re.match(r"\{,\d*\}", pattern[i:]):
            out.append("\\{")
            i += 1
        else:
            out.append(char)
            i += 1
    if len(scoped) != 1:
        raise TranslationError("a group that is not closed")
    out.append(")" * len(scoped[0]))
    return "".join(out)


def compile_re2(pattern: str) -> re.Pattern[str]:
    return re.compile(translate(pattern), re.ASCII)


def shannon_entropy(text: str) -> float:
    """Bits per character, as gitleaks measures a secret's randomness."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


@dataclass(frozen=True)
class Allowlist:
    """What gitleaks lets pass although a rule matched it."""

    regexes: tuple[re.Pattern[str], ...]
    stopwords: tuple[str, ...]
    """Lower-cased: a secret holding one is allowed."""
    target: Literal["secret", "match", "line"]
    """What the regexes are tried on: the secret, the whole match, or its line."""
    all_of: bool
    """gitleaks' `condition = "AND"`: every check must hold."""
    by_path: bool
    """It also names file paths: a log's text has none, so with `all_of` it never holds."""

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"secret": secret, "match": match, "line": line}[self.target]
        by_regex = bool(secret) and any(p.search(target) for p in self.regexes)
        lowered = secret.lower()
        by_word = any(word in lowered for word in self.stopwords)
        if self.all_of:
            checks = [False] if self.by_path else []
            if self.regexes:
                checks.append(by_regex)
            if self.stopwords:
                checks.append(by_word)
            return bool(checks) and all(checks)
        return by_regex or by_word


@dataclass(frozen=True)
class GitleaksRule:
    """One `[[rules]]` entry of the file."""

    id: str
    description: str
    regex: str
    """As gitleaks writes it (RE2)."""
    keywords: tuple[str, ...]
    """Lower-cased; the rule runs only on text holding one of them."""
    entropy: float
    """A secret with no more bits per character than this is not one (0: no check)."""
    secret_group: int
    """The group that is the secret (0: the first non-empty group, else the whole match)."""
    allowlists: tuple[Allowlist, ...]
    path: str | None
    """gitleaks' file-path condition; logs hold no paths, so it is not applied."""


def _allowlist(entry: dict[str, Any]) -> Allowlist:
    condition = str(entry.get("condition", "OR")).upper()
    target = entry.get("regexTarget", "secret")
    if target not in ("secret", "match", "line"):
        raise TranslationError(f"unknown regexTarget {target!r}")
    return Allowlist(
        regexes=tuple(compile_re2(p) for p in entry.get("regexes", ())),
        stopwords=tuple(str(w).lower() for w in entry.get("stopwords", ())),
        target=target,
        all_of=condition == "AND",
        by_path=bool(entry.get("paths")),
    )


@dataclass(frozen=True)
class Config:
    rules: tuple[GitleaksRule, ...]
    """Every rule with an expression, in the file's order (a path-only rule has none)."""
    path_only: tuple[str, ...]
    """Rules that match a file's name only (`pkcs12-file`): nothing to match in a log."""
    allowlists: tuple[Allowlist, ...]
    """The global allowlists: they apply to every rule."""


def parse(text: str) -> Config:
    """The rules of a gitleaks config. Raises TranslationError (naming the rule) for an
    expression Python cannot read the same way."""
    import tomllib  # a build reads the rules as shipped (redact_table.py), not this file

    data = tomllib.loads(text)
    globals_: list[dict[str, Any]] = []
    if "allowlist" in data:
        globals_.append(data["allowlist"])
    globals_.extend(data.get("allowlists", ()))
    rules = []
    path_only = []
    for entry in data["rules"]:
        rule_id = str(entry["id"])
        if "regex" not in entry:
            path_only.append(rule_id)
            continue
        try:
            compile_re2(entry["regex"])
            allowlists = tuple(_allowlist(a) for a in entry.get("allowlists", ()))
        except (TranslationError, re.error) as error:
            raise TranslationError(f"gitleaks rule {rule_id}: {error}") from error
        rules.append(
            GitleaksRule(
                id=rule_id,
                description=str(entry.get("description", "")),
                regex=str(entry["regex"]),
                keywords=tuple(str(k).lower() for k in entry.get("keywords", ())),
                entropy=float(entry.get("entropy", 0.0)),
                secret_group=int(entry.get("secretGroup", 0)),
                allowlists=allowlists,
                path=entry.get("path"),
            )
        )
    return Config(
        rules=tuple(rules),
        path_only=tuple(path_only),
        allowlists=tuple(_allowlist(a) for a in globals_),
    )


@cache
def default_config() -> Config:
    """The shipped rule set (`secret_rules/gitleaks.toml`)."""
    text = resources.files("wikitrace.compiler").joinpath("secret_rules", RULES_FILE).read_text()
    return parse(text)


def secret_span(rule: GitleaksRule, match: re.Match[str]) -> tuple[int, int]:
    """Where the secret is in a match, as gitleaks picks it: the rule's group, else the first
    non-empty group, else the whole match."""
    if rule.secret_group:
        return match.span(rule.secret_group)
    for index in range(1, (match.re.groups or 0) + 1):
        start, end = match.span(index)
        if end > start:
            return start, end
    return match.span()


def line_of(text: str, start: int, end: int) -> str:
    """The line (or lines) a match spans, as gitleaks' `line` allowlists see it."""
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    return text[first : last if last != -1 else len(text)]


def allowed(
    allowlists: Sequence[Allowlist], secret: str, match: str, text: str, span: tuple[int, int]
) -> bool:
    """True when one of `allowlists` lets this finding pass."""
    if not allowlists:
        return False
    line = line_of(text, *span) if any(a.target == "line" for a in allowlists) else ""
    return any(a.allows(secret, match, line) for a in allowlists)
