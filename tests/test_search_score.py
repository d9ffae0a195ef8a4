"""Search's scores and its "no match" (tools/find.py, search/score.py): what a score
is, an unrelated question answered "no match" on the command line and over MCP, a
compilation found from the words of its quotes, scores in order, corpora made before quotes
and the compilations' ranker were saved, and the site's script answering as the CLI does."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
import search_queries
from mcp import Client

from wikitrace.search import MIN_SCORE
from wikitrace.search.rank import Ranker
from wikitrace.search.score import common_words, covered, scored, words_of
from wikitrace.tools.find import Hit, no_match, search
from wikitrace.tools.mcp_server import Corpus, build_server
from wikitrace.tools.memory import Memory
from wikitrace.tools.site import FILES as SITE_FILES
from wikitrace.tools.site import build_site

from helpers import run

DATA = Path(__file__).parent / "data"
UNRELATED = "help me write a condolence card"
"""An everyday question that shares a word with the corpus (a SIM card), so that a search with
no threshold answers it."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return search_queries.build(tmp_path_factory.mktemp("scores") / "corpus")


def _mcp(corpus: Path, arguments: dict[str, object]) -> str:
    async def main() -> str:
        async with Client(build_server(Corpus(corpus))) as client:
            result = await client.call_tool("search", arguments)
            return "".join(block.text for block in result.content)

    return anyio.run(main)


def test_a_score_is_the_share_of_the_query_weight_a_text_matches() -> None:
    """Two texts of the same length: one holding each word of the query once scores
    1 / (1 + k1) = 0.4; a word no text holds adds its weight (the idf of a word in no text)
    to the query's, and lowers the score by as much."""
    ranker = Ranker.of(["refund the ticket", "cancel the flight"])
    [(index, score)] = scored(ranker, "refund ticket", range(2))
    assert index == 0 and score == pytest.approx(0.4, abs=1e-6)
    held, unknown = math.log(1 + 1.5 / 1.5), math.log(1 + 2.5 / 0.5)  # lucene idf: df 1, 0
    [(index, score)] = scored(ranker, "refunds ticket zebra", range(2))
    assert score == pytest.approx(0.4 * 2 * held / (2 * held + unknown), abs=1e-6)
    assert scored(ranker, "zebra quokka", range(2)) == []
    assert scored(ranker, "refund", [1]) == []  # only the texts allowed


def test_within_a_scope_its_common_words_weigh_little() -> None:
    """Across the six texts "mix" is rare (two hold it); among the scope's two texts, both
    hold it, so a text that matches the query by "mix" alone holds less of its weight there:
    each word weighs its idf counted among the scope's texts."""
    texts = [
        "mix phx.server does not start",
        "ran mix ash.codegen for the session resource",
        "book a flight",
        "cancel a flight",
        "refund a ticket",
        "created the beads",
    ]
    ranker = Ranker.of(texts)

    def idf(held: int, size: int) -> float:  # lucene's, as bm25s counts it
        return math.log(1 + (size - held + 0.5) / (held + 0.5))

    [(_, overall)] = scored(ranker, "mix codegen", [0])
    [(_, within)] = scored(ranker, "mix codegen", [0, 1], within=True)[1:]
    # The same text, the same match: only the words' weights differ.
    assert within / overall == pytest.approx(
        (idf(2, 2) / (idf(2, 2) + idf(1, 2))) / (idf(2, 6) / (idf(2, 6) + idf(1, 6))), rel=1e-5
    )
    assert within < overall * 0.6
    assert [i for i, _ in scored(ranker, "mix codegen", [0, 1], within=True)] == [1, 0]


def test_covered_counts_the_words_held_whatever_the_text_s_length() -> None:
    """A long compilation that holds the task's rare words covers more of the task than a
    short text that holds two of its words that other runs hold too."""
    tasks = Ranker.of(["mix phx.server does not start", "work on bead a0y", "create beads"])
    compilations = Ranker.of(
        [
            "the session ended before the server would start",
            "added the bootstrap sync of a transcript when a session hook arrives, with a test "
            + "and then many more claims about the registry, pubsub, tail workers, badges "
            + "and a migration, each quoting the turns it rests on",
            "",
        ]
    )
    task = "Add a test that a session start hook triggers the bootstrap sync"
    share = covered([tasks, compilations], task, range(3))
    assert max(share, key=lambda i: share[i]) == 1 and set(share) == {0, 1}
    assert 0 < share[0] < share[1] <= 1
    assert covered([tasks, compilations], task, [2]) == {}  # only the items allowed


def test_an_unrelated_question_answers_no_match_on_the_cli_and_over_mcp(corpus: Path) -> None:
    memory = Memory.load(corpus)
    weak = memory.search(UNRELATED, min_score=0.0)
    assert weak and max(hit.score for hit in weak) < MIN_SCORE  # it matches, weakly
    assert memory.search(UNRELATED) == []
    said = no_match(MIN_SCORE)
    assert run(["search", str(corpus), UNRELATED]) == (0, "", said + "\n")
    code, out, err = run(["search", str(corpus), UNRELATED, "--json"])
    assert (code, json.loads(out), err) == (0, [], said + "\n")
    assert _mcp(corpus, {"query": UNRELATED}) == said
    # The threshold is the caller's to lower: then the weak hits come back, on both.
    cli = run(["search", str(corpus), UNRELATED, "--min-score", "0"])[1]
    assert cli.splitlines() == [hit.line() for hit in weak]
    assert _mcp(corpus, {"query": UNRELATED, "min_score": 0}) + "\n" == cli


def test_a_compilation_is_found_from_the_words_of_its_quotes(corpus: Path) -> None:
    """The quote "I really appreciate your help with this" is in no title or claim: only
    the compilations that quote it hold its words."""
    memory = Memory.load(corpus)
    phrase = "really appreciate your help with this"
    quoting = {run.step for run in memory.runs if phrase in run.explanation}
    claimed = [run.explanation.split("\n")[:2] for run in memory.runs]
    assert quoting and not any("appreciate" in " ".join(lines) for lines in claimed)
    hits = memory.search(phrase, ["compilations"], limit=5)
    assert hits and {hit.id for hit in hits[: len(quoting)]} == quoting
    code, out, _ = run(["search", str(corpus), phrase, "--layer", "compilations", "--json"])
    assert code == 0 and json.loads(out)[0]["id"] in quoting


def test_a_corpus_read_from_its_pages_searches_its_quotes_too(corpus: Path, tmp_path: Path) -> None:
    """A corpus with no catalog (made before catalogs) is read from its pages: the quotes
    come from the compilations' headers, and the rankers are built in memory."""
    copy = tmp_path / "copy"
    shutil.copytree(corpus.resolve(), copy)
    copy.chmod(0o755)
    (copy / "catalog.jsonl").unlink()
    pages, catalog = Memory.load(copy), Memory.load(corpus)
    query = "appreciate your help"
    assert pages.search(query) == catalog.search(query) != []


def test_a_version_without_the_compilations_ranker_builds_it(corpus: Path, tmp_path: Path) -> None:
    """A version made before search/compilations/ was saved: the ranker is built from the
    catalog when a search first asks for it, with the same hits."""
    copy = tmp_path / "copy"
    shutil.copytree(corpus.resolve(), copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755)
    shutil.rmtree(copy / "search" / "compilations")
    for query in ["payment amount does not add up", "resetting apn and rebooting"]:
        assert Memory.load(copy).search(query) == Memory.load(corpus).search(query) != []


def test_a_format_1_corpus_searches_with_scores() -> None:
    memory = Memory.load(DATA / "format1-corpus")
    hits = memory.search(memory.runs[0].task[:80])
    assert hits and all(isinstance(hit, Hit) and hit.score >= MIN_SCORE for hit in hits)


def test_scores_are_ordered_best_first_across_kinds(corpus: Path) -> None:
    code, out, _ = run(["search", str(corpus), "data", "--limit", "3", "--min-score", "0.05"])
    assert code == 0
    lines = out.splitlines()
    scores = [float(line.split()[0]) for line in lines]
    kinds = [line.split()[1] for line in lines]
    assert len(set(kinds)) == 3 and all(kinds.count(kind) <= 3 for kind in kinds)
    assert scores == sorted(scores, reverse=True) and min(scores) >= 0.05
    hits = json.loads(run(["search", str(corpus), "refund", "--json"])[1])
    exact = [hit["score"] for hit in hits]
    assert exact == sorted(exact, reverse=True) and all(0 < s < 1 for s in exact)


QUERIES = [
    UNRELATED,
    "really appreciate your help with this",
    "transfer_to_human_agents",
    "payment amount does not add up",
    "granting sms permissions",
    "data",
]


@pytest.mark.skipif(shutil.which("node") is None, reason="the site's script needs node here")
def test_the_site_answers_as_the_cli_and_mcp_do(corpus: Path, tmp_path: Path) -> None:
    """The site's script (search.js over search-index.js, run by node) gives the hits and
    scores, to the last bit, that tools/find.search gives the CLI and MCP."""
    site = tmp_path / "site"
    build_site(corpus, site)
    script = (
        "global.window = {};"
        f"require({json.dumps(str(site / 'search-index.js'))});"
        f"const s = require({json.dumps(str(site / 'search.js'))});"
        "const qs = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify(qs.map(q => s.search(window.WIKITRACE_SEARCH, q))));"
    )
    done = subprocess.run(
        ["node", "-e", script, json.dumps(QUERIES)], capture_output=True, text=True, check=True
    )
    answers = json.loads(done.stdout)
    memory = Memory.load(corpus)
    for query, answer in zip(QUERIES, answers, strict=True):
        hits = search(memory, query)
        assert [(h[0], h[1], h[7]) for h in answer] == [(h.kind, h.id, h.score) for h in hits]
        cli = run(["search", str(corpus), query])[1]
        assert cli.splitlines() == [hit.line() for hit in hits]
        assert _mcp(corpus, {"query": query}) == (
            "\n".join(cli.splitlines()) or no_match(MIN_SCORE)
        )
    assert answers[0] == [] and answers[1] != []


HARD_WORDS = (
    "generously communication universal pasted bpaste biologist international evening inning "
    "proceeding succeeded dying vying skies news hopping hoping adding egging agreed cried ties "
    "kiwis sayings fluently naïve résumés café straße x86_64 getUserDetails"
)


@pytest.mark.skipif(shutil.which("node") is None, reason="the site's script needs node here")
def test_the_site_stems_words_as_search_does(corpus: Path) -> None:
    """The site's stemmer (search.js) against PyStemmer, which search stems with: every word
    of the corpus's texts, and words that take the algorithm's exceptions."""
    import Stemmer

    memory = Memory.load(corpus)
    texts = [run.task + run.explanation for run in memory.runs]
    texts += [f"{i.title} {i.guideline} {i.applicability}" for i in memory.insights]
    words = sorted({w for text in [*texts, HARD_WORDS] for w in re.findall(r"\w\w+", text.lower())})
    assert len(words) > 500
    script = (
        f"const s = require({json.dumps(str(SITE_FILES / 'search.js'))});"
        "console.log(JSON.stringify(JSON.parse(process.argv[1]).map(s.stem)));"
    )
    done = subprocess.run(
        ["node", "-e", script, json.dumps(words)], capture_output=True, text=True, check=True
    )
    pairs = zip(Stemmer.Stemmer("english").stemWords(words), json.loads(done.stdout), strict=True)
    assert [w for w, (py, js) in zip(words, pairs, strict=True) if py != js] == []


def test_covered_counts_the_words_an_item_also_holds() -> None:
    """Words given for an item (the files a run touched) count as words it holds: a run whose
    task text and compilation name none of the task's subject, but that wrote its migration,
    covers the task."""
    tasks = Ranker.of(["mix phx.server does not start", "work on bead a0y", "create beads"])
    compilations = Ranker.of(["the server would not start", "closed the epic", ""])
    task = "Generate the migration for the message identity"
    assert covered([tasks, compilations], task, range(3)) == {}
    also = {1: words_of(tasks, "priv repo migrations add message upsert identity.exs")}
    share = covered([tasks, compilations], task, range(3), also=also)
    assert set(share) == {1} and share[1] > 0.5
    assert covered([tasks, compilations], task, [0, 2], also=also) == {}  # only those allowed


def test_ignored_words_neither_match_nor_weigh() -> None:
    """`ignore` (common words and, asked for, numbers: `common_words`) leaves words out of the
    query: a text that meets it only in them is not found, and the query's weight is that of
    its other words."""
    texts = ["which tools to list after two sessions", "regenerate the fixtures", "book a flight"]
    ranker = Ranker.of(texts)
    common = common_words(ranker, numbers=True)
    assert "two" in common and "two" not in common_words(ranker)
    query = "regenerate the fixtures after two changes, which breaks them"
    assert [i for i, _ in scored(ranker, query, range(3))] == [1, 0]
    found = scored(ranker, query, range(3), ignore=common)
    assert [i for i, _ in found] == [1]
    assert found[0][1] > scored(ranker, query, range(3))[0][1]  # less weight to share
    shares = covered([ranker], query, range(3), ignore=common)
    assert set(shares) == {1}
