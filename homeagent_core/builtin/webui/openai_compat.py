"""OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models``.

Only the last message is used and it must come from the user; it is injected on channel
``http`` without memory, so IDE templates never pollute what the agent remembers. Streaming is
real: this request's own content and reasoning deltas are forwarded as they arrive, the last
chunk carries the usage the model reported, errors after the headers go in-stream. Request
errors use OpenAI's shape ``{"error": {"message", "type"}}`` so OpenAI clients show them.
The admin login and API key speak as the owner; a person's own key (``homeagent people key``)
as that person, with that person's rights (docs/PEOPLE.md). Only these routes (and the web
chat's) take such a key. Each request is a turn of the thread ``v1:<person>:<user>`` (``user``
is the request's optional ``user`` field, default ``default``): its prompt is built from that
thread only, never from the person's other conversations or anyone else's.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from homeagent_core.builtin.webui import agent_port
from homeagent_core.builtin.webui.common import ApiError, UIState, busy, json_body, ok, require_chat_api
from homeagent_sdk.errors import InputQueueFull
from homeagent_sdk.types import Principal

__all__ = ["routes"]

MODEL_ID = "homeagent"
_USER = re.compile(r"^[^\x00-\x1f/\\]{1,64}$")


def _ui(request: Request) -> UIState:
    return request.app.state.ui  # type: ignore[no-any-return]


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty array")
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        raise ApiError(400, "last message must be from user")
    content = last.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if not isinstance(content, str) or not content.strip():
        raise ApiError(400, "the last user message has no text content")
    return content


def _usage(raw: dict[str, Any] | None) -> dict[str, int] | None:
    if not raw:
        return None
    prompt, completion = int(raw.get("prompt", 0) or 0), int(raw.get("completion", 0) or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": int(raw.get("total", 0) or prompt + completion)}


def _openai_error(exc: ApiError) -> Response:
    """Errors in OpenAI's shape, so OpenAI clients show the message (``error.message``)."""
    kind = "invalid_request_error" if exc.status < 500 else "server_error"
    body = {"error": {"message": exc.message, "type": kind, "param": None, "code": None}}
    return Response(orjson.dumps(body), status_code=exc.status, media_type="application/json", headers=exc.headers)


@require_chat_api
async def completions(request: Request) -> Response:
    try:
        return await _completions(request)
    except ApiError as exc:
        return _openai_error(exc)
    except InputQueueFull as exc:  # backpressure: 503 + Retry-After, which OpenAI clients retry
        return _openai_error(busy(exc))


async def _completions(request: Request) -> Response:
    data = await json_body(request, required={"messages": list})
    text = _last_user_text(data["messages"])
    model = data.get("model") if isinstance(data.get("model"), str) else MODEL_ID
    ui = _ui(request)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    # A person's own key speaks as that person; the admin login and key are the owner's.
    principal = _principal(request, data.get("user"))
    created = int(time.time())
    if not data.get("stream"):
        try:
            result = await agent_port.ask(
                ui.kernel, text, channel="http", source="http", no_memory=True, principal=principal
            )
        except TimeoutError:
            raise ApiError(504, "the agent did not answer within 300 s") from None
        message: dict[str, Any] = {"role": "assistant", "content": result["response"]}
        if result.get("reasoning_content"):
            message["reasoning_content"] = result["reasoning_content"]
        body: dict[str, Any] = {
            "id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
        usage = _usage(result.get("usage"))
        if usage:
            body["usage"] = usage
        return ok(body)

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
        body: dict[str, Any] = {
            "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage:
            body["usage"] = usage
        return b"data: " + orjson.dumps(body) + b"\n\n"

    kernel = ui.kernel  # a stopped kernel is a 503 before the headers
    # Submitted before the headers, so a full queue is a 503 with Retry-After, not an in-stream error.
    parts = agent_port.stream(kernel, text, channel="http", source="http", no_memory=True, principal=principal)

    async def events() -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": ""})
        usage = None
        try:
            async for part in parts:
                if part["kind"] == "content" and part["text"]:
                    yield chunk({"content": part["text"]})
                elif part["kind"] == "reasoning" and part["text"]:
                    yield chunk({"content": "", "reasoning_content": part["text"]})
                elif part["kind"] == "done":
                    usage = _usage(part.get("usage"))
        except Exception as exc:  # after the headers, errors travel in-stream
            yield b"data: " + orjson.dumps({"error": {"message": str(exc)}}) + b"\n\n"
            return
        yield chunk({}, "stop", usage)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


def _principal(request: Request, user: Any) -> Principal:
    """The principal of a /v1 request: the key's person (the owner for the admin login and key) in
    the thread ``v1:<person>:<user>``."""
    if user is None or user == "":
        user = "default"
    if not isinstance(user, str) or not _USER.fullmatch(user):
        raise ApiError(400, "user must be 1-64 characters without control characters, '/' or a backslash")
    person = getattr(request.state, "person", None)
    if person:
        return Principal(person=person, door="http", thread=f"v1:{person}:{user}")
    rights = _ui(request).services.rights
    owner = rights.people.owner() if rights is not None else None
    name = owner.name if owner is not None else ""
    return Principal(person=name, door="http", thread=f"v1:{name or 'owner'}:{user}")


@require_chat_api
async def models(request: Request) -> Response:
    return ok({"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": int(_ui(request).started_at),
                                           "owned_by": "homeagent"}]})


routes = [
    Route("/v1/chat/completions", completions, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
]
