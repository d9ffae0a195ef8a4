"""The rules that find secrets (compiler/redact.py): our own expressions, gitleaks' rule set,
detect-secrets' token plugins, the keyword and neutral-key rules, each with the keywords that
let it run and, where every match starts with a few words, its anchor; and the one
Aho-Corasick automaton of all those words."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import gitleaks, redact_table
from .redact_table import Rule

_KEY_BLOCK = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    # Cut off before its END line: the key's own characters (base64, escaped or real line
    # breaks, header lines such as Proc-Type) up to the first other text.
    r"|(?:\\[nr]|[A-Za-z0-9+/=:,\- \t\r\n])*)"
)
_LINE_BREAK = r"(?:\\r|\r)?(?:\\n|\n)"

# A group named `secret` is what goes; the rest of the match is context that stays. Order
# matters: a more specific format comes before a more general one it would also match.
_OWN: Sequence[tuple[str, str, tuple[str, ...], str]] = (
    ("private-key", _KEY_BLOCK, ("private key",), "own"),
    (
        "putty-private-key",
        # The private lines and their MAC (the public lines and the comment are no secret).
        rf"(?P<secret>Private-Lines:[ \t]*\d+(?:{_LINE_BREAK}[A-Za-z0-9+/=]+)+"
        rf"(?:{_LINE_BREAK}Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+)?)",
        ("private-lines",),
        "own",
    ),
    ("anthropic-api-key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",), "own"),
    ("openai-api-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", ("sk-",), "own"),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", ("_live_", "_test_"), "own"),
    ("stripe-webhook-secret", r"\bwhsec_[A-Za-z0-9+/=]{24,}", ("whsec_",), "own"),
    (
        "github-token",
        r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        "own",
    ),
    ("google-api-key", r"\bAIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", ("aiza",), "own"),
    ("slack-token", r"\bx(?:ox[abposr]|app)-[A-Za-z0-9\-]{10,}", ("xox", "xapp-"), "own"),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+",
        ("hooks.slack.com",),
        "own",
    ),
    (
        "discord-webhook",
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/\d+/"
        r"(?P<secret>[A-Za-z0-9_\-]{20,})",
        ("discord",),
        "own",
    ),
    ("huggingface-token", r"\bhf_[A-Za-z0-9]{34,}\b", ("hf_",), "own"),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", ("npm_",), "own"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
        ("eyj",),
        "own",
    ),
    (
        "azure-sas-token",
        # A shared access signature (Azure storage, Logic Apps and Teams workflow URLs).
        r"[?&;](?i:sig)=(?P<secret>[A-Za-z0-9%+/=_\-]{16,})",
        ("sig=",),
        "own",
    ),
    (
        "docker-auth",
        # ~/.docker/config.json: base64 of user:password.
        r"[\"']?\bauth[\"']?\s*:\s*[\"'](?P<secret>[A-Za-z0-9+/]{8,}={0,2})[\"']",
        ('auth"', "auth'"),
        "own",
    ),
    (
        "kubeconfig-client-key",
        r"(?i:client-key-data)[\"']?\s*:\s*[\"']?(?P<secret>[A-Za-z0-9+/]{16,}={0,2})",
        ("client-key-data",),
        "own",
    ),
    (
        "connection-string-password",
        # ODBC and ADO.NET (`Pwd={a;b}`, `Password=x;`), JDBC and URL query parameters.
        r"(?:^|(?<=[;?&\s\"']))(?i:pwd|password|passwd)(?P<op>=)"
        r"(?P<secret>\{(?:[^}]|\}\})*\}|[^;&\s\"'\\()]{3,})(?=[;&\s\"'\\]|$)",
        ("pwd", "password", "passwd"),
        "checked",
    ),
    (
        "connection-string-password",
        r"\bjdbc:oracle:[a-z]+:[^/:@\s]+/(?P<secret>[^@\s/]+)@",
        ("jdbc:oracle",),
        "checked",
    ),
    (
        "authorization-header",
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|basic|token|digest)?\s*"
        r"(?P<secret>[A-Za-z0-9_\-.=~+/]{8,})",
        ("authorization",),
        "checked",
    ),
    (
        "bearer-token",
        r"\b(?i:bearer)\s+(?P<secret>[A-Za-z0-9_\-.=~+/]{20,})",
        ("bearer",),
        "checked",
    ),
    (
        "sendgrid-api-key",
        # gitleaks' rule wants a quote, a space or `;` after it: not `,`, `)` or `}`.
        r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])",
        ("sg.",),
        "own",
    ),
    (
        "teams-webhook",
        # Incoming webhooks (webhookb2, and the older outlook.office.com/webhook): the path
        # after the host is the credential, whatever case its ids are in.
        r"https://[A-Za-z0-9.\-]*(?:webhook\.office\.com|outlook\.office(?:365)?\.com)"
        r"/webhook(?:b2)?/(?P<secret>[^\s\"'<>`]{16,})",
        ("webhook.office.com", "outlook.office"),
        "own",
    ),
    (
        "signed-url-signature",
        # Pre-signed URLs: AWS SigV4 (X-Amz-Signature, and its session token), GCS V4 and
        # V2 (X-Goog-Signature, Signature with GoogleAccessId), CloudFront (Signature).
        r"[?&;](?i:x-amz-signature|x-amz-security-token|x-goog-signature|signature)="
        r"(?P<secret>[A-Za-z0-9%+/=_\-~.]{16,})",
        ("signature=", "security-token="),
        "own",
    ),
    (
        "cookie-header",
        # Cookie: a=b; c=d and Set-Cookie: a=b; Path=/ (as a header line, a JSON or a curl
        # header): the name=value pairs go.
        r"(?i:\b(?:set-)?cookie)[\"']?\s*:\s*[\"']?"
        r"(?P<secret>[^\s\"';,=]+=[^\s\"';,]{6,}(?:;\s*[^\s\"';,=]+=[^\s\"';,]*)*)",
        ("cookie",),
        "own",
    ),
    (
        "cookie-header",
        # A HAR file's header: {"name": "Cookie", "value": "a=b; c=d"}.
        r"[\"']name[\"']\s*:\s*[\"'](?i:set-)?(?i:cookie)[\"']\s*,\s*[\"']value[\"']\s*:\s*"
        r"[\"'](?P<secret>[^\"']{6,})",
        ("cookie",),
        "own",
    ),
    (
        "cookie-header",
        # curl -b / --cookie 'a=b; c=d' (a name=value pair after -b: not `git checkout -b x`)
        r"(?<![\w\-])(?:-b|--cookie)[ =](?P<quote>[\"'])?"
        r"(?P<secret>[^\s\"';=]+=[^\s\"';]{6,}(?:;\s*[^\s\"';=]+=[^\s\"';]*)*)",
        ("-b", "--cookie"),
        "own",
    ),
    (
        "command-line-password",
        # mysql -pSECRET (no space: with one, the word is the database), mysqldump and the rest.
        r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb(?:-dump|-admin)?)\b"
        r"[^\n|;&]*?\s-p(?P<quote>[\"'])?(?P<secret>[^\s\"']{3,})",
        ("mysql", "mariadb"),
        "checked",
    ),
    (
        "command-line-password",
        # --password VALUE, --passwd=VALUE, --db-password 'VALUE', sshpass -p VALUE.
        r"(?:(?<![\w\-])--(?:[a-z]+-)?pass(?:word|wd)?(?P<op>=|[ \t]+)|\bsshpass\s+-p[ \t]*)"
        r"(?P<quote>[\"'])?(?P<secret>(?(quote)[^\"'\r\n]{3,}|[^\s\"'`;|&]{3,}))",
        ("--", "sshpass"),
        "checked",
    ),
    (
        "netrc-password",
        # ~/.netrc: machine HOST login USER password SECRET (on one line or several).
        r"\b(?:machine\s+\S+|default)\s+login\s+\S+\s+(?:account\s+\S+\s+)?"
        r"password\s+(?P<secret>\S{3,})",
        ("machine", "default"),
        "own",
    ),
    (
        "pgpass-password",
        # ~/.pgpass: hostname:port:database:username:password, one a line.
        r"(?m)^[ \t]*(?:[A-Za-z0-9.\-]+|\*|localhost):(?:\d{1,5}|\*):[^:\s/]+:[^:\s/]+:"
        r"(?P<secret>[^\s:]{3,})[ \t]*$",
        (":5432:", ":*:", "pgpass"),
        "own",
    ),
    (
        "wallet-private-key",
        # A 32-byte hex key beside a word that says it is one (a bare 0x+64 hex is as often a
        # transaction or block hash).
        r"(?i:priv(?:ate)?[_\- ]?key|secret[_\- ]?key|wallet[_\- ]?key|signer[_\- ]?key|"
        r"\bpk\b|--private-key)[\"']?[\s:=,\"'(]{1,6}(?P<secret>(?:0x)?[0-9a-fA-F]{64})"
        r"(?![0-9a-fA-F])",
        ("priv", "secret", "wallet", "signer", "pk"),
        "own",
    ),
    (
        "wallet-seed-phrase",
        # A BIP-39 style mnemonic (12 to 24 lower-case words) under a name that says so.
        r"(?i:mnemonic|seed[_\- ]?phrase|recovery[_\- ]?phrase|seed[_\- ]?words|\bseed)"
        r"[\"']?(?:\s*[:=]\s*|\s+)[\"']?(?P<secret>[a-z]{3,8}(?:[ \t]+[a-z]{3,8}){11,23})\b",
        ("mnemonic", "seed", "phrase"),
        "own",
    ),
    (
        "url-password",
        # Any user (none too: redis://:pw@), a password with `/` or `+`; not a port before a
        # path, and not an already masked `***`.
        # Bounded: a long text of `a://b:c` with no `@` is read in linear time.
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]{0,30}://[^/\s:@]{0,256}:(?!\d*(?:/|$))(?!\*+@)"
        r"(?P<secret>[^\s@]{1,256})(?=@)",
        ("://",),
        "checked",
    ),
)

NEUTRAL_KEYS = (
    "data",
    "value",
    "val",
    "v",
    "payload",
    "blob",
    "body",
    "raw",
    "b64",
    "base64",
    "encoded",
)
"""Keys that say nothing of their value: a random-looking value under one is taken for a secret."""

_NEUTRAL_RULE = (
    r"(?<![\w\-])(?i:" + "|".join(k for k in NEUTRAL_KEYS if len(k) > 1) + r")[\"']?"
    r"[ \t]*[:=][ \t]*[\"']?(?P<secret>[A-Za-z0-9+/_\-]{24,}={0,2})(?![A-Za-z0-9+/_\-=])"
)

_ENCODED_NEEDLES = ("eyj", "ewo", "w3si", "ls0tls1")


@cache
def _keyword_rule() -> str:
    """`NAME=value`, `"name": "value"`, `name: value` where the name holds a secret keyword
    (detect-secrets' list, plus tokens and access keys)."""
    from detect_secrets.plugins.keyword import DENYLIST

    # The match starts at the keyword (the rest of the name before it stays as context), so
    # the scan is linear: a leading [\w.-]* would be tried again at every position.
    words = "|".join([*DENYLIST, "access_?key", "session_?token", "auth_?token", "token"])
    return (
        r"(?i:(?:" + words + r")[\w.\-]*)[\"']?\s*(?P<op>:=|=|:)\s*(?P<quote>[\"'])?"
        r"(?P<secret>(?(quote)[^\"'\r\n]{4,}|[^\s\"'`,;()\[\]{}<>\\]{6,}))"
    )


# detect-secrets' token plugins, with the needles our pre-filter looks for, or the reason
# one is not used. A plugin it adds in a new release fails tests/test_redact.py until it is
# named here.
_PLUGIN_NEEDLES: dict[str, tuple[str, ...]] = {
    "ArtifactoryDetector": ("akc", "ap"),
    "AWSKeyDetector": ("akia", "asia", "abia", "acca", "a3t", "aws"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("://",),
    "CloudantDetector": ("cloudant", "cl_", "cl-", "clou"),
    "DiscordBotTokenDetector": ("discord", "bot "),
    "IbmCloudIamDetector": ("ibm", "iam"),
    "IbmCosHmacDetector": ("cos", "hmac"),
    "MailchimpDetector": ("-us",),
    "NpmDetector": ("_authtoken",),
    "PypiTokenDetector": ("pypi-",),
    "SoftlayerDetector": ("softlayer", "sl_", "sl-"),
    "SquareOAuthDetector": ("sq0csp-",),
    "TelegramBotTokenDetector": (":aa",),
    "TwilioKeyDetector": ("ac", "sk"),
}
_CASED_PLUGINS = frozenset({"ArtifactoryDetector", "TwilioKeyDetector"})
"""Plugins whose needles are upper-case letters in their expressions (`AP`, `SK`), common
in lower case in any text."""
_NOT_USED_PLUGINS = {
    "Base64HighEntropyString": "every hash in a log would go; NEUTRAL_KEYS instead",
    "HexHighEntropyString": "every hash in a log would go; NEUTRAL_KEYS instead",
    "IPPublicDetector": "an address is no secret, and logs are full of them",
    "KeywordDetector": "its keyword list is used by our keyword rule instead",
    "PrivateKeyDetector": "it finds the BEGIN line only; our rule takes the whole block",
    "GitHubTokenDetector": "our github-token rule and gitleaks' github-* rules",
    "GitLabTokenDetector": "gitleaks' gitlab-* rules",
    "JwtTokenDetector": "our jwt rule and gitleaks' jwt rule",
    "OpenAIDetector": "our openai-api-key rule and gitleaks' openai-api-key",
    "SendGridDetector": "gitleaks' sendgrid-api-token",
    "SlackDetector": "our slack rules and gitleaks' slack-* rules",
    "StripeDetector": "our stripe-key rule and gitleaks' stripe-access-token",
}


def _kind(plugin: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(plugin.secret_type).lower()).strip("-")


_GENERIC_PREFIX = "(?i)[\\w.-]{0,50}?"
GENERIC = "generic-api-key"


def _leading_literals(items: Sequence[Any]) -> set[str] | None:
    """Every text a parsed expression's matches can start with (lower-cased, as long as it is
    literal), or None when a match may start with something else."""
    constants: Any = importlib.import_module("re._constants")
    prefixes = {""}
    for op, arg in items:
        if op in (constants.AT, constants.ASSERT, constants.ASSERT_NOT):
            continue  # consumes nothing
        if op is constants.LITERAL:
            prefixes = {p + chr(arg).lower() for p in prefixes}
            continue
        if op is constants.IN:
            letters = {chr(value).lower() for kind, value in arg if kind is constants.LITERAL}
            if len(letters) != 1 or any(kind is not constants.LITERAL for kind, _ in arg):
                return prefixes if all(prefixes) else None
            prefixes = {p + letters.pop() for p in prefixes}
            continue
        if op is constants.BRANCH:
            branches: set[str] = set()
            for branch in arg[1]:
                found = _leading_literals(list(branch))
                if found is None or not all(found):
                    return prefixes if all(prefixes) else None
                branches |= found
            return {p + b for p in prefixes for b in branches}
        if op is constants.SUBPATTERN:
            found = _leading_literals(list(arg[3]))
            if found is None or not all(found):
                return prefixes if all(prefixes) else None
            return {p + f for p in prefixes for f in found}
        break
    return prefixes if all(prefixes) else None


def _anchor(source: str, flags: int = 0) -> tuple[str, tuple[int, tuple[str, ...]] | None]:
    """The expression to try, and where to try it (see `Rule.anchor`), or None to search
    the whole text."""
    back = 0
    if source.startswith(_GENERIC_PREFIX):
        source, back = "(?i)" + source[len(_GENERIC_PREFIX) :], 50
    parser: Any = importlib.import_module("re._parser")
    starts = _leading_literals(list(parser.parse(source, flags).data))
    # Short words would be found everywhere, and anchor nothing.
    if not starts or min(map(len, starts)) < 2 or len(starts) > 64:
        return source if back == 0 else _GENERIC_PREFIX + source[4:], None
    return source, (back, tuple(sorted(starts)))


def _rule(kind: str, source: str, needles: tuple[str, ...], style: str, **more: Any) -> Rule:
    """A rule, anchored where it can be."""
    flags = int(more.pop("flags", 0))
    source, anchor = _anchor(source, flags)
    return Rule(kind, source, needles, style, flags=flags, anchor=anchor, **more)


def _gitleaks_rule(rule: gitleaks.GitleaksRule) -> Rule:
    source = gitleaks.translate(rule.regex)
    return _rule(rule.id, source, rule.keywords, "gitleaks", flags=re.ASCII, origin=rule)


@cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule, in the order that names a secret two of them find: as shipped in
    `secret_rules/rules.json` (redact_table.py), which is `compute_rules()` made at development
    time."""
    return redact_table.shipped_rules()


@cache
def gitleaks_allowlists() -> tuple[gitleaks.Allowlist, ...]:
    """gitleaks' global allowlists, as shipped with the rules."""
    return redact_table.shipped_allowlists()


def compute_rules() -> tuple[Rule, ...]:
    """Every rule made from its source: our expressions, gitleaks' file, detect-secrets'
    plugins (imported here). What `all_rules` ships, made anew."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    rules = [_rule(kind, source, needles, style) for kind, source, needles, style in _OWN]
    config = gitleaks.default_config()
    # gitleaks' generic-api-key after its named formats: a token both find is named by its format.
    rules += [_gitleaks_rule(r) for r in config.rules if not r.path and r.id != GENERIC]
    rules += [_gitleaks_rule(r) for r in config.rules if r.id == GENERIC]
    plugin_class: Any
    for plugin_class in get_mapping_from_secret_type_to_class().values():
        name = plugin_class.__name__
        if name in _NOT_USED_PLUGINS:
            continue
        needles = _PLUGIN_NEEDLES[name]  # KeyError: a new plugin wants its needles
        plugin = plugin_class()
        for pattern in plugin.denylist:
            # Its needles are as case-sensitive as its expression: the cheap test before it.
            cased = tuple(n.upper() for n in needles) if not pattern.flags & re.I else ()
            also = cased if name in _CASED_PLUGINS else ()
            rules.append(
                _rule(
                    _kind(plugin),
                    pattern.pattern,
                    needles,
                    "detect-secrets",
                    flags=pattern.flags,
                    also=also,
                )
            )
    rules.append(
        _rule(
            "secret-assignment",
            _keyword_rule(),
            ("pass", "pwd", "secret", "key", "token", "contrase"),
            "checked",
            also=("=", ":"),
        )
    )
    rules.append(
        _rule(
            "high-entropy-value",
            _NEUTRAL_RULE,
            tuple(k for k in NEUTRAL_KEYS if len(k) > 1),
            "entropy",
            also=("=", ":"),
        )
    )
    # A rule gitleaks applies to some files only (`*.tf`, `*.yaml`) reads every text here (a
    # log names no file), last: it names only what no other rule found.
    rules += [_gitleaks_rule(rule) for rule in config.rules if rule.path]
    return tuple(rules)


@dataclass(frozen=True)
class _Automaton:
    """All the rules' needles, and the words anchored rules start with, in one Aho-Corasick
    automaton: every occurrence of each, in one scan of the text."""

    search: Any
    """pyahocorasick's Automaton: word -> its index."""
    words: tuple[str, ...]
    rules_of: tuple[int, ...]
    """Per word, a bit mask of the rules (by index) it lets run (0 for an anchor only)."""
    anchors: tuple[frozenset[int] | None, ...]
    """Per rule, the indexes of the words it is tried at (None: it reads the whole text)."""
    decode: int
    """The bit of the base64 decoding pass (past the rules' bits)."""


@cache
def rule_automaton() -> _Automaton:
    import ahocorasick

    rules = all_rules()
    masks: dict[str, int] = {}
    for index, rule in enumerate(rules):
        for needle in rule.needles:
            masks[needle] = masks.get(needle, 0) | (1 << index)
    decode = 1 << len(rules)
    for needle in _ENCODED_NEEDLES:
        masks[needle] = masks.get(needle, 0) | decode
    for rule in rules:
        for word in rule.anchor[1] if rule.anchor else ():
            masks.setdefault(word, 0)
    words = tuple(masks)
    position = {word: index for index, word in enumerate(words)}
    search = ahocorasick.Automaton()
    for index, word in enumerate(words):
        search.add_word(word, index)
    search.make_automaton()
    return _Automaton(
        search,
        words,
        tuple(masks[w] for w in words),
        tuple(
            frozenset(position[w] for w in rule.anchor[1]) if rule.anchor else None
            for rule in rules
        ),
        decode,
    )


def made_table() -> str:
    """The text of `secret_rules/rules.json`, made from the rules' sources."""
    from importlib.metadata import version

    return redact_table.dumps(
        compute_rules(),
        gitleaks.default_config().allowlists,
        detect_secrets_version=version("detect-secrets"),
    )


def main() -> None:
    """Write `secret_rules/rules.json` into the package (a development step)."""
    target = redact_table.table_path()
    temporary = target.with_suffix(".json.tmp")
    temporary.write_text(made_table())
    temporary.replace(target)
    print(f"wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
