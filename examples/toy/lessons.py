"""A stand-in for the model in the toy example: answers wikitrace's prompts deterministically,
so the example needs no model and no key.

- Compile prompts: a compilation that quotes the run's last action and what it observed (the
  agent's own act, so its lessons do not rest on read content alone), and the lesson a model
  would plausibly draw from the runs that teach something: a key found under the doormat (sound),
  an old safe that gave way when forced (true of old safes, written as if it held for every
  container), and a drawer that splintered when forced (a misreading of a failed run). With
  --hypotheses the lesson comes as a hypothesis too.
- Hypothesis prompts (`wikitrace hypothesize`): the lesson's hypothesis, as above.
- Narrowing prompts (`wikitrace gate`): the narrowest precondition that keeps every task where
  the lesson helped and leaves out every other probe task, from the words of their task texts.
"""

from __future__ import annotations

import json
import re

_TURN = re.compile(
    r"^--- WIKITRACE-DATA-\w+ TURN (\d+) ---\n(.*?)"
    r"(?=^--- WIKITRACE-DATA-\w+ TURN|^WIKITRACE-DATA-)",
    re.S | re.M,
)
_OBSERVATION = re.compile(r"^observation: (.*)$", re.M)
_ACTION = re.compile(r"^action: (.*)$", re.M)
_PROBE = re.compile(r"^- (HELPED|HURT|SAME) [^:]+: (.*)$", re.M)

MAT = {
    "title": "Look under the doormat for the key",
    "guideline": "When a drawer is locked, lift the doormat: its key is under the doormat. "
    "Unlock the drawer with it, then take the item.",
    "applicability": "Locked drawers in the study.",
    "supporting_claims": [1],
    "hypothesis": {
        "precondition": "A locked drawer.",
        "behaviour": "Lift the doormat, take the key, unlock the drawer.",
        "expected_effect": "The drawer opens and the item can be taken.",
        "verifier": "The task succeeds.",
    },
}
FORCE = {
    "title": "Force containers open",
    "guideline": "Force the container open instead of opening it normally; forcing opened it "
    "at once.",
    "applicability": "Any container that holds the item you need.",
    "supporting_claims": [1],
    "hypothesis": {
        "precondition": "Any container that holds the item you need.",
        "behaviour": "Force the container instead of opening it.",
        "expected_effect": "The container opens at once.",
        "verifier": "The task succeeds.",
    },
}
FORCE_DRAWERS = {
    "title": "Force drawers open at once",
    "guideline": "Force a drawer open at once instead of opening it normally; opening it the "
    "normal way wasted the attempt.",
    "applicability": "Any drawer.",
    "supporting_claims": [1],
    "hypothesis": {
        "precondition": "Any drawer.",
        "behaviour": "Force the drawer instead of opening it.",
        "expected_effect": "The drawer opens.",
        "verifier": "The task succeeds.",
    },
}


def _lesson(lesson: dict[str, object], hypotheses: bool) -> dict[str, object]:
    return lesson if hypotheses else {k: v for k, v in lesson.items() if k != "hypothesis"}


def answer(prompt: str) -> str:
    """The JSON answer to one wikitrace prompt."""
    if "NARROW THE PRECONDITION" in prompt:
        return narrow(prompt)
    if prompt.startswith("You are comparing two lessons"):
        # Whether a newer lesson supersedes an older one (prompts/supersede.j2): the toy's
        # lessons are about different containers, and the gate tests each on its own.
        return json.dumps({"relation": "neither", "reason": "Different containers."})
    if "STATE THIS LESSON AS A HYPOTHESIS" in prompt:
        for lesson in (MAT, FORCE, FORCE_DRAWERS):
            if f"Title: {lesson['title']}" in prompt:
                return json.dumps(lesson["hypothesis"])
        return json.dumps({"precondition": "unknown"})  # not a lesson this stand-in knows
    turns = {int(n): text for n, text in _TURN.findall(prompt)}
    observations = [
        (number, match.group(1).strip())
        for number, text in sorted(turns.items())
        for match in [_OBSERVATION.search(text)]
        if match
    ]
    number, quote = observations[-1] if observations else (max(turns, default=1), "")
    acted = _ACTION.search(turns.get(number, ""))
    action = acted.group(0).strip() if acted and quote else ""  # `action: look` is too short alone
    succeeded = "The run SUCCEEDED" in prompt
    hypotheses = "State each insight as a hypothesis" in prompt
    insights = []
    if succeeded and "You find a small key under the doormat." in prompt:
        insights.append(_lesson(MAT, hypotheses))
    if succeeded and "The old lock gives way." in prompt:
        insights.append(_lesson(FORCE, hypotheses))
    if not succeeded and "The drawer splinters and jams shut." in prompt:
        insights.append(_lesson(FORCE_DRAWERS, hypotheses))
    outcome = "got the item" if succeeded else "did not get the item"
    return json.dumps(
        {
            "title": f"The agent {outcome}",
            "description": f"The last thing the agent saw was: {quote}",
            "claims": [
                {
                    "statement": f"The agent {outcome} after its last action.",
                    "evidence": [
                        {"turn": number, "quote": text} for text in (action, quote) if text
                    ],
                }
            ],
            "insights": insights,
        }
    )


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def narrow(prompt: str) -> str:
    """Words every helped task shares, chosen until no other probe task has them all (a greedy
    cover): the narrowest precondition the evidence supports, as a careful model would write."""
    probes = _PROBE.findall(prompt)
    helped = [_words(text) for kind, text in probes if kind == "HELPED"]
    hurt = [set(_words(text)) for kind, text in probes if kind != "HELPED"]
    shared = [w for w in helped[0] if all(w in h for h in helped[1:])] if helped else []
    chosen: list[str] = []
    left = list(hurt)
    while left:
        best = max(shared, key=lambda w: sum(w not in h for h in left), default=None)
        if best is None or all(best in h for h in left):
            break
        chosen.append(best)
        left = [h for h in left if best in h]
    ordered = [w for w in shared if w in chosen]
    target = " ".join(ordered) or "task like the ones it helped"
    return json.dumps(
        {
            "precondition": f"A {target}.",
            "applicability": f"Only a {target}; not the other tasks it was tried on.",
        }
    )
