"""Anthropic, Gemini and Ollama adapters: request mapping, responses and streams over HTTP.

Fixtures follow the vendors' documented examples (listed in provider_servers.py):
Anthropic "Create a Message" + "Streaming request with tool use"; Gemini generateContent /
streamGenerateContent?alt=sse + function calling guide; Ollama api.md "Generate a chat
completion" (streaming NDJSON, with tools).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from provider_helpers import ADAPTERS, MakeProvider, assemble, collect
from provider_servers import FakeVendors

from homeagent_core.providers import ProviderError
from homeagent_core.providers.adapter import load_adapter
from homeagent_core.providers.wire import prepare_request

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "system", "content": "Answer in English."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this image, and the weather?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    },
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    {"role": "tool", "tool_call_id": "call_2", "content": "rainy"},
]


def transform(name: str, request: dict[str, Any]) -> dict[str, Any]:
    script = load_adapter(ADAPTERS / f"{name}.lua")
    return orjson.loads(script.transform_request(orjson.dumps(prepare_request(request)).decode()))


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_request_maps_system_tools_images_and_results() -> None:
    body = transform("anthropic", {"model": "", "messages": CONVERSATION, "tools": TOOLS, "tool_choice": "required"})
    assert body["model"] == "claude-sonnet-4-20250514"
    assert body["max_tokens"] == 4096
    assert body["system"] == "You are terse.\n\nAnswer in English."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    user = body["messages"][0]["content"]
    assert user[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Let me check."}
    assert assistant[1] == {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}
    results = body["messages"][2]["content"]  # consecutive tool results merge into one turn
    assert [r["tool_use_id"] for r in results] == ["call_1", "call_2"]
    assert body["tools"] == [
        {"name": "get_weather", "description": "Weather for a city", "input_schema": TOOLS[0]["function"]["parameters"]}
    ]
    assert body["tool_choice"] == {"type": "any"}


async def test_anthropic_response_with_tool_use_and_cache_usage(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    p = make_provider("anthropic", base, api_key="sk-ant")
    resp = await p.chat({"messages": [{"role": "user", "content": "weather in SF?"}]})
    assert resp["content"] == "I'll check the weather."
    assert resp["finish_reason"] == "tool_calls"
    assert resp["tool_calls"] == [
        {
            "id": "toolu_01A09q90qw90lq917835lq9",
            "type": "function",
            "name": "get_weather",
            "arguments": {"location": "San Francisco, CA"},
        }
    ]
    # prompt = input + cache_read + cache_creation (OpenAI semantics)
    assert resp["token_usage"] == {
        "prompt": 3195,
        "completion": 503,
        "total": 3698,
        "cache_read": 1000,
        "cache_miss": 100,
        "cache_reported": True,
    }
    headers = fake.requests[-1]["headers"]
    assert headers["x-api-key"] == "sk-ant"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert fake.requests[-1]["path"] == "/v1/messages"


async def test_anthropic_stream_text_tool_use_and_usage(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("anthropic", base)
    chunks = await collect(p.chat_stream({"messages": [{"role": "user", "content": "x"}]}))
    folded = assemble(chunks)
    assert folded["content"] == "Okay, let's check"
    assert folded["tool_calls"] == [
        {"id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "args": '{"location": "San Francisco, CA"}'}
    ]
    done = chunks[-1]
    assert [c["done"] for c in chunks].count(True) == 1
    assert done["finish_reason"] == "tool_calls"
    assert done["usage"]["prompt"] == 472
    assert done["usage"]["completion"] == 89
    assert done["usage"]["cache_reported"] is True


async def test_anthropic_auth_error_is_reported(vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    _, base = vendors
    p = make_provider("anthropic", base, model="error-401")
    with pytest.raises(ProviderError) as info:
        await p.chat({"messages": [{"role": "user", "content": "x"}]})
    assert info.value.kind == "auth"
    assert "invalid x-api-key" in str(info.value)


# --------------------------------------------------------------------------- Gemini


def test_gemini_request_maps_roles_tools_and_function_responses() -> None:
    body = transform(
        "gemini", {"model": "gemini-2.5-flash", "messages": CONVERSATION, "tools": TOOLS, "disable_thinking": True}
    )
    assert body["systemInstruction"] == {"parts": [{"text": "You are terse.\n\nAnswer in English."}]}
    roles = [c["role"] for c in body["contents"]]
    assert roles == ["user", "model", "user"]
    assert body["contents"][0]["parts"][1] == {"inline_data": {"mime_type": "image/png", "data": "iVBORw0KGgo="}}
    calls = [p["functionCall"] for p in body["contents"][1]["parts"] if "functionCall" in p]
    assert calls == [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "get_weather", "args": {"city": "Rome"}},
    ]
    responses = [p["functionResponse"] for p in body["contents"][2]["parts"]]
    assert responses == [
        {"name": "get_weather", "response": {"temp": 21}},
        {"name": "get_weather", "response": {"result": "rainy"}},
    ]
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"
    assert body["generationConfig"] == {
        "temperature": 0.7,
        "maxOutputTokens": 4096,
        "thinkingConfig": {"thinkingBudget": 0},
    }


async def test_gemini_response_and_usage(vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    fake, base = vendors
    p = make_provider("gemini", base, api_key="g-key", model="gemini-2.5-flash")
    resp = await p.chat({"messages": [{"role": "user", "content": "hi"}]})
    assert resp["content"] == "Hello! How can I help you today?"
    assert resp["finish_reason"] == "stop"
    assert resp["token_usage"] == {
        "prompt": 30,
        "completion": 22,
        "total": 52,
        "cache_read": 12,
        "cache_miss": 18,
        "cache_reported": True,
        "reasoning_tokens": 12,
    }
    sent = fake.requests[-1]
    assert sent["path"] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent["headers"]["x-goog-api-key"] == "g-key"
    assert "authorization" not in sent["headers"]


async def test_gemini_function_call_response(vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    _, base = vendors
    p = make_provider("gemini", base, model="gemini-2.5-flash")
    resp = await p.chat({"messages": [{"role": "user", "content": "meet"}], "tools": TOOLS})
    assert resp["finish_reason"] == "tool_calls"
    assert resp["tool_calls"][0]["name"] == "schedule_meeting"
    assert resp["tool_calls"][0]["arguments"]["attendees"] == ["Bob", "Alice"]


async def test_gemini_stream_text_calls_and_usage(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    p = make_provider("gemini", base, model="gemini-2.5-flash")
    chunks = await collect(p.chat_stream({"messages": [{"role": "user", "content": "x"}], "tools": TOOLS}))
    assert fake.requests[-1]["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert fake.requests[-1]["query"] == "alt=sse"
    folded = assemble(chunks)
    assert folded["content"] == "The sky is blue."
    assert [(c["name"], c["args"]) for c in folded["tool_calls"]] == [
        ("get_weather", '{"city":"Paris"}'),
        ("get_time", "{}"),
    ]
    assert chunks[-1]["done"] is True
    assert chunks[-1]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["total"] == 14


# --------------------------------------------------------------------------- Ollama


def test_ollama_request_options_images_and_tools() -> None:
    body = transform(
        "ollama", {"model": "", "messages": CONVERSATION, "tools": TOOLS, "max_tokens": 100, "disable_thinking": True}
    )
    assert body["model"] == "llama3"
    assert body["options"] == {"temperature": 0.7, "num_predict": 100}
    assert body["messages"][2]["images"] == ["iVBORw0KGgo="]
    assert body["messages"][3]["tool_calls"][0] == {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    assert body["messages"][4]["tool_name"] == "get_weather"
    assert body["tools"] == TOOLS
    assert body["think"] is False


async def test_ollama_response_with_tool_calls(vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    fake, base = vendors
    p = make_provider("ollama", base, model="llama3.2")
    resp = await p.chat({"messages": [{"role": "user", "content": "hi"}]})
    assert resp["content"] == "Hello! How are you today?"
    assert resp["token_usage"] == {"prompt": 26, "completion": 298, "total": 324}
    assert "authorization" not in fake.requests[-1]["headers"]
    resp = await p.chat({"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
    assert resp["finish_reason"] == "tool_calls"
    assert resp["tool_calls"][0]["arguments"] == {"format": "celsius", "location": "Paris, FR"}


async def test_ollama_ndjson_stream(vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    _, base = vendors
    p = make_provider("ollama", base, model="llama3.2")
    chunks = await collect(p.chat_stream({"messages": [{"role": "user", "content": "x"}], "tools": TOOLS}))
    folded = assemble(chunks)
    assert folded["content"] == "The sky is"
    assert folded["tool_calls"] == [{"id": "call_0", "name": "get_weather", "args": '{"city":"Tokyo"}'}]
    assert chunks[-1]["done"] is True
    assert chunks[-1]["usage"] == {"prompt": 26, "completion": 282, "total": 308}


async def test_ollama_error_body(vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    _, base = vendors
    p = make_provider("ollama", base, model="missing")
    with pytest.raises(ProviderError) as info:
        await p.chat({"messages": [{"role": "user", "content": "x"}]})
    assert info.value.status == 404
    assert "model 'missing' not found" in str(info.value)
    assert "'ollama'" in str(info.value)


def test_anthropic_error_event_mid_stream_raises() -> None:
    from homeagent_core.providers.adapter import LuaAdaptedProvider

    script = load_adapter(ADAPTERS / "anthropic.lua")
    p = LuaAdaptedProvider("claude", script, base_url="http://127.0.0.1:9")
    event = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(ProviderError) as info:
        p.parse_stream_payload(orjson.dumps(event).decode(), 7, script.new_stream_state())
    assert "overloaded_error: Overloaded" in str(info.value)
    assert info.value.kind == "stream"


async def test_source_thinking_switch_sets_disable_thinking(
        vendors: tuple[FakeVendors, str], make_provider: MakeProvider) -> None:
    fake, base = vendors
    p = make_provider("deepseek", base, model="m", thinking_enabled=False)
    await p.chat({"messages": [{"role": "user", "content": "x"}]})
    assert fake.requests[-1]["body"]["thinking"] == {"type": "disabled"}
    await p.chat({"messages": [{"role": "user", "content": "x"}], "disable_thinking": False})
    assert "thinking" not in fake.requests[-1]["body"]
