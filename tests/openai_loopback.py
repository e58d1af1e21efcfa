"""A loopback server speaking the OpenAI Chat Completions wire format, for tests that need a model.

It answers ``GET /v1/models`` (the list-models object) and ``POST /v1/chat/completions``, plain or
streamed (``chat.completion.chunk`` SSE frames ending in ``data: [DONE]``), always with the same
text reply and never a tool call, so an agent's turn ends after one request. It runs on a thread,
so synchronous tests and child processes can use it alike.

In tool mode (``openai_loopback(tools=True)``) it plays a model that uses tools: a request whose
last message is the user's takes the next call queued with ``server.call(name, **arguments)``
(answered as a ``tool_calls`` reply), or, with none queued, is answered with the user's own text;
a request whose last message is a tool result is answered with that result
(``TOOL_DONE`` + result), so the turn ends there and its reply shows what the tool did.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "Hello from the loopback model."
TOOL_DONE = "好的 · Done: "


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "loopback-model", "object": "model",
                                                         "created": 1_700_000_000, "owned_by": "tests"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        self.server.paths.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.requests.append(body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        base = {"id": "chatcmpl-loopback", "created": 1_700_000_000, "model": body.get("model", "")}
        usage = {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16}
        reply, call = REPLY, None
        if self.server.tools:
            reply, call = self.server.answer(body.get("messages") or [])
        if call is not None:
            self._tool_call(base, usage, call, bool(body.get("stream")))
            return
        if not body.get("stream"):
            message = {"role": "assistant", "content": reply}
            self._json(200, {**base, "object": "chat.completion", "usage": usage,
                             "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {**base, "object": "chat.completion.chunk"}
        frames = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
            *({**chunk, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
              for piece in (reply[:5], reply[5:])),
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage},
        ]
        for frame in frames:
            self.wfile.write(b"data: " + json.dumps(frame).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


    def _tool_call(self, base: dict[str, Any], usage: dict[str, int], call: dict[str, Any], stream: bool) -> None:
        if not stream:
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            self._json(200, {**base, "object": "chat.completion", "usage": usage,
                             "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {**base, "object": "chat.completion.chunk"}
        frames = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None,
                                                         "tool_calls": [{"index": 0, **call}]},
                                   "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": usage},
        ]
        for frame in frames:
            self.wfile.write(b"data: " + json.dumps(frame).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tools: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.tools = tools
        self._calls: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._made = 0

    def call(self, name: str, **arguments: Any) -> None:
        """Tool mode: the next request ending in a user message calls ``name(**arguments)``."""
        with self._lock:
            self._calls.append({"name": name, "arguments": arguments})

    def answer(self, messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
        """Tool mode: (text reply, or None) and (the tool call to make, or None) for ``messages``."""
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return TOOL_DONE + _text(last), None
        with self._lock:
            if not self._calls:
                return _text(last), None
            queued = self._calls.popleft()
            self._made += 1
            made = self._made
        call = {"id": f"call_{made}", "type": "function",
                "function": {"name": queued["name"], "arguments": json.dumps(queued["arguments"], ensure_ascii=False)}}
        return "", call

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def openai_loopback(*, tools: bool = False) -> Iterator[_Server]:
    """Serve until the block ends; ``.base_url`` ends in ``/v1``, ``.requests`` holds the bodies.

    ``tools``: tool mode (see the module's docstring); queue calls with ``server.call(name, **arguments)``.
    """
    server = _Server(tools)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
