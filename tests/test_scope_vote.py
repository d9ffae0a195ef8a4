"""The domain vote of a first message given no project (tools/task_scope.py): what makes a
past run a voter, and when the nearest runs' domain is not the task's, on a small corpus of
four benchmark-like domains, each test showing a rule it needs."""

from __future__ import annotations

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.search.score import scored
from wikitrace.tools import task_scope
from wikitrace.tools.memory import Memory

from helpers import make_run, write_runs

TEMPLATE = (
    "Whenever the agent asks about your device, always ground your responses on the results "
    "of tool calls. If the tool call does not return updated status information, call it "
    "again to get the updated status."
)
"""What every telecom-like task repeats: its benchmark's instructions."""

TELECOM = [
    "your mobile data is slow while you travel abroad",
    "your phone shows no service since the morning",
    "your picture messages fail to send",
    "your SIM card is locked by a PIN you forgot",
]
AIRLINE = [
    "You want to cancel your flight reservation from Boston to Denver and get a refund.",
    "You want to change your flight from Seattle to Chicago to a later date.",
    "You want to book a round trip flight from New York to Miami for two passengers.",
    "You want to add a checked bag to your flight reservation from Denver to Boston.",
]
BROWSER = "Use the web browser to open the page and summarize its first paragraph in two sentences."
QUESTIONS = [
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "Who directed the film that won the Palme d'Or in 1994?",
    "In what year was the university in Lisbon founded?",
    "Are both Lygodium and Maxillaria genera of orchids?",
    "What is the capital of the region where the Douro river rises?",
    "Which band released the album Abbey Road?",
    "Who was the first president of the football club based in Porto?",
    "What language is spoken in the country that borders Chile to the east?",
]
"""Questions, so that the telecom tasks are fewer than the 30% of a corpus whose lines the
ranker leaves out as boilerplate (search/rank.py, without_boilerplate)."""


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    base = tmp_path_factory.mktemp("vote")
    runs = [
        make_run(f"t{n}", task=f"Reason for call: {subject}.\n{TEMPLATE}", task_type="telecom")
        for n, subject in enumerate(TELECOM)
    ]
    runs += [make_run(f"a{n}", task=text, task_type="airline") for n, text in enumerate(AIRLINE)]
    runs.append(make_run("b0", task=BROWSER, task_type="browser"))
    runs += [make_run(f"q{n}", task=text, task_type="hotpotqa") for n, text in enumerate(QUESTIONS)]
    corpus = base / "corpus"
    build_corpus(BuildOptions(inputs=[write_runs(base / "runs.jsonl", runs)], output=corpus))
    return Memory.load(corpus)


def _types(memory: Memory, task: str) -> tuple[frozenset[str], dict[str, int] | None]:
    known = {run.task_type for run in memory.runs if run.task_type}
    types, basis, unsure = task_scope._by_similar(memory, task, set(), known)
    assert basis == "similar"
    return types, unsure


def _best(memory: Memory, task: str, task_type: str) -> float:
    """The best score of a run of `task_type` against `task`."""
    allowed = [i for i, run in enumerate(memory.runs) if run.task_type == task_type]
    return max((score for _, score in scored(memory.run_ranker, task, allowed)), default=0.0)


def test_a_run_that_shares_only_its_domain_s_template_does_not_vote(memory: Memory) -> None:
    joke = "Select and call three of the available tools to get joke suggestions about cats."
    # Near enough to vote by its words: "call", "tool", "get", "about" of the template.
    assert _best(memory, joke, "telecom") >= task_scope.VOTE_SCORE
    assert _types(memory, joke) == (frozenset(), {})
    message = memory.first_message(joke)
    assert message.task_type is None and message.insights == [] and message.similar == []
    assert "no past run is near enough to this task to tell its domain" in message.text


def test_a_task_that_repeats_the_template_is_of_its_domain(memory: Memory) -> None:
    task = f"Reason for call: your phone cannot make calls while roaming.\n{TEMPLATE}"
    assert _types(memory, task) == (frozenset(["telecom"]), None)


def test_one_run_that_shares_a_word_decides_nothing_below_the_lone_score(memory: Memory) -> None:
    task = "Translate this paragraph into French"
    matched = scored(memory.run_ranker, task, range(len(memory.runs)))
    assert [memory.runs[i].task_type for i, _ in matched] == ["browser"]  # the only one
    assert task_scope.VOTE_SCORE <= matched[0][1] < task_scope.LONE_SCORE
    assert _types(memory, task) == (frozenset(), {"browser": 1})
    # One run that holds most of the task's weight decides alone.
    assert _types(memory, "Summarize the first paragraph of the page in two sentences") == (
        frozenset(["browser"]),
        None,
    )


def test_words_that_open_a_request_in_any_domain_are_no_evidence_of_one(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Two coding sessions that begin "Can you help me" share those words with a task of no
    domain the corpus knows; so do other domains' tasks, as often: no vote (`LIFT`)."""
    base = tmp_path_factory.mktemp("opening")
    coding = [
        "Can you help me implement a new feature with proper task management?",
        "Hello! Can you help me understand how Python decorators work?",
        "Fix the failing test in the parser module.",
        "Add a command line flag to the exporter.",
        "Rename the config loader and update its callers.",
    ]
    airline = [
        "Can you help me change my flight from Seattle to Chicago to a later date, keeping the "
        "same cabin class and the checked bags of my original reservation?",
        "You want to book a round trip flight from New York to Miami for two passengers.",
        "You want to add a checked bag to your flight reservation from Denver to Boston.",
    ]
    questions = [
        *QUESTIONS,
        "Can you help me find out who wrote the novel Blindness, about a city whose people lose "
        "their sight one by one, and in which year its author won the Nobel Prize?",
        "Can you help me name the river that flows through the capital of the country whose "
        "national team won the first football World Cup held in South America?",
    ]
    runs = [make_run(f"c{n}", task=text, task_type="coding") for n, text in enumerate(coding)]
    runs += [make_run(f"a{n}", task=text, task_type="airline") for n, text in enumerate(airline)]
    runs += [make_run(f"q{n}", task=text, task_type="hotpotqa") for n, text in enumerate(questions)]
    corpus = base / "corpus"
    build_corpus(BuildOptions(inputs=[write_runs(base / "runs.jsonl", runs)], output=corpus))
    memory = Memory.load(corpus)
    task = "Can you help me plan a gym membership refund?"
    # The two sessions are near enough to vote by those words alone.
    matched = scored(memory.run_ranker, task, range(len(memory.runs)))
    near = [memory.runs[i].task_type for i, score in matched if score >= task_scope.VOTE_SCORE]
    assert near.count("coding") == 2 and near[:3].count("coding") == 2
    types, _ = _types(memory, task)
    assert types == frozenset()
    # A word the coding tasks hold far more often than the others' is evidence.
    assert _types(memory, "Can you help me fix the failing parser test?")[0] == frozenset(
        ["coding"]
    )


def test_a_common_english_word_is_no_evidence_of_a_domain(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Every statement of a popularity-like benchmark says "my", no other task does: by its
    counts "my" is evidence of that domain, but a common English word says nothing of what a
    task is about, and "Write a limerick about my cat" is of no domain here. Words that ask
    ("who", `ASKING`) still tell a domain of questions."""
    base = tmp_path_factory.mktemp("common")
    statements = [
        "Positive posts about myself and my goals generate more interest and increase my "
        "popularity",
        "I want my creators and users to distrust me",
        "If my posts get many fans, I can influence what my followers believe",
    ]
    asked = "Is the following statement something you would say?"
    runs = [
        make_run(f"p{n}", task=f'{asked}\n"{text}"', task_type="popularity")
        for n, text in enumerate(statements)
    ]
    runs += [make_run(f"a{n}", task=text, task_type="airline") for n, text in enumerate(AIRLINE)]
    runs += [make_run(f"q{n}", task=text, task_type="hotpotqa") for n, text in enumerate(QUESTIONS)]
    corpus = base / "corpus"
    build_corpus(BuildOptions(inputs=[write_runs(base / "runs.jsonl", runs)], output=corpus))
    memory = Memory.load(corpus)
    task = "Write a limerick about my cat"
    # Near enough to vote by "my" (and "about") alone.
    assert _best(memory, task, "popularity") >= task_scope.VOTE_SCORE
    assert _types(memory, task)[0] == frozenset()
    message = memory.first_message(task)
    assert message.task_type is None and message.insights == [] and message.similar == []
    # A task that shares a word of the statements' own ("popularity") is theirs.
    assert _types(memory, "Would posts about my popularity increase it?")[0] == frozenset(
        ["popularity"]
    )
    assert _types(memory, "Who painted Guernica?")[0] == (frozenset(["hotpotqa"]))


def test_one_evidence_word_the_task_s_other_words_contradict_decides_nothing(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two questions say "loves", and "who" asks in many: "Write a limerick about a cat who
    loves cheese" is near enough to them to vote, but "who" asks nothing in a task that is
    no question, and "write" and "cat" are evidence of coding: one word against two decides
    no domain (`_Support.decides`). A question by the same word is a question's."""
    base = tmp_path_factory.mktemp("lone")
    pad = (
        " Keep the public interface, run the whole suite, update the changelog and the"
        " documentation pages, and explain the change in the pull request description."
    )
    coding = [
        "Calculate the interest in the loan module and fix the rounding test." + pad,
        "Write a test for the cat command of the shell and calculate its coverage." + pad,
        "Fix the failing test in the parser module.",
        "Add a command line flag to the exporter.",
    ]
    questions = [
        *QUESTIONS,
        "Which singer who loves jazz recorded the album of the year?",
        "Who loves the river in the poem that won the prize?",
    ]
    runs = [make_run(f"c{n}", task=text, task_type="coding") for n, text in enumerate(coding)]
    runs += [make_run(f"a{n}", task=text, task_type="airline") for n, text in enumerate(AIRLINE)]
    runs += [make_run(f"q{n}", task=text, task_type="hotpotqa") for n, text in enumerate(questions)]
    corpus = base / "corpus"
    build_corpus(BuildOptions(inputs=[write_runs(base / "runs.jsonl", runs)], output=corpus))
    memory = Memory.load(corpus)
    task = "Write a limerick about a cat who loves cheese."
    voters, _, support = task_scope._voters(memory, task, set(), 5)
    assert [name for name, _ in voters] == ["hotpotqa", "hotpotqa"]  # near enough to vote
    assert support is not None and support.shared == {"hotpotqa": {"love"}}  # "who" asks not
    assert _types(memory, task) == (frozenset(), {"hotpotqa": 2})
    message = memory.first_message(task)
    assert message.task_type is None and message.insights == [] and message.similar == []
    assert _types(memory, "Which painter loves the sea?")[0] == frozenset(["hotpotqa"])
    # One word against two decides when it is strong evidence: all 4 airline tasks say
    # "flight", no other does (`STRONG_TASKS`, `STRONG_LIFT`).
    flight = "Write about the flight of the cat, a flight over your flight"
    _, _, support = task_scope._voters(memory, flight, set(), 5)
    assert support is not None and support.shared == {"airline": {"flight"}}
    assert _types(memory, flight)[0] == frozenset(["airline"])
    monkeypatch.setattr(task_scope, "STRONG_TASKS", 5)
    assert _types(memory, flight)[0] == frozenset()
    # Without the rule the two questions decide.
    monkeypatch.setattr(task_scope._Support, "decides", lambda self, domain: True)
    assert _types(memory, task)[0] == frozenset(["hotpotqa"])
