"""A loopback server speaking the OpenAI Chat Completions wire format, for tests that need a model.

It answers ``GET /v1/models`` (the list-models object) and ``POST /v1/chat/completions``, plain or
streamed (``chat.completion.chunk`` SSE frames ending in ``data: [DONE]``), with the same text
reply and no tool call, so an agent's turn ends after one request. It runs on a thread, so
synchronous tests and child processes can use it alike.

Two ways to play a model that uses tools:

* rules: ``server.tool_rules`` maps a text to the tool calls (``[(name, arguments), ...]``) the
  model makes when the last user message contains that text; a request whose last message is a
  tool result is answered with ``tool results: `` and those results' text, so a test reads what
  the tools returned in the turn's reply;
* a queue (``openai_loopback(tools=True)``): a request whose last message is the user's takes the
  next call queued with ``server.call(name, **arguments)``, or, with none queued, is answered
  with the user's own text; a request whose last message is a tool result is answered with that
  result (``TOOL_DONE`` + result).
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
        reply, calls = self.server.answer(body.get("messages") or [])
        if calls:
            self._tool_calls(base, usage, calls, bool(body.get("stream")))
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

    def _tool_calls(self, base: dict[str, Any], usage: dict[str, int], calls: list[dict[str, Any]],
                    stream: bool) -> None:
        if not stream:
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            self._json(200, {**base, "object": "chat.completion", "usage": usage,
                             "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {**base, "object": "chat.completion.chunk"}
        deltas = [{**call, "index": i} for i, call in enumerate(calls)]
        frames = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": deltas},
                                   "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "usage": usage},
        ]
        for frame in frames:
            self.wfile.write(b"data: " + json.dumps(frame).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tools: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        #: Tool mode: text in the last user message -> the tool calls [(name, arguments)] made for it.
        self.tool_rules: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._calls = 0
        #: Queue mode (``tools=True``): the calls :meth:`call` queued, made one per user message.
        self.tools = tools
        self._queued: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()

    def call(self, name: str, **arguments: Any) -> None:
        """Queue mode: the next request ending in a user message calls ``name(**arguments)``."""
        with self._lock:
            self._queued.append({"name": name, "arguments": arguments})

    def _made(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._calls += 1
            made = self._calls
        return {"id": f"call_{made}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}

    def answer(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """The reply text, or the tool calls, for a request's messages (see the module docstring)."""
        if self.tools:
            last = messages[-1] if messages else {}
            if last.get("role") == "tool":
                return TOOL_DONE + _text(last.get("content")), []
            with self._lock:
                queued = self._queued.popleft() if self._queued else None
            if queued is None:
                return _text(last.get("content")), []
            return "", [self._made(queued["name"], queued["arguments"])]
        results = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.insert(0, _text(message.get("content")))
        if results:
            return "tool results: " + " | ".join(results), []
        last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        text = _text(last.get("content")) if last is not None else ""
        for needle, calls in self.tool_rules.items():
            if needle in text:
                return "", [self._made(name, arguments) for name, arguments in calls]
        return REPLY, []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@contextmanager
def openai_loopback(*, tools: bool = False) -> Iterator[_Server]:
    """Serve until the block ends; ``.base_url`` ends in ``/v1``, ``.requests`` holds the bodies.

    ``tools``: queue mode (see the module's docstring); queue calls with ``server.call(name, **arguments)``.
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
