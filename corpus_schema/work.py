"""The kind of work a coding session did (RunRecord.kind): a small fixed vocabulary, inferred
from the task's words and the files the session changed, one key for every log format and for
what a user types (`prompt --kind`). A task of a project with no runs is shown the same kind
of work's lessons from other projects, and never another domain's (domain_of, below).

How a session's kind is inferred (`infer_kind`), in order:

1. The files it changed (edit, write and patch tool calls; compiler/importers/base.py finds
   them), each classed as docs, tests, build-ci-deps or code (`file_class`): when every file
   changed is of one class other than code, the kind is that class (a session that changed
   only README.md and docs/ did docs work, whatever its task said).
2. Else the request's lead, where it is clear (`_lead`): a task that opens with a verb that
   makes something (add, write, create, update, ...) and whose object names tests, docs or the
   build is that kind ("Write tests for with_span: ... an exception ... marks the span as
   error" is tests, though its later words name fix-bug twice; "Add a README.md to myapp" is
   docs); one that opens with a verb that is a kind's cue of its own (fix, document,
   refactor, explain) is that kind.
3. Else the task's words: each kind has cue words (`CUES`, read in the task's first
   TASK_CHARS characters); the kind with strictly more cues than any other is the kind. A tie
   goes to the kind the task's first word names, when it names one of those tied (a request
   starts with its verb: "Explain how failed payments are retried" is investigate).
4. Else it is unsure, and says why: no cue word, or a tie (the kinds and their counts).

A new task (the first message) has no files yet: its words alone decide, by rules 2 and 3.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

KINDS: dict[str, str] = {
    "fix-bug": "make something that fails work: an error, a crash, a failing test, wrong output",
    "add-feature": "add something new: a function, an option, a command, a page, an endpoint",
    "refactor": "change how code is written, not what it does: rename, move, split, simplify",
    "tests": "write or repair tests",
    "docs": "write documentation: README, docs/, docstrings, comments, changelog",
    "build-ci-deps": "the build, CI, packaging, dependencies, tooling and environment",
    "investigate": "understand, explain or review code without setting out to change it",
}
"""The kinds of work, each with what it covers (`prompt --help` and the docs show them)."""

TASK_CHARS = 600
"""The task's words read for cues: its start says what is asked; a long paste after it
(a traceback, a file) would outvote it."""

_NOT_WORKING = (
    r"(?:does\s*n[o']?t|doesnt|is\s*n[o']?t|isnt|won'?t|can'?t|cannot|not)\s+"
    r"(?:seem\s+to\s+)?(?:work|start|run|load|compile|build|connect|open|render)\w*"
)
CUES: dict[str, re.Pattern[str]] = {
    kind: re.compile(r"\b(?:" + "|".join(words) + r")\b", re.IGNORECASE)
    for kind, words in {
        "fix-bug": [
            r"fix(?:es|ed|ing)?",
            r"bugs?",
            r"broken",
            r"breaks?",
            r"errors?",
            r"exceptions?",
            r"traceback",
            r"crash(?:es|ed|ing)?",
            r"fail(?:s|ed|ing|ure|ures)?",
            r"flaky",
            r"regression",
            r"wrong",
            r"debug",
            r"warn(?:s|ed|ing|ings)?",
            _NOT_WORKING,
        ],
        "add-feature": [
            r"add(?:s|ed|ing)?",
            r"implement(?:s|ed|ing)?",
            r"create(?:s|d)?",
            r"new",
            r"features?",
            r"introduce",
            r"support\s+for",
            r"extend",
            r"enable",
            r"allow",
        ],
        "refactor": [
            r"refactor(?:s|ed|ing)?",
            r"rename",
            r"clean\s*up",
            r"simplify",
            r"restructure",
            r"reorgani[sz]e",
            r"extract",
            r"move",
            r"split",
            r"deduplicate",
            r"dedupe",
            r"tidy",
            r"rewrite",
        ],
        "tests": [
            r"tests?",
            r"unit\s+tests?",
            r"testing",
            r"coverage",
            r"pytest",
            r"specs?",
        ],
        "docs": [
            r"docs?",
            r"documentation",
            r"document",
            r"readme",
            r"docstrings?",
            r"changelog",
            r"tutorial",
            r"typos?",
        ],
        "build-ci-deps": [
            r"ci",
            r"workflows?",
            r"github\s+actions",
            r"dependenc(?:y|ies)",
            r"deps",
            r"upgrade",
            r"bump",
            r"install(?:ation)?",
            r"packag(?:e|es|ing)",
            r"docker(?:file)?",
            r"release",
            r"lint(?:er|ing)?",
            r"pre-commit",
            r"set\s*up",
            r"setup",
            r"configure",
        ],
        "investigate": [
            r"explain",
            r"why",
            r"how\s+(?:does|do|is|are|can|to)",
            r"what\s+(?:is|are|does|do)",
            r"understand",
            r"investigate",
            r"look\s+into",
            r"find\s+out",
            r"review",
            r"tour",
            r"compare",
            r"analy[sz]e",
            r"overview",
            r"inspect",
            r"explore",
            r"list\s+(?:the|all|every)",
        ],
    }.items()
}
"""Words that name each kind of work in a task (case aside, whole words)."""

_BUILD_NAMES = frozenset(
    [
        *("pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "pipfile", "tox.ini"),
        *("package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock"),
        *("uv.lock", "cargo.toml", "cargo.lock", "go.mod", "go.sum", "gemfile", "gemfile.lock"),
        *("mix.exs", "mix.lock", "pom.xml", "build.gradle", "makefile", "dockerfile"),
        *(".gitlab-ci.yml", ".travis.yml", ".pre-commit-config.yaml", "noxfile.py", "justfile"),
        *("docker-compose.yml", "docker-compose.yaml", "compose.yaml", ".dockerignore"),
    ]
)
_DOC_SUFFIXES = frozenset([".md", ".rst", ".adoc", ".mdx"])


def file_class(path: str) -> str:
    """What a changed file is: docs, tests, build-ci-deps or code."""
    parts = PurePosixPath(path.replace("\\", "/").lower()).parts
    name = parts[-1] if parts else ""
    folders = set(parts[:-1])
    if (
        name in _BUILD_NAMES
        or name.startswith(("requirements", "dockerfile"))
        or {".github", ".circleci"} & folders
        or name.endswith((".lock", ".lockb"))
    ):
        return "build-ci-deps"
    if (
        {"test", "tests", "__tests__", "spec", "testing"} & folders
        or name.startswith("test_")
        or re.search(r"(?:_test|\.test|_spec|\.spec)\.\w+$", name)
    ):
        return "tests"
    if PurePosixPath(name).suffix in _DOC_SUFFIXES or {"docs", "doc"} & folders:
        return "docs"
    return "code"


@dataclass(frozen=True)
class KindGuess:
    """What inferring a kind of work found."""

    kind: str | None
    """One of KINDS; None when unsure."""
    basis: str
    """How it was inferred, or why it could not be: what the raw page and the first message
    say."""
    votes: dict[str, int] = field(default_factory=dict)
    """The task's cue words counted by kind, most first (empty when no word is a cue)."""


def task_votes(task: str) -> dict[str, int]:
    """The cue words (CUES) in the start of `task`, counted by kind, most first."""
    start = task[:TASK_CHARS]
    counted = Counter({kind: len(cue.findall(start)) for kind, cue in CUES.items()})
    return {k: n for k, n in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])) if n}


MAKING = frozenset(
    ["add", "write", "create", "implement", "make", "update", "improve", "extend", "expand"]
)
"""Verbs that make or change something of any kind: the object they open says which."""

_LEAD = re.compile(
    r"(?:please\s+|(?:can|could|would)\s+you\s+(?:please\s+)?)?([a-z]+)\b(.*)", re.I | re.S
)
_OBJECT_END = re.compile(
    r"[.,:;!?(\n]|\s(?:to|for|in|into|on|that|which|who|and|so|with|from|of|by|when|where|"
    r"because|using|via)\s",
    re.I,
)
"""Where the object of the leading verb ends: a preposition or a clause after it says where
or what for ("Add a /ping slash command to the Discord bot and a test for it" adds a
command)."""

_OBJECT_KINDS = ("tests", "docs", "build-ci-deps")
"""The kinds a making verb's object may name."""

_PLANNING = re.compile(r"\b(?:beads?|issues?|tickets?|epics?|stories|story|todos?)\b", re.I)
"""A making verb's object that is an item of a tracker ("Create beads for an epic that adds a
commit review page ...", "Add a ticket for the login bug"): planning work, which no kind of
work covers, though the words after it name the kinds the planned work will be."""


def _lead(task: str) -> tuple[str | None, str] | None:
    """The kind the task's lead names, and how: its first word when that is a making verb
    (`MAKING`) and its object names one kind of `_OBJECT_KINDS`, or when that word is the
    cue of one kind other than add-feature (fix, document, refactor, explain); no kind (None)
    when a making verb's object is a tracker's item (`_PLANNING`). None when the lead says
    nothing clear."""
    found = _LEAD.match(task.lstrip(" \t\n/*-#>"))
    if found is None:
        return None
    verb, rest = found.group(1), found.group(2)
    if verb.lower() in MAKING:
        head = _OBJECT_END.split(rest, maxsplit=1)[0]
        if _PLANNING.search(head):
            return None, f"its lead: {verb} {' '.join(head.split())}, planning work no kind covers"
        named = [kind for kind in _OBJECT_KINDS if CUES[kind].search(head)]
        if len(named) == 1:
            return named[0], f"its lead: {verb} {' '.join(head.split())}"
        return None
    named = [kind for kind, cue in CUES.items() if cue.fullmatch(verb)]
    if len(named) == 1 and named[0] != "add-feature":
        return named[0], f"its lead: {verb}"
    return None


def _listed(names: Iterable[str], shown: int = 3) -> str:
    items = list(names)
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def infer_kind(task: str, changed: Iterable[str] = ()) -> KindGuess:
    """The kind of work of a task, or of a session that changed the files `changed` (see the
    module's docstring for the rules)."""
    files = list(dict.fromkeys(changed))
    classes = {file_class(path) for path in files}
    if len(classes) == 1 and "code" not in classes:
        (only,) = classes
        names = _listed(PurePosixPath(p.replace("\\", "/")).name for p in files)
        return KindGuess(only, f"changed only {only} files ({names})")
    votes = task_votes(task)
    counts = sorted(votes.values(), reverse=True)
    said = ", ".join(f"{n} {kind}" for kind, n in votes.items())
    lead = _lead(task[:TASK_CHARS])
    if lead is not None:
        unsure = "unsure: " if lead[0] is None else ""
        return KindGuess(lead[0], f"{unsure}the task's words ({said}), {lead[1]}", votes)
    if counts and (len(counts) == 1 or counts[0] > counts[1]):
        best = next(iter(votes))
        return KindGuess(best, f"the task's words ({said})", votes)
    tied = [kind for kind, n in votes.items() if counts and n == counts[0]]
    first = next((kind for kind in tied if CUES[kind].match(task.lstrip(" \t\n/*-#>"))), None)
    if first is not None:
        return KindGuess(first, f"the task's words ({said}), its first word {first}'s", votes)
    why = f"the task's words are a tie ({said})" if votes else "no word of the task names one"
    if classes == {"code"}:
        why += f"; the files changed are code ({_listed(files)}), which any kind may change"
    elif files:
        why += f"; the files changed are of several kinds ({', '.join(sorted(classes))})"
    return KindGuess(None, f"unsure: {why}", votes)


def kind_named(given: str) -> str:
    """A kind as a user types it (`prompt --kind`): case and spaces aside, `_` for `-`;
    ValueError naming the kinds when it is none of them."""
    name = "-".join(given.strip().lower().replace("_", "-").split())
    if name not in KINDS:
        raise ValueError(f"no kind of work {given!r}; the kinds are: {', '.join(KINDS)}")
    return name


# --- domains ----------------------------------------------------------------------------------

CODING = "coding"
"""The task type of a coding agent's session: another domain's lessons are never listed for
a coding task, nor a coding session's for another domain's task."""

ALFWORLD_TYPES = (
    "pick_and_place",
    "pick_clean_then_place",
    "pick_heat_then_place",
    "pick_cool_then_place",
    "look_at_obj",
    "pick_two_obj",
)
"""ALFWorld's six task types, the prefixes of its game ids: one domain, household tasks."""

_DOMAIN_OF: dict[str, str] = {name: "household" for name in ALFWORLD_TYPES}


def domain_of(task_type: str | None) -> str | None:
    """The domain a task type belongs to, whose lessons a task of another domain is never
    shown: ALFWorld's six types are one (`household`); any other type is its own (`coding`
    for coding sessions, `airline`, `swe-bench`, ...); an untyped run has none."""
    if task_type is None:
        return None
    return _DOMAIN_OF.get(task_type, task_type)
