"""Which of a first message's lessons bear on the task: those listed by project are scored
against the task's words within the project's lessons, and those that bear less than the one
that bears most are counted, not listed (tools/first_message.py shows the rest whole)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from wikitrace.corpus_schema.catalog import InsightEntry
from wikitrace.search.score import common_words, scored

from .similar_runs import most_similar_runs
from .task_scope import Scope

if TYPE_CHECKING:
    from .loaded_memory import LoadedMemory as Memory

BEARING = 0.5
"""A project's lesson bears on the task when its score (search.score.scored within the
project's lessons, over its title, guideline and applicability) is at least this share of the
best lesson's: a lesson that meets the task only in a word most of the project's lessons hold
("mix", "run") scores a fraction of one that holds the task's own subject ("Dialyzer")."""

BEARING_FLOOR = 0.05
"""The best lesson's least score (its words weighed over the whole memory) for any lesson to
bear on the task: under it no lesson shares more than a stray word with the task, and none is
listed (the message says so)."""


APART = 4
"""How many lessons may reach `BEARING` and still stand apart from the rest: when more do,
the scores are close together, and each must also reach `WHOLE_FLOOR` to be shown whole.
Five or more unrelated lessons shown whole are what the realistic benchmark's judges count as
padding; from three on (APART 2), three of its tasks lost a lesson that bore on the task by
its content, not its words (a lesson about spotter.css for a status badge; mix format before
commit for a Dialyzer CI workflow), and eight messages fell below 8 of 10."""

WHOLE_FLOOR = 0.05
"""The least score (weighed within the project's lessons, as `BEARING` compares them) each of
more than `APART` lessons that reach half the best needs to be shown whole. When every lesson
meets the task only in words many of them hold, the scores are low and close, and half the
best let five unrelated lessons through whole ("Add an ended_at attribute to the Session Ash
resource ...": the best 0.031; "The TranscriptTailWorker stops ingesting ...": 0.041): now
none is listed, and the message says no lesson bears. Chosen on benchmarks/realistic_bench.py's
three lists of held-out tasks (docs/measuring.md): in the 14 messages whose best lesson bears
on the task by its title, it scores 0.068 or more, but in one long task text, where two
lessons reach half the best (0.031 and 0.020, both bearing) and so stand apart; the messages
judged to show no bearing lesson whole score 0.031 to 0.041 at best (0.067 in one)."""


_ANY_CHANGE = re.compile(r"\s*(any|every|all|always)\b", re.I)
"""How an applicability that covers every change opens ("Any commit in the spotter
repository (Elixir); ...")."""


def applies_to_any_change(item: InsightEntry) -> bool:
    """Whether a lesson says it applies to any change, commit or task of its kind: its
    applicability's first clause (up to a semicolon, where a model's lesson says where else it
    applies or when it does not) opens with "any", "every", "all" or "always". Such a lesson
    ("Run mix format before git commit in spotter": any commit in the repository) bears on
    every task of its project, whatever the task's words: a task that names neither
    formatting nor commits ("Mouse-wheel scrollback in the xterm.js terminal ...; fix it")
    still commits its fix. A narrow subject after "any" ("Any Phoenix start-up problem")
    passes too: the rule reads how the lesson states its reach, not what it is about."""
    return bool(_ANY_CHANGE.match(item.applicability.split(";", 1)[0]))


def brief(memory: Memory, scope: Scope, listed: list[int]) -> tuple[frozenset[int], bool]:
    """The lessons listed by project that bear less on the task than the one that bears most
    (`BEARING`), and whether none bears at all (`BEARING_FLOOR`): the message counts them, with
    how to list them, rather than listing titles an agent must skip. They are the project's
    own when it has runs; else those of other projects (a project with no runs here, or none
    named, gets other coding projects' lessons of its kind: "Fix the flaky test" asked in a
    new folder listed all twelve of this corpus's whole). Which bear most is told by the
    words' weight among those lessons (`within`), so a project's vocabulary ("mix",
    "phoenix", "bead") tells no lesson apart; the task's words that name the project
    ("spotter"), the common English words and numbers (search.score.common_words: "which",
    "after", "when" let a lesson about creating beads into a task about a status badge) are
    left out too. Nothing when the task has no other words, or the project with runs has
    fewer than two lessons. When more than `APART` reach half the best, each must also score
    `WHOLE_FLOOR`. A project's lesson that applies to any change in it
    (`applies_to_any_change`) is listed whatever its score, and does not count as bearing by
    the task's words (`none_bear` may be true beside it), when the task is of the project
    at all (`_of_project`); another project's is not: its change is not this task's."""
    if scope.project_has_runs:
        own = [i for i in listed if scope.tier(memory.run_of(i)) == 0]
        if len(own) < 2:
            return frozenset(), False
    else:
        own = [i for i in listed if (run := memory.run_of(i)) is not None and run.project]
    names = {word for key in scope.projects for word in re.split(r"[^a-z0-9]+", key.lower())}
    words = [w for w in re.split(r"(\W+)", scope.task) if w.lower() not in names]
    query = "".join(words)
    if not own or not query.strip():
        return frozenset(), False
    common = common_words(memory.insight_ranker, numbers=True)
    # Whether any bears, by the words' weight in the whole memory: lessons that all share
    # the task's subject ("phoenix") all bear on it, though the word tells none apart.
    overall = max(
        (score for _, score in scored(memory.insight_ranker, query, own, ignore=common)),
        default=0.0,
    )
    always = frozenset(
        i for i in own if scope.project_has_runs and applies_to_any_change(memory.insights[i])
    )
    if overall < BEARING_FLOOR:
        if always and overall == 0 and not _of_project(memory, scope):
            always = frozenset()
        return frozenset(own) - always, True
    found = dict(scored(memory.insight_ranker, query, own, within=True, ignore=common))
    best = max(found.values(), default=0.0)
    bearing = [i for i in own if found.get(i, 0.0) >= BEARING * best]
    if len(bearing) > APART:  # close together: each must also score the floor
        bearing = [i for i in bearing if found[i] >= WHOLE_FLOOR]
    unlisted = frozenset(own) - frozenset(bearing) - always
    return unlisted, not bearing


def _of_project(memory: Memory, scope: Scope) -> bool:
    """Whether the task shares a word with its project's runs (their task texts,
    compilations and the files they touched), common words and numbers aside, when it shares
    none with the project's lessons: the
    evidence that a task none of the project's lessons bears on is still work in the project
    ("xterm: copy selection to clipboard on mouse-up" meets the session that scrolled
    xterm.js), so that the lessons for any change in it bear on it. A task that shares none
    ("Write a two-minute toast for my sister's wedding" asked in spotter) shows nothing of the
    project: its words are no evidence of the project's work, and a lesson for any commit
    there says nothing of a toast. (The task's domain told over the whole memory, as
    `task_scope` tells it with no project, would not do: a terse coding task's words, "xterm",
    are in no past task text, and abstain as a toast's do.) The same test as for similar runs
    (tools/similar_runs.py)."""
    return bool(most_similar_runs(memory, scope, scope.runs, 1))
