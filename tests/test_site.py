"""`wikitrace site`: static HTML, every log text escaped, quotes highlighted where they stand;
walked in a real headless browser (Debian's chromium) when it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.tools.site import build_site, highlight

from helpers import FakeLLM, good_answer, make_run, run, write_runs

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_ENV = "WIKITRACE_SITE_SCREENSHOT"
"""Where the browser walk saves its screenshot (docs/images/site.png is made with it)."""
HOSTILE = '<script>alert("log")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("site")
    corpus = base / "example-corpus"
    assert run(["-q", "build", str(EXAMPLE), "-o", str(corpus)])[0] == 0
    site = base / "example-site"
    code, out, err = run(["export", "site", str(corpus), "-o", str(site), "--json"])
    assert code == 0, err
    report = json.loads(out)
    assert report["runs"] == 12 and report["insights"] == 2 and report["not_found"] == 0
    return site


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Logs and a model's answers that carry markup everywhere they can."""
    base = tmp_path_factory.mktemp("hostile")
    runs = [
        {**make_run("t<1>", task_type="x<b>"), "task": "Open it. " + HOSTILE},
        {**make_run("t<1>", success=True, task_type="x<b>"), "task": "Open it. " + HOSTILE},
    ]
    for run_ in runs:
        run_["turns"][1]["observation"] = "You see " + HOSTILE

    def answer(messages: list[dict[str, str]]) -> str:
        data = json.loads(good_answer(messages[0]["content"]))
        data["title"] = "Title " + HOSTILE
        data["claims"][0]["statement"] = "Claim " + HOSTILE
        data["insights"][0]["title"] = "Lesson " + HOSTILE
        data["insights"][0]["guideline"] = "Do " + HOSTILE
        return json.dumps(data)

    llm = FakeLLM(answer=answer)
    path = write_runs(base / "runs.jsonl", runs)
    corpus = base / "corpus"
    build_corpus(
        BuildOptions(inputs=[path], output=corpus, model=llm.model, use_cache=False), llm=llm
    )
    site = base / "site"
    build_site(corpus, site)
    return site


class _Collect(HTMLParser):
    """Every element and attribute a browser would build from a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _elements(page: Path) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Collect()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.tags


def test_text_from_logs_and_models_is_shown_as_text_never_as_markup(hostile_site: Path) -> None:
    pages = sorted(hostile_site.rglob("*.html"))
    assert len(pages) == 3 + 2 + 2 + 1  # index, runs, search, 2 insights, 2 runs, their task
    ours = ("filter.js", "search.js", "search-index.js")
    for page in pages:
        tags = _elements(page)
        scripts = [attrs.get("src") for tag, attrs in tags if tag == "script"]
        assert all(src and src.endswith(ours) for src in scripts), page
        assert not any(tag == "img" for tag, _ in tags), page
        assert not any(k.startswith("on") for _, attrs in tags for k in attrs), page
        assert "alert" not in "".join(str(a) for _, attrs in tags for a in attrs.values())
    run_page = (hostile_site / "run" / "step-0001.html").read_text(encoding="utf-8")
    assert "Open it. &lt;script&gt;alert(&#34;log&#34;)&lt;/script&gt;" in run_page
    assert "You see &lt;script&gt;" in run_page
    insight = (hostile_site / "insight" / "insight-0001.html").read_text(encoding="utf-8")
    assert "Lesson &lt;script&gt;" in insight and "Do &lt;script&gt;" in insight
    index = (hostile_site / "index.html").read_text(encoding="utf-8")
    assert "<h2>x&lt;b&gt;</h2>" in index
    # The search's data is one JSON value, the log's text in its strings; its script shows
    # hits as text (textContent), never as markup.
    data = (hostile_site / "search-index.js").read_text(encoding="utf-8")
    prefix = "window.WIKITRACE_SEARCH = "
    assert data.startswith(prefix) and data.endswith(";\n")
    assert "<script>" in json.dumps(json.loads(data[len(prefix) : -2]))
    assert "innerHTML" not in (hostile_site / "search.js").read_text(encoding="utf-8")


def test_a_quote_is_highlighted_at_its_exact_span() -> None:
    text = 'role: tool\nobservation: the <b> drawer is locked; the drawer is "locked"'
    shown, found = highlight(text, [("drawer is locked", "c1-1"), ("nowhere", "c1-2")])
    assert found == {"c1-1"}
    assert str(shown) == (
        "role: tool\nobservation: the &lt;b&gt; "
        '<mark id="c1-1">drawer is locked</mark>; the drawer is "locked"'
    )
    # Overlapping quotes make one mark; both anchors stay reachable.
    shown, found = highlight("abcdefgh", [("bcd", "a1"), ("cdef", "a2"), ("gh", "a3")])
    assert str(shown) == ('a<mark id="a1"><span id="a2"></span>bcdef</mark><mark id="a3">gh</mark>')
    assert found == {"a1", "a2", "a3"}
    # Markup inside a quoted span is escaped too, and whitespace may differ (as audit allows).
    shown, _ = highlight("x <i>a\n  b</i> y", [("<i>a b</i>", "q")])
    assert str(shown) == 'x <mark id="q">&lt;i&gt;a\n  b&lt;/i&gt;</mark> y'


def test_each_claim_links_to_the_highlighted_words_in_its_turn(example_site: Path) -> None:
    checked = 0
    for page in sorted((example_site / "run").glob("step-*.html")):
        tags = _elements(page)
        marks = {attrs["id"] for tag, attrs in tags if tag in ("mark", "span") and attrs.get("id")}
        cites = [
            attrs["href"]
            for tag, attrs in tags
            if tag == "a" and "cite" in (attrs.get("class") or "")
        ]
        for href in cites:
            assert href and href.startswith("#") and href[1:] in marks, (page, href)
            checked += 1
    assert checked > 10
    for page in sorted((example_site / "insight").glob("insight-*.html")):
        for tag, attrs in _elements(page):
            if tag == "a" and "cite" in (attrs.get("class") or ""):
                target, _, anchor = (attrs["href"] or "").partition("#")
                run_page = (page.parent / target).resolve()
                assert f'id="{anchor}"' in run_page.read_text(encoding="utf-8")


def test_every_link_resolves_inside_the_site(example_site: Path) -> None:
    for page in example_site.rglob("*.html"):
        for tag, attrs in _elements(page):
            ref = attrs.get("href") if tag in ("a", "link") else attrs.get("src")
            if tag not in ("a", "link", "script") or not ref or ref.startswith("#"):
                continue
            assert "://" not in ref, (page, ref)  # nothing fetched: works from file://
            assert (page.parent / ref.partition("#")[0]).resolve().is_file(), (page, ref)


def test_the_site_of_a_model_corpus_shows_claims_and_support(
    toy_corpus: Path, tmp_path: Path
) -> None:
    site = tmp_path / "toy-site"
    report = build_site(toy_corpus, site)
    assert report.insights >= 3 and report.quotes > 0
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "ungated" in index and re.search(r"\d+ runs? \(\d+ failed\)|1 run", index)
    first = (site / "insight" / "insight-0001.html").read_text(encoding="utf-8")
    assert "Claims behind it" in first and 'class="cite" href="../run/step-' in first
    assert "compiled by openai/toy" in first


def test_an_occupied_folder_is_refused(example_site: Path, tmp_path: Path) -> None:
    corpus = example_site.parent / "example-corpus"
    code, _, err = run(["export", "site", str(corpus), "-o", str(example_site)])
    assert code == 1 and "already exists; use --force" in err
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep", encoding="utf-8")
    code, _, err = run(["export", "site", str(corpus), "-o", str(mine), "--force"])
    assert code == 1 and "is not a site wikitrace wrote" in err


# --- in a real browser -----------------------------------------------------------------------


@pytest.fixture
def browser() -> object:
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (.ci/run installs Debian's chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.mark.browser
def test_in_a_browser_insight_to_claim_to_highlighted_turn(
    example_site: Path, browser: object, tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 760})  # type: ignore[attr-defined]
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto((example_site / "index.html").as_uri())
    assert page.locator("tr.row").count() == 2
    page.fill("#filter", "FQ8APE")  # the client-side filter
    assert page.inner_text("#filter-count") == "1 of 2 shown"
    assert page.locator("tr.row:not(.hidden)").inner_text().startswith("insight-0002")
    page.click("tr.row:not(.hidden) a[href^='insight/']")
    assert page.url.endswith("/insight/insight-0002.html")
    quote = page.locator("blockquote").first.inner_text()
    page.click("a.cite >> nth=0")
    assert re.search(r"/run/step-\d+\.html#insight-0002-1-1$", page.url)
    page.wait_for_selector("mark:target")  # the click has navigated; the page may still load
    target = page.locator("mark:target")
    assert target.count() == 1 and target.inner_text() == quote
    box = target.bounding_box()
    assert box is not None and 0 <= box["y"] < 760  # scrolled into view
    shot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "site.png")
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    # The run's own compilation links to its marks as well.
    page.click("a[href='../runs.html']")
    page.click("a[href='run/step-0001.html']")
    page.click("ol.claims a.cite >> nth=0")
    page.wait_for_selector("mark:target")
    assert page.locator("mark:target").count() == 1
    assert dialogs == []


@pytest.mark.browser
def test_in_a_browser_the_filter_matches_whole_words_and_turns_open_by_anchor(
    tasks_site: Path, browser: object
) -> None:
    page = browser.new_page(viewport={"width": 1100, "height": 760})  # type: ignore[attr-defined]
    page.goto((tasks_site / "runs.html").as_uri())
    assert page.locator("tr.row").count() == 4
    page.fill("#filter", "Task 5")  # before: a substring, also Task 51 and Task 15
    assert page.inner_text("#filter-count") == "1 of 4 shown"
    assert "Task 5: open" in page.locator("tr.row:not(.hidden)").inner_text()
    page.fill("#filter", "BOX")
    assert page.inner_text("#filter-count") == "3 of 4 shown"
    page.fill("#filter", "bo")  # not a word of theirs
    assert page.inner_text("#filter-count") == "0 of 4 shown"
    # A long run: every turn folded; its anchor opens one, and a link to it does too.
    page.goto((tasks_site / "run" / "step-0004.html").as_uri() + "#turn-30")
    assert page.locator("details.turn[open]").count() == 1
    opened = page.locator("#turn-30 pre")
    assert opened.is_visible() and "step 29 of the long run" in opened.inner_text()
    box = opened.bounding_box()
    assert box is not None and 0 <= box["y"] < 760
    assert not page.locator("#turn-12 pre").is_visible()
    page.click("#turn-12 summary .action")  # on demand
    assert page.locator("#turn-12 pre").is_visible()
    page.click("#unfold")
    assert page.locator("details.turn[open]").count() == 40
    # The search box on every page searches the corpus as `wikitrace search` does.
    page.fill("header input[name=q]", "Open THE box")
    page.press("header input[name=q]", "Enter")
    page.wait_for_load_state()  # its script fills the search in from the address
    assert page.url.split("/")[-1].startswith("search.html?q=")
    assert page.input_value("#search") == "Open THE box"
    assert page.locator("#hits li").count() >= 1 and not page.locator("#no-match").is_visible()
    page.fill("#search", "zebra quokka")
    assert page.locator("#hits li").count() == 0 and page.locator("#no-match").is_visible()


@pytest.mark.browser
def test_in_a_browser_a_hostile_log_runs_no_script(hostile_site: Path, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    for path in sorted(hostile_site.rglob("*.html")):
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
    assert dialogs == []
    page.goto((hostile_site / "run" / "step-0001.html").as_uri())
    assert HOSTILE in page.inner_text("pre.task")


def test_a_task_page_lists_its_runs_and_divergences(example_site: Path) -> None:
    runs = (example_site / "runs.html").read_text(encoding="utf-8")
    link = re.search(r'<a href="(task/[^"]+)">5</a>', runs)
    assert link is not None
    page = (example_site / link.group(1)).read_text(encoding="utf-8")
    steps = re.findall(r'href="../run/(step-\d+)\.html"', page)
    assert steps == ["step-0004", "step-0010"]  # task 5's two runs, one failed, one not
    assert "outcome-failure" in page and "outcome-success" in page
    divergences = re.findall(r'href="../insight/(insight-\d+)\.html"', page)
    assert len(divergences) == 1
    lesson = (example_site / "insight" / f"{divergences[0]}.html").read_text(encoding="utf-8")
    assert "task 5" in lesson.lower() and "step-0010" in lesson
    assert len(list((example_site / "task").glob("*.html"))) == 6  # a page a task


@pytest.fixture(scope="module")
def tasks_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tasks whose texts differ by a digit, and one run of 40 turns."""
    base = tmp_path_factory.mktemp("tasks")
    runs = []
    for number in ("5", "51", "15"):
        made = make_run(number, success=number == "5")
        runs.append({**made, "task": f"Task {number}: open the box"})
    long = make_run("long")
    long["turns"] = long["turns"][:1] + [
        {"role": "assistant" if n % 2 else "tool", "content": f"step {n} of the long run"}
        for n in range(1, 40)
    ]
    runs.append({**long, "task": "A long job"})
    path = write_runs(base / "runs.jsonl", runs)
    corpus = base / "corpus"
    assert run(["-q", "build", str(path), "-o", str(corpus)])[0] == 0
    site = base / "site"
    build_site(corpus, site)
    return site


def test_a_long_run_is_folded_to_its_action_lines(tasks_site: Path, example_site: Path) -> None:
    long = (tasks_site / "run" / "step-0004.html").read_text(encoding="utf-8")
    assert long.count('<details class="turn') == 40 and " open>" not in long
    assert '<span class="action">step 39 of the long run</span>' in long
    short = (tasks_site / "run" / "step-0001.html").read_text(encoding="utf-8")
    turns = short.count('<details class="turn')
    assert 0 < turns <= 20 and short.count(" open>") == turns
