"""`wikitrace export skill`: a corpus as an Agent Skill a coding agent loads by itself.

The folder holds SKILL.md (name and description frontmatter, then the drill-down rules: short,
pointing into the corpus), `corpus/` (copies of the corpus's files, read-only and never hard
links, so that nothing done to the skill reaches the corpus; `wikitrace verify DIR/corpus` checks
them against the manifest) and `scripts/actions` and
`scripts/turn` (links to the corpus's drill-down tools).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from wikitrace.corpus_schema import CorpusError, manifest
from wikitrace.corpus_schema.export import EXPORT_MARKER, staged_export
from wikitrace.corpus_schema.indexes import DIVERGENCE
from wikitrace.corpus_schema.layout import MANIFEST, TOOL_NAMES, TOOLS_DIR
from wikitrace.corpus_schema.read import contained
from wikitrace.corpus_schema.render import inline
from wikitrace.corpus_schema.writing import copy_file, freeze

from .memory import Memory

NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*\Z")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
TEMPLATE = "skill.j2"
CORPUS_DIR = "corpus"
SCRIPTS_DIR = "scripts"


@dataclass
class TypeRow:
    type: str
    runs: int = 0
    successes: int = 0
    insights: int = 0


@dataclass
class SkillReport:
    path: str
    name: str
    version: str | None
    files: int
    """Corpus files in the skill (the manifest's, and the manifest), each a read-only copy."""
    skill_lines: int


def check_name(name: str) -> None:
    if len(name) > NAME_MAX or not NAME_RE.match(name):
        raise CorpusError(
            f"{name!r} cannot name a skill: the folder's name is the skill's name, and it must "
            f"be 1-{NAME_MAX} lowercase letters, digits and single hyphens (e.g. -o "
            ".claude/skills/airline-memory)"
        )


def lesson_count(memory: Memory) -> int:
    """The insights that are lessons: a divergence is a fact about one task, not a lesson."""
    return sum(insight.pattern != DIVERGENCE for insight in memory.insights)


def _description(memory: Memory, types: list[TypeRow]) -> str:
    kinds = ", ".join(row.type for row in types[:8]) + (", ..." if len(types) > 8 else "")
    about = f" on {kinds} tasks" if kinds else ""
    runs = f"{len(memory.runs)} past run{'s' if len(memory.runs) != 1 else ''} of an agent"
    if lesson_count(memory):
        text = (
            f"Lessons from {runs}{about}, each linked to the turns it rests on. Use before "
            "starting such a task: read the lessons for its type, check the ones you rely on "
            "against the past run they came from, and report which you used."
        )
    else:  # say what is there: runs to read, not lessons
        text = (
            f"The logs of {runs}{about}, each with why it succeeded or failed quoted from its "
            "turns (no lessons drawn yet). Use before starting such a task: read how past runs "
            "of its type went, check what you rely on against their turns, and report which "
            "you used."
        )
    return inline(text)[:DESCRIPTION_MAX]


def export_skill(corpus: Path, dest: Path, *, force: bool = False) -> SkillReport:
    """Write the skill for the corpus version `corpus` names into `dest` (whole, or not at
    all); `dest`'s name is the skill's."""
    from wikitrace import prompts

    name = dest.resolve().name
    check_name(name)
    root = corpus.resolve()
    frozen = manifest.load(root)
    memory = Memory.load(root)
    rows: dict[str, TypeRow] = {}
    for run in memory.runs:
        row = rows.setdefault(run.task_type or "untyped", TypeRow(run.task_type or "untyped"))
        row.runs += 1
        row.successes += run.outcome == "success"
    for insight in memory.insights:
        key = insight.task_type or "untyped"
        rows.setdefault(key, TypeRow(key)).insights += 1
    types = sorted(rows.values(), key=lambda row: (-row.runs, row.type))
    for row in types:
        row.type = inline(row.type)
    version = frozen.version.name if frozen.version else None
    successes = sum(run.outcome == "success" for run in memory.runs)
    summary = (
        f"{len(memory.runs)} past runs of an agent ({successes} succeeded, "
        f"{len(memory.runs) - successes} did not) and {lesson_count(memory)} lessons drawn "
        f"from them: {'version ' + version + ' of ' if version else ''}a wikitrace corpus "
        f"built {frozen.created[:10]}"
        + (" without a model" if frozen.compiled_by == "offline" else f" with {frozen.model}")
        + "."
    )
    text = (
        prompts.environment()
        .get_template(TEMPLATE)
        .render(
            name=name,
            description=orjson.dumps(_description(memory, types)).decode(),
            summary=summary,
            types=types if len(types) > 1 or (types and types[0].type != "untyped") else [],
        )
    )
    text = re.sub(r"\n{3,}", "\n\n", text)
    files = [*frozen.files, MANIFEST]
    with staged_export(dest, "skill", force=force) as stage:
        for rel in files:
            target = stage / CORPUS_DIR / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            source = contained(root, rel)  # a corpus may be hostile: never read outside it
            copy_file(source, target)  # never a hard link: the skill's agent may write to it
        freeze(stage / CORPUS_DIR)
        checked = manifest.verify(stage / CORPUS_DIR)
        if not checked.ok:
            wrong = (checked.missing + checked.changed + checked.extra)[:3]
            raise CorpusError(
                f"{corpus} does not match its manifest ({', '.join(wrong)}); the skill was not "
                f"written. Run `wikitrace verify {corpus}`"
            )
        (stage / SCRIPTS_DIR).mkdir()
        for tool in TOOL_NAMES:
            (stage / SCRIPTS_DIR / tool).symlink_to(f"../{CORPUS_DIR}/{TOOLS_DIR}/{tool}")
        (stage / "SKILL.md").write_text(text, encoding="utf-8")
        marker = {"kind": "skill", "corpus": str(root), "version": version}
        (stage / EXPORT_MARKER).write_bytes(orjson.dumps(marker))
    return SkillReport(
        path=str(dest),
        name=name,
        version=version,
        files=len(files),
        skill_lines=text.count("\n"),
    )
