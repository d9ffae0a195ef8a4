"""The pieces every corpus page is made of: frontmatter headers, a page with its data file,
text from logs and models made safe to show as Markdown, and the notes pages share."""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from .layout import data_rel

if TYPE_CHECKING:
    from pydantic import BaseModel

# frontmatter (and YAML) are imported when a page is written: reading a corpus's text
# (a hook's recall, `prompt`) needs neither, and they weigh on a command's start.

TRUST_NOTE = (
    "A compilation is an interpretation; only raw turns are facts. "
    "Check a lesson against the raw turns it cites before relying on it."
)
OFFLINE_NOTE = (
    "Compiled offline: a mechanical summary made without an LLM "
    "(outcome, turns that failed, final actions). "
    "Its only insights are mined ones: counted from how runs with and without a pattern of "
    "action ended, not drawn by a model."
)


# Characters JSON leaves unescaped that YAML refuses, or reads as line breaks (NEL, LS, PS).
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
# A JSON string, or a number in exponent form: YAML 1.1 reads `1e-7` as text, `1.0e-7` as a
# number, so such numbers get a fraction and a signed exponent (strings are left alone).
_JSON_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+)(\.\d+)?[eE]([-+]?)(\d+)')
_DIGIT_EXPONENT = re.compile(r"\d[eE][-+]?\d")


def _yaml_number(match: re.Match[str]) -> str:
    whole, fraction, sign, exponent = match.groups()
    if whole is None:
        return match.group()
    return f"{whole}{fraction or '.0'}e{sign or '+'}{exponent}"


def _json_flow(value: object) -> str:
    """A nested value as JSON, which YAML reads back as the same value."""
    flow = orjson.dumps(value).decode()
    flow = _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", flow)
    if _DIGIT_EXPONENT.search(flow):  # rare: skip the slower, string-aware pass otherwise
        flow = _JSON_EXPONENT.sub(_yaml_number, flow)
    return flow


# Text YAML 1.1 reads back as the same string when written bare: no quoting, no number, no
# date, no yes/no/on/off/null. Anything else is written as a JSON string, which YAML reads too.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _yaml_scalar(value: object) -> str:
    if isinstance(value, str) and _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
        return value
    return _json_flow(value)


@functools.cache
def _header_handler() -> Any:
    from frontmatter.default_handlers import YAMLHandler

    class _HeaderHandler(YAMLHandler):
        """One `key: value` line per field: scalars bare when YAML reads them back unchanged
        (`source_step: step-0003`, easy to grep), anything else as JSON, which is YAML too.
        Many times faster than a YAML dumper, and round-trip tested."""

        def export(self, metadata: dict[str, object], **kwargs: object) -> str:
            return "\n".join(f"{key}: {_yaml_scalar(value)}" for key, value in metadata.items())

    return _HeaderHandler()


_UNSET_LEFT_OUT = ("origin", "project", "kind", "kind_basis", "support")
"""Optional header fields written only when set: a run with no source, project, kind or taint mark
carries no `project: null` line (read back, an absent field is None)."""


def _header_fields(header: BaseModel) -> dict[str, Any]:
    fields = header.model_dump(mode="json")
    for name in _UNSET_LEFT_OUT:
        if name in fields and fields[name] is None:
            del fields[name]
    return fields


def with_frontmatter(header: BaseModel, body: str) -> str:
    """A markdown file with a YAML header, scalar fields first, ending in a newline."""
    return _page(_header_fields(header), body)


def _page(fields: dict[str, Any], body: str) -> str:
    import frontmatter

    post = frontmatter.Post(body.rstrip("\n"), **fields)
    return frontmatter.dumps(post, handler=_header_handler()) + "\n"


PageFiles = list[tuple[str, str]]
"""A page and its data file, each as (path under the corpus root, text): write both."""


def with_data(rel: str, header: BaseModel, body: str, kept: Sequence[str]) -> PageFiles:
    """The page at `rel` with a header of short fields that names its data file (`data`),
    which holds the fields `kept` as JSON for the tools: the body shows them once."""
    fields = _header_fields(header)
    data = {name: fields.pop(name) for name in kept}
    fields["data"] = data_rel(rel)
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return [(rel, _page(fields, body)), (fields["data"], text)]


# --- text from logs and models, made safe to render --------------------------------------

_INLINE_SPECIAL = re.compile(r"([\\\[\]<>*`])")
_ESCAPED = str.maketrans({char: "\\" + char for char in "\\[]<>*`"})
"""Each character of _INLINE_SPECIAL -> itself escaped: one pass of str.translate."""
_LINE_START = re.compile(r"^(?:([#+=|-])|(\d{1,9})([.)]))")
_LINE_START_CHARS = frozenset("#+=|-0123456789")
"""The characters a match of _LINE_START starts with: the only lines it need be tried on."""
_UNESCAPE = re.compile(r"\\([\\\[\]<>*`#+=|.)-])")


def inline(text: str) -> str:
    """One line of Markdown that shows `text` and nothing else: no heading, list, link, tag,
    emphasis or code span that the text could open, whatever it holds (whitespace folded).

    `unescape` gives the folded text back.
    """
    escaped = " ".join(text.split()).translate(_ESCAPED)
    start = _LINE_START.match(escaped) if escaped[:1] in _LINE_START_CHARS else None
    if start and start.group(1):  # `# x`, `- x`: a heading or a list if it starts a line
        escaped = "\\" + escaped
    elif start:  # `1. x`
        escaped = start.group(2) + "\\" + escaped[len(start.group(2)) :]
    return escaped


def unescape(text: str) -> str:
    """The (folded) text `inline` was given."""
    return _UNESCAPE.sub(r"\1", text)


LINE_LIMIT = 200
"""No line of an insight page, a compilation page or an index is longer (but a header line
of a page from format 1, or a word a fenced quote cannot break): grep shows whole lines."""
WRAP = 150
"""Where prose is wrapped on a page: most paragraphs stay one line, whole in a grep's hit."""


def wrapped(text: str, first: str = "", indent: str = "", width: int = WRAP) -> str:
    """`first` then `text` as `inline` shows it, wrapped at `width` on lines that start with
    `indent` (each line escaped on its own, so that none starts a list or a heading); a word
    too long for a line is cut. `page_line` gives the text back as a reader takes it."""
    lines: list[str] = []
    line: list[str] = []
    size = len(first)
    limit = max(width, len(indent) + 20)
    for word, shown in _words(text, LINE_LIMIT - len(indent) - 4):
        if line and size + 1 + shown > limit:
            lines.append(inline(" ".join(line)))
            line, size = [], len(indent)
        line.append(word)
        size += shown + (len(line) > 1)
    lines.append(inline(" ".join(line)))
    return first + f"\n{indent}".join(lines)


def _shown_length(word: str) -> int:
    """`len(inline(word))` for a word (no whitespace in it), without making it: every word of
    every wrapped paragraph is measured. Escaping a character never makes or unmakes a
    line's start (_LINE_START), so the start is read on the word as it is."""
    length = len(word)
    if not word.isalnum():
        length += len(_INLINE_SPECIAL.findall(word))
    if word[:1] in _LINE_START_CHARS and _LINE_START.match(word):
        length += 1
    return length


def _words(text: str, longest: int) -> Iterator[tuple[str, int]]:
    """The words of `text`, each with its `_shown_length`, a word longer than `longest`
    shown cut into pieces."""
    for word in text.split():
        shown = _shown_length(word)
        if shown <= longest:
            yield word, shown
            continue
        # Escaping at most doubles a word: cut it so that each piece fits a line escaped.
        step = max(longest // 2, 1)
        for start in range(0, len(word), step):
            piece = word[start : start + step]
            yield piece, _shown_length(piece)


def fit_line(prefix: str, text: str, suffix: str = "", cell: bool = False) -> str:
    """`prefix`, `text` shortened as far as it must be for the line to fit LINE_LIMIT (a table
    cell when `cell`), then `suffix`."""
    shown = table_cell if cell else lambda t, n: inline(shortened(t, n))
    limit = max(len(text), 1)
    line = f"{prefix}{shown(text, limit)}{suffix}"
    while len(line) > LINE_LIMIT and limit > 16:
        limit = max(16, limit - (len(line) - LINE_LIMIT))
        line = f"{prefix}{shown(text, limit)}{suffix}"
    return line


def page_line(text: str) -> str:
    """`text` as a reader takes it back from the lines `wrapped` makes of it (whitespace
    folded)."""
    return " ".join(unescape(wrapped(text)).split())


_BACKTICKS = re.compile(r"`+")


def verbatim(text: str, indent: str = "") -> str:
    """A fenced code block holding `text` exactly: nothing in it is Markdown. The fence is
    longer than any run of backticks in the text, so the text cannot close it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0) if "`" in text else 0
    fence = "`" * max(3, longest + 1)
    lines = [f"{indent}{fence}text"]
    lines += [f"{indent}{line}" if line else "" for line in text.split("\n")]
    lines.append(f"{indent}{fence}")
    return "\n".join(lines)


def folded_quote(text: str, indent: str = "  ", width: int = LINE_LIMIT - 20) -> tuple[str, bool]:
    """A quote as a page shows it (`verbatim`), its lines longer than `width` broken (at a
    space where there is one); and whether any was. The data file keeps it whole."""
    lines: list[str] = []
    for line in text.split("\n"):
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width)
            cut = cut + 1 if cut != -1 else width
            lines.append(line[:cut].rstrip(" "))
            line = line[cut:]
        lines.append(line)
    folded = "\n".join(lines)
    return verbatim(folded, indent), folded != text


def heading(prefix: str, text: str) -> list[str]:
    """A heading `prefix` + `text`, or when it would be too long a line, `prefix` as the
    heading and the text wrapped under it."""
    line = f"{prefix}{inline(text)}"
    if len(line) <= LINE_LIMIT:
        return [line, ""]
    return [prefix.rstrip(": "), "", wrapped(text), ""]


def _wrap(text: str, width: int = WRAP, first: str = "", then: str = "") -> list[str]:
    """`textwrap.wrap(text, width, initial_indent=first, subsequent_indent=then)`, words
    never broken. A text that fits on its first line, with no whitespace at its ends and
    none but spaces inside, is that line as it is: what textwrap gives it, without its
    splitting into chunks (every list item and note of every page is wrapped)."""
    if text and len(first) + len(text) <= width and text.isprintable() and text == text.strip():
        return [first + text]
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=then,
        break_long_words=False,
        break_on_hyphens=False,
    )


def quote_block(text: str, indent: str = "") -> str:
    """A block quote of our own text (a note; no Markdown but code spans), wrapped."""
    lines = [_wrap(line) or [""] for line in text.splitlines()]
    return "\n".join(
        f"{indent}> {part}" if part else f"{indent}>" for group in lines for part in group
    )


TASK_PREVIEW = 400


def shortened(text: str, limit: int) -> str:
    """`text` on one line (whitespace flattened), cut to `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def task_preview(text: str) -> str:
    """The start of a task, whitespace flattened: what a row keeps (RunRow.task)."""
    return " ".join(text[: 4 * TASK_PREVIEW].split())[:TASK_PREVIEW]


def table_cell(text: str | None, limit: int = 0) -> str:
    """Text fit for one markdown table cell."""
    if text is None:
        return ""
    flat = " ".join(text.split())
    if limit and len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return inline(flat).replace("|", "\\|")


def bullet(text: str) -> str:
    """A list item of our own text (no Markdown but code spans and links), wrapped."""
    return "\n".join(_wrap(text, WRAP, "- ", "  "))


def prose(text: str) -> str:
    """A paragraph of our own text (no Markdown but code spans), wrapped."""
    return "\n".join(_wrap(text))


def outcome_text(outcome: str, judged: bool) -> str:
    """An outcome as pages show it: a judged one says so, so no reader takes it for a
    verifier's."""
    return f"{outcome} (judged by a model)" if judged else outcome
