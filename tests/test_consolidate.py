"""Grouping near-duplicate lessons: deterministic, and only what says the same thing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wikitrace.search import consolidate
from wikitrace.search.consolidate import group

REFUND = [
    (
        "Confirm the refund route before cancelling",
        "Before cancelling a reservation, confirm with the user whether the refund goes to the "
        "original payment method or a gift card.",
    ),
    (
        "Confirm the refund route before cancelling a booking",
        "Ask the user which payment method should receive the refund before you cancel.",
    ),
    (
        "Confirm refund route before cancellation",
        "Before cancelling, confirm with the user that the refund goes back to the original "
        "payment method.",
    ),
]
OTHER = [
    (
        "Check the baggage allowance by membership tier",
        "Gold members get three free checked bags; look up the tier before quoting a fee.",
    ),
    (
        "Run the failing test before editing code",
        "Reproduce the failure with the exact test command first, then change the code.",
    ),
    (
        "Confirm the seat map before booking",  # shares words, says something else
        "Look at the seat map before you book so the user gets the seat they asked for.",
    ),
]


def test_near_duplicates_share_a_group_and_others_stay_apart() -> None:
    lessons = [REFUND[0], OTHER[0], REFUND[1], OTHER[1], REFUND[2], OTHER[2]]
    assert group(lessons) == [0, 1, 0, 3, 0, 5]


def test_grouping_is_deterministic_and_in_corpus_order() -> None:
    lessons = [OTHER[1], REFUND[2], REFUND[0]]
    assert group(lessons) == group(list(lessons)) == [0, 1, 1]
    assert group([]) == [] and group([("", ""), ("", "")]) == [0, 1]


def _every_leader(lessons: list[tuple[str, str]], threshold: float) -> list[int]:
    """The grouping rule read plainly: compare each lesson with every group leader."""
    leaders: list[tuple[int, frozenset[str], frozenset[str]]] = []
    found = []
    for index, (title, guideline) in enumerate(lessons):
        head, whole = consolidate.words(title), consolidate.words(f"{title} {guideline}")
        leader = next(
            (
                i
                for i, their_head, their_whole in leaders
                if (
                    consolidate._jaccard(head, their_head) >= threshold
                    and consolidate._jaccard(whole, their_whole) >= threshold / 2
                )
                or consolidate._jaccard(whole, their_whole) >= threshold
            ),
            None,
        )
        if leader is None:
            leaders.append((index, head, whole))
            leader = index
        found.append(leader)
    return found


VOCABULARY = [
    "drawer",
    "cabinet",
    "refund",
    "route",
    "user",
    "reservation",
    "flight",
    "cancel",
    "baggage",
    "payment",
    "key",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(VOCABULARY), max_size=5).map(" ".join),
            st.lists(st.sampled_from(VOCABULARY), max_size=12).map(" ".join),
        ),
        max_size=40,
    ),
    st.sampled_from([0.6, 0.3, 0.9, 1.0, 0.05]),
)
def test_prefix_filtering_groups_as_comparing_with_every_leader(
    lessons: list[tuple[str, str]], threshold: float
) -> None:
    assert consolidate.group(lessons, threshold) == _every_leader(lessons, threshold)


@pytest.mark.parametrize("seed", [1, 2])
def test_counting_shared_prefix_words_groups_as_comparing_with_every_leader(seed: int) -> None:
    """Lessons of up to 40 words from 300, each a few words away from one of 40 others: a
    leader is compared only when it shares two words of a lesson's prefix (one for small
    sets), and the groups are still those of comparing with every leader, at thresholds where
    near-duplicates are many and where they are few."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(300)]

    def some(low: int, high: int) -> list[str]:
        return [rng.choice(vocabulary) for _ in range(rng.randint(low, high))]

    bases = [(some(1, 9), some(0, 30)) for _ in range(40)]
    lessons = []
    for _ in range(400):
        title, guideline = (list(part) for part in rng.choice(bases))
        for _ in range(rng.randint(0, 6)):
            part = title if title and rng.random() < 0.5 else guideline
            if part:
                part[rng.randrange(len(part))] = rng.choice(vocabulary)
        lessons.append((" ".join(title), " ".join(guideline)))
    for threshold in (0.6, 0.3, 0.8):
        assert consolidate.group(lessons, threshold) == _every_leader(lessons, threshold)


# Two runs of one project (real sessions of marot/spotter: `mix phx.server doesnt seem to
# start` and `start phoenix in background`) drew the same lesson, each naming its own commands.
PHOENIX = "Start the Phoenix server in the background with its log redirected"
SAME_PROJECT = [
    (
        PHOENIX,
        "Run `mix phx.server > /tmp/phx.log 2>&1 &` and read /tmp/phx.log before assuming it "
        "failed; port 4000 may already be taken by a stale beam process.",
    ),
    (
        PHOENIX,
        "Background it with `nohup iex -S mix phx.server &> log/dev.log &`, then poll "
        "http://localhost:4000 until it answers instead of sleeping a fixed time.",
    ),
]


def test_one_project_s_runs_drawing_the_same_titled_lesson_are_grouped() -> None:
    lessons = [*SAME_PROJECT, OTHER[1]]
    titles = [title for title, _ in lessons]
    leaders = group(lessons)
    assert leaders == [0, 1, 2]  # their whole texts overlap too little for the lexical rule
    projects = {"step-0010": "spotter", "step-0012": "spotter", "step-0013": "spotter"}
    steps = ["step-0010", "step-0012", "step-0013"]
    assert consolidate.within_projects(leaders, titles, steps, projects.get) == [0, 0, 2]
    # Other projects, no project, or one run's two lessons: left apart.
    elsewhere = {"step-0010": "spotter", "step-0012": "shop"}
    assert consolidate.within_projects(leaders, titles, steps, elsewhere.get) == [0, 1, 2]
    assert consolidate.within_projects(leaders, titles, steps, {}.get) == [0, 1, 2]
    one_run = ["step-0010", "step-0010", "step-0013"]
    assert consolidate.within_projects(leaders, titles, one_run, projects.get) == [0, 1, 2]
    # A group already holding a lesson keeps it when its first joins another group.
    with_copy = [*SAME_PROJECT, SAME_PROJECT[1]]
    assert consolidate.within_projects(
        [0, 1, 1], [PHOENIX] * 3, ["a", "b", "c"], lambda step: "spotter"
    ) == [0, 0, 0] and group(with_copy) == [0, 1, 1]


def test_project_groups_join_one_project_when_asked_and_walk_no_common_word() -> None:
    """`ProjectGroups` gives `within_projects`'s groups, each project's joined when first
    asked for; a word every title has ("check") counts as one shared word, never as two."""
    titles = [
        "Check the parser cache before a rebuild",
        "Check the parser cache before rebuilding",
        "Check the lock file",
        "Check the config path",
        "Check the parser cache before a rebuild",
    ]
    steps = ["s1", "s2", "s3", "s4", "s5"]
    projects = {"s1": "app", "s2": "app", "s3": "app", "s4": "app", "s5": "shop"}
    leaders = list(range(5))
    expected = [0, 0, 2, 3, 4]
    assert consolidate.within_projects(leaders, titles, steps, projects.get) == expected
    lazy = consolidate.ProjectGroups(leaders, titles, steps, projects.get)
    assert lazy[4] == 4 and set(lazy._joined) == {"shop"}  # the app's titles not compared yet
    assert list(lazy) == expected and lazy[1:3] == [0, 2]


def test_a_lesson_and_its_opposite_are_never_near_duplicates() -> None:
    """ "Do not X" shares every word of "X" but says the opposite: grouped, the first message
    would show the one and count the other as its support."""
    lessons = [
        ("Pass --strict to the parser", "Always give the parser its --strict flag."),
        ("Do not pass --strict to the parser", "Do not give the parser its --strict flag."),
        ("Never pass --strict to the parser", "Never give the parser its --strict flag."),
    ]
    assert consolidate.group(lessons) == [0, 1, 1]


class _MinedOnly:
    """A mined lesson as grouping reads it, whose texts may not be read."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.task_type = "shop"
        self.source_outcome = "failure"
        self.goes_with = "failure"

    @property
    def title(self) -> str:
        raise AssertionError("a mined lesson's texts read")

    guideline = title


def test_mined_lessons_alone_are_grouped_without_reading_a_text() -> None:
    # A catalog of divergences and contrasts (mined: never grouped with each other, and no
    # model lesson to join): neither the grouping nor a text is called for.
    def grouping(texts: object) -> list[int]:
        raise AssertionError("grouped")

    lessons = [_MinedOnly("diverge"), _MinedOnly("uses:issue_refund"), _MinedOnly("diverge")]
    assert consolidate.of_lessons(lessons, grouping) == [0, 1, 2]
