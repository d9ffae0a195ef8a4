"""Search that understands words: stems, the parts of snake_case, camelCase and dotted names,
over lessons, compilations and tasks; `wikitrace search` gives what the MCP tool gives."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import orjson
import pytest
import search_queries
from mcp import Client

from wikitrace.corpus_schema import CorpusError
from wikitrace.search import MIN_SCORE
from wikitrace.search.rank import Ranker
from wikitrace.tools.mcp_server import Corpus, build_server
from wikitrace.tools.memory import Memory

from helpers import run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return search_queries.build(tmp_path_factory.mktemp("search") / "corpus")


def test_plain_language_queries_find_their_lesson_in_the_top_5(corpus: Path) -> None:
    """24 queries written from the sample logs (benchmarks/search_bench.py prints each one's
    place): each finds its lesson or compilation among the first 5 hits. Without stems and
    name parts, 4 of them find nothing there ("transfer to human", "cancelled reservations
    refunded", "one stop flights compared by fare", ...)."""
    memory = Memory.load(corpus)
    places = search_queries.ranks(memory)
    missed = [q.text for q, place in zip(search_queries.QUERIES, places, strict=True) if not place]
    assert missed == []
    assert search_queries.recall(memory) == 1.0


def test_words_match_their_other_forms_and_names_their_parts() -> None:
    texts = [
        "Call transfer_to_human_agents after two refusals.",
        "Import os.path.join to build the paths.",
        "Use getUserDetails before booking.",
        "The user cancelled and was refunded.",
    ]
    ranker = Ranker.of(texts)
    for query, expected in [
        ("human agent", 0),
        ("transfer_to_human_agents", 0),
        ("path join", 1),
        ("os.path.join", 1),
        ("user details", 2),
        ("cancel refund", 3),
        ("cancelling refunds", 3),
    ]:
        assert ranker.rank(query, range(len(texts)), matched_only=True)[0] == expected, query


def test_an_index_saved_before_stems_is_asked_in_words(corpus: Path, tmp_path: Path) -> None:
    saved = corpus / "search" / "insights"
    assert orjson.loads((saved / "texts.json").read_bytes())["words"] == "stems"
    assert Ranker.load(saved, len(Memory.load(corpus).insights)).stemmed
    old = tmp_path / "old"
    old.mkdir()
    for path in saved.iterdir():
        (old / path.name).write_bytes(path.read_bytes())
    head = orjson.loads((old / "texts.json").read_bytes())
    del head["words"]
    (old / "texts.json").write_bytes(orjson.dumps(head))
    assert not Ranker.load(old, head["texts"]).stemmed


def test_the_cli_searches_as_the_mcp_tool_does(corpus: Path) -> None:
    query = "transfer to human agent"
    code, out, err = run(["search", str(corpus), query, "--limit", "2"])
    assert code == 0 and err == ""

    async def main() -> str:
        async with Client(build_server(Corpus(corpus))) as client:
            result = await client.call_tool("search", {"query": query, "limit": 2})
            return "".join(block.text for block in result.content)

    assert out == anyio.run(main) + "\n"
    lines = out.splitlines()
    kinds = [line.split()[1] for line in lines]
    assert 2 <= len(lines) <= 6 and all(kinds.count(kind) <= 2 for kind in set(kinds))
    scores = [float(line.split()[0]) for line in lines]
    assert scores == sorted(scores, reverse=True) and scores[-1] >= MIN_SCORE
    code, out, err = run(["search", str(corpus), query, "--layer", "insights", "--json"])
    assert code == 0 and err == ""
    hits = json.loads(out)
    assert set(hits[0]) == {
        "kind",
        "id",
        "path",
        "title",
        "task_id",
        "task_type",
        "outcome",
        "score",
        "read_only",
    }
    assert all(hit["kind"] == "insights" for hit in hits) and len(hits) <= 10
    assert "transfer_to_human_agents" in hits[0]["title"]
    assert (corpus / hits[0]["path"]).is_file()
    code, out, err = run(["search", str(corpus), "zebra quokka"])
    assert (code, out, err) == (0, "", f"no match: no entry scores {MIN_SCORE:g} or more\n")
    code, out, err = run(["search", str(corpus), "zebra", "--json"])
    assert (code, json.loads(out)) == (0, [])
    code, _, err = run(["search", str(corpus), "x", "--limit", "0"])
    assert code == 2 and "--limit" in err
    code, _, err = run(["search", str(corpus), "q" * 3000])
    assert code == 2 and "the query is 3000 characters" in err


def test_a_lesson_resting_on_an_excluded_tasks_runs_is_not_found(corpus: Path) -> None:
    """Leave-one-task-out over MCP's search: a lesson whose evidence includes a run of an
    excluded task (a mined pattern over several tasks) is left out, not only one drawn from
    it."""
    memory = Memory.load(corpus)
    lesson = memory.insights[0]
    other = next(run for run in memory.runs if run.task_id != lesson.source_task_id)
    query = lesson.title
    assert lesson.id in [h.id for h in memory.search(query, ["insights"], limit=100)]
    lesson.cited_steps = [*lesson.cited_steps, other.step]
    found = memory.search(query, ["insights"], limit=100, exclude_tasks=[other.task_id])
    assert lesson.id not in [h.id for h in found]


def test_a_lazily_loaded_memory_answers_as_a_loaded_one_reading_its_hits_alone(
    corpus: Path,
) -> None:
    """`wikitrace search` loads the catalog lazily (Memory.load(lazy=True)): the same hits as
    the memory the MCP server loads whole, for every query, kind and task left out, and only
    the hits' records made when no task is left out."""
    whole = Memory.load(corpus)
    tasks = sorted({run.task_id for run in whole.runs})
    for query in [q.text for q in search_queries.QUERIES] + ["zebra", "the agent"]:
        for excluded in ([], tasks[:2]):
            for kinds in (["insights"], ["compilations"], ["tasks"], ["insights", "tasks"]):
                lazy = Memory.load(corpus, lazy=True)
                found = lazy.search(query, kinds, limit=3, exclude_tasks=excluded, min_score=0.0)
                assert found == whole.search(
                    query, kinds, limit=3, exclude_tasks=excluded, min_score=0.0
                ), (query, excluded, kinds)
                if not excluded:
                    made = sum(r is not None for r in lazy.runs._made)  # type: ignore[attr-defined]
                    made += sum(i is not None for i in lazy.insights._made)  # type: ignore[attr-defined]
                    assert made <= len(found), (query, kinds)
    lazy = Memory.load(corpus, lazy=True)
    assert list(lazy.runs) == whole.runs and list(lazy.insights) == whole.insights
    assert list(lazy.groups) == list(whole.groups) and (lazy.offline, lazy.withheld) == (
        whole.offline,
        whole.withheld,
    )


def test_a_damaged_catalog_line_is_found_when_a_lazy_search_reads_it(
    corpus: Path, tmp_path: Path
) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(corpus.resolve(), copy)
    catalog = copy / "catalog.jsonl"
    catalog.chmod(0o644)
    lines = catalog.read_bytes().splitlines(keepends=True)
    first_insight = next(i for i, line in enumerate(lines) if line.startswith(b'["insight"'))
    lines[first_insight] = b'["insight",0,"cut short"]\n'
    catalog.write_bytes(b"".join(lines))
    lazy = Memory.load(copy, lazy=True)
    assert lazy.insights[1].id  # the other lines read as written
    with pytest.raises(CorpusError, match=r"catalog.jsonl: damaged \(ValueError: an insight's"):
        lazy.insights[0]
    run_line = (copy / "catalog/runs-0001.jsonl").read_bytes().splitlines(keepends=True)[0]
    lines[first_insight] = run_line  # a run's line where an insight's should be
    catalog.write_bytes(b"".join(lines))
    lazy = Memory.load(copy, lazy=True)
    with pytest.raises(CorpusError, match=r"catalog.jsonl: damaged \(ValueError: line \d+ "):
        list(lazy.insights)
