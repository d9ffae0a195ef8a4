"""`wikitrace mcp`: the real command, driven by the official SDK's client over stdio and HTTP."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters

from wikitrace.tools.mcp_server import URI_ROOT, Corpus, build_server
from wikitrace.tools.memory import Memory

from helpers import free_port, make_run, run, write_runs

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
WIKITRACE = str(Path(sys.executable).parent / "wikitrace")
TOOLS = ["first_message", "search", "read_page", "actions", "turn", "audit", "check_citations"]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's example corpus: offline, with mined lessons."""
    root = tmp_path_factory.mktemp("mcp") / "example-corpus"
    code, _, err = run(["-q", "build", str(EXAMPLE), "-o", str(root)])
    assert code == 0, err
    return root


def call(corpus: Path, body: Any) -> Any:
    """Run `body(client)` against a real `wikitrace mcp CORPUS` over stdio."""

    async def main() -> Any:
        params = StdioServerParameters(command=WIKITRACE, args=["mcp", str(corpus)])
        async with Client(params) as client:
            return await body(client)

    return anyio.run(main)


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_over_stdio_every_tool_answers_as_the_cli_does(example: Path) -> None:
    async def body(client: Client) -> dict[str, Any]:
        tools = (await client.list_tools()).tools
        out: dict[str, Any] = {
            "tools": {t.name: t for t in tools},
            "instructions": client.instructions,
        }
        for name, arguments in [
            ("first_message", {"task": "Cancel my reservation and refund it"}),
            ("search", {"query": "cancel flights refund", "kind": "tasks", "limit": 2}),
            ("read_page", {"path": "insight/insight-0001.md"}),
            ("actions", {"step": "step-0002"}),
            ("turn", {"step": "2", "turns": "3-4"}),
            ("audit", {"entry": "insight-0001"}),
            ("check_citations", {"report": {"used": {"insights": ["insight-0001"]}}}),
        ]:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, (name, text_of(result))
            out[name] = text_of(result)
        return out

    seen = call(example, body)
    assert sorted(seen["tools"]) == sorted(TOOLS)
    for name in TOOLS:  # each says when to use it, and promises to write nothing
        tool = seen["tools"][name]
        assert len(tool.description) > 80 and "\n        " not in tool.description
        assert tool.annotations.read_only_hint is True
    assert "version v0001" in seen["instructions"] and "drill down" in seen["instructions"]
    # The same texts as the CLI's; the first message names this server's tools, not a shell's.
    task = "Cancel my reservation and refund it"
    over_mcp = Memory.load(example).first_message(task, access="mcp").text
    assert seen["first_message"].rstrip("\n") == over_mcp.rstrip("\n")
    cli = run(["prompt", str(example), task])[1]
    assert "cat /work/corpus/insight/insight-NNNN.md" in cli and "read_page(" not in cli
    for shell in ("cat ", "grep ", "/work/corpus", "tools/turn"):
        assert shell not in seen["first_message"], shell
    for name in ("read_page(", "audit(", "actions(", "turn(", "search("):
        assert name in seen["first_message"], name
    assert seen["first_message"].split("## Insights for")[0] == over_mcp.split("## Insights")[0]
    assert seen["actions"] == run(["actions", str(example), "step-0002"])[1].rstrip("\n")
    assert seen["turn"] == run(["turn", str(example), "2", "3-4"])[1].rstrip("\n")
    assert seen["audit"] == run(["audit", str(example), "insight-0001"])[1]
    page = (example / "insight" / "insight-0001.md").read_text(encoding="utf-8")
    assert seen["read_page"] == page
    hits = seen["search"].splitlines()
    assert len(hits) == 2 and all(re.match(r"0\.\d\d task step-", h) for h in hits)
    assert "cancel" in hits[0].lower() and "[raw/step-" in hits[0]
    assert seen["check_citations"].startswith("ok: 1 entry, all in the corpus")


HOSTILE = [
    ("read_page", {"path": "../manifest.json"}, "is not a page of this corpus"),
    ("read_page", {"path": "/etc/passwd"}, "is not a page of this corpus"),
    ("read_page", {"path": "raw/step-0001/../../../../etc/passwd"}, "is not a page"),
    ("read_page", {"path": "insight/\x00.md"}, "is not a page of this corpus"),
    ("read_page", {"path": "x" * 5000}, "is not a page of this corpus"),
    ("read_page", {"path": "_index.md", "offset": -1}, "bad arguments to read_page: offset"),
    ("read_page", {"path": "_index.md", "offset": True}, "offset: Input should be a valid integer"),
    ("read_page", {"path": "_index.md", "offset": 1.0}, "offset: Input should be a valid integer"),
    ("read_page", {"path": "_index.md", "offset": "1"}, "offset: Input should be a valid integer"),
    ("read_page", {"path": "_index.md", "offset": 10**12}, "offset 1000000000000 is past the end"),
    ("read_page", {"path": "_index.md", "offset": 10**30}, "offset: Input should be less than"),
    ("search", {"query": "x", "limit": True}, "bad arguments to search: limit"),
    ("first_message", {"task": "x", "similar": 2.0}, "bad arguments to first_message: similar"),
    ("first_message", {"task": "x", "all_types": 1}, "all_types: Input should be a valid bool"),
    ("first_message", {"task": "x", "max_tokens": 10**13}, "max_tokens: Input should be less"),
    ("actions", {"step": "step-9999"}, "step-9999 is not in this corpus"),
    ("actions", {"step": "../../etc"}, "not a step"),
    ("turn", {"step": "1", "turns": "0-3"}, "bad turn range"),
    ("turn", {"step": "1", "turns": "3-1"}, "bad turn range"),
    ("turn", {"step": "1", "turns": "1-99999999999"}, "not a turn number or range"),
    ("turn", {"step": 1, "turns": "1"}, "bad arguments to turn: step"),
    ("turn", {"step": "1"}, "bad arguments to turn: turns: Field required"),
    ("audit", {"entry": "insight-9999"}, "no insight insight-9999"),
    ("audit", {"entry": "../../etc/passwd"}, "not an insight id"),
    ("first_message", {"task": "  "}, "the task is empty"),
    ("first_message", {"task": "x", "task_type": "nope"}, "no task type 'nope'"),
    ("search", {"query": "x", "kind": "everything"}, "bad arguments to search: kind"),
    ("search", {"query": "q" * 3000}, "the query is 3000 characters"),
    ("check_citations", {"report": {"used": {"raw": ["step-0999"]}}}, "'step-0999' is not in"),
    ("check_citations", {"report": {"usde": {}}}, "field 'used': Field required"),
    ("check_citations", {"report": "not an object"}, "bad arguments to check_citations"),
    ("no_such_tool", {}, "no_such_tool"),
]


def test_hostile_arguments_are_one_line_tool_errors_and_read_nothing_outside(
    example: Path,
) -> None:
    async def body(client: Client) -> list[tuple[bool, str]]:
        return [
            ((r := await client.call_tool(name, arguments)).is_error, text_of(r))
            for name, arguments, _ in HOSTILE
        ]

    for (name, _, expected), (is_error, text) in zip(HOSTILE, call(example, body), strict=True):
        assert is_error, (name, text)
        assert expected in text and "\n" not in text and "Traceback" not in text, (name, text)
        assert "root:" not in text  # nothing read from /etc/passwd


def test_a_far_offset_is_a_clear_error_with_no_traceback(
    example: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, an offset past the page was skipped by reading it into memory: 1e12 failed with
    a bare "Error executing tool" and a traceback on the server's stderr."""
    length = len((example / "_index.md").read_text(encoding="utf-8"))

    async def main() -> list[tuple[bool, str]]:
        async with Client(build_server(Corpus(example))) as client:
            found = []
            for offset in (length, length + 1, 10**12, 2**40):
                arguments = {"path": "_index.md", "offset": offset}
                result = await client.call_tool("read_page", arguments)
                found.append((result.is_error, text_of(result)))
            return found

    at_end, *past = anyio.run(main)
    assert at_end == (False, "")
    for (is_error, text), offset in zip(past, (length + 1, 10**12, 2**40), strict=True):
        assert is_error
        assert text.endswith(f"offset {offset} is past the end of _index.md ({length} characters)")
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


def test_resources_list_the_indexes_and_read_any_page_by_uri(example: Path) -> None:
    async def body(client: Client) -> dict[str, Any]:
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        templates = [
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        ]
        read = await client.read_resource(URI_ROOT + "compilation/step-0003.md")
        errors = []
        for uri in (URI_ROOT + "nope.md", URI_ROOT + "../manifest.json", URI_ROOT + "%2e%2e/x"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            errors.append(str(caught.value))
        return {"listed": listed, "templates": templates, "read": read, "errors": errors}

    seen = call(example, body)
    assert seen["listed"] == [
        URI_ROOT + "_index.md",
        URI_ROOT + "raw/_index.md",
        URI_ROOT + "compilation/_index.md",
        URI_ROOT + "insight/_index.md",
    ]
    assert seen["templates"] == [URI_ROOT + "{+path}"]
    page = (example / "compilation" / "step-0003.md").read_text(encoding="utf-8")
    assert seen["read"].contents[0].text == page
    assert "'nope.md' is not a page of this corpus" in seen["errors"][0]
    assert all("Traceback" not in e for e in seen["errors"])


def test_a_long_page_comes_in_parts_that_join_to_the_whole(example: Path) -> None:
    corpus = Corpus(example)
    whole = (example / "raw" / "step-0001" / "solver.full.jsonl").read_text(encoding="utf-8")
    parts, offset = [], 0
    while True:
        text = corpus.page("raw/step-0001/solver.full.jsonl", offset, limit=1000)
        head, _, more = text.partition("\n[... more: call read_page with path=")
        parts.append(head)
        if not more:
            break
        offset = int(more.split("offset=", 1)[1].split(" ", 1)[0])
    assert "".join(parts) == whole and len(parts) > 3


def test_only_files_the_manifest_lists_are_served(example: Path, tmp_path: Path) -> None:
    """A file slipped into the corpus after it was frozen, or a link out of it, is never read."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(example.resolve()), str(copy)], check=True)
    (copy / "insight").chmod(0o755)
    (copy / "insight" / "planted.md").write_text("secret", encoding="utf-8")
    (copy / "insight" / "insight-0001.md").chmod(0o644)
    (copy / "insight" / "insight-0001.md").unlink()
    (copy / "insight" / "insight-0001.md").symlink_to("/etc/hostname")
    corpus = Corpus(copy)
    with pytest.raises(ValueError, match="is not a page"):
        corpus.page("insight/planted.md")
    with pytest.raises(ValueError, match="not a regular file inside the corpus"):
        corpus.page("insight/insight-0001.md")


def test_the_server_keeps_serving_the_version_it_started_on(tmp_path: Path) -> None:
    runs = write_runs(tmp_path / "a.jsonl", [make_run("a"), make_run("a", success=True)])
    more = write_runs(tmp_path / "b.jsonl", [make_run("b", success=True)])
    pointer = tmp_path / "corpus"
    assert run(["-q", "build", str(runs), "-o", str(pointer)])[0] == 0
    corpus = Corpus(pointer)
    server = build_server(corpus)
    assert run(["-q", "add", str(pointer), str(more)])[0] == 0  # the pointer moves to v0002

    async def main() -> tuple[str | None, str]:
        async with Client(server) as client:
            index = await client.call_tool("read_page", {"path": "raw/_index.md"})
            return client.instructions, text_of(index)

    instructions, index = anyio.run(main)
    assert corpus.version == "v0001" and "version v0001" in (instructions or "")
    assert "step-0003" not in index  # v0002's run
    assert "step-0003" in (pointer / "raw" / "_index.md").read_text(encoding="utf-8")


def test_the_server_never_imports_litellm(example: Path) -> None:
    code = f"""
import sys, anyio
from mcp import Client
from wikitrace.tools.mcp_server import Corpus, build_server
async def main():
    async with Client(build_server(Corpus(__import__("pathlib").Path({str(example)!r})))) as c:
        for name, args in [("first_message", {{"task": "cancel"}}), ("search", {{"query": "x"}}),
                           ("audit", {{"entry": "1"}}), ("turn", {{"step": "1", "turns": "1"}})]:
            assert not (await c.call_tool(name, args)).is_error
anyio.run(main)
print("litellm" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_client_with_a_shell_is_told_shell_commands(example: Path) -> None:
    """Given the mount it sees the corpus at, an agent with a shell gets `wikitrace prompt`'s
    text, word for word."""
    task = "Cancel my reservation and refund it"

    async def body(client: Client) -> str:
        arguments = {"task": task, "mount": "/mnt/memory"}
        return text_of(await client.call_tool("first_message", arguments))

    cli = run(["prompt", str(example), task, "--mount", "/mnt/memory"])[1]
    assert call(example, body).rstrip("\n") == cli.rstrip("\n")
    assert "cat /mnt/memory/insight/insight-NNNN.md" in cli


CLAUDE_ADD = 'claude mcp add memory -- "$(command -v wikitrace)" mcp /abs/path/corpus'
"""The README's Claude Code line: the shell that runs it puts the venv's absolute path in."""
CONFIGS = {
    "wikitrace": '{"mcpServers": {"memory": {"command": "/abs/path/.venv/bin/wikitrace", '
    '"args": ["mcp", "/abs/path/corpus"]}}}',
    "python -m": '{"mcpServers": {"memory": {"command": "/abs/path/.venv/bin/python", '
    '"args": ["-m", "wikitrace.cli", "mcp", "/abs/path/corpus"]}}}',
}
"""The README's mcpServers entries (Claude Desktop, a project's .mcp.json)."""
CLIENT_PATH = "/usr/bin:/bin"
"""A client's PATH: the virtualenv is not on it (Claude Desktop, an IDE started from a dock)."""


def _tools_of(command: list[str]) -> list[str]:
    """The tools a client lists from a server it starts as `command`, without the venv on
    its PATH."""

    async def main() -> list[str]:
        params = StdioServerParameters(
            command=command[0], args=command[1:], env={"PATH": CLIENT_PATH}
        )
        async with Client(params) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    return list(anyio.run(main))


def test_the_readme_s_client_snippets_start_the_server_from_a_venv(example: Path) -> None:
    """`claude mcp add memory -- wikitrace mcp ...` stored a bare `wikitrace`, which a client
    whose PATH lacks the venv cannot start; the snippets as the README shows them can."""
    import shlex
    import shutil

    venv = str(Path(sys.executable).parent)
    assert shutil.which("wikitrace", path=CLIENT_PATH) is None  # the bare name: not found
    # What `claude mcp add` stores: the words after `--`, as an activated venv's shell
    # expands them.
    words = CLAUDE_ADD.replace("/abs/path/corpus", shlex.quote(str(example))).split(" -- ", 1)[1]
    expanded = subprocess.run(
        ["sh", "-c", f"printf '%s\\n' {words}"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": f"{venv}:{CLIENT_PATH}"},
    ).stdout.splitlines()
    assert expanded == [f"{venv}/wikitrace", "mcp", str(example)]
    assert _tools_of(expanded) == TOOLS
    for snippet in CONFIGS.values():
        entry = json.loads(
            snippet.replace("/abs/path/.venv/bin", venv).replace("/abs/path/corpus", str(example))
        )["mcpServers"]["memory"]
        assert _tools_of([entry["command"], *entry["args"]]) == TOOLS


def test_list_prints_what_a_client_sees(example: Path) -> None:
    code, out, err = run(["mcp", str(example), "--list"])
    assert code == 0, err
    listed = json.loads(out)
    assert [t["name"] for t in listed["tools"]] == TOOLS
    assert listed["version"] == "v0001" and listed["resources"][0] == URI_ROOT + "_index.md"


def test_not_a_corpus_is_a_one_line_error(tmp_path: Path) -> None:
    code, _, err = run(["mcp", str(tmp_path)])
    assert code == 1 and "has no manifest.json" in err and "Traceback" not in err


# --- streamable HTTP on 127.0.0.1 ----------------------------------------------------------


@pytest.fixture
def http_server(example: Path, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "server.log"
    with (
        log.open("wb") as stderr,
        subprocess.Popen(
            [WIKITRACE, "mcp", str(example), "--http", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        ) as process,
    ):
        try:
            # Generous: on a busy machine, the server's start (the MCP SDK's imports) takes
            # many seconds; it is tried every 0.05 s, so a quiet machine does not wait.
            deadline = time.monotonic() + 120
            while True:
                assert process.poll() is None, log.read_text()
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert time.monotonic() < deadline, f"nothing listens on {port}: {log.read_text()}"
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=60)
    assert "over http://127.0.0.1:" in log.read_text()


def test_over_http_on_loopback(http_server: str) -> None:
    async def main() -> tuple[list[str], str, bool, str]:
        async with Client(http_server) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            message = text_of(await client.call_tool("first_message", {"task": "Book a flight"}))
            bad = await client.call_tool("read_page", {"path": "../../../etc/passwd"})
            return tools, message, bad.is_error, text_of(bad)

    tools, message, bad_is_error, bad = anyio.run(main)
    assert sorted(tools) == sorted(TOOLS)
    assert message.startswith("# Your task\n\nBook a flight\n")
    assert bad_is_error and "is not a page of this corpus" in bad


def test_on_a_corpus_with_a_model_s_insights(toy_corpus: Path) -> None:
    """The toy's runs compiled by its model server: lessons, their claims, their audit."""

    async def body(client: Client) -> dict[str, str]:
        out = {}
        for name, arguments in [
            ("first_message", {"task": "Fetch the key from drawer 3"}),
            ("search", {"query": "drawer locked", "kind": "insights"}),
            ("search", {"query": "agent item", "kind": "compilations", "limit": 1}),
            ("audit", {"entry": "1"}),
        ]:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, text_of(result)
            out[f"{name} {arguments.get('kind', '')}".strip()] = text_of(result)
        return out

    seen = call(toy_corpus, body)
    assert "## Insights for" in seen["first_message"] and "insight-0001" in seen["first_message"]
    assert re.match(r"0\.\d\d insight insight-", seen["search insights"])
    assert re.match(r"0\.\d\d compilation step-", seen["search compilations"])
    assert "[compilation/step-" in seen["search compilations"]
    assert "## Claims behind it" in seen["audit"] and ">>>" in seen["audit"]
