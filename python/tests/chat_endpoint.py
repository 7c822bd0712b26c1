"""A local OpenAI-compatible chat endpoint with scripted replies, for tests that run a real client
(verifiers' harness program, which streams): POST /v1/chat/completions answers the reply for the
conversation's turn (the count of assistant messages in the request), as one JSON completion or as
server-sent events when the request says ``stream``; GET /v1/models lists one model with its
``max_model_len`` as vLLM does. Standard library only; serves on 127.0.0.1 in a thread."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatEndpoint:
    def __init__(self, replies: list[str], model: str = "tiny", max_model_len: int = 32768) -> None:
        self.replies, self.model, self.max_model_len = replies, model, max_model_len
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, body: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                models = {"object": "list", "data": [{"id": endpoint.model, "object": "model",
                                                      "max_model_len": endpoint.max_model_len}]}
                self._answer(json.dumps(models).encode(), "application/json")

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.requests.append(request)
                turn = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
                content = endpoint.replies[min(turn, len(endpoint.replies) - 1)]
                usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
                head = {"id": f"chat-{len(endpoint.requests)}", "created": 0, "model": request.get("model")}
                if not request.get("stream"):
                    message = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                    body = {**head, "object": "chat.completion", "choices": [message], "usage": usage}
                    self._answer(json.dumps(body).encode(), "application/json")
                    return
                chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": content},
                                        "finish_reason": None}]},
                          {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                          {"choices": [], "usage": usage}]
                events = "".join(f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', **c})}\n\n"
                                 for c in chunks)
                self._answer((events + "data: [DONE]\n\n").encode(), "text/event-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ChatEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
