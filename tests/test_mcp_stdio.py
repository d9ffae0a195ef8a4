"""The MCP server's stdio on its own loop (tools/mcp_stdio.py): lines read as sent, answers
written whole, and stdin or stdout the loop cannot wait on left to the SDK's transport."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio

from wikitrace.tools.mcp_stdio import LineReader, Writer, waitable

from helpers import run

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tau-bench-airline.jsonl"
WIKITRACE = str(Path(sys.executable).parent / "wikitrace")


def test_lines_come_whole_however_the_bytes_arrive() -> None:
    reading, writing = os.pipe()
    parts = [b'{"a": 1}\n{"b"', b': "\xc3', b'\xa9"}\n\n', b"no newline at the end"]

    def send() -> None:
        for part in parts:
            os.write(writing, part)
        os.close(writing)

    async def lines() -> list[str]:
        sender = threading.Thread(target=send)
        sender.start()
        found = [line async for line in LineReader(reading)]
        sender.join()
        return found

    try:
        assert anyio.run(lines) == ['{"a": 1}\n', '{"b": "é"}\n', "\n", "no newline at the end"]
    finally:
        os.close(reading)


def test_an_answer_longer_than_the_pipe_holds_is_written_whole() -> None:
    reading, writing = os.pipe()
    text = "é" * 300_000 + "\n"  # 600 KB: many times a pipe's buffer
    received = bytearray()

    def drain() -> None:
        while chunk := os.read(reading, 1 << 16):
            received.extend(chunk)

    async def write() -> None:
        writer = Writer(writing)
        await writer.write(text)
        await writer.flush()

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        anyio.run(write)
    finally:
        os.close(writing)
        reader.join()
        os.close(reading)
    assert received.decode() == text


def test_only_pipes_and_sockets_are_waited_on(tmp_path: Path) -> None:
    reading, writing = os.pipe()
    plain = tmp_path / "f"
    plain.write_text("x")
    with plain.open() as handle:
        assert waitable(reading) and not waitable(handle.fileno())
    os.close(reading)
    os.close(writing)
    assert not waitable(reading)  # closed


def test_requests_from_a_file_are_answered_by_the_sdk_s_transport(tmp_path: Path) -> None:
    """stdin and stdout regular files (no loop can wait on them): the SDK's own stdio."""
    corpus = tmp_path / "corpus"
    assert run(["-q", "build", str(EXAMPLE), "-o", str(corpus)])[0] == 0
    meta = {  # what the SDK's client sends with every request
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    requests = tmp_path / "requests.jsonl"
    call = {"name": "actions", "arguments": {"step": "step-0001"}, "_meta": meta}
    requests.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}) + "\n"
    )
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [WIKITRACE, "mcp", str(corpus)], stdin=stdin, stdout=stdout, timeout=60
        )
    assert done.returncode == 0
    (answer,) = [json.loads(line) for line in answers.read_text().splitlines()]
    assert answer["id"] == 1
    assert answer["result"]["content"][0]["text"].startswith("step-0001: 24 turns")
