"""Recall on real corpora: does the first message show the right lessons and runs for the task
at hand, and does search find what the corpus holds (issue 51)?

Converts every log family under DATA (default ../shared/data: trajectories and sessions) with
`wikitrace convert`, labels the sessions (they carry no outcome; see `label_session`), tags
each run with the truth this script knows from where the log lies (its family, domain and
repository: metadata `recall_bench`, never read by wikitrace), and builds one corpus with an
instant, deterministic stand-in for a model (`TaskWordsModel`: one claim quoting a line of
a turn and one lesson in the task's own words a run; mining on). Then, through the public
entry points only (`wikitrace convert` and `prompt`, `Memory.load`, `first_message`, `search`,
the catalog and the pages):

(a) items (lessons and similar runs) from another domain, or another project, in the first
    message for each run's task, asked with its task left out (`exclude_tasks`, the
    leave-one-task-out view `wikitrace view` writes): with the run's project given, and
    without it;
(b) for tasks with several runs, leaving one RUN out (the other runs of its task stay): runs
    of the same task (same family and id) among the 3 similar runs, and first, and runs of a
    task of another family that shares the id (a `Memory` of the catalog's runs less that
    one: `wikitrace view` leaves out whole tasks only);
(c) the right kind of work (runs whose kind is known) and the right task type;
(d) search recall@5 for quotes of compilations (the whole quote, and a substring of it), and
    the share of unrelated questions answered with no hit ("no match"), scores when search
    gives them;
(e) `wikitrace prompt` for the sessions of a known repository, the project named six ways
    (folder name, repository name, remote, path, `.` and nothing from inside a clone): its
    own lessons shown, and other domains' items;
(f) for tasks of domains the corpus lacks (`FOREIGN`: travel, cooking, translation, finance,
    law, music, ...), no project given: first messages that show any item rather than
    abstain;
plus the scope each message used, the corpus's tasks and divergences that hold runs of two
families' tasks, the distinct projects per repository, and figures per family. Counts come
with their denominators; `--json` prints them as one object; `--keep DIR` keeps the corpus
built (and reuses it when run again). Asserts nothing (tests/test_recall_bench.py runs a
bounded slice).

    python benchmarks/recall_bench.py [DATA] [--per-family N] [--max-tokens 6000] [--keep DIR]
                                      [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from wikitrace.cli.main import main as wikitrace_main
from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.corpus_schema import read
from wikitrace.corpus_schema.catalog import PastRun
from wikitrace.tools.find import SEARCH_KINDS, SearchKind
from wikitrace.tools.memory import Memory
from wikitrace.transport.llm import LLMReply

TRUTH = "recall_bench"
"""The metadata key of the truth this script adds to each run (family, domain, repository)."""


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def _entry(context: click.Context) -> None:
    wikitrace_main(list(context.args))


def wikitrace(
    args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """`wikitrace ARGS` run in `cwd` as the console script runs it, in this process (a
    process each would cost more than the command): its exit code, stdout and stderr; `env`
    adds variables (a setting with no flag)."""
    before = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        done = CliRunner().invoke(_entry, args, env=env)
    finally:
        os.chdir(before)
    return done.exit_code, done.stdout, done.stderr


# --- the corpora: what each family of logs is -------------------------------------------------


@dataclass(frozen=True)
class Family:
    """One log family: where it lies, and what its runs are about."""

    name: str
    """The source its tasks belong to: two families never share a task."""
    path: str
    """A file or folder, relative to the data folder."""
    domain: str
    """What its tasks are about: runs of two domains never help each other."""
    repo: str | None = None
    """The repository its sessions worked in, when known from where the log came from."""
    session: bool = False
    """Its runs carry no outcome; `label_session` labels them."""


def _sessions(tool: str, origin: str, domain: str = "coding", repo: str | None = None) -> Family:
    return Family(f"{tool}/{origin}", f"sessions/{tool}/{origin}", domain, repo, session=True)


SHARED = [
    Family("tau-bench", "trajectories/tau-bench", "airline customer service"),
    Family("tau2-bench", "trajectories/tau2-bench", "telecom customer service"),
    Family("mini-swe-agent", "trajectories/mini-swe-agent", "coding"),
    Family("atif-harbor", "trajectories/atif-harbor", "coding"),
    Family("alfworld", "trajectories/alfworld-react", "household"),
    Family("hotpotqa", "trajectories/hotpotqa-react", "question answering"),
    Family("inspect-ai", "trajectories/inspect-ai", "question answering"),
    Family("openhands", "trajectories/openhands", "logic puzzles"),
    _sessions("claude-code", "marot-spotter", repo="github.com/marot/spotter"),
    _sessions("claude-code", "daaain-claude-code-log"),
    _sessions("claude-code", "jazzyalex-agent-sessions"),
    _sessions("claude-code", "simonw-claude-code-transcripts"),
    _sessions("codex", "lanegrid-agtrace"),
    _sessions("codex", "jazzyalex-agent-sessions"),
    _sessions("codex", "daaain-claude-code-log"),
    _sessions("gemini-cli", "Mai0313-VibeCodingTracker"),
    _sessions("gemini-cli", "jazzyalex-agent-sessions"),
    _sessions("langfuse", "langfuse-framework-traces", "agent framework demos"),
    _sessions("otel-genai", "mozilla-ai-any-agent", "agent framework demos"),
    _sessions("openai-agents", "openai-agents-python-run_state", "agent framework demos"),
]
"""Every family of ../shared/data (its READMEs say where each came from)."""


def label_session(record: dict[str, Any]) -> bool:
    """A session's outcome, which its log does not give: a success unless one of the tool
    calls of its last 5 turns failed (a result marked as an error), the weak signal a user
    would look at first. Stated, not learned; the figures below do not depend on outcomes
    except through which lessons are mined."""
    for turn in record["turns"][-5:]:
        for call in turn.get("tool_calls") or []:
            meta = call.get("metadata") or {}
            if meta.get("is_error") or meta.get("status") in ("error", "failed", "failure"):
                return False
    return True


def convert(family: Family, data: Path, out: Path) -> int:
    """`wikitrace convert` the family into one native file at `out`, labelled and tagged with
    its truth; the number of runs written (0 when the family is missing or unreadable)."""
    source = data / family.path
    if not source.exists():
        return 0
    _, converted, _ = wikitrace(
        ["-q", "convert", str(source), "--unlabelled", "keep", "--on-error", "skip"]
    )
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        for line in converted.splitlines():
            record = json.loads(line)
            if record.get("success") is None:
                record["success"] = label_session(record) if family.session else False
            truth = {"family": family.name, "domain": family.domain, "repo": family.repo}
            record.setdefault("metadata", {})[TRUTH] = truth
            handle.write(json.dumps(record) + "\n")
            count += 1
    return count


# --- a stand-in for the model ---------------------------------------------------------------

TURN_BLOCK = re.compile(
    r"--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=\n--- WIKITRACE-DATA-\w+ TURN|\nWIKITRACE-DATA-)",
    re.S,
)
TASK_BLOCK = re.compile(r"\nTASK:\n(.*?)\n(?:THE GRADER|--- WIKITRACE-DATA-)", re.S)
WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


class TaskWordsModel:
    """A compile answer at once, made from the run itself: one claim quoting 8 words of a
    line of a turn (its statement does not repeat them), and one lesson in the task's own
    words, as a model's lesson speaks of the task's subject."""

    model = "fake/recall-bench"

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model}

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    async def complete(self, messages: list[dict[str, str]]) -> LLMReply:
        prompt = messages[0]["content"]
        found = TASK_BLOCK.search(prompt)
        words = WORD.findall(found.group(1) if found else "")[:12] or ["the", "task"]
        turn, quote = _quotable(prompt)
        subject = " ".join(words)
        answer = {
            "title": f"Run on: {' '.join(words[:6])}",
            "description": f"The agent worked on {subject}.",
            "claims": [
                {
                    "statement": "The agent's decisive step is quoted.",
                    "evidence": [{"turn": turn, "quote": quote}],
                }
            ],
            "insights": [
                {
                    "title": f"For {' '.join(words[:5])}: check first",
                    "guideline": f"When the task is about {subject}, check the facts first.",
                    "applicability": f"Tasks about {' '.join(words[:8])}.",
                    "supporting_claims": [1],
                }
            ],
        }
        return LLMReply(text=json.dumps(answer), prompt_tokens=100, completion_tokens=50)


def _quotable(prompt: str) -> tuple[int, str]:
    """A turn and 8 words of its longest line (the one a reader would quote); a run whose
    turns hold no such line gets its one word (an answer still of the required shape)."""
    turns = {int(m.group(1)): m.group(2) for m in TURN_BLOCK.finditer(prompt)}
    best = (min(turns, default=1), "")
    for number in sorted(turns):
        for line in turns[number].splitlines():
            if line.startswith("[") or "..." in line:
                continue  # a one-line summary or a cut: not verbatim
            text = line.split(": ", 1)[-1] if line[:12].count(":") else line
            if len(text.split()) > len(best[1].split()):
                best = (number, text)
    return best[0], " ".join(best[1].split()[:8]) or "the"


# --- the measurements -------------------------------------------------------------------------


@dataclass
class Rate:
    """A count of `hits` out of `of`."""

    hits: int = 0
    of: int = 0

    def add(self, hit: bool) -> None:
        self.hits += bool(hit)
        self.of += 1

    def __str__(self) -> str:
        share = f" ({self.hits / self.of:.0%})" if self.of else ""
        return f"{self.hits} of {self.of}{share}"


@dataclass
class Truth:
    """What this script knows of each run, from where its log lies."""

    family: dict[str, str] = field(default_factory=dict)
    domain: dict[str, str] = field(default_factory=dict)
    repo: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, corpus: Path) -> Truth:
        truth = cls()
        for page in read.runs(corpus):
            tag = page.header.metadata.get(TRUTH) or {}
            step = page.header.step
            truth.family[step] = tag.get("family", "?")
            truth.domain[step] = tag.get("domain", "?")
            truth.repo[step] = tag.get("repo")
        return truth

    def task(self, run: PastRun) -> tuple[str, str]:
        """The task's identity as this script knows it: (family, id)."""
        return self.family[run.step], run.task_id

    def project(self, run: PastRun) -> str | None:
        """The repository when known from the log's place, else the project wikitrace gave."""
        return self.repo.get(run.step) or run.project


def sample(runs: list[PastRun], truth: Truth, per_family: int | None, seed: int) -> list[PastRun]:
    """Up to `per_family` runs of each family (all with None), drawn with a fixed seed."""
    by_family: dict[str, list[PastRun]] = defaultdict(list)
    for run in runs:
        by_family[truth.family[run.step]].append(run)
    rng = random.Random(seed)
    chosen: list[PastRun] = []
    for name in sorted(by_family):
        group = by_family[name]
        chosen += (
            group
            if per_family is None or len(group) <= per_family
            else rng.sample(group, per_family)
        )
    return chosen


def scope_of(message: Any) -> str:
    """The scope a first message used, in a few words (its type, project and kind fields;
    a `scope` field too, once the message has one)."""
    if message.type_unsure is not None:
        kept = "type unsure"
    elif message.task_type is None:
        kept = "no type"
    else:
        kept = "type inferred" if message.task_type_inferred else "type given or only one"
    parts = [kept, "project given" if message.project else "no project"]
    if message.kind_unsure is not None:
        parts.append("kind unsure")
    elif message.kind is not None:
        parts.append("kind inferred" if message.kind_inferred else "kind given")
    said = getattr(message, "scope", None)
    if said:
        parts.append(str(said))
    return ", ".join(parts)


@dataclass
class Shown:
    """What the first messages of one variant (project given or not) showed."""

    messages: int = 0
    wrong_domain_lessons: Rate = field(default_factory=Rate)
    wrong_domain_runs: Rate = field(default_factory=Rate)
    other_project_lessons: Rate = field(default_factory=Rate)
    """Lessons of another project, while the task's project has runs in the view."""
    other_project_runs: Rate = field(default_factory=Rate)
    messages_with_wrong_domain: Rate = field(default_factory=Rate)
    scopes: Counter[str] = field(default_factory=Counter)
    wrong_by_family: dict[str, Rate] = field(default_factory=dict)
    """Messages showing another domain's items, per family of the task's run."""

    def count(
        self, memory: Memory, truth: Truth, run: PastRun, message: Any, own_project: bool
    ) -> None:
        """Tally one message for `run`'s task; `own_project`: the project has runs in view."""
        by_step = {r.step: r for r in memory.runs}
        by_id = {item.id: item for item in memory.insights}
        sources = [by_step[by_id[i].source_step] for i in message.insights]
        similar = [by_step[step] for step in message.similar]
        domain, project = truth.domain[run.step], truth.project(run)
        wrong = 0
        for shown, (domain_rate, project_rate) in (
            (sources, (self.wrong_domain_lessons, self.other_project_lessons)),
            (similar, (self.wrong_domain_runs, self.other_project_runs)),
        ):
            for other in shown:
                domain_rate.add(truth.domain[other.step] != domain)
                wrong += truth.domain[other.step] != domain
                if message.project and own_project:
                    project_rate.add(truth.project(other) != project)
        self.messages += 1
        self.messages_with_wrong_domain.add(wrong > 0)
        self.wrong_by_family.setdefault(truth.family[run.step], Rate()).add(wrong > 0)
        self.scopes[scope_of(message)] += 1


@dataclass
class Figures:
    """Everything the script prints."""

    runs: int = 0
    queries: int = 0
    families: dict[str, int] = field(default_factory=dict)
    project_known: Shown = field(default_factory=Shown)
    project_not_given: Shown = field(default_factory=Shown)
    same_task_top3: Rate = field(default_factory=Rate)
    other_source_twin_top3: Rate = field(default_factory=Rate)
    """Messages whose similar runs hold a run of another family's task with the same id."""
    same_task_first: Rate = field(default_factory=Rate)
    """... and first of the similar runs."""
    same_text_top3: Rate = field(default_factory=Rate)
    """Runs whose task text, word for word, other tasks' runs have (another id): one of those
    among the top 3."""
    same_task_by_family: dict[str, Rate] = field(default_factory=dict)
    right_kind: Rate = field(default_factory=Rate)
    right_type: Rate = field(default_factory=Rate)
    right_type_by_family: dict[str, Rate] = field(default_factory=dict)
    quote_recall: Rate = field(default_factory=Rate)
    substring_recall: Rate = field(default_factory=Rate)
    no_match: Rate | None = None
    top_scores_unrelated: list[float] = field(default_factory=list)
    divergences_across_tasks: Rate = field(default_factory=Rate)
    tasks_across_families: Rate = field(default_factory=Rate)
    """The corpus's tasks (its task identity: the id, with the source when runs carry one)
    that hold runs of two families."""
    projects_per_repo: dict[str, list[str]] = field(default_factory=dict)
    named: dict[str, Named] = field(default_factory=dict)
    """(e) Each way of naming the project -> what `wikitrace prompt` showed."""
    foreign_shown: Rate = field(default_factory=Rate)
    """(f) Tasks of a domain the corpus lacks (`FOREIGN`) whose first message, no project
    given, shows any item (a lesson or a past run)."""
    foreign_scoped: dict[str, str] = field(default_factory=dict)
    """... each such task -> the task type its message kept to."""
    notes: list[str] = field(default_factory=list)


def first_messages(
    memory: Memory, truth: Truth, queries: list[PastRun], figures: Figures, max_tokens: int | None
) -> None:
    """(a) and (c): each run's task asked with its task left out, with and without its project."""
    projects = Counter(truth.project(run) for run in memory.runs if run.project)
    tasks_of_type: dict[str | None, set[tuple[str, str]]] = defaultdict(set)
    for run in memory.runs:
        tasks_of_type[run.task_type].add(truth.task(run))
    for run in queries:
        left_out = [run.task_key.name]
        plain = memory.first_message(run.task, exclude_tasks=left_out, max_tokens=max_tokens)
        figures.project_not_given.count(memory, truth, run, plain, own_project=False)
        if run.task_type and tasks_of_type[run.task_type] - {truth.task(run)}:
            # A type no other task has cannot be told from the view without this task.
            figures.right_type.add(plain.task_type == run.task_type)
            family = truth.family[run.step]
            figures.right_type_by_family.setdefault(family, Rate()).add(
                plain.task_type == run.task_type
            )
        message = plain
        if run.project:
            message = memory.first_message(
                run.task, exclude_tasks=left_out, max_tokens=max_tokens, project=run.project
            )
            own = projects[truth.project(run)] > sum(
                truth.task(other) == truth.task(run) for other in memory.runs
            )
            figures.project_known.count(memory, truth, run, message, own_project=own)
        if run.kind:
            figures.right_kind.add(message.kind == run.kind)


def similar_runs(memory: Memory, truth: Truth, queries: list[PastRun], figures: Figures) -> None:
    """(b): for each run of a task with several runs, or whose task text other tasks' runs
    have word for word, that run left out (the others stay)."""
    runs_of = Counter(truth.task(run) for run in memory.runs)
    texts: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for run in memory.runs:
        texts[" ".join(run.task.split())].add(truth.task(run))
    for run in queries:
        twins = texts[" ".join(run.task.split())] - {truth.task(run)}
        if runs_of[truth.task(run)] < 2 and not twins:
            continue
        kept = [other for other in memory.runs if other.step != run.step]
        # The runs alone: which lessons a view without this run holds does not change them.
        view = Memory(memory.root, kept, [], memory.offline)
        message = view.first_message(run.task, project=run.project)
        by_step = {other.step: other for other in kept}
        tasks = [truth.task(by_step[step]) for step in message.similar]
        if twins:
            figures.same_text_top3.add(bool(twins & set(tasks)))
        if runs_of[truth.task(run)] < 2:
            continue
        figures.same_task_top3.add(truth.task(run) in tasks)
        figures.same_task_first.add(tasks[:1] == [truth.task(run)])
        family = figures.same_task_by_family.setdefault(truth.family[run.step], Rate())
        family.add(truth.task(run) in tasks)
        figures.other_source_twin_top3.add(
            any(task[1] == run.task_id and task != truth.task(run) for task in tasks)
        )


UNRELATED = [
    "How long should I boil an egg for a soft yolk?",
    "Which houseplants tolerate low light in a north facing room?",
    "What was the population of Lisbon in 1755?",
    "Recommend a beginner watercolour brush set",
    "How do I tune a ukulele by ear?",
    "What is the offside rule in ice hockey?",
    "Translate good morning into Icelandic",
    "Best time of year to see the northern lights in Finland",
]
"""Questions no log here is about: search should say "no match"."""


FOREIGN = [
    "Translate this paragraph into French",
    "Translate this paragraph into Spanish, keeping the formal tone of the original.",
    "Plan a three day trip to Rome with two museum visits",
    "Book a table for four at an Italian restaurant near the station for Friday at 7 pm.",
    "Find a vegetarian lasagna recipe and scale the ingredients to serve twelve people.",
    "Convert this bread recipe from cups to grams and suggest a substitute for buttermilk.",
    "Suggest a weekly meal plan for a family of four on a budget of 100 euros.",
    "Calculate the monthly repayment on a 30-year mortgage of 400,000 dollars at 6.5% interest.",
    "Rebalance my investment portfolio to 60% stocks and 40% bonds and list the trades needed.",
    "Estimate the income tax a freelance designer in Germany owes on 50,000 euros of profit.",
    "Check this invoice for VAT errors and compute the correct total.",
    "Draft a non-disclosure agreement between a startup and a freelance illustrator.",
    "Review this residential lease and list the clauses that favour the landlord.",
    "Summarise the arguments of the court's ruling on the copyright of wedding photographs.",
    "Transpose this chord progression from C major to E flat major for a singer.",
    "Create a playlist of upbeat swing songs for a dinner party of two hours.",
    "Write the lyrics of a short lullaby about the sea with three verses.",
    "Translate the restaurant menu from German into English and mark the dishes with nuts.",
    "Prepare a twelve week training plan for a first half marathon.",
    "Design a thirty minute home workout for upper body strength without equipment.",
    "Write a cover letter for a junior accountant position at a logistics company.",
    "Compose a haiku about autumn leaves falling on a quiet pond.",
    "Recommend three board games for a family evening with children aged six and nine.",
    "Plan the planting of a small vegetable garden for spring in a rainy climate.",
    "Proofread my wedding speech and make it two minutes shorter.",
    "Find a cheap hotel in Lisbon for three nights near the old town with breakfast included.",
    "Write a product description for a handmade ceramic mug in a friendly tone.",
    "Compare the fees of three savings accounts and recommend the one with the best interest rate.",
    "Arrange this folk song for two guitars and write out the tablature.",
    "Draft a polite email to my landlord asking to repair the heating before winter.",
    "Summarise this week's news about the European Central Bank's interest rate decision.",
    "Write a wedding toast for my sister that mentions her love of hiking.",
    "Plan a four-course dinner menu for eight guests, one of them vegan.",
    "Convert 250 US dollars to euros and Japanese yen at today's rates.",
    "Summarise the key terms of this employment contract, especially the notice period and the"
    " non-compete clause.",
    "Find a hiking route near Innsbruck suitable for a family with a dog.",
    "Translate these product reviews from Italian to English and rate their sentiment.",
    "Write a four-bar melody in D minor and describe its rhythm.",
    "Draft a complaint letter to the city council about noise from a construction site.",
    "Create a budget plan for a family saving for a house deposit over five years.",
    "Suggest wine pairings for a mushroom risotto and a grilled salmon.",
    "Help me prepare for a job interview as a nurse: list likely questions and good answers.",
    "Explain how to file a small claims court case for an unpaid rental deposit.",
    "Write a bedtime story about a dragon who is afraid of the dark.",
    "Organise a weekend itinerary in Kyoto with temples, a tea ceremony and local food.",
    "Calculate the compound interest on 10,000 euros over eight years at 3% a year.",
    "Design a logo concept for a bakery called Golden Crust and describe the colours.",
    "Give me a stretching routine for lower back pain after long days of sitting.",
    "Rewrite this press release in plain language for a general audience.",
    "Choose the best time to sow tomatoes indoors and when to move them outside.",
    "Tune my guitar to drop D and suggest three songs that use that tuning.",
    "Draft the minutes of a neighbourhood association meeting from these notes.",
    "Assess whether this freelance contract's payment terms are fair and suggest changes.",
    "Cancel my gym membership and ask for a refund of this month's fee.",
    "Write a sonnet about a lighthouse keeper.",
    "Find a recipe for gluten-free pancakes that uses oat flour.",
    "Write a thank-you note to my neighbours for looking after our cat.",
    "Plan a road trip along the Norwegian fjords for ten days in July.",
    "Calculate how much I need to save each month to retire at 60 with a pension pot of 500,000.",
    "Explain the difference between a will and a living trust for a couple with two children.",
    "Suggest a chord progression for a melancholic indie ballad.",
    "Translate this legal notice from Portuguese into English.",
    "Write a limerick about a cat who loves cheese.",
    "Create a seating chart for a wedding reception with twelve tables.",
    "Draft a tenancy deposit dispute letter citing the inspection report.",
    "Recommend running shoes for flat feet and a budget of 120 pounds.",
    "Summarise the plot of a novel chapter by chapter for a book club.",
    "Schedule a weekly cleaning rota for four flatmates.",
    "Estimate the calories in a homemade chicken curry with rice.",
    "Prepare talking points for a salary negotiation with my manager.",
    "Outline a beginner's yoga sequence for flexibility in the morning.",
    "Write an itinerary for a day of sightseeing in Barcelona on foot.",
    "Work out the VAT due for the quarter from these sales and purchase totals.",
    "Compose a short birthday poem for my grandmother's ninetieth.",
    "Choose paint colours for a small north-facing living room.",
]
"""Tasks of domains none of ../shared/data's logs is about (travel, cooking, translation,
finance, law, music, sport, writing, gardening), as a user would ask an agent: with no project
given, the first message should abstain (no lesson, no past run) rather than show a domain's
items. The vote's rules (tools/task_scope.py) were chosen on the first 31; the next 24 were
written after that (other rules tried on them were not kept), the last 20 after that again: a
check on tasks the rules were not tuned on (docs/measuring.md gives each part's figures)."""


def foreign_figures(
    memory: Memory, tasks: Sequence[str], figures: Figures, max_tokens: int | None
) -> None:
    """(f): the first message, no project given, for each of `tasks` (of domains the corpus
    lacks): whether it shows any item rather than abstain."""
    for task in tasks:
        message = memory.first_message(task, max_tokens=max_tokens)
        shown = bool(message.insights or message.similar)
        figures.foreign_shown.add(shown)
        if shown:
            figures.foreign_scoped[task] = message.task_type or "several types"


def quotes(corpus: Path, chosen: set[str]) -> Iterator[tuple[str, str]]:
    """(step, quote): the first verified quote of at least 5 words of each chosen compilation."""
    for page in read.compilations(corpus):
        if page.header.step not in chosen:
            continue
        for claim in page.header.claims:
            found = [e.quote for e in claim.evidence if e.verified and len(e.quote.split()) >= 5]
            if found:
                yield page.header.step, found[0]
                break


def _found(hits: Iterable[Any], steps: Collection[str]) -> bool:
    """Whether the hits name a compilation of `steps` (as a compilation, a claim or a quote)."""
    return any(
        hit.kind != "tasks" and (hit.id in steps or any(f"/{s}." in f"/{hit.path}" for s in steps))
        for hit in hits
    )


COMPILATIONS: tuple[SearchKind, ...] = ("compilations",)
"""Quote recall asks the compilations alone: a quote's run is found as its compilation."""


def searched(
    memory: Memory, query: str, kinds: Sequence[SearchKind] = SEARCH_KINDS
) -> tuple[list[Any], bool]:
    """The first 5 hits of `search` (tools/find.py: best first, each at least search's
    MIN_SCORE), and whether it answered "no match"."""
    hits = memory.search(query, kinds, limit=5)
    return hits[:5], not hits


def search_figures(memory: Memory, corpus: Path, queries: list[PastRun], figures: Figures) -> None:
    """(d): recall@5 of compilation quotes, and "no match" for unrelated questions."""
    for step, quote in quotes(corpus, {run.step for run in queries}):
        # A quote several compilations hold (a policy line every τ-bench run's log repeats)
        # is found by finding any of them.
        holders = {step} | {run.step for run in memory.runs if quote in run.explanation}
        figures.quote_recall.add(_found(searched(memory, quote, COMPILATIONS)[0], holders))
        words = quote.split()
        part = " ".join(words[1:-1] if len(words) >= 7 else words[1:])
        figures.substring_recall.add(_found(searched(memory, part, COMPILATIONS)[0], holders))
    no_match = Rate()
    for question in UNRELATED:
        no_match.add(searched(memory, question)[1])
        # The best score under the threshold too: how near "no match" it came.
        best = memory.search(question, limit=1, min_score=0.0)
        figures.top_scores_unrelated.append(round(max((h.score for h in best), default=0.0), 3))
    figures.no_match = no_match


def corpus_task(run: PastRun) -> tuple[str | None, str]:
    """A run's task as the corpus tells tasks apart: its id, with its source once runs carry
    one (issue 51's task identity, (source, id))."""
    return (run.task_key.origin, run.task_key.id)


def identity_figures(memory: Memory, truth: Truth, figures: Figures) -> None:
    """Tasks and divergences across two families' tasks, and projects per repository."""
    families: dict[tuple[str | None, str], set[str]] = defaultdict(set)
    for run in memory.runs:
        families[corpus_task(run)].add(truth.family[run.step])
    for found in families.values():
        figures.tasks_across_families.add(len(found) > 1)
    by_step = {run.step: run for run in memory.runs}
    for item in memory.insights:
        if item.pattern != "diverge":
            continue
        tasks = {truth.task(by_step[s]) for s in item.cited_steps if s in by_step}
        figures.divergences_across_tasks.add(len(tasks) > 1)
    named: dict[str, set[str]] = defaultdict(set)
    for run in memory.runs:
        repo = truth.repo.get(run.step)
        if repo:
            named[repo].add(run.project or "(none)")
    figures.projects_per_repo = {repo: sorted(names) for repo, names in sorted(named.items())}


@dataclass
class Named:
    """What `wikitrace prompt` showed for tasks of a repository with other runs, the
    project named one way."""

    messages: int = 0
    own_lessons: Rate = field(default_factory=Rate)
    """Lessons of the task's own repository, of the lessons shown."""
    with_own: Rate = field(default_factory=Rate)
    """Messages showing at least one of its own repository's lessons."""
    said_none: int = 0
    """Messages showing none of its lessons that say none of them bears on the task and count
    them, its similar runs all of the repository (the project found, with runs)."""
    wrong_domain: Rate = field(default_factory=Rate)
    """Items (lessons and similar runs) from another domain, of the items shown."""


def clone(repo: str, work: Path) -> Path:
    """A git repository whose remote `origin` is `repo` (host/owner/name): where a user who
    cloned it runs `wikitrace prompt`."""
    folder = work / "clones" / repo.rsplit("/", 1)[-1]
    if not folder.is_dir():
        folder.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        url = f"https://{repo}.git"
        subprocess.run(["git", "-C", str(folder), "remote", "add", "origin", url], check=True)
    return folder


def namings(repo: str, run: PastRun, place: Path) -> dict[str, tuple[list[str], Path | None]]:
    """The ways a user names the project of `run`'s task: `--project` arguments, and the
    folder `wikitrace prompt` runs in (None: anywhere outside it)."""
    return {
        "the run's folder name": (["--project", run.project or ""], None),
        "the repository's name": (["--project", repo.rsplit("/", 1)[-1]], None),
        "its remote": (["--project", f"git@{repo.replace('/', ':', 1)}.git"], None),
        "its path": (["--project", str(place)], None),
        "'.' inside it": (["--project", "."], place),
        "nothing, inside it": ([], place),
    }


def naming_figures(
    corpus: Path,
    memory: Memory,
    truth: Truth,
    queries: list[PastRun],
    figures: Figures,
    ways: Collection[str] | None = None,
) -> None:
    """(e): for each run of a known repository that has other runs, `wikitrace prompt` (the
    CLI itself, so that its defaults count) with the run's task left out, the project named
    each way (those in `ways`; None: all): how many of its own repository's lessons it shows."""
    by_step = {run.step: run for run in memory.runs}
    by_id = {item.id: item for item in memory.insights}
    repos = Counter(truth.repo.get(run.step) for run in memory.runs)
    work = corpus.parent
    for run in queries:
        repo = truth.repo.get(run.step)
        if not repo or repos[repo] < 2:
            continue
        task_file = work / "task.txt"
        task_file.write_text(run.task, encoding="utf-8")
        for name, (given, cwd) in namings(repo, run, clone(repo, work)).items():
            if ways is not None and name not in ways:
                continue
            command = ["-q", "prompt", str(corpus.resolve()), "--json"]
            command += ["--task-file", str(task_file), "--exclude-task", run.task_key.name, *given]
            code, printed, error = wikitrace(command, cwd)
            tally = figures.named.setdefault(name, Named())
            if code != 0:
                figures.notes.append(f"prompt, {name}: exit {code}: {error[:200]}")
                continue
            message = json.loads(printed)
            sources = [by_step[by_id[i].source_step] for i in message["insights"]]
            similar = [by_step[step] for step in message["similar"]]
            own = [truth.repo.get(source.step) == repo for source in sources]
            tally.messages += 1
            tally.with_own.add(any(own))
            tally.said_none += (
                not sources
                and message["project_has_runs"]
                and message["none_bear"]
                and message["unlisted"] > 0
                and all(truth.repo.get(other.step) == repo for other in similar)
            )
            for hit in own:
                tally.own_lessons.add(hit)
            for other in sources + similar:
                tally.wrong_domain.add(truth.domain[other.step] != truth.domain[run.step])


# --- the run ---------------------------------------------------------------------------------


def build(families: list[Family], data: Path, work: Path) -> tuple[Path, dict[str, int]]:
    """Convert every family (a native file each, so each keeps its own source) and build one
    corpus from them with the stand-in model; or, when `work` holds both already (`--keep`
    of an earlier run), take them as they are."""
    corpus, counted = work / "corpus", work / "families.json"
    if corpus.exists() and counted.is_file():
        return corpus, dict(json.loads(counted.read_text(encoding="utf-8")))
    inputs, counts = [], {}
    for index, family in enumerate(families):
        out = work / f"runs-{index:02d}.jsonl"
        counts[family.name] = convert(family, data, out)
        if counts[family.name]:
            inputs.append(out)
    llm = TaskWordsModel()
    options = BuildOptions(inputs=inputs, output=corpus, model=llm.model, use_cache=False)
    build_corpus(options, llm=llm)  # type: ignore[arg-type]
    counted.write_text(json.dumps(counts), encoding="utf-8")
    return corpus, counts


def measure(
    families: list[Family],
    data: Path,
    work: Path,
    *,
    per_family: int | None = None,
    max_tokens: int | None = 6000,
    seed: int = 1,
    ways: Collection[str] | None = None,
    foreign: Sequence[str] = tuple(FOREIGN),
) -> Figures:
    """Every figure, for the families under `data`, built in `work`; `ways`: the ways of
    naming a project (e) to ask (None: all, see `namings`); `foreign`: the tasks of domains
    the corpus lacks (f)."""
    corpus, counts = build(families, data, work)
    memory = Memory.load(corpus)
    truth = Truth.of(corpus)
    queries = sample(memory.runs, truth, per_family, seed)
    figures = Figures(runs=len(memory.runs), queries=len(queries), families=counts)
    for name, count in counts.items():
        if not count:
            figures.notes.append(f"{name}: no run read (`wikitrace convert` found none)")
    first_messages(memory, truth, queries, figures, max_tokens)
    similar_runs(memory, truth, queries, figures)
    search_figures(memory, corpus, queries, figures)
    identity_figures(memory, truth, figures)
    naming_figures(corpus, memory, truth, queries, figures, ways)
    foreign_figures(memory, foreign, figures, max_tokens)
    return figures


def as_json(figures: Figures) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, Rate):
            return {"hits": value.hits, "of": value.of}
        if isinstance(value, Shown | Figures | Named):
            return {name: plain(item) for name, item in vars(value).items()}
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return plain(figures)  # type: ignore[no-any-return]


def report(figures: Figures, settings: str) -> Iterator[str]:
    """The figures as lines."""
    yield f"recall_bench ({settings}): {figures.runs} runs in the corpus, {figures.queries} asked"
    yield "  runs per family: " + ", ".join(f"{k} {v}" for k, v in figures.families.items())
    for title, shown in (
        ("(a) project known (--project as the corpus names it)", figures.project_known),
        ("(a) project not given", figures.project_not_given),
    ):
        yield f"{title}: {shown.messages} first messages"
        yield f"  messages showing another domain's items: {shown.messages_with_wrong_domain}"
        yield f"  lessons from another domain: {shown.wrong_domain_lessons} lessons shown"
        yield f"  similar runs from another domain: {shown.wrong_domain_runs} runs shown"
        if shown is figures.project_known:
            yield (
                "  lessons of another project (its project has runs): "
                f"{shown.other_project_lessons}; similar runs: {shown.other_project_runs}"
            )
        for scope, count in shown.scopes.most_common():
            yield f"  scope {count:4d}x  {scope}"
    yield (
        "(b) same-task runs in the top 3 similar runs (one RUN left out, the task's other runs "
        f"in the corpus): {figures.same_task_top3}; a twin of another source (same id): "
        f"{figures.other_source_twin_top3}"
    )
    yield f"    ... the same task's run first: {figures.same_task_first}"
    yield (
        "    the same task text under another id (one run left out) in the top 3: "
        f"{figures.same_text_top3}"
    )
    yield f"(c) right kind of work (runs with a kind): {figures.right_kind}"
    yield (
        "    right task type (no project given; runs whose type other tasks have): "
        f"{figures.right_type}"
    )
    yield f"(d) search recall@5, a compilation's quote by its own words: {figures.quote_recall}"
    yield f"    ... by a substring of it: {figures.substring_recall}"
    yield f"    unrelated questions answered with no hit (no match): {figures.no_match}"
    if figures.top_scores_unrelated:
        yield f"    their best scores: {figures.top_scores_unrelated}"
    yield (
        "tasks of the corpus holding runs of two families' tasks (a shared id): "
        f"{figures.tasks_across_families}"
    )
    yield f"divergences comparing two different tasks: {figures.divergences_across_tasks}"
    for repo, names in figures.projects_per_repo.items():
        yield f"projects for repository {repo}: {len(names)} ({', '.join(names)})"
    yield "per family: (a) messages showing another domain's items, no project | (b) | type"
    for name in figures.families:
        cells = (
            figures.project_not_given.wrong_by_family.get(name),
            figures.same_task_by_family.get(name),
            figures.right_type_by_family.get(name),
        )
        if any(cells):
            yield f"  {name}: " + " | ".join(str(cell) if cell else "-" for cell in cells)
    for name, named in figures.named.items():
        yield (
            f"(e) `prompt` given {name}: {named.messages} messages; showing the repository's "
            f"own lessons: {named.with_own} (and saying none of them bears, counting them: "
            f"{named.said_none}); own lessons {named.own_lessons} lessons shown; "
            f"another domain's items: {named.wrong_domain}"
        )
    yield (
        "(f) tasks of a domain the corpus lacks, no project given: messages showing any item "
        f"(a lesson or a past run): {figures.foreign_shown}"
    )
    for task, task_type in figures.foreign_scoped.items():
        yield f"    scoped to {task_type}: {task}"
    for note in figures.notes:
        yield f"note: {note}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parent.parent
    parser.add_argument("data", nargs="?", type=Path, default=here.parent / "shared/data")
    parser.add_argument("--per-family", type=int, default=None, help="runs asked per family")
    parser.add_argument("--max-tokens", type=int, default=6000, help="0: no budget")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--keep", type=Path, help="build in this folder and keep it; a folder kept before is reused"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        figures = measure(
            SHARED,
            args.data,
            work,
            per_family=args.per_family,
            max_tokens=args.max_tokens or None,
            seed=args.seed,
        )
    if args.json:
        print(json.dumps(as_json(figures), indent=1))
        return
    settings = f"per family {args.per_family or 'all'}, max tokens {args.max_tokens}"
    print("\n".join(report(figures, settings)))


if __name__ == "__main__":
    main()
