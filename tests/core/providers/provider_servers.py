"""Loopback HTTP servers speaking real vendor wire formats, for provider tests and the bench.

One Starlette app serves four vendors; each fixture follows a documented example:

* OpenAI Chat Completions — the API reference's "Create chat completion" response object,
  the streaming "chat.completion.chunk" example, the function-calling guide's streamed
  tool-call deltas (first delta has id/type/name, later ones only ``index`` + ``arguments``),
  and the ``stream_options.include_usage`` final frame with ``choices: []``.
  https://platform.openai.com/docs/api-reference/chat
* Anthropic Messages — the "Create a Message" response example and the streaming guide's
  "Streaming request with tool use" event sequence (message_start, content_block_start,
  ping, content_block_delta text_delta / input_json_delta, content_block_stop,
  message_delta, message_stop). https://docs.anthropic.com/en/docs/build-with-claude/streaming
* Gemini — ``models.generateContent`` response (candidates/content/parts, finishReason,
  usageMetadata) and ``streamGenerateContent?alt=sse`` (one GenerateContentResponse per
  ``data:`` line), function calling guide's ``functionCall`` part.
  https://ai.google.dev/api/generate-content
* Ollama — docs/api.md "Generate a chat completion": streaming NDJSON objects with
  ``message.content`` and a final ``done: true`` object with ``done_reason``,
  ``prompt_eval_count``, ``eval_count``; "Chat request (with tools)" response.

Behaviour switches ride on the request's ``model`` (``error-401``, ``slow``, ``drop``...), so
one server can play every scenario without shared mutable test state.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


def _sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class FakeVendors:
    """State and handlers of the loopback vendor server."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.stream_closed = asyncio.Event()
        self.stream_started = asyncio.Event()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.openai, methods=["POST"]),
                Route("/chat/completions", self.openai, methods=["POST"]),
                Route("/openai/v1/chat/completions", self.openai, methods=["POST"]),
                Route("/v1/messages", self.anthropic, methods=["POST"]),
                Route("/v1beta/models/{call:path}", self.gemini, methods=["POST"]),
                Route("/api/chat", self.ollama, methods=["POST"]),
            ]
        )

    async def _record(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        body = orjson.loads(raw)
        self.requests.append(
            {"path": request.url.path, "query": request.url.query, "headers": dict(request.headers), "body": body}
        )
        return body

    # ---------------------------------------------------------------- OpenAI

    async def openai(self, request: Request) -> Response:
        body = await self._record(request)
        model = str(body.get("model", ""))
        if model.startswith("error-"):
            code = int(model.split("-")[1])
            return Response(
                orjson.dumps({"error": {"message": f"simulated {code}", "type": "test"}}),
                status_code=code,
                media_type="application/json",
            )
        if model == "slow":
            await self.release.wait()
        if model == "html":
            return Response("<html>502 Bad Gateway</html>", media_type="text/html")
        tools = model == "tools" or bool(body.get("tools"))
        if body.get("stream"):
            return StreamingResponse(self._openai_stream(model, tools, body), media_type="text/event-stream")
        if model == "sse-body":
            return Response(
                b"".join([_sse(c) for c in self._openai_frames(False)]) + b"data: [DONE]\n\n",
                media_type="text/event-stream",
            )
        msg: dict[str, Any] = {"role": "assistant", "content": "Hello there, how may I assist you today?"}
        finish = "stop"
        if tools:
            msg = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "get_current_weather", "arguments": '{\n"location": "Boston, MA"\n}'},
                    }
                ],
            }
            finish = "tool_calls"
        return Response(
            orjson.dumps(
                {
                    "id": "chatcmpl-123",
                    "object": "chat.completion",
                    "created": 1677652288,
                    "model": model,
                    "system_fingerprint": "fp_44709d6fcb",
                    "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
                    "usage": {
                        "prompt_tokens": 9,
                        "completion_tokens": 12,
                        "total_tokens": 21,
                        "prompt_tokens_details": {"cached_tokens": 4},
                        "completion_tokens_details": {"reasoning_tokens": 2},
                    },
                }
            ),
            media_type="application/json",
        )

    def _openai_frames(self, tools: bool) -> list[dict[str, Any]]:
        base = {
            "id": "chatcmpl-123",
            "object": "chat.completion.chunk",
            "created": 1694268190,
            "model": "gpt-4o-mini",
            "system_fingerprint": "fp_44709d6fcb",
        }

        def frame(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        frames = [frame({"role": "assistant", "content": ""})]
        if tools:
            frames += [
                frame(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_DdmO9pD3xa9XTPNJ32zg2hcA",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": ""},
                            }
                        ]
                    }
                ),
                frame({"tool_calls": [{"index": 0, "function": {"arguments": '{"lo'}}]}),
                frame({"tool_calls": [{"index": 0, "function": {"arguments": 'cation":'}}]}),
                frame({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
                frame(
                    {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "call_2",
                                "type": "function",
                                "function": {"name": "get_time", "arguments": "{}"},
                            }
                        ]
                    }
                ),
                frame({}, "tool_calls"),
            ]
        else:
            frames += [frame({"content": w}) for w in ("Hello", " from", " loopback")]
            frames.append(frame({}, "stop"))
        frames.append(
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": 20,
                    "completion_tokens": 3,
                    "total_tokens": 23,
                    "prompt_tokens_details": {"cached_tokens": 0},
                },
            }
        )
        return frames

    async def _openai_stream(self, model: str, tools: bool, body: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            self.stream_started.set()
            if model == "network_error":
                yield _sse(
                    {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "network_error"}],
                    }
                )
                return
            if model == "garbage":
                yield b": keep-alive comment\n\n"
                yield b"data: <html>this is not json</html>\n\n"
                return
            frames = self._openai_frames(tools)
            if model == "count":
                n = int(body.get("max_tokens") or 100)
                frames = [self._openai_frames(False)[1]] * n + frames[-2:]
            for i, f in enumerate(frames):
                if model == "drop" and i == 2:
                    raise ConnectionResetError("simulated mid-stream disconnect")
                if model == "hang" and i == 2:
                    await asyncio.Event().wait()  # until the client goes away
                yield _sse(f)
            if model != "no-done":
                yield b"data: [DONE]\n\n"
        finally:
            self.stream_closed.set()

    # ---------------------------------------------------------------- Anthropic

    async def anthropic(self, request: Request) -> Response:
        body = await self._record(request)
        if body.get("model") == "error-401":
            return Response(
                orjson.dumps(
                    {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
                ),
                status_code=401,
                media_type="application/json",
            )
        if body.get("stream"):
            return StreamingResponse(self._anthropic_stream(), media_type="text/event-stream")
        return Response(
            orjson.dumps(
                {
                    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-20250514",
                    "content": [
                        {"type": "text", "text": "I'll check the weather."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01A09q90qw90lq917835lq9",
                            "name": "get_weather",
                            "input": {"location": "San Francisco, CA"},
                        },
                    ],
                    "stop_reason": "tool_use",
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 2095,
                        "output_tokens": 503,
                        "cache_creation_input_tokens": 100,
                        "cache_read_input_tokens": 1000,
                    },
                }
            ),
            media_type="application/json",
        )

    async def _anthropic_stream(self) -> AsyncIterator[bytes]:
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-4-20250514",
                        "stop_sequence": None,
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": 472, "output_tokens": 2, "cache_read_input_tokens": 0},
                    },
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            ("ping", {"type": "ping"}),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Okay"}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ", let's check"}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                        "name": "get_weather",
                        "input": {},
                    },
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": '{"location":'},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": ' "San Francisco, CA"}'},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 1}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 89},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        for name, data in events:
            yield f"event: {name}\n".encode() + _sse(data)

    # ---------------------------------------------------------------- Gemini

    async def gemini(self, request: Request) -> Response:
        body = await self._record(request)
        call = request.path_params["call"]
        tools = bool(body.get("tools"))
        if call.endswith(":streamGenerateContent"):
            return StreamingResponse(self._gemini_stream(tools), media_type="text/event-stream")
        parts: list[dict[str, Any]] = [{"text": "Hello! How can I help you today?"}]
        if tools:
            parts = [
                {
                    "functionCall": {
                        "name": "schedule_meeting",
                        "args": {
                            "attendees": ["Bob", "Alice"],
                            "date": "2025-03-27",
                            "time": "10:00",
                            "topic": "Q3 planning",
                        },
                    }
                }
            ]
        return Response(
            orjson.dumps(
                {
                    "candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {
                        "promptTokenCount": 30,
                        "candidatesTokenCount": 10,
                        "totalTokenCount": 52,
                        "cachedContentTokenCount": 12,
                        "thoughtsTokenCount": 12,
                    },
                    "modelVersion": "gemini-2.5-flash",
                }
            ),
            media_type="application/json",
        )

    async def _gemini_stream(self, tools: bool) -> AsyncIterator[bytes]:
        yield _sse(
            {
                "candidates": [{"content": {"parts": [{"text": "The"}], "role": "model"}, "index": 0}],
                "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
                "modelVersion": "gemini-2.5-flash",
            }
        )
        if tools:
            yield _sse(
                {
                    "candidates": [
                        {
                            "content": {
                                "parts": [
                                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"name": "get_time", "args": {}}},
                                ],
                                "role": "model",
                            },
                            "index": 0,
                        }
                    ]
                }
            )
        yield _sse(
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": " sky is blue."}], "role": "model"},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 6, "totalTokenCount": 14},
                "modelVersion": "gemini-2.5-flash",
            }
        )

    # ---------------------------------------------------------------- Ollama

    async def ollama(self, request: Request) -> Response:
        body = await self._record(request)
        if body.get("model") == "missing":
            return Response(
                orjson.dumps({"error": "model 'missing' not found"}), status_code=404, media_type="application/json"
            )
        tools = bool(body.get("tools"))
        if body.get("stream"):
            return StreamingResponse(self._ollama_stream(tools), media_type="application/x-ndjson")
        msg: dict[str, Any] = {"role": "assistant", "content": "Hello! How are you today?"}
        if tools:
            msg = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "function": {
                            "name": "get_current_weather",
                            "arguments": {"format": "celsius", "location": "Paris, FR"},
                        }
                    }
                ],
            }
        return Response(
            orjson.dumps(
                {
                    "model": "llama3.2",
                    "created_at": "2023-12-12T14:13:43.416799Z",
                    "message": msg,
                    "done": True,
                    "done_reason": "stop",
                    "total_duration": 5191566416,
                    "load_duration": 2154458,
                    "prompt_eval_count": 26,
                    "prompt_eval_duration": 383809000,
                    "eval_count": 298,
                    "eval_duration": 4799921000,
                }
            ),
            media_type="application/json",
        )

    async def _ollama_stream(self, tools: bool) -> AsyncIterator[bytes]:
        for word in ("The", " sky", " is"):
            yield (
                orjson.dumps(
                    {
                        "model": "llama3.2",
                        "created_at": "2023-08-04T08:52:19Z",
                        "message": {"role": "assistant", "content": word},
                        "done": False,
                    }
                )
                + b"\n"
            )
        if tools:
            yield (
                orjson.dumps(
                    {
                        "model": "llama3.2",
                        "created_at": "2023-08-04T08:52:19Z",
                        "message": {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}],
                        },
                        "done": False,
                    }
                )
                + b"\n"
            )
        yield (
            orjson.dumps(
                {
                    "model": "llama3.2",
                    "created_at": "2023-08-04T19:22:45Z",
                    "message": {"role": "assistant", "content": ""},
                    "done": True,
                    "done_reason": "stop",
                    "total_duration": 4883583458,
                    "prompt_eval_count": 26,
                    "eval_count": 282,
                }
            )
            + b"\n"
        )


class LoopbackServer:
    """Runs an ASGI app with uvicorn on 127.0.0.1:<ephemeral> inside the current loop."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, lifespan="off", log_level="critical", access_log=False))
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopbackServer:
        self._task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        async with asyncio.timeout(5):
            while not self.server.started:
                await asyncio.sleep(0.005)  # bounded by the 5 s timeout above
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        if self._task is not None:
            async with asyncio.timeout(10):
                await self._task
        self.sock.close()
