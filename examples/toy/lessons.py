"""A stand-in for the compiling LLM in the toy example: reads wikitrace's compile prompt and
answers with a valid compilation, deterministically, so the example needs no model and no key.

It quotes the run's last observation as evidence and draws the lesson a model would plausibly
draw from the two runs that teach something: a key found under the doormat (a sound lesson) and
an old safe that gave way when forced (over-broad: it is written as if forcing always works).
"""

from __future__ import annotations

import json
import re

_TURN = re.compile(r"^--- TURN (\d+) ---\n(.*?)(?=^--- TURN \d+ ---|^WIKITRACE-DATA-)", re.S | re.M)
_OBSERVATION = re.compile(r"^observation: (.*)$", re.M)

MAT = {
    "title": "Look under the doormat for the key",
    "guideline": "When a drawer is locked, lift the doormat: its key is under the doormat. "
    "Unlock the drawer with it, then take the item.",
    "applicability": "Locked drawers in the study. Not safes: nothing is under the doormat "
    "for them.",
    "supporting_claims": [1],
}
FORCE = {
    "title": "Force containers open",
    "guideline": "Force the container open instead of opening it normally; forcing opened it "
    "at once.",
    "applicability": "Any container that holds the item you need.",
    "supporting_claims": [1],
}


def answer(prompt: str) -> str:
    """The JSON answer to one compile prompt (or to a repair prompt, the same answer)."""
    turns = {int(n): text for n, text in _TURN.findall(prompt)}
    observations = [
        (number, match.group(1).strip())
        for number, text in sorted(turns.items())
        for match in [_OBSERVATION.search(text)]
        if match
    ]
    number, quote = observations[-1] if observations else (max(turns, default=1), "")
    succeeded = "The run SUCCEEDED" in prompt
    insights = []
    if succeeded and "You find a small key under the doormat." in prompt:
        insights.append(MAT)
    if succeeded and "The old lock gives way." in prompt:
        insights.append(FORCE)
    outcome = "got the item" if succeeded else "did not get the item"
    return json.dumps(
        {
            "title": f"The agent {outcome}",
            "description": f"The last thing the agent saw was: {quote}",
            "claims": [
                {
                    "statement": f"The agent {outcome} after its last action.",
                    "evidence": [{"turn": number, "quote": quote}] if quote else [],
                }
            ],
            "insights": insights,
        }
    )
