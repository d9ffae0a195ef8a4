"""Finding secrets in one text (compiler/redact.py): `SecretMatcher` runs the rules its
keywords call (redact_rules.py), where their anchors let them start, judges each match
(placeholders, templates, entropy, gitleaks' allowlists) and reads base64 of JSON or PEM
again, decoded."""

from __future__ import annotations

import base64
import binascii
import re
import string
from collections.abc import Iterable

from . import gitleaks
from .redact_rules import NEUTRAL_KEYS, all_rules, gitleaks_allowlists, rule_automaton
from .redact_table import Rule

MIN_SECRET_TEXT = 6
"""A text shorter than this holds no secret any rule finds (it is still read with its key)."""
KEYED_VALUE_LIMIT = 2048
"""A value longer than this is not read again with its key (no rule's secret is this long)."""

_ENCODED = re.compile(r"(?<![A-Za-z0-9+/_\-])(?:eyJ|ewo|W3si|LS0tLS1)[A-Za-z0-9+/_\-]{12,}={0,2}")
"""Base64 of JSON or of a PEM block: decoded and read again."""
_DECODE_DEPTH = 2


_NUMBERS = re.compile(r"^[0-9]+(?:[-:,./][0-9]+)*$")  # a count, a line range, a date
_CODE_NAME = re.compile(r"^[A-Za-z_][A-Za-z_]*[0-9]*(?:\.[A-Za-z_][A-Za-z_]*[0-9]*)*$")
"""`form.password`, `settings.TOKEN`, `self.api_key2`: code that names a value. A dotted token
(`ya29.a0AfB_byC1`) has digits inside its parts."""
_QUALIFIED = re.compile(
    r"[_.\-](?:type|name|length|len|size|count|tokens|file|path|url|uri|endpoint|format|"
    r"version|expires?(?:_at|_in)?|expiry|ttl|prefix|field|header|param|label|kind|policy|"
    r"env|var|hint|source|location|ref)[\"']?\s*$",
    re.I,
)
"""A name that says what it holds is about a secret, not one: `token_type`, `password_length`."""
_PLACEHOLDER = re.compile(
    r"^(?:\*+|x+|\.+|-+|_+|<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}|\(?null\)?|nil|none|true|false|"
    r"undefined|unset|empty|string|redacted|masked|hidden|required|optional|missing|invalid|"
    r"expired|incorrect|wrong|provided|changed|reset|set|pass|passw(?:or)?d|pwd|pw|secret|"
    r"token|key|api[_-]?key|changeme|change[_-]?me|change[_-]?it|example|sample|dummy|"
    r"placeholder|your[_-]?[a-z_-]*|my[_-]?(?:password|secret|token|key)|\.\.\.|…)$",
    re.I,
)
"""A value that stands for a secret without being one (`http://user:pass@host`)."""


def is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value.strip("\"'`")))


_DIGEST_LENGTHS = frozenset({32, 40, 56, 64, 96, 128})
"""Hex lengths of md5, sha1 (git), sha224, sha256, sha384, sha512: content digests."""
_MEDIA = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "JVBERi0", "UEsDB", "H4sI", "AAAA")
"""Base64 of a PNG, JPEG, GIF, WebP, PDF, zip or gzip file: data, not a secret."""
_BASE64 = re.compile(r"[A-Za-z0-9+/_\-]+={0,2}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


_KEY_CHARS = 128
"""Base64 of 96 bytes: a random key is no longer; longer binary is data."""


def _decoded(token: str) -> bytes | None:
    """The bytes a base64 (or base64url) token stands for, or None."""
    try:
        return base64.b64decode(token.replace("-", "+").replace("_", "/") + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        return None


def _decodes_to_text(token: str) -> bool:
    raw = _decoded(token)
    if raw is None:
        return False
    try:
        return raw.decode("utf-8").isprintable() or "\n" in raw.decode("utf-8")
    except UnicodeDecodeError:
        return False


def _jwt_header_only(secret: str) -> bool:
    """`eyJhbGciOiJIUzI1NiIs...`: the start of a token printed cut, its header only."""
    token = secret.rstrip(".")
    if not token.startswith("eyJ") or "." in token:
        return False
    raw = _decoded(token[: len(token) - len(token) % 4])
    return raw is not None and raw.startswith((b'{"alg"', b'{"typ"', b'{"kid"'))


def high_entropy(value: str) -> bool:
    """True for a long random-looking base64 or hex token that is no digest, UUID or file."""
    token = value.strip().strip("\"'")
    if len(token) < 24 or not _BASE64.fullmatch(token) or _UUID.fullmatch(token):
        return False
    if _HEX.fullmatch(token):
        return (
            len(token) >= 32
            and len(token) not in _DIGEST_LENGTHS
            and gitleaks.shannon_entropy(token) >= 3.0
        )
    if token.startswith(_MEDIA) or (len(token) > _KEY_CHARS and not _decodes_to_text(token)):
        return False  # a file, or ciphertext (a model's encrypted reasoning): data, no key
    has = {
        "digit": any(c.isdigit() for c in token),
        "upper": any(c.isupper() for c in token),
        "lower": any(c.islower() for c in token),
    }
    if not all(has.values()):
        return False
    return gitleaks.shannon_entropy(token) >= min(4.5, 3.5 + len(token) / 40)


# detect-secrets' false-positive filters (`detect_secrets/filters/heuristic.py`), written out
# here: importing detect-secrets costs a build 0.1 s of CPU (it imports requests and
# multiprocessing). tests/test_redact_table.py checks them against detect-secrets' own.
_SEQUENCES = (
    string.ascii_uppercase + string.ascii_uppercase + string.digits + "+/",
    string.digits + string.ascii_uppercase + string.ascii_uppercase + "+/",
    (string.digits + string.ascii_uppercase) * 2,
    string.digits * 2,
    string.hexdigits.upper() + string.hexdigits.upper(),
    string.ascii_uppercase + "=/",
)
_UUID = re.compile(r"[a-f0-9]{8}\-[a-f0-9]{4}\-[a-f0-9]{4}\-[a-f0-9]{4}\-[a-f0-9]{12}", re.I)


def is_templated_secret(secret: str) -> bool:
    """`{secret}`, `<secret>`, `${secret}`; also `` and `$`, where detect-secrets' test reads
    past the end."""
    try:
        return (
            (secret[0] == "{" and secret[-1] == "}")
            or (secret[0] == "<" and secret[-1] == ">")
            or (secret[0] == "$" and secret[1] == "{" and secret[-1] == "}")
        )
    except IndexError:
        return True


def is_sequential_string(secret: str) -> bool:
    """A run of the alphabet, digits or hex digits (`ABCDEF`, `123456`)."""
    uppercase = secret.upper()
    return any(uppercase in sequence for sequence in _SEQUENCES)


def _plausible(value: str, text: str, match: re.Match[str], end: int) -> bool:
    """False for a value that only looks like a secret: a template, a variable, a name, a call
    (`end` is where the value ends in `text`)."""
    if (
        is_templated_secret(value)
        or value.startswith("$")
        or is_sequential_string(value)
        or _UUID.search(value)
        or _NUMBERS.match(value)
        or value.startswith(("{{", "${", "%("))
    ):
        return False
    if text[end : end + 1] in ("(", "["):
        return False  # `password = get_password()`, `token = os.environ["TOKEN"]`
    groups = match.re.groupindex
    if "op" in groups and _QUALIFIED.search(text, match.start(), match.start("op")):
        return False  # `token_type: bearer`, `secret_name: db-creds`, `key_id = 42`
    quoted = "quote" in groups and bool(match.group("quote"))
    if "quote" in groups and not quoted and _CODE_NAME.match(value):
        # `password = form.password`, `token = settings.TOKEN`, `input_tokens=input_tokens`:
        # code that names a value. Not `PGPASSWORD=postgres`: a shell variable's value.
        op_start, op_end = match.span("op")
        spaced = text[op_start - 1 : op_start].isspace() or text[op_end : op_end + 1].isspace()
        name = text[match.start() : op_start]
        shell = name.isupper() and not spaced and match.group("op") == "="
        if not shell or "." in value:
            return False
    if not re.search(r"[0-9\W_]", value):
        # A plain word: a secret when written as one is given (`PGPASSWORD=postgres`,
        # `"password": "letmein"`), or long; words after a colon are mostly prose
        # (`token: expired`).
        given = quoted or ("op" in groups and match.group("op") == "=")
        return given or len(value) >= 12
    return True


class SecretMatcher:
    """Every finding of the rules in a text: start, end, the rule's order, its kind. Keeps what
    it learnt of object keys (keys repeat)."""

    def __init__(self) -> None:
        self.rules = all_rules()
        self._automaton = rule_automaton()
        self._keys: dict[str, tuple[int, bool]] = {}
        """Per object key: the rules its words call for its value, and whether it is neutral."""
        self._lengths = tuple(map(len, self._automaton.words))

    # --- one text ----------------------------------------------------------------------------

    def spans(self, text: str, depth: int) -> list[tuple[int, int, int, str]]:
        """Every finding in the text: start, end, the rule's order, its kind."""
        if len(text) < MIN_SECRET_TEXT:
            return []
        mask, hits = self._scan(text)
        if not mask:
            return []
        found: list[tuple[int, int, int, str]] = []
        self._run(text, mask & ~self._automaton.decode, hits, found)
        if mask & self._automaton.decode and depth < _DECODE_DEPTH:
            self._decoded_spans(text, depth, found)
        return found

    def _scan(self, text: str) -> tuple[int, list[tuple[int, int]] | None]:
        """The rules the text's words let run (a bit mask), and each word's end and index in
        the text (None when lower-casing moved the text's characters)."""
        lowered = text.lower()
        hits = list(self._automaton.search.iter(lowered))
        if not hits:
            return 0, None
        rules_of = self._automaton.rules_of
        mask = 0
        for word in {word for _, word in hits}:
            mask |= rules_of[word]
        # Lower-casing may lengthen a text (`İ`); at the same length the places are the text's.
        return mask, hits if len(lowered) == len(text) else None

    def _run(
        self,
        text: str,
        mask: int,
        hits: list[tuple[int, int]] | None,
        found: list[tuple[int, int, int, str]],
    ) -> None:
        """The findings of the rules in `mask` (by index) in the text."""
        anchors = self._automaton.anchors
        lengths = self._lengths
        for index in _bits(mask):
            rule = self.rules[index]
            if rule.also and not any(part in text for part in rule.also):
                continue
            words = anchors[index]
            if words is not None and hits is not None:
                starts = sorted({end - lengths[w] + 1 for end, w in hits if w in words})
                self._anchored_spans(rule, index, text, starts, found)
            else:
                self._rule_spans(rule, index, text, found)

    def key_spans(self, key: str, value: str) -> list[tuple[int, int, int, str]]:
        """Findings in the value that its key tells of: the rules its key's keywords call,
        read on `"key": "value"`, and entropy under a key that says nothing."""
        known = self._keys.get(key)
        if known is None:
            mask, _ = self._scan(key)
            known = (mask & ~self._automaton.decode, key.strip("\"' ").lower() in NEUTRAL_KEYS)
            if len(self._keys) < 10_000:
                self._keys[key] = known
        mask, neutral = known
        found: list[tuple[int, int, int, str]] = []
        if neutral and high_entropy(value):
            found.append((0, len(value), len(self.rules), "high-entropy-value"))
        if not mask or len(value) > KEYED_VALUE_LIMIT:
            return found
        head = f'"{key}": "'
        line = f'{head}{value}"'
        keyed: list[tuple[int, int, int, str]] = []
        self._run(line, mask, self._scan(line)[1], keyed)
        offset = len(head)
        for start, end, order, kind in keyed:
            start, end = max(start - offset, 0), min(end - offset, len(value))
            if end > start:
                found.append((start, end, order, kind))
        return found

    def _decoded_spans(self, text: str, depth: int, found: list[tuple[int, int, int, str]]) -> None:
        for match in _ENCODED.finditer(text):
            raw = _decoded(match.group())
            try:
                decoded = raw.decode("utf-8") if raw is not None else ""
            except UnicodeDecodeError:
                continue
            inner = self.spans(decoded, depth + 1)
            if inner:
                order, kind = min((s[2], s[3]) for s in inner)
                found.append((match.start(), match.end(), order, kind))

    # --- one rule on one text ----------------------------------------------------------------

    def _rule_spans(
        self, rule: Rule, order: int, text: str, found: list[tuple[int, int, int, str]]
    ) -> None:
        pattern = rule.pattern
        position = 0
        while (match := pattern.search(text, position)) is not None:
            span = self._judge(rule, match, text, match.start())
            if span is not None:
                found.append((span[0], span[1], order, rule.kind))
            if rule.style == "gitleaks" or span is not None:
                # gitleaks reads a text's matches one after another, never overlapping
                position = max(match.end(), match.start() + 1)
            else:
                # Not a secret: look again just after where it started, so that a match
                # turned down does not hide one inside it (`Authorization: Authorization: X`).
                position = match.start() + 1

    def _anchored_spans(
        self,
        rule: Rule,
        order: int,
        text: str,
        starts: Iterable[int],
        found: list[tuple[int, int, int, str]],
    ) -> None:
        """A rule tried only where its words start (see `Rule.anchor`): the matches a search
        finds, each starting up to `back` word characters before its word."""
        assert rule.anchor is not None
        back = rule.anchor[0]
        pattern = rule.pattern
        line_bound = rule.kind in _LINE_BOUND
        position = 0
        for keyword_at in starts:
            if keyword_at < position:
                continue
            match = pattern.match(text, keyword_at)
            if match is None:
                if line_bound:  # no later try on this line can match either
                    line_end = text.find("\n", keyword_at)
                    position = len(text) if line_end == -1 else line_end
                continue
            start = keyword_at
            while start > max(position, keyword_at - back) and _word_char(text[start - 1]):
                start -= 1
            span = self._judge(rule, match, text, start)
            if span is not None:
                found.append((span[0], span[1], order, rule.kind))
            if rule.style == "gitleaks" or span is not None:
                position = max(match.end(), keyword_at + 1)

    def _judge(
        self, rule: Rule, match: re.Match[str], text: str, match_start: int
    ) -> tuple[int, int] | None:
        """Where the secret of this match is, or None when it is none."""
        style = rule.style
        if style == "gitleaks":
            assert rule.origin is not None
            whole = text[match_start : match.end()].strip("\n")
            start, end = gitleaks.secret_span(rule.origin, match)
            secret = text[start:end]
            if rule.origin.entropy and gitleaks.shannon_entropy(secret) <= rule.origin.entropy:
                return None
            span = (match_start, match.end())
            if gitleaks.allowed(gitleaks_allowlists(), secret, whole, text, span):
                return None
            if gitleaks.allowed(rule.origin.allowlists, secret, whole, text, span):
                return None
        elif style == "detect-secrets":
            start, end = match.span()
            for group in range(1, (match.re.groups or 0) + 1):
                group_start, group_end = match.span(group)
                # A group at the very start is only the token's prefix (`(ghp|gho)_...`).
                if group_start > match.start() and group_end > group_start:
                    start, end = group_start, group_end
                    break
        else:
            if "secret" in match.re.groupindex and match.group("secret"):
                start, end = match.span("secret")
            else:
                start, end = match.span()
        if end <= start:
            return None
        secret = text[start:end]
        if secret[0] == "{" and secret[-1] == "}" and rule.kind == "connection-string-password":
            secret = secret[1:-1]  # ODBC's braces around a value (`PWD={a;b}`), not a template
        if "[REDACTED" in secret or is_placeholder(secret) or _jwt_header_only(secret):
            return None
        if style == "checked" and not _plausible(secret, text, match, end):
            return None
        if style == "entropy" and not high_entropy(secret):
            return None
        return start, end


_LINE_BOUND = frozenset({"curl-auth-header", "curl-auth-user"})
"""gitleaks rules that start `\\bcurl\\b(?:.*|...)`: from any later `curl` on the same line
they reach no text that the `.*` of an earlier one did not, so a failed try at one is a failed
try at the rest of its line (Python's backtracking would otherwise read the line once for each
`curl` in it; RE2 reads it once)."""


def _bits(mask: int) -> Iterable[int]:
    """The indexes of the bits set in `mask`, lowest first."""
    while mask:
        lowest = mask & -mask
        yield lowest.bit_length() - 1
        mask ^= lowest


def _word_char(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char in "_.-")
