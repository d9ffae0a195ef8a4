"""A local stub of OpenAI's files and batches endpoints (and chat completions), on 127.0.0.1:
what `--batch` reaches through litellm's real code path in the tests and benchmarks."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers import chat_completion, good_answer, local_server

Answer = Callable[[dict[str, Any]], str | None]
"""A request's body -> the answer's content, or None for an error line."""


def default_answer(body: dict[str, Any]) -> str | None:
    return good_answer(body["messages"][0]["content"])


@dataclass
class BatchStub:
    url: str
    answer: Answer = default_answer
    hold: bool = False
    """Keep every batch in_progress (a provider that has not answered yet)."""
    end: str = "completed"
    """How a batch ends: completed, expired (answers the first half only) or failed."""
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    uploads: int = 0
    polls: int = 0
    downloads: int = 0
    chat_calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests_of(self, batch_id: str) -> list[dict[str, Any]]:
        data = self.files[self.batches[batch_id]["input_file_id"]]
        return [json.loads(line) for line in data.splitlines()]

    def _new_file(self, data: bytes, purpose: str) -> dict[str, Any]:
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = data
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": 0,
            "filename": f"{file_id}.jsonl",
            "purpose": purpose,
            "status": "processed",
        }

    def _run(self, batch: dict[str, Any]) -> None:
        """Answer a batch's requests (the first half only when it expires)."""
        lines = self.files[batch["input_file_id"]].splitlines()
        if self.end == "failed":
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"code": "bad", "message": "no"}]}
            return
        if self.end == "expired":
            lines = lines[: len(lines) // 2]
        out, errors = [], []
        for n, raw in enumerate(lines):
            request = json.loads(raw)
            content = self.answer(request["body"])
            if content is None:
                errors.append(
                    {
                        "id": f"req-{n}",
                        "custom_id": request["custom_id"],
                        "response": {
                            "status_code": 400,
                            "body": {"error": {"message": "stub refused this request"}},
                        },
                        "error": None,
                    }
                )
                continue
            out.append(
                {
                    "id": f"req-{n}",
                    "custom_id": request["custom_id"],
                    "response": {
                        "status_code": 200,
                        "body": chat_completion(request["body"]["model"], content),
                    },
                    "error": None,
                }
            )
        done = "\n".join(json.dumps(line) for line in out).encode()
        batch["output_file_id"] = self._new_file(done, "batch_output")["id"] if out else None
        failed = "\n".join(json.dumps(line) for line in errors).encode()
        batch["error_file_id"] = self._new_file(failed, "batch_output")["id"] if errors else None
        batch["status"] = self.end
        total = len(self.files[batch["input_file_id"]].splitlines())
        batch["request_counts"] = {"total": total, "completed": len(out), "failed": len(errors)}


@contextlib.contextmanager
def serving() -> Iterator[BatchStub]:
    stub = BatchStub(url="")

    class Handler(BaseHTTPRequestHandler):
        def _send(self, payload: Any, status: int = 200, raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers["content-length"]))
            with stub.lock:
                if self.path.endswith("/files"):
                    stub.uploads += 1
                    head = f"content-type: {self.headers['content-type']}\r\n\r\n".encode()
                    message = BytesParser(policy=HTTP).parsebytes(head + data)
                    parts = {
                        part.get_param("name", header="content-disposition"): part
                        for part in message.iter_parts()
                    }
                    content = parts["file"].get_payload(decode=True)
                    purpose = parts["purpose"].get_content()
                    self._send(stub._new_file(content, purpose))
                elif self.path.endswith("/batches"):
                    body = json.loads(data)
                    batch_id = f"batch_{len(stub.batches) + 1}"
                    stub.batches[batch_id] = {
                        "id": batch_id,
                        "object": "batch",
                        "endpoint": body["endpoint"],
                        "input_file_id": body["input_file_id"],
                        "completion_window": body["completion_window"],
                        "status": "validating",
                        "created_at": 0,
                        "metadata": body.get("metadata"),
                    }
                    self._send(stub.batches[batch_id])
                elif self.path.endswith("/chat/completions"):
                    stub.chat_calls += 1
                    body = json.loads(data)
                    self._send(chat_completion(body["model"], default_answer(body) or ""))
                else:
                    self._send({"error": {"message": f"no {self.path}"}}, 404)

        def do_GET(self) -> None:
            with stub.lock:
                parts = self.path.rstrip("/").split("/")
                if "batches" in parts:
                    batch = stub.batches.get(parts[-1])
                    if batch is None:
                        self._send({"error": {"message": "no such batch"}}, 404)
                        return
                    stub.polls += 1
                    if batch["status"] == "validating":
                        batch["status"] = "in_progress"
                    elif batch["status"] == "in_progress" and not stub.hold:
                        stub._run(batch)
                    self._send(batch)
                elif parts[-1] == "content" and parts[-2] in stub.files:
                    stub.downloads += 1
                    self._send(None, raw=stub.files[parts[-2]])
                else:
                    self._send({"error": {"message": f"no {self.path}"}}, 404)

        def log_message(self, *args: Any) -> None:
            pass

    with local_server(Handler) as port:
        stub.url = f"http://127.0.0.1:{port}/v1"
        yield stub
