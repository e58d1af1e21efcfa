"""FakeModelServer: a :class:`FakeModel` behind a loopback OpenAI-compatible HTTP endpoint.

For end-to-end tests of a real daemon (``homeagent serve`` in a subprocess): point a source's
``base_url`` at ``server.base_url`` and the daemon's real provider code (Lua adapter, httpx,
SSE parsing) talks to the scripted model. ``POST /v1/chat/completions`` answers in the Chat
Completions wire format, streaming (``chat.completion.chunk`` SSE frames, ``[DONE]``) or not;
``server.model.requests`` holds the requests as the model saw them (OpenAI ``messages``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from homeagent_sdk._fake_model import FakeModel
from homeagent_sdk._net import listen_tcp

__all__ = ["FakeModelServer"]


class FakeModelServer:
    """``async with FakeModelServer(model) as server:`` serves ``model`` on 127.0.0.1 (a free port)."""

    __test__ = False

    def __init__(self, model: FakeModel | None = None) -> None:
        self.model = model if model is not None else FakeModel(default="ok")
        self.port = 0
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeModelServer:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        app = Starlette(routes=[
            Route("/v1/chat/completions", self._completions, methods=["POST"]),
            Route("/chat/completions", self._completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
        ])
        sock = listen_tcp("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]))
        async with asyncio.timeout(10):
            while not self._server.started:
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await self._task

    async def _models(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "test"}]})

    async def _completions(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, StreamingResponse

        body = await request.json()
        answer = await self.model.chat(body)
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False)},
            }
            for c in answer["tool_calls"]
        ]
        message: dict[str, Any] = {"role": "assistant", "content": answer["content"] or None}
        if calls:
            message["tool_calls"] = calls
        usage = answer["token_usage"]
        wire_usage = {
            "prompt_tokens": usage.get("prompt", 0),
            "completion_tokens": usage.get("completion", 0),
            "total_tokens": usage.get("total", 0),
        }
        created = int(time.time())
        if not body.get("stream"):
            return JSONResponse({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": created, "model": body.get("model"),
                "choices": [{"index": 0, "message": message, "finish_reason": answer["finish_reason"]}],
                "usage": wire_usage,
            })

        def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
            chunk = {
                "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created,
                "model": body.get("model"), "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"

        async def stream() -> Any:
            yield frame({"role": "assistant", "content": answer["content"] or ""})
            for index, call in enumerate(calls):
                yield frame({"tool_calls": [{"index": index, **call}]})
            yield frame({}, answer["finish_reason"])
            final = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": created,
                     "model": body.get("model"), "choices": [], "usage": wire_usage}
            yield b"data: " + json.dumps(final).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")
