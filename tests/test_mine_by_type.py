"""Mining recounted only for the task types an add touches (compiler/mine_contrast.py,
`contrasts_of_types`): with the parent's tests of the other types kept (`raw/_contrast_tests
.json`), the contrasts, their q-values, the report and the tests written are what counting
every type anew gives, also when the runs added to one type move the Benjamini-Hochberg
threshold past a pattern of another that no new run touches."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from wikitrace.compiler import mine_contrast, mine_exact
from wikitrace.compiler.mine_contrast import (
    FDR,
    MiningReport,
    contrasts_of_types,
    mining_thresholds,
)
from wikitrace.compiler.mine_table import PatternTable, RunPatterns
from wikitrace.corpus_schema.contrast_tests import ContrastTests, load_tests
from wikitrace.corpus_schema.errors import CorpusError


def _runs(
    rng: random.Random,
    task_type: str,
    tasks: int,
    trials: int,
    strength: float,
    patterns: list[str],
    first_step: int,
    prefix: str,
) -> list[RunPatterns]:
    """Runs of `tasks` tasks, `trials` each, each pattern shown by half of them; a run that
    shows the first fails `strength` more often than the others (0.3)."""
    made = []
    for task in range(tasks):
        for _ in range(trials):
            shown = {name: turn for turn, name in enumerate(patterns, 1) if rng.random() < 0.5}
            failing = 0.3 + (strength if patterns[0] in shown else 0.0)
            made.append(
                RunPatterns(
                    step=first_step + len(made),
                    task_id=f"{prefix}{task}",
                    task_type=task_type,
                    success=rng.random() >= failing,
                    judged=False,
                    patterns=shown,
                )
            )
    return made


def _scenario(crossing: str) -> tuple[list[RunPatterns], list[RunPatterns]]:
    """A parent's runs of task types "a" and "b", and runs of "b" an add brings. "lost": the
    added runs bring more patterns tried, so the one significant pattern of "a" is no longer
    significant; "found": they bring strong patterns, and a pattern of "a" becomes
    significant (seeds found by trying; the test checks that they do this)."""
    seed, a_strength, b_tasks, b_strength = (
        (22, 0.45, 6, 0.0) if crossing == "lost" else (49, 0.35, 8, 0.6)
    )
    rng = random.Random(seed)
    a = _runs(rng, "a", 6, 4, a_strength, ["uses:x", "uses:y"], 1, "a")
    b = _runs(rng, "b", 6, 4, 0.3, ["uses:p", "uses:q", "uses:r"], 100, "b")
    added = _runs(
        rng, "b", b_tasks, 4, b_strength, ["uses:p", "uses:q", "uses:r", "uses:s"], 200, "c"
    )
    return a + b, added


def _mined(
    runs: Sequence[RunPatterns],
    kept: ContrastTests | None = None,
    touched: frozenset[str | None] = frozenset(),
) -> tuple[
    list[tuple[str | None, str, float, float]], dict[str, object], bytes, Counter[str | None]
]:
    """The contrasts found (type, pattern, p, q), the report, the tests' file, and how often
    each type's runs were read."""
    by_type: dict[str | None, list[RunPatterns]] = {}
    for run in runs:
        by_type.setdefault(run.task_type, []).append(run)
    read: Counter[str | None] = Counter()

    def members_of(task_type: str | None) -> list[RunPatterns]:
        read[task_type] += 1
        return by_type[task_type]

    report = MiningReport()
    found, tests = contrasts_of_types(
        {key: len(value) for key, value in by_type.items()},
        members_of,
        report,
        kept=kept,
        touched=touched,
    )
    kept_contrasts = [(c.task_type, c.pattern, c.p_value, c.q_value) for c in found]
    return kept_contrasts, report.as_dict(), tests.dumps(), read


def _tests(runs: Sequence[RunPatterns], tmp_path: Path) -> ContrastTests:
    """The tests one count of `runs` writes, read back from its file."""
    path = tmp_path / "tests.json"
    path.write_bytes(_mined(runs)[2])
    tests = load_tests(path, mining_thresholds())
    assert tests is not None
    return tests


@pytest.mark.parametrize("crossing", ["lost", "found"])
def test_an_add_recounts_the_types_it_touches_and_mines_what_a_full_count_does(
    tmp_path: Path, crossing: str
) -> None:
    parent, added = _scenario(crossing)
    before = _mined(parent)[0]
    whole, report, file, _ = _mined(parent + added)
    # The add moves the threshold past a pattern of "a", whose runs it does not touch.
    a_before = [c[1] for c in before if c[0] == "a"]
    a_after = [c[1] for c in whole if c[0] == "a"]
    assert (a_before, a_after) == ((["uses:x"], []) if crossing == "lost" else ([], ["uses:x"]))
    ours = _mined(parent + added, _tests(parent, tmp_path), frozenset({"b"}))
    assert ours[:3] == (whole, report, file)
    # "a" is counted anew only when one of its patterns is significant (its lesson is made
    # from its runs); "b" once, as touched.
    assert ours[3] == Counter({"b": 1, **({"a": 1} if crossing == "found" else {})})


def test_kept_tests_are_not_taken_for_a_type_of_other_runs_or_under_other_thresholds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent, added = _scenario("lost")
    kept = _tests(parent, tmp_path)
    # Not told it was touched, "b" has more runs than its kept tests counted: counted anew.
    whole = _mined(parent + added)
    assert _mined(parent + added, kept)[:3] == whole[:3]
    # Under another threshold nothing kept is taken.
    path = tmp_path / "tests.json"
    monkeypatch.setattr(mine_contrast, "MIN_SUPPORT", mine_contrast.MIN_SUPPORT + 1)
    assert load_tests(path, mining_thresholds()) is None
    assert load_tests(path, mining_thresholds(FDR / 2)) is None


def test_kept_tests_that_the_runs_do_not_give_are_refused(tmp_path: Path) -> None:
    parent, added = _scenario("found")
    kept = _tests(parent, tmp_path)
    forged = kept.types["a"]
    wrong = [dataclasses.replace(t, p_value=t.p_value / 10) for t in forged.tried]
    kept.types["a"] = type(forged)(forged.runs, tuple(wrong), forged.note)
    with pytest.raises(ValueError, match="kept tests of task type a are not what its runs give"):
        _mined(parent + added, kept, frozenset({"b"}))


def test_a_damaged_tests_file_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "_contrast_tests.json"
    path.write_text('{"tests": 2, "settings": {}, "types": [{"task_type": 3}]}\n')
    with pytest.raises(CorpusError, match=r"_contrast_tests.json: damaged .*wikitrace verify"):
        load_tests(path, {})
    path.write_text('{"tests": 1}\n')  # an older version's: every type is counted anew
    assert load_tests(path, {}) is None
    assert load_tests(tmp_path / "none.json", {}) is None


def _added_to_a_task(
    seed: int, strength: float, flip: str
) -> tuple[list[RunPatterns], list[RunPatterns]]:
    """A parent's runs of type "a" (8 tasks, 6 trials each; task a0's runs never show
    "uses:v"), and 8 runs an add brings to its task a0: with "uses:x" they succeed ("lost")
    or fail ("found"), without it the other way (seeds found by trying; the test checks
    that "uses:x" flips)."""
    rng = random.Random(seed)
    parent = _runs(rng, "a", 8, 6, strength, ["uses:x", "uses:y", "uses:v"], 1, "a")
    for run in parent:
        if run.task_id == "a0":
            run.patterns.pop("uses:v", None)
    added = [
        RunPatterns(
            step=500 + index,
            task_id="a0",
            task_type="a",
            success=(index % 2 == 0) == (flip == "lost"),
            judged=False,
            patterns={"uses:x": 1, "uses:y": 2} if index % 2 == 0 else {"uses:y": 1},
        )
        for index in range(8)
    ]
    return parent, added


@pytest.mark.parametrize(("flip", "seed", "strength"), [("lost", 93, 0.45), ("found", 1, 0.25)])
def test_an_add_to_a_task_with_runs_flips_its_contrast_as_a_full_count_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flip: str, seed: int, strength: float
) -> None:
    parent, added = _added_to_a_task(seed, strength, flip)
    before = [c[1] for c in _mined(parent)[0]]
    whole = _mined(parent + added)
    assert ("uses:x" in before, "uses:x" in [c[1] for c in whole[0]]) == (
        (True, False) if flip == "lost" else (False, True)
    )
    kept = _tests(parent, tmp_path)
    computed: list[object] = []
    real = mine_contrast.stratified_exact

    def counting(strata: Sequence[mine_exact.Stratum]) -> tuple[float, float]:
        computed.append(strata)
        return real(strata)

    monkeypatch.setattr(mine_contrast, "stratified_exact", counting)
    ours = _mined(parent + added, kept, frozenset({"a"}))
    assert ours[:3] == whole[:3]
    # "uses:v" is never shown in task a0: its test's counts are the parent's, and its
    # p-values are taken from the parent's tests (computed again only to check them when it
    # is kept as a lesson, in "lost").
    v_kept = next(t for t in kept.types["a"].tried if t.pattern == "uses:v")
    path = tmp_path / "after.json"
    path.write_bytes(ours[2])
    after = load_tests(path, mining_thresholds())
    assert after is not None
    assert v_kept in after.types["a"].tried
    full: list[object] = []
    monkeypatch.setattr(
        mine_contrast, "stratified_exact", lambda strata: full.append(1) or real(strata)
    )
    _mined(parent + added)
    assert len(computed) == len(full) - (0 if flip == "lost" else 1)


def test_a_kept_test_taken_for_a_touched_type_is_checked_when_its_lesson_is_kept(
    tmp_path: Path,
) -> None:
    parent, added = _added_to_a_task(93, 0.45, "lost")
    kept = _tests(parent, tmp_path)
    tests = kept.types["a"]
    forged = [
        dataclasses.replace(t, p_value=t.p_value / 10) if t.pattern == "uses:v" else t
        for t in tests.tried
    ]
    kept.types["a"] = dataclasses.replace(tests, tried=tuple(forged))
    with pytest.raises(ValueError, match="kept test of uses:v in task type a is not what"):
        _mined(parent + added, kept, frozenset({"a"}))


def test_a_tables_columns_count_what_each_runs_patterns_say() -> None:
    # The counts mining tries patterns by come from the table's arrays (`Columns`); each
    # contrast's runs with and without its pattern, split from the runs themselves
    # (`mine_contrast.split`), must give the same counts, and a list of the runs the same
    # tests and contrasts.
    rng = random.Random(5)
    runs = []
    for step in range(1, 401):
        kinds = rng.sample(["uses:x", "uses:y", "uses:z", "errors", "order_x"], rng.randint(0, 4))
        shown = {name: rng.randint(1, 6) for name in kinds}
        failing = 0.3 + 0.3 * ("uses:x" in shown)
        runs.append(
            RunPatterns(
                step=step,
                task_id=f"t{rng.randint(0, 30)}",
                task_type=rng.choice(["a", "b"]),
                success=rng.random() >= failing,
                judged=False,
                patterns=shown,
                origin=rng.choice([None, "src"]),
            )
        )
    table = PatternTable(runs)
    tried = 0
    for task_type in ("a", "b"):
        members = table.type_runs(task_type)
        for contrast in mine_contrast._tried(task_type, members):
            present, absent = contrast.present, contrast.absent
            assert contrast.counts == (
                len(present),
                sum(not run.success for run in present),
                len(absent),
                sum(not run.success for run in absent),
            )
            tried += 1
    assert tried >= 8
    by_list = contrasts_of_types(table.task_types(), table.of_type, MiningReport())
    by_columns = contrasts_of_types(table.task_types(), table.type_runs, MiningReport())
    assert by_list[1].dumps() == by_columns[1].dumps()
    assert [(c.pattern, c.q_value) for c in by_list[0]] == [
        (c.pattern, c.q_value) for c in by_columns[0]
    ]
    assert by_columns[0]
