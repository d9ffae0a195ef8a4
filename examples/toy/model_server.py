"""An OpenAI-compatible chat server that answers wikitrace's compile prompts with lessons.py.

    python examples/toy/model_server.py --port 8321 &
    wikitrace build runs.jsonl -o toy --model openai/toy --api-base http://127.0.0.1:8321/v1

It stands where a local model server (vLLM, llama.cpp, Ollama) would, so the toy walk-through
goes through the same litellm code path as a real model, with no key and no download.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lessons import answer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        content = answer(body["messages"][0]["content"])
        data = json.dumps(
            {
                "id": "toy",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "toy"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8321)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"toy model server on http://127.0.0.1:{args.port}/v1", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
