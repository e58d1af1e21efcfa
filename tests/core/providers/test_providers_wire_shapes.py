"""Runtime rules for adapters of the original runtime: fragment shapes, models-collection
endpoints, the vendor key header, NDJSON recognised by content type."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from provider_servers import LoopbackServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from homeagent_core.providers.adapter import (
    AdapterScript,
    LuaAdaptedProvider,
    complete_models_endpoint,
    key_header,
)
from homeagent_core.providers.wire import normalize_chunk


def test_nested_fragments_are_flattened_and_continuations_keep_only_index_and_text() -> None:
    first = normalize_chunk({"tool_calls": [{"index": 2, "id": "t1", "type": "function",
                                             "function": {"name": "lookup", "arguments": ""}}]})
    more = normalize_chunk({"tool_calls": [{"index": 2, "id": "", "type": "function",
                                            "function": {"name": "", "arguments": '{"k'}}]})
    assert first["tool_calls"] == [{"stream_index": 2, "id": "t1", "type": "function", "name": "lookup",
                                    "raw_arguments": ""}]
    assert more["tool_calls"] == [{"stream_index": 2, "type": "function", "raw_arguments": '{"k'}]


def test_argument_objects_become_json_text_and_the_index_falls_back_to_the_position() -> None:
    chunk = normalize_chunk({"tool_calls": [
        {"name": "a", "raw_arguments": {"city": "Tokyo"}},
        {"function": {"name": "b", "arguments": {"n": 1}}},
        {"name": "c", "raw_arguments": [1, 2]},
    ]})
    assert [(f["stream_index"], f["name"], f["raw_arguments"]) for f in chunk["tool_calls"]] == [
        (0, "a", '{"city":"Tokyo"}'), (1, "b", '{"n":1}'), (2, "c", "[1,2]")]


@pytest.mark.parametrize(("endpoint", "model", "stream", "expected"), [
    ("/v1/models", "gemini-2.5-flash", False, "/v1/models/gemini-2.5-flash:generateContent"),
    ("/v1/models/", "models/gemini-2.5-flash", True, "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
    ("/v1beta/models?alt=json", "m", True, "/v1beta/models/m:streamGenerateContent?alt=json"),
    ("/v1/models", "a/b c", False, "/v1/models/a%2Fb%20c:generateContent"),
])
def test_a_models_collection_endpoint_is_completed(endpoint: str, model: str, stream: bool, expected: str) -> None:
    assert complete_models_endpoint(endpoint, model, stream) == expected


def test_the_key_header_follows_the_vendor() -> None:
    assert key_header({"anthropic-version": "2023-06-01"}, "/v1/messages", "k") == ("x-api-key", "k")
    assert key_header({}, "/v1/models", "k") == ("x-goog-api-key", "k")
    assert key_header({}, "/v1beta/models/{model}:generateContent", "k") == ("x-goog-api-key", "k")
    assert key_header({}, "/chat/completions", "k") == ("Authorization", "Bearer k")
    assert key_header({}, "/api/chat", "k") == ("Authorization", "Bearer k")


PLAIN = """
return {
  name = "plain", endpoint = "/api/chat", headers = {},
  transform_request = function(raw) return raw end,
  transform_stream_chunk = function(line)
    local c = json.decode(line)
    return json.encode({ content = c.message.content, done = c.done })
  end,
}
"""


@pytest.mark.parametrize("media_type", ["application/x-ndjson", "application/x-ndjson; charset=utf-8"])
async def test_an_ndjson_answer_is_read_by_line_without_stream_format(media_type: str) -> None:
    async def chat(request: Request) -> Response:
        async def lines() -> AsyncIterator[bytes]:
            yield b'{"message": {"content": "one"}, "done": false}\n'
            yield b'{"message": {"content": " two"}, "done": false}\n'
            yield b'{"message": {"content": ""}, "done": true}\n'
        return StreamingResponse(lines(), media_type=media_type)

    async with LoopbackServer(Starlette(routes=[Route("/api/chat", chat, methods=["POST"])])) as srv:
        p = LuaAdaptedProvider("s", AdapterScript(PLAIN), base_url=srv.base_url, model="m")
        try:
            chunks = [c async for c in p.chat_stream({"messages": [{"role": "user", "content": "hi"}]})]
        finally:
            await p.aclose()
    assert "".join(c["content"] for c in chunks) == "one two"
    assert chunks[-1]["done"] is True
