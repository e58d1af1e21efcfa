"""The nine OpenAI-compatible bundled adapters: request, response and stream over real HTTP.

Server fixtures follow the OpenAI API reference examples (see provider_servers.py).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from provider_helpers import ADAPTERS, MakeProvider, assemble, collect
from provider_servers import FakeVendors

from homeagent_core.providers.adapter import load_adapter
from homeagent_core.providers.wire import prepare_request

FAMILY = {
    # name: (endpoint path, default model or None when the adapter sets none)
    "openai": ("/chat/completions", "gpt-4o-mini"),
    "deepseek": ("/chat/completions", "deepseek-chat"),
    "mistral": ("/v1/chat/completions", "mistral-large-latest"),
    "groq": ("/openai/v1/chat/completions", "llama3-70b-8192"),
    "github": ("/chat/completions", "gpt-4o"),
    "kimi": ("/v1/chat/completions", "kimi-k2"),
    "server": ("/chat/completions", None),
    "qwen": ("/chat/completions", "qwen-plus"),
    "zhipu": ("/chat/completions", "glm-4.5"),
}

REQUEST: dict[str, Any] = {
    "model": "",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "天气?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "thinking...",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ],
    "disable_thinking": True,
    "extra_body": {"top_k": 5},
}


def transform(name: str, request: dict[str, Any]) -> dict[str, Any]:
    """Run the kernel's request preparation and the adapter's transform_request."""
    script = load_adapter(ADAPTERS / f"{name}.lua")
    raw = orjson.dumps(prepare_request(request)).decode()
    return orjson.loads(script.transform_request(raw))


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_request_applies_defaults_and_vendor_rules(name: str) -> None:
    body = transform(name, REQUEST)
    _, default_model = FAMILY[name]
    if default_model:
        assert body["model"] == default_model
    assert body["temperature"] == 0.7
    assert body["max_tokens"] == 4096
    assert "extra_body" not in body
    assert body["top_k"] == 5  # extra_body keys are merged at top level by the kernel
    assistant = body["messages"][2]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert orjson.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    if name == "server":
        assert body["disable_thinking"] is True
        assert assistant["reasoning_content"] == "thinking..."
    else:
        assert "disable_thinking" not in body
        assert "reasoning_content" not in assistant
    if name in ("deepseek", "zhipu"):
        assert body["thinking"] == {"type": "disabled"}
    if name == "qwen":
        assert body["enable_thinking"] is False


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_request_keeps_empty_arrays_and_objects(name: str) -> None:
    req = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": "noop", "parameters": {"type": "object", "properties": {}, "required": []}},
            }
        ],
    }
    params = transform(name, req)["tools"][0]["function"]["parameters"]
    assert params == {"type": "object", "properties": {}, "required": []}


@pytest.mark.parametrize("name", sorted(FAMILY))
async def test_response_text_and_usage(
    name: str, vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    p = make_provider(name, base, api_key="sk-test", model="m1")
    resp = await p.chat({"messages": [{"role": "user", "content": "hi"}]})
    assert resp["content"] == "Hello there, how may I assist you today?"
    assert resp["finish_reason"] == "stop"
    assert resp["token_usage"] == {
        "prompt": 9,
        "completion": 12,
        "total": 21,
        "cache_read": 4,
        "cache_miss": 5,
        "cache_reported": True,
        "reasoning_tokens": 2,
    }
    sent = fake.requests[-1]
    assert sent["path"] == FAMILY[name][0]
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert sent["headers"]["content-type"] == "application/json"
    assert sent["body"]["model"] == "m1"


@pytest.mark.parametrize("name", sorted(FAMILY))
async def test_response_tool_calls_are_decoded(
    name: str, vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider(name, base, model="tools")
    resp = await p.chat({"messages": [{"role": "user", "content": "weather?"}]})
    assert resp["finish_reason"] == "tool_calls"
    assert resp["tool_calls"] == [
        {
            "id": "call_abc123",
            "type": "function",
            "name": "get_current_weather",
            "arguments": {"location": "Boston, MA"},
        }
    ]


@pytest.mark.parametrize("name", sorted(FAMILY))
async def test_stream_text_usage_and_single_done(
    name: str, vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider(name, base, model="m")
    chunks = await collect(p.chat_stream({"messages": [{"role": "user", "content": "hi"}]}))
    assert assemble(chunks)["content"] == "Hello from loopback"
    assert [c["done"] for c in chunks].count(True) == 1
    assert chunks[-1]["done"] is True
    assert chunks[-1]["finish_reason"] == "stop"
    # the usage frame (choices: []) arrives after finish_reason and is folded into done
    assert chunks[-1]["usage"]["prompt"] == 20
    assert chunks[-1]["usage"]["cache_reported"] is True
    assert chunks[-1]["usage"]["cache_read"] == 0


@pytest.mark.parametrize("name", sorted(FAMILY))
async def test_stream_tool_call_fragments_keep_index_and_continuations(
    name: str, vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider(name, base, model="tools")
    chunks = await collect(p.chat_stream({"messages": [{"role": "user", "content": "x"}]}))
    frags = [f for c in chunks for f in c.get("tool_calls", [])]
    assert all("stream_index" in f for f in frags)
    continuation = [f for f in frags if "name" not in f]
    assert continuation and all(set(f) == {"stream_index", "raw_arguments"} for f in continuation)
    calls = assemble(chunks)["tool_calls"]
    assert calls == [
        {"id": "call_DdmO9pD3xa9XTPNJ32zg2hcA", "name": "get_weather", "args": '{"location":"Paris"}'},
        {"id": "call_2", "name": "get_time", "args": "{}"},
    ]
    assert chunks[-1]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("name", ["openai", "deepseek", "server"])
def test_stream_chunk_usage_variants(name: str) -> None:
    script = load_adapter(ADAPTERS / f"{name}.lua")
    deepseek = {
        "choices": [],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "prompt_cache_hit_tokens": 60,
            "prompt_cache_miss_tokens": 40,
        },
    }
    out = orjson.loads(script.transform_stream_chunk(orjson.dumps(deepseek).decode()) or "")
    assert out["usage"] == {
        "prompt": 100,
        "completion": 5,
        "total": 105,
        "cache_read": 60,
        "cache_miss": 40,
        "cache_reported": True,
    }
    no_cache = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 1}}
    out = orjson.loads(script.transform_stream_chunk(orjson.dumps(no_cache).decode()) or "")
    assert "cache_reported" not in out["usage"]
    assert out["usage"]["total"] == 8
    heartbeat = {"choices": []}
    assert script.transform_stream_chunk(orjson.dumps(heartbeat).decode()) == ""
