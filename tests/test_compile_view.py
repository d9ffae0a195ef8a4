"""What the model is shown of a run, how its answer is read, and how its quotes are checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wikitrace.compiler import BuildOptions, CompileLimits, build_corpus
from wikitrace.compiler.compile import Templates, parse_output, render_prompt, reply_json
from wikitrace.compiler.evidence import QuoteChecker
from wikitrace.corpus_schema import RunRecord
from wikitrace.corpus_schema.read import read_page
from wikitrace.corpus_schema.records import CompilationHeader

from helpers import FakeLLM, good_answer, make_run, turns_in_prompt, write_runs

TURN_TEXT = (
    "It's done \u2014 the file \u201cutils.py\u201d now passes.\n"
    'result: {"passed":3,"failed":0}\n'
    "Next I will check the migration of the billing table."
)
TURNS = [
    {"role": "user", "content": "Fix the failing test in utils.py"},
    {"role": "assistant", "content": "Running the tests now to see what fails first."},
    {"role": "tool", "content": TURN_TEXT},
]

# (cited turn, quote) -> (verified, turn it is found in, note)
QUOTES: list[tuple[int, str, tuple[bool, int, str | None]]] = [
    (3, "It's done \u2014 the file \u201cutils.py\u201d", (True, 3, None)),
    (
        3,
        'It\'s done - the file "utils.py" now passes',
        (True, 3, "typography and spacing normalised"),
    ),
    (3, "It\u2019s done \u2014 the\u00a0file", (True, 3, "typography and spacing normalised")),
    (
        3,
        "the file \u201cutils.\u200bpy\u201d now passes",
        (True, 3, "typography and spacing normalised"),
    ),
    (3, 'result: {"passed": 3, "failed": 0}', (True, 3, "typography and spacing normalised")),
    (3, 'result:   {"passed":3,\n"failed":0}', (True, 3, "typography and spacing normalised")),
    (2, "check the migration of the billing table", (True, 3, "cited as turn 2; found in turn 3")),
    (3, "Running the tests now to see", (True, 2, "cited as turn 3; found in turn 2")),
    (3, "the", (False, 3, "too short to prove anything")),
    (3, "passes.", (False, 3, "too short to prove anything")),
    (3, "It's done ... now passes", (False, 3, "not found in the turn")),
    (3, "the tests passed after the fix", (False, 3, "not found in the turn")),
    (9, "check the migration of the billing table", (True, 3, "cited as turn 9; found in turn 3")),
]


@pytest.mark.parametrize(("turn", "quote", "expected"), QUOTES)
def test_the_quote_checker_on_variants(
    turn: int, quote: str, expected: tuple[bool, int, str | None]
) -> None:
    record = RunRecord.model_validate(make_run("a", turns=TURNS))
    found = QuoteChecker(record.turns).check(turn, quote)
    assert (found.verified, found.turn, found.note) == expected


def test_a_quote_counts_only_in_what_was_shown() -> None:
    record = RunRecord.model_validate(make_run("a", turns=TURNS))
    checker = QuoteChecker(record.turns, ["", "role: assistant\ncontent: Running the tests", ""])
    assert not checker.check(3, "check the migration of the billing table").verified
    assert checker.check(2, "Running the tests").verified
    assert checker.check(2, "the tests").note == "too short to prove anything"


def test_the_closest_passage_of_a_turn() -> None:
    long_turn = {
        "role": "tool",
        "content": "x" * 2000 + " the migration of the billing table " + "y" * 2000,
    }
    record = RunRecord.model_validate(make_run("a", turns=[long_turn]))
    passage = QuoteChecker(record.turns).closest(1, "migration of the billing tables")
    assert "migration of the billing table" in passage and len(passage) == 240


@pytest.mark.parametrize(
    "reply",
    [
        '{"a": 1}',
        'Here is the analysis.\n```json\n{"a": 1}\n```',
        'Sure! {"a": 1}\nHope this helps.',
        '```\n{"a": 1}\n```\n\nNote: I kept it short.',
    ],
)
def test_the_one_json_object_is_found_wherever_it_sits(reply: str) -> None:
    assert reply_json(reply) == {"a": 1}


def _answer(claims: int = 1, supporting: list[int] | None = None) -> str:
    return json.dumps(
        {
            "title": "t",
            "description": "d",
            "claims": [
                {"statement": f"s{i}", "evidence": [{"turn": 1, "quote": "Fix the failing test"}]}
                for i in range(claims)
            ],
            "insights": [
                {
                    "title": "i",
                    "guideline": "g",
                    "applicability": "a",
                    "supporting_claims": [1] if supporting is None else supporting,
                }
            ],
        }
    )


def test_the_answer_schema_holds_the_prompts_limits() -> None:
    assert len(parse_output(_answer(6), 3).claims) == 6
    with pytest.raises(ValueError, match="claims: List should have at most 6 items"):
        parse_output(_answer(9), 3)
    with pytest.raises(ValueError, match="supporting_claims: List should have at least 1 item"):
        parse_output(_answer(1, supporting=[]), 3)


def test_the_prompt_drops_provider_metadata_and_repeats() -> None:
    task = "Fix the bug where the cache is never invalidated after a write. " * 5
    turns = [
        {"role": "user", "content": f"Here is the issue:\n{task}\nPlease fix it."},
        {
            "role": "assistant",
            "content": "I will look.\n```bash\ngrep -rn cache src/\n```",
            "action": "grep -rn cache src/",
            "metadata": {"encrypted_reasoning": "gAAAAB" + "Q" * 3000, "usage": {"tokens": 9}},
        },
    ]
    record = RunRecord.model_validate({**make_run("a", turns=turns), "task": task})
    prompt = render_prompt(Templates.load(), record, FakeLLM(), 24_000)
    shown = turns_in_prompt(prompt.text)
    assert "[the TASK above, repeated here]" in shown[1] and task not in shown[1]
    assert "gAAAAB" not in prompt.text and "metadata" not in shown[2]
    assert "action:" not in shown[2]  # the command is already in the content
    assert prompt.text.count(task) == 1


def _tau_like(tmp_path: Path) -> Path:
    run = make_run(
        "t1",
        metadata={
            "task_source": "simulated-user",
            "info": {"reward_info": {"reward": 0.0, "actions": ["cancel_reservation(id=X9)"]}},
        },
    )
    return write_runs(tmp_path / "runs.jsonl", [run])


@pytest.mark.parametrize("details", [False, True])
def test_grader_details_only_when_asked_and_labelled(tmp_path: Path, details: bool) -> None:
    llm = FakeLLM()
    build_corpus(
        BuildOptions(
            inputs=[_tau_like(tmp_path)],
            output=tmp_path / "c",
            model=llm.model,
            use_cache=False,
            limits=CompileLimits(outcome_details=details),
        ),
        llm=llm,
    )
    prompt = llm.calls[0][0]["content"]
    assert "simulated user's hidden instruction" in prompt
    assert ("cancel_reservation(id=X9)" in prompt) is details
    assert ("THE GRADER'S DETAILS" in prompt) is details
    assert ("the log does not say why" in prompt) is not details


def test_moved_and_inferred_evidence_is_recorded_and_shown(tmp_path: Path) -> None:
    def answer(messages: list[Any]) -> str:
        data = json.loads(good_answer(messages[0]["content"]))
        data["claims"][0]["evidence"][0]["turn"] = 1  # the quote is in the last turn
        data["claims"][0]["basis"] = "inferred"
        return json.dumps(data)

    path = write_runs(tmp_path / "runs.jsonl", [make_run("a")])
    build_corpus(
        BuildOptions(
            inputs=[path],
            output=tmp_path / "c",
            model="fake",
            use_cache=False,
        ),
        llm=FakeLLM(answer=answer),
    )
    page = read_page(tmp_path / "c", "compilation/step-0001.md", CompilationHeader)
    (claim,) = page.header.claims
    assert claim.basis == "inferred"
    (evidence,) = claim.evidence
    assert (evidence.turn, evidence.verified, evidence.note) == (
        4,
        True,
        "cited as turn 1; found in turn 4",
    )
    assert "(inferred: the compiler's reading" in page.body
    assert "- turn 4 (verified; cited as turn 1; found in turn 4):" in page.body


def _renders(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Each render of a template, as (mode, turns shown)."""
    seen: list[tuple[str, int]] = []
    render = Templates.render

    def counted(self: Templates, name: str, **context: Any) -> str:
        seen.append((context.get("mode", ""), len(context.get("turns") or [])))
        return render(self, name, **context)

    monkeypatch.setattr(Templates, "render", counted)
    return seen


def test_a_run_that_fits_renders_its_prompt_once(monkeypatch: pytest.MonkeyPatch) -> None:
    templates = Templates.load()
    record = RunRecord.model_validate(make_run("a", turns=TURNS))
    seen = _renders(monkeypatch)
    prompt = render_prompt(templates, record, FakeLLM(), 24_000)
    assert seen == [("whole", 3)] and prompt.view.mode == "whole"
    monkeypatch.undo()
    assert "Running the tests now" in prompt.text and len(prompt.view.entries) == 3
    long = RunRecord.model_validate(
        make_run("b", turns=[{"role": "tool", "content": "z" * 40_000}, *TURNS])
    )
    seen = _renders(monkeypatch)
    cut = render_prompt(templates, long, FakeLLM(), 3000)
    # A run that does not fit checks the instructions alone once, then looks for its view.
    assert seen[:2] == [("whole", 4), ("whole", 0)] and seen.count(("whole", 0)) == 1
    assert cut.view.mode != "whole"
