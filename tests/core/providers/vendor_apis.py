"""Strict loopback vendor APIs: each speaks one vendor's documented wire format and refuses
what the real service refuses, so an adapter that only works against a lenient fake fails here.

* OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat): ``POST
  /v1/chat/completions``, ``Authorization: Bearer``; unknown body fields are refused with
  "Unrecognized request argument supplied"; assistant ``tool_calls[].function.arguments`` must
  be a JSON string; SSE ``chat.completion.chunk`` frames and ``data: [DONE]``.
* Anthropic Messages (https://docs.anthropic.com/en/api/messages): ``POST /v1/messages``,
  ``x-api-key`` and ``anthropic-version`` headers; extra fields "Extra inputs are not
  permitted"; roles ``user``/``assistant`` only; SSE with ``event:`` lines (message_start,
  content_block_start/delta/stop, message_delta, message_stop).
* Gemini (https://ai.google.dev/api/generate-content): ``POST
  /{v1,v1beta}/models/{model}:generateContent`` and ``:streamGenerateContent`` (SSE with
  ``alt=sse``, a JSON array without); key in ``x-goog-api-key`` or ``?key=``; no key is 403
  PERMISSION_DENIED, a bad key 400 API_KEY_INVALID, an API key sent as a Bearer token 401
  UNAUTHENTICATED; unknown fields "Invalid JSON payload received. Unknown name".
* Ollama (https://github.com/ollama/ollama/blob/main/docs/api.md): ``POST /api/chat``, no
  auth, streams NDJSON (``application/x-ndjson``) unless ``stream: false``; unknown models are
  404 "try pulling it first"; tool-call ``arguments`` in the history must be objects.

Every server answers the same scripted conversation: with tools offered and no tool result yet
it calls ``lookup`` with ``{"key": "alpha"}``; after a tool result it answers
``lookup said <result>``; without tools it says hello. Each records what it received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

__all__ = ["API_KEY", "VENDORS", "VendorAPI"]

API_KEY = "sk-loopback-0123456789"
TOOL_ARGS = '{"key": "alpha"}'
TOOL_PIECES = ('{"ke', 'y": "al', 'pha"}')


class Refused(Exception):
    """A request the vendor refuses: HTTP status and the vendor's error body."""

    def __init__(self, status: int, body: Any, media_type: str = "application/json") -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.media_type = media_type

    def response(self) -> Response:
        content = self.body if isinstance(self.body, str) else orjson.dumps(self.body)
        return Response(content, status_code=self.status, media_type=self.media_type)


def _sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


class VendorAPI:
    """One vendor's strict API as a Starlette app; ``requests`` records what arrived."""

    def __init__(self, vendor: str) -> None:
        self.vendor = vendor
        self.requests: list[dict[str, Any]] = []
        self.refusals: list[tuple[int, str]] = []

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._dispatch, methods=["GET", "POST"])])

    async def _dispatch(self, request: Request) -> Response:
        raw = await request.body()
        entry = {"path": request.url.path, "query": request.url.query, "headers": dict(request.headers),
                 "body": raw.decode("utf-8", "replace")}
        self.requests.append(entry)
        handler: Callable[[Request, bytes], Any] = getattr(self, f"_{self.vendor}")
        try:
            return await handler(request, raw)  # type: ignore[no-any-return]
        except Refused as exc:
            text = exc.body if isinstance(exc.body, str) else orjson.dumps(exc.body).decode()
            self.refusals.append((exc.status, text))
            return exc.response()

    # ------------------------------------------------------------------ conversation script

    @staticmethod
    def _reply(tools: bool, tool_result: str | None) -> tuple[str, bool]:
        """(text, call_tool) for the scripted conversation."""
        if tool_result is not None:
            return f"lookup said {tool_result}", False
        if tools:
            return "", True
        return "Hello from the loopback", False

    # ------------------------------------------------------------------ OpenAI

    _OPENAI_FIELDS = frozenset({
        "model", "messages", "temperature", "max_tokens", "max_completion_tokens", "stream", "stream_options",
        "tools", "tool_choice", "parallel_tool_calls", "top_p", "n", "stop", "presence_penalty",
        "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user", "response_format", "seed",
        "reasoning_effort", "store", "metadata", "modalities", "audio", "prediction", "service_tier",
    })

    @staticmethod
    def _openai_error(status: int, message: str, code: str | None = None) -> Refused:
        return Refused(status, {"error": {"message": message, "type": "invalid_request_error", "param": None,
                                          "code": code}})

    async def _openai(self, request: Request, raw: bytes) -> Response:
        if request.method != "POST" or request.url.path != "/v1/chat/completions":
            raise self._openai_error(404, f"Invalid URL ({request.method} {request.url.path})")
        auth = request.headers.get("authorization", "")
        if not auth:
            raise self._openai_error(401, "You didn't provide an API key. You need to provide your API key in "
                                          "an Authorization header using Bearer auth (i.e. Authorization: Bearer "
                                          "YOUR_KEY).")
        if auth != f"Bearer {API_KEY}":
            raise self._openai_error(401, "Incorrect API key provided.", "invalid_api_key")
        body = self._json(raw, lambda m: self._openai_error(400, m))
        for key in body:
            if key not in self._OPENAI_FIELDS:
                raise self._openai_error(400, f"Unrecognized request argument supplied: {key}")
        if not body.get("model") or not isinstance(body.get("messages"), list) or not body["messages"]:
            raise self._openai_error(400, "you must provide a model parameter and a non-empty messages array")
        tool_result = None
        for i, m in enumerate(body["messages"]):
            role = m.get("role")
            if role not in ("system", "developer", "user", "assistant", "tool"):
                raise self._openai_error(400, f"Invalid value: '{role}'. Supported values are: 'system', "
                                              "'assistant', 'user', 'tool', and 'developer'.")
            for tc in m.get("tool_calls") or []:
                if not isinstance(tc.get("function", {}).get("arguments"), str):
                    raise self._openai_error(400, f"Invalid type for 'messages[{i}].tool_calls[0].function."
                                                  "arguments': expected a string.")
            if role == "tool":
                if not m.get("tool_call_id"):
                    raise self._openai_error(400, f"Missing required parameter: 'messages[{i}].tool_call_id'.")
                tool_result = str(m.get("content"))
        for t in body.get("tools") or []:
            if t.get("type") != "function" or not t.get("function", {}).get("name"):
                raise self._openai_error(400, "Missing required parameter: 'tools[0].function'.")
        text, call = self._reply(bool(body.get("tools")), tool_result)
        base = {"id": "chatcmpl-1", "created": 1700000000, "model": body["model"], "system_fingerprint": "fp_1"}
        if body.get("stream"):
            return StreamingResponse(self._openai_stream(base, text, call), media_type="text/event-stream")
        msg: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
        if call:
            msg["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "lookup", "arguments": TOOL_ARGS}}]
        return Response(orjson.dumps({**base, "object": "chat.completion", "choices": [
            {"index": 0, "message": msg, "logprobs": None, "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}),
            media_type="application/json")

    @staticmethod
    async def _openai_stream(base: dict[str, Any], text: str, call: bool) -> AsyncIterator[bytes]:
        def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse({**base, "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

        yield frame({"role": "assistant", "content": "" if not call else None})
        if call:
            yield frame({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                         "function": {"name": "lookup", "arguments": ""}}]})
            for piece in TOOL_PIECES:
                yield frame({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            yield frame({}, "tool_calls")
        else:
            for word in text.split(" "):
                yield frame({"content": word if word == text.split(" ")[0] else " " + word})
            yield frame({}, "stop")
        yield b"data: [DONE]\n\n"

    # ------------------------------------------------------------------ Anthropic

    _ANTHROPIC_FIELDS = frozenset({
        "model", "messages", "max_tokens", "system", "stream", "tools", "tool_choice", "temperature", "top_p",
        "top_k", "stop_sequences", "metadata", "thinking", "service_tier",
    })

    @staticmethod
    def _anthropic_error(status: int, kind: str, message: str) -> Refused:
        return Refused(status, {"type": "error", "error": {"type": kind, "message": message}})

    async def _anthropic(self, request: Request, raw: bytes) -> Response:
        if request.method != "POST" or request.url.path != "/v1/messages":
            raise self._anthropic_error(404, "not_found_error", "Not Found")
        key = request.headers.get("x-api-key")
        if not key:
            raise self._anthropic_error(401, "authentication_error", "x-api-key header is required")
        if key != API_KEY:
            raise self._anthropic_error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            raise self._anthropic_error(400, "invalid_request_error", "anthropic-version: header is required")
        body = self._json(raw, lambda m: self._anthropic_error(400, "invalid_request_error", m))
        for k in body:
            if k not in self._ANTHROPIC_FIELDS:
                raise self._anthropic_error(400, "invalid_request_error", f"{k}: Extra inputs are not permitted")
        for k in ("model", "max_tokens", "messages"):
            if k not in body:
                raise self._anthropic_error(400, "invalid_request_error", f"{k}: Field required")
        tool_result = None
        for i, m in enumerate(body["messages"]):
            if m.get("role") not in ("user", "assistant"):
                raise self._anthropic_error(400, "invalid_request_error",
                                            f"messages.{i}.role: Input should be 'user' or 'assistant'")
            content = m.get("content")
            if isinstance(content, list):
                for b in content:
                    if b.get("type") not in ("text", "image", "tool_use", "tool_result", "thinking"):
                        raise self._anthropic_error(400, "invalid_request_error",
                                                    f"messages.{i}.content: unknown block type {b.get('type')!r}")
                    if b.get("type") == "tool_use" and not isinstance(b.get("input"), dict):
                        raise self._anthropic_error(400, "invalid_request_error",
                                                    f"messages.{i}.content.input: Input should be a valid dictionary")
                    if b.get("type") == "tool_result":
                        c = b.get("content")
                        tool_result = c if isinstance(c, str) else "".join(x.get("text", "") for x in c or [])
            elif not isinstance(content, str):
                raise self._anthropic_error(400, "invalid_request_error", f"messages.{i}.content: Field required")
        for t in body.get("tools") or []:
            if not t.get("name") or not isinstance(t.get("input_schema"), dict):
                raise self._anthropic_error(400, "invalid_request_error", "tools.0.input_schema: Field required")
        text, call = self._reply(bool(body.get("tools")), tool_result)
        if body.get("stream"):
            return StreamingResponse(self._anthropic_stream(body["model"], text, call), media_type="text/event-stream")
        content_out: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        if call:
            content_out.append({"type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {"key": "alpha"}})
        return Response(orjson.dumps({
            "id": "msg_01", "type": "message", "role": "assistant", "model": body["model"], "content": content_out,
            "stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 5}}), media_type="application/json")

    @staticmethod
    async def _anthropic_stream(model: str, text: str, call: bool) -> AsyncIterator[bytes]:
        yield _sse({"type": "message_start", "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 20, "output_tokens": 1}}},
            "message_start")
        yield _sse({"type": "ping"}, "ping")
        if call:
            yield _sse({"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_01", "name": "lookup", "input": {}}}, "content_block_start")
            for piece in TOOL_PIECES:
                yield _sse({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": piece}}, "content_block_delta")
        else:
            yield _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                       "content_block_start")
            half = len(text) // 2
            for piece in (text[:half], text[half:]):
                yield _sse({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        yield _sse({"type": "message_delta", "delta": {"stop_reason": "tool_use" if call else "end_turn",
                                                       "stop_sequence": None}, "usage": {"output_tokens": 5}},
                   "message_delta")
        yield _sse({"type": "message_stop"}, "message_stop")

    # ------------------------------------------------------------------ Gemini

    _GEMINI_FIELDS = frozenset({"contents", "tools", "toolConfig", "tool_config", "safetySettings", "safety_settings",
                                "systemInstruction", "system_instruction", "generationConfig", "generation_config",
                                "cachedContent", "cached_content"})
    _GEMINI_GEN = frozenset({"temperature", "maxOutputTokens", "topP", "topK", "candidateCount", "stopSequences",
                             "thinkingConfig", "responseMimeType", "responseSchema", "seed", "presencePenalty",
                             "frequencyPenalty"})
    _GEMINI_PART = frozenset({"text", "inlineData", "inline_data", "functionCall", "function_call",
                              "functionResponse", "function_response", "fileData", "file_data", "thought",
                              "thoughtSignature"})

    @staticmethod
    def _gemini_error(status: int, state: str, message: str, reason: str | None = None) -> Refused:
        err: dict[str, Any] = {"code": status, "message": message, "status": state}
        if reason:
            err["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                               "domain": "googleapis.com"}]
        return Refused(status, {"error": err})

    def _gemini_unknown(self, name: str) -> Refused:
        return self._gemini_error(400, "INVALID_ARGUMENT",
                                  f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')

    async def _gemini(self, request: Request, raw: bytes) -> Response:
        path = request.url.path
        parts = path.strip("/").split("/")
        method = parts[-1].rpartition(":")[2] if len(parts) == 3 else ""
        if request.method != "POST" or len(parts) != 3 or parts[0] not in ("v1", "v1beta") or parts[1] != "models" \
                or method not in ("generateContent", "streamGenerateContent"):
            raise self._gemini_error(404, "NOT_FOUND", f"Requested entity was not found. ({request.method} {path})")
        key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
        if not key:
            if request.headers.get("authorization"):
                raise self._gemini_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. "
                                         "Expected OAuth 2 access token, login cookie or other valid authentication "
                                         "credential.", "ACCESS_TOKEN_TYPE_UNSUPPORTED")
            raise self._gemini_error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers "
                                     "without established identity). Please use API Key or other form of API "
                                     "consumer identity to call this API.")
        if key != API_KEY:
            raise self._gemini_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                                     "API_KEY_INVALID")
        body = self._json(raw, lambda m: self._gemini_error(400, "INVALID_ARGUMENT", m))
        for k in body:
            if k not in self._GEMINI_FIELDS:
                raise self._gemini_unknown(k)
        for k in body.get("generationConfig") or {}:
            if k not in self._GEMINI_GEN:
                raise self._gemini_unknown(f"generation_config.{k}")
        if not body.get("contents"):
            raise self._gemini_error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not "
                                                              "specified")
        tool_result = None
        for c in body["contents"]:
            if c.get("role") not in ("user", "model", None):
                raise self._gemini_error(400, "INVALID_ARGUMENT", "Please use a valid role: user, model.")
            for p in c.get("parts") or []:
                for k in p:
                    if k not in self._GEMINI_PART:
                        raise self._gemini_unknown(f"contents.parts.{k}")
                fr = p.get("functionResponse")
                if fr is not None:
                    resp = fr.get("response")
                    if not isinstance(resp, dict):
                        raise self._gemini_error(400, "INVALID_ARGUMENT", "Invalid value at 'contents.parts."
                                                 "function_response.response' (type.googleapis.com/google.protobuf."
                                                 "Struct)")
                    tool_result = str(resp.get("result", resp.get("content", resp)))
        text, call = self._reply(bool(body.get("tools")), tool_result)
        model = parts[2].rpartition(":")[0]
        if method == "streamGenerateContent":
            frames = self._gemini_frames(model, text, call)
            if request.query_params.get("alt") == "sse":
                return StreamingResponse(self._gemini_sse(frames), media_type="text/event-stream")
            return Response(orjson.dumps(frames), media_type="application/json")
        parts_out: list[dict[str, Any]] = [{"functionCall": {"name": "lookup", "args": {"key": "alpha"}}}] if call \
            else [{"text": text}]
        return Response(orjson.dumps({
            "candidates": [{"content": {"parts": parts_out, "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 4, "totalTokenCount": 12},
            "modelVersion": model}), media_type="application/json")

    @staticmethod
    def _gemini_frames(model: str, text: str, call: bool) -> list[dict[str, Any]]:
        def frame(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
            cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
            if finish:
                cand["finishReason"] = finish
            return {"candidates": [cand], "modelVersion": model}

        if call:
            return [frame([{"functionCall": {"name": "lookup", "args": {"key": "alpha"}}}], "STOP")]
        half = len(text) // 2
        last = frame([{"text": text[half:]}], "STOP")
        last["usageMetadata"] = {"promptTokenCount": 8, "candidatesTokenCount": 4, "totalTokenCount": 12}
        return [frame([{"text": text[:half]}]), last]

    @staticmethod
    async def _gemini_sse(frames: list[dict[str, Any]]) -> AsyncIterator[bytes]:
        for f in frames:
            yield b"data: " + orjson.dumps(f) + b"\r\n\r\n"

    # ------------------------------------------------------------------ Ollama

    _OLLAMA_MODELS = frozenset({"llama3.2", "llama3.2:latest"})

    async def _ollama(self, request: Request, raw: bytes) -> Response:
        if request.method != "POST" or request.url.path != "/api/chat":
            raise Refused(404, "404 page not found", "text/plain")
        body = self._json(raw, lambda m: Refused(400, {"error": m}))
        model = body.get("model")
        if not model:
            raise Refused(400, {"error": "model is required"})
        if model not in self._OLLAMA_MODELS:
            raise Refused(404, {"error": f'model "{model}" not found, try pulling it first'})
        tool_result = None
        for m in body.get("messages") or []:
            for tc in m.get("tool_calls") or []:
                if not isinstance(tc.get("function", {}).get("arguments"), dict):
                    raise Refused(400, {"error": "json: cannot unmarshal string into Go struct field "
                                                 "ChatRequest.messages.tool_calls.function.arguments of type "
                                                 "api.ToolCallFunctionArguments"})
            if m.get("role") == "tool":
                tool_result = str(m.get("content"))
        text, call = self._reply(bool(body.get("tools")), tool_result)
        msg: dict[str, Any] = {"role": "assistant", "content": text}
        if call:
            msg["tool_calls"] = [{"function": {"name": "lookup", "arguments": {"key": "alpha"}}}]
        final = {"model": model, "created_at": "2024-07-22T20:33:28Z", "done": True, "done_reason": "stop",
                 "total_duration": 885095291, "prompt_eval_count": 26, "eval_count": 12}
        if body.get("stream", True) is False:
            return Response(orjson.dumps({**final, "message": msg}), media_type="application/json")
        return StreamingResponse(self._ollama_stream(model, msg, final), media_type="application/x-ndjson")

    @staticmethod
    async def _ollama_stream(model: str, msg: dict[str, Any], final: dict[str, Any]) -> AsyncIterator[bytes]:
        head = {"model": model, "created_at": "2024-07-22T20:33:28Z", "done": False}
        if msg.get("tool_calls"):
            yield orjson.dumps({**head, "message": msg}) + b"\n"
        else:
            for i, word in enumerate(msg["content"].split(" ")):
                yield orjson.dumps({**head, "message": {"role": "assistant",
                                                        "content": word if i == 0 else " " + word}}) + b"\n"
        yield orjson.dumps({**final, "message": {"role": "assistant", "content": ""}}) + b"\n"

    # ------------------------------------------------------------------ shared

    @staticmethod
    def _json(raw: bytes, error: Callable[[str], Refused]) -> dict[str, Any]:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise error(f"request body is not valid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise error("request body must be a JSON object")
        return body


VENDORS = ("openai", "anthropic", "gemini", "ollama")
