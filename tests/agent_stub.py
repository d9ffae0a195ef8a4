"""A local stand-in for the model APIs that coding agents call, so that the real Claude Code,
Codex and Gemini CLIs run a session here, offline: Anthropic's Messages API (Claude Code;
streamed as server-sent events, or one JSON answer), OpenAI's Responses API (Codex; streamed)
and Google's Gemini API (Gemini CLI; generateContent, streamed or not). Every
request is kept, so that a test can read what the agent put before its model (a hook's added
context); each is answered with one fixed text and no tool call, which ends the turn."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers import local_server

REPLY = "Done."
"""The model's whole answer to every request."""


@dataclass
class AgentStub:
    url: str
    """The server's root, http://127.0.0.1:PORT (Claude Code adds /v1/messages, Gemini CLI
    /v1beta/models/...; Codex's provider is given URL/v1)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Each model request's path and JSON body, in order."""

    def bodies(self, path_end: str) -> list[str]:
        """The bodies of the requests to a path ending so, each as its JSON text."""
        return [
            json.dumps(request["body"])
            for request in self.requests
            if request["path"].split("?")[0].endswith(path_end)
        ]


def _events(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _messages(body: dict[str, Any]) -> tuple[str, bytes]:
    """Anthropic's Messages API: one text block, end of turn."""
    model = body.get("model", "stub")
    message = {"id": "msg_stub", "type": "message", "role": "assistant", "model": model}
    done = {"stop_reason": "end_turn", "stop_sequence": None}
    if not body.get("stream"):
        whole = {
            **message,
            "content": [{"type": "text", "text": REPLY}],
            **done,
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }
        return "application/json", json.dumps(whole).encode()
    started = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return "text/event-stream", _events(
        [
            ("message_start", {"type": "message_start", "message": started}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": REPLY},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {"type": "message_delta", "delta": done, "usage": {"output_tokens": 2}},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _responses(body: dict[str, Any]) -> tuple[str, bytes]:
    """OpenAI's Responses API, streamed: one assistant message, completed."""
    item = {
        "type": "message",
        "id": "msg_stub",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
    }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 12,
    }
    response = {
        "id": "resp_stub",
        "object": "response",
        "model": body.get("model"),
        "status": "completed",
        "output": [item],
        "usage": usage,
    }
    return "text/event-stream", _events(
        [
            (
                "response.created",
                {
                    "type": "response.created",
                    "response": {**response, "status": "in_progress", "output": []},
                },
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": response}),
        ]
    )


def _gemini(streamed: bool) -> tuple[str, bytes]:
    """The Gemini API's generateContent: one text part, stopped."""
    answer = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": REPLY}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
    }
    if streamed:
        return "text/event-stream", f"data: {json.dumps(answer)}\r\n\r\n".encode()
    return "application/json", json.dumps(answer).encode()


@contextlib.contextmanager
def serving_agents() -> Iterator[AgentStub]:
    """The stub on a free port of 127.0.0.1, until the block ends."""
    stub = AgentStub(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            # Model lists, asked for by some versions at start: an empty one.
            if self.path.split("?")[0].endswith("/models"):
                self._answer(200, "application/json", b'{"object": "list", "data": []}')
            else:
                self._answer(404, "application/json", b"{}")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw)
            except ValueError:
                self._answer(400, "application/json", b'{"error": "not JSON"}')
                return
            with lock:
                stub.requests.append({"path": self.path, "body": body})
            if path.endswith("/messages/count_tokens"):
                self._answer(200, "application/json", b'{"input_tokens": 10}')
            elif path.endswith("/messages"):
                self._answer(200, *_messages(body))
            elif path.endswith("/responses"):
                self._answer(200, *_responses(body))
            elif path.endswith(":countTokens"):
                self._answer(200, "application/json", b'{"totalTokens": 10}')
            elif path.endswith((":generateContent", ":streamGenerateContent")):
                self._answer(200, *_gemini(path.endswith(":streamGenerateContent")))
            else:
                self._answer(404, "application/json", b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    with local_server(Handler) as port:
        stub.url = f"http://127.0.0.1:{port}"
        yield stub
