"""The past runs a first message lists as most like the task: one run per task, the identical
task first, then by how like the task each run's task and what it did are (`most_similar_runs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wikitrace.corpus_schema.catalog import PastRun
from wikitrace.corpus_schema.tasks import TaskKey
from wikitrace.search.score import common_words, covered, scored, words_of

from .task_scope import Scope

if TYPE_CHECKING:
    from .loaded_memory import LoadedMemory as Memory


def most_similar_runs(
    memory: Memory, scope: Scope, run_ok: list[int], similar: int
) -> list[PastRun]:
    """Up to `similar` runs most like the task among those in scope, one per task (three
    attempts of one task say less than three tasks): runs of the identical task first, then
    by the similarity of their tasks and of what they did (`_likeness`), whatever their
    project. A run that shares no word with the task but common ones (search.score's
    `common_words`, numbers too) is not like it: "Write a two-minute toast for my sister's
    wedding" asked in spotter listed three bead sessions. With no task yet (a session just
    started), or none with a word to compare by ("???"), the runs in scope in corpus order."""
    if similar == 0:
        return []  # nor is the runs' ranker loaded (its files mapped: a hook's start-up time)
    similar_runs: list[PastRun] = []
    seen_tasks: set[TaskKey] = set()
    likeness = _likeness(memory, scope.task, run_ok)
    same = memory.identical_runs(scope.task, run_ok)
    place = {i: n for n, i in enumerate(run_ok)}
    nothing = (0.0, 0.0)
    candidates = run_ok
    if scope.task.strip() and words_of(memory.run_ranker, scope.task):
        # Left out before the sort, not after: the same order of fewer runs.
        candidates = [i for i in run_ok if i in same or i in likeness]

    def order(i: int) -> tuple[bool, float, float, int]:
        share, score = likeness.get(i, nothing)
        return (i not in same, -share, -score, place[i])

    ranked_runs = sorted(candidates, key=order)
    for i in ranked_runs:
        if len(similar_runs) == similar:
            break
        if memory.runs[i].task_key not in seen_tasks:
            seen_tasks.add(memory.runs[i].task_key)
            similar_runs.append(memory.runs[i])
    return similar_runs


def _likeness(memory: Memory, task: str, run_ok: list[int]) -> dict[int, tuple[float, float]]:
    """How like the task each run in scope is, to sort by: first the share of the task's
    words (each weighed by how rare it is among the runs in scope: a project's own vocabulary,
    "mix", "start", weighs little there) that its task text or its compilation (its title and
    claims: what the run did, the commands and files its quotes name) holds
    (search.score.covered); then, between runs that hold as much, the BM25 score of each
    (search.score.scored, within the scope). A task text alone says little of a session
    ("Work on bead spotter-4te"); a run that did the task's work holds its subject's words
    in a long compilation, where a short failed run that shares two common words holds
    little, though BM25 (which weighs a word by the text's length) would rank it first.
    The files a run touched count as text it holds (`_touched`). Common words and numbers
    (`common_words`) are left out of the task: they say nothing of its subject. A run that
    shares no other word with the task is not in the result."""
    if not task.strip():
        return {}
    rankers = [memory.run_ranker, memory.compilation_ranker]
    share = covered(
        rankers,
        task,
        run_ok,
        also=_touched(memory, run_ok),
        ignore=common_words(rankers[0], numbers=True),
    )
    score: dict[int, float] = {}
    for ranker in rankers:
        common = common_words(ranker, numbers=True)
        for i, value in scored(ranker, task, run_ok, within=True, ignore=common):
            score[i] = score.get(i, 0.0) + value
    return {i: (share.get(i, 0.0), score.get(i, 0.0)) for i in share.keys() | score.keys()}


def _touched(memory: Memory, run_ok: list[int]) -> dict[int, set[str]]:
    """The words of the paths of the files each run in scope touched (a coding session's
    repository record), as the runs' ranker holds words: what a run did, where its task
    text and compilation do not say it. "Work on bead spotter-a0y", whose compilation
    names lifecycle hooks and a live tail, wrote priv/repo/migrations/... and
    transcript_tail_worker.ex: a task that adds a migration, or fixes the tail worker, is
    like it."""
    touched: dict[int, set[str]] = {}
    for i in run_ok:
        repo = memory.runs[i].repo
        files = repo.get("files") if repo else None
        if files:
            paths = " ".join(path for path in files if isinstance(path, str))
            touched[i] = words_of(memory.run_ranker, paths.replace("/", " "))
    return touched
