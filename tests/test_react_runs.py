"""The ReAct paper's FEVER and WebShop run logs, as their notebooks printed them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from wikitrace.compiler.importers import plan_inputs
from wikitrace.compiler.importers.runs import SourceRun

from helpers import DATA, run

REACT = DATA / "importers/react"


def printed(notebook: Path) -> str:
    data = json.loads(notebook.read_text())
    return "".join("".join(output["text"]) for cell in data["cells"] for output in cell["outputs"])


def test_fever_episodes_from_a_notebook_with_their_outcome() -> None:
    notebook = REACT / "FEVER-3-episodes.ipynb"
    plan = plan_inputs([notebook])
    assert [f.format for f in plan.files] == ["fever"]
    runs = list(plan.items())
    assert all(isinstance(r, SourceRun) for r in runs)
    source = printed(notebook)
    # Outcomes are the `em` of each episode's info line, in order.
    ems = [int(m) for m in re.findall(r"'em': (\d)", source)]
    assert [r.record.success for r in runs] == [em == 1 for em in ems] == [True, True, False]
    assert [r.record.task_id for r in runs] == ["3687", "6238", "2817"]
    assert runs[0].record.task == "Claim: Paramore is not from Tennessee."
    # A step per number; a step the notebook printed twice (its retry) keeps the later one.
    steps = [
        len(set(re.findall(r"^Action (\d+):", e, re.M)))
        for e in re.split(r"^\d+ Claim:", source, flags=re.M)[1:]
    ]
    assert [len(r.record.turns) for r in runs] == steps
    last = runs[2].record.turns[-1]
    assert last.action == "Finish[NOT ENOUGH INFO]" and last.reasoning == "I give up."
    assert runs[0].at == "cell outputs" and runs[0].line == 1


def test_webshop_sessions_from_the_printed_text(tmp_path: Path) -> None:
    log = REACT / "webshop-3-sessions.txt"
    runs = list(plan_inputs([log]).items())
    source = log.read_text()
    scores = [float(s) for s in re.findall(r"Your score \(min 0\.0, max 1\.0\): ([\d.]+)", source)]
    assert scores == [1.0, 0.75]  # session 0 stopped without buying: it scores 0
    assert [r.record.metadata["reward"] for r in runs] == [0.0, *scores]
    assert runs[0].record.metadata["stopped_without_buying"] is True
    assert [r.record.success for r in runs] == [False, True, False]  # the shop's success: 1.0
    assert [r.record.task_id for r in runs] == ["fixed_0", "fixed_1", "fixed_2"]
    assert runs[0].record.task.startswith("i need a long clip-in hair extension")
    # Every action the agent took is a turn (think[...] as reasoning); reset is the harness's.
    actions = len(re.findall(r"^Action: ", source, re.M)) - source.count("Action: reset")
    agent = [t for r in runs for t in r.record.turns if t.role == "agent"]
    assert len(agent) == actions
    assert all(r.record.turns[0].role == "environment" for r in runs)
    # Cut off before its score: no label, said why.
    cut = tmp_path / "cut.txt"
    cut.write_text(source[: source.index("Your score (min 0.0, max 1.0): 0.75")])
    code, _, err = run(["convert", str(cut), "--unlabelled", "keep"])
    assert code == 0 and "2 runs" in err and "1 unlabelled" in err
    assert "the episode has no score" in err
    # The same run saved as a notebook's output reads the same.
    shutil.copy(REACT / "FEVER-3-episodes.ipynb", tmp_path / "f.ipynb")
    code, out, _ = run(["convert", str(tmp_path / "f.ipynb")])
    assert code == 0 and len(out.splitlines()) == 3
