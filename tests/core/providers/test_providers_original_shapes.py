"""Adapters in the Go original's shapes, installed as user adapters, against strict vendor APIs.

The fixtures in ``original_shapes/`` are written for these tests in the shapes of the original
runtime's adapter files: Ollama's NDJSON stream without ``stream_format``, object tool-call
arguments, Anthropic's streamed fragments in OpenAI's nested shape, Gemini's ``/v1/models``
endpoint, and no ``build_headers`` (so vendor key headers are the runtime's job). Each is
copied into ``<data>/adapters/`` the way a user would, and must chat and call tools, streaming
and not, against a loopback server that refuses what the real API refuses. The bundled
adapters run through the same servers.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from provider_servers import LoopbackServer
from vendor_apis import API_KEY, VendorAPI

from homeagent_core.agent.kernel import Kernel, KernelSettings
from homeagent_core.events import EventBus
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_core.providers import ProviderManager, SourceConfig, deploy_bundled_adapters
from homeagent_core.providers.adapter import AdapterScript, LuaAdaptedProvider
from homeagent_core.providers.errors import ProviderError
from homeagent_sdk import hookimpl

FIXTURES = Path(__file__).parent / "original_shapes"

#: source kind -> (vendor server, path under the server for base_url, model, adapter file or None=bundled)
SHAPES: dict[str, tuple[str, str, str, Path | None]] = {
    "original-openai": ("openai", "/v1", "gpt-4o-mini", FIXTURES / "openai.lua"),
    "original-mistral": ("openai", "", "gpt-4o-mini", FIXTURES / "mistral.lua"),
    "original-anthropic": ("anthropic", "", "claude-sonnet-4-20250514", FIXTURES / "anthropic.lua"),
    "original-gemini": ("gemini", "", "gemini-2.5-flash", FIXTURES / "gemini.lua"),
    "original-ollama": ("ollama", "", "llama3.2", FIXTURES / "ollama.lua"),
    "bundled-openai": ("openai", "/v1", "gpt-4o-mini", None),
    "bundled-mistral": ("openai", "", "gpt-4o-mini", None),
    "bundled-anthropic": ("anthropic", "", "claude-sonnet-4-20250514", None),
    "bundled-gemini": ("gemini", "", "gemini-2.5-flash", None),
    "bundled-ollama": ("ollama", "", "llama3.2", None),
}


class Setup:
    """A data dir with the adapter installed, the vendor server, and a manager aimed at it."""

    def __init__(self, api: VendorAPI, manager: ProviderManager) -> None:
        self.api = api
        self.manager = manager

    def stream_flags(self) -> list[bool]:
        """Per recorded request: was it a streaming request (by body or by Gemini's method)?"""
        import orjson

        flags = []
        for r in self.api.requests:
            body = orjson.loads(r["body"]) if r["body"] else {}
            flags.append(bool(body.get("stream", r["path"].endswith("/api/chat")))
                         or r["path"].endswith(":streamGenerateContent"))
        return flags


def install_user_adapter(data_dir: Path, fixture: Path) -> None:
    """Copy a fixture over the deployed file as a user would; a restart's deploy keeps it."""
    deploy_bundled_adapters(data_dir)
    target = data_dir / "adapters" / fixture.name
    shutil.copyfile(fixture, target)
    deploy_bundled_adapters(data_dir)
    assert target.read_bytes() == fixture.read_bytes()


@pytest.fixture(params=list(SHAPES))
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    vendor, base_path, model, fixture = SHAPES[request.param]
    api = VendorAPI(vendor)
    adapter = request.param.split("-", 1)[1]
    if fixture is not None:
        install_user_adapter(tmp_path, fixture)
    else:
        deploy_bundled_adapters(tmp_path)
    async with LoopbackServer(api.app()) as srv:
        source = SourceConfig(name="src", base_url=srv.base_url + base_path, model=model, adapter=adapter,
                              api_key=API_KEY)
        manager = ProviderManager([source], default="src", data_dir=tmp_path)
        try:
            yield Setup(api, manager)
        finally:
            await manager.aclose()


USER = {"messages": [{"role": "user", "content": "hello"}]}


async def test_chat_answers_with_the_key_in_the_vendor_header_only(setup: Setup) -> None:
    reply = await setup.manager.chat(dict(USER))
    assert reply["content"] == "Hello from the loopback", setup.api.refusals
    assert setup.api.refusals == []
    headers = setup.api.requests[0]["headers"]
    carrying = sorted(k for k, v in headers.items() if API_KEY in v)
    assert carrying == [{"anthropic": "x-api-key", "gemini": "x-goog-api-key"}.get(setup.api.vendor, "authorization")]


async def test_stream_answers_without_falling_back(setup: Setup) -> None:
    chunks = [c async for c in setup.manager.chat_stream(dict(USER))]
    assert not any(c.get("reset") for c in chunks), f"fell back to a non-stream call: {setup.api.refusals}"
    assert "".join(c.get("content", "") for c in chunks) == "Hello from the loopback"
    assert chunks[-1]["done"] is True
    assert setup.api.refusals == []
    assert setup.stream_flags() == [True]


class Lookup:
    name = "lookup-tool"

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        def lookup(key: str) -> str:
            """Look a key up."""
            self.calls.append(key)
            return f"value-of-{key}"

        registry.add(lookup)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "no-stream"])
async def test_a_turn_calls_the_tool_and_answers_with_its_result(setup: Setup, stream: bool) -> None:
    tool = Lookup()
    bus = EventBus()
    kernel = Kernel(create_plugin_manager(load_entrypoints=False, builtins=(), plugins=(tool,)), bus,
                    setup.manager, settings=KernelSettings(stream=stream))
    await kernel.start()
    try:
        reply = await kernel.ask("what is alpha?")
    finally:
        await kernel.aclose()
        await bus.aclose()
    assert tool.calls == ["alpha"], (reply, setup.api.refusals)
    assert reply == "lookup said value-of-alpha"
    assert setup.api.refusals == []
    assert setup.stream_flags() == [stream, stream]


async def test_the_vendor_refusal_of_a_wrong_key_reaches_the_caller(setup: Setup, tmp_path: Path) -> None:
    if setup.api.vendor == "ollama":
        pytest.skip("Ollama has no authentication; its refusal is the unknown model below")
    src = setup.manager.list_sources()[0]
    bad = SourceConfig(name="bad", base_url=src["base_url"], model=src["model"], adapter=src["adapter"],
                       api_key="sk-wrong")
    manager = ProviderManager([bad], default="bad", data_dir=tmp_path)
    try:
        with pytest.raises(ProviderError) as err:
            await manager.chat(dict(USER))
    finally:
        await manager.aclose()
    expected = {"openai": "Incorrect API key", "anthropic": "invalid x-api-key",
                "gemini": "API key not valid"}[setup.api.vendor]
    assert expected in str(err.value)
    assert setup.api.refusals and setup.api.refusals[0][0] in (400, 401)


async def test_ollama_refuses_an_unknown_model_with_its_own_message(tmp_path: Path) -> None:
    install_user_adapter(tmp_path, FIXTURES / "ollama.lua")
    api = VendorAPI("ollama")
    async with LoopbackServer(api.app()) as srv:
        manager = ProviderManager([SourceConfig(name="o", base_url=srv.base_url, model="nope", adapter="ollama")],
                                  default="o", data_dir=tmp_path)
        try:
            with pytest.raises(ProviderError, match="try pulling it first"):
                await manager.chat(dict(USER))
        finally:
            await manager.aclose()


class MixedShapes:
    """A chat provider (as a plugin may supply one) streaming tool calls in the shapes adapters
    of the original runtime produce: OpenAI's nested fragments and an argument object."""

    name = "mixed"

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the kernel streams")

    async def chat_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
        if results:
            yield {"content": "lookup said " + " and ".join(results), "done": True, "finish_reason": "stop"}
            return
        yield {"content": "", "done": False, "tool_calls": [
            {"index": 0, "id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": '}}]}
        yield {"content": "", "done": False, "tool_calls": [
            {"index": 0, "id": "", "type": "function", "function": {"name": "", "arguments": '"alpha"}'}}]}
        yield {"content": "", "done": False, "tool_calls": [
            {"stream_index": 1, "id": "c2", "type": "function", "name": "lookup", "raw_arguments": {"key": "beta"}}]}
        yield {"content": "", "done": True, "finish_reason": "tool_calls"}


async def test_the_turn_merges_nested_fragments_and_argument_objects() -> None:
    tool = Lookup()
    bus = EventBus()
    kernel = Kernel(create_plugin_manager(load_entrypoints=False, builtins=(), plugins=(tool,)), bus, MixedShapes())
    await kernel.start()
    try:
        reply = await kernel.ask("alpha and beta?")
    finally:
        await kernel.aclose()
        await bus.aclose()
    assert tool.calls == ["alpha", "beta"]
    assert reply == "lookup said value-of-alpha and value-of-beta"


BOGUS = """
return {
  name = "bogus", endpoint = "%s", headers = %s,
  transform_request = function(raw)
    local req = json.decode(raw)
    return json.encode(%s)
  end,
}
"""
REFUSALS = {
    "openai": ("/v1/chat/completions", "{}", "{model = req.model, messages = req.messages, bogus = true}",
               "Unrecognized request argument supplied: bogus"),
    "anthropic": ("/v1/messages", '{["anthropic-version"] = "2023-06-01"}',
                  "{model = req.model, max_tokens = 10, messages = req.messages, bogus = true}",
                  "bogus: Extra inputs are not permitted"),
    "gemini": ("/v1beta/models/{model}:generateContent", "{}",
               "{contents = {{role = 'user', parts = {{text = 'hi'}}}}, bogus = true}", 'Unknown name "bogus"'),
    "ollama": ("/api/generate/chat", "{}", "{model = req.model, messages = req.messages}", "404 page not found"),
}


@pytest.mark.parametrize("vendor", list(REFUSALS))
async def test_the_loopback_apis_refuse_unknown_fields_and_paths(vendor: str) -> None:
    endpoint, headers, body, message = REFUSALS[vendor]
    api = VendorAPI(vendor)
    async with LoopbackServer(api.app()) as srv:
        p = LuaAdaptedProvider("s", AdapterScript(BOGUS % (endpoint, headers, body)), base_url=srv.base_url,
                               api_key=API_KEY, model="llama3.2")
        try:
            with pytest.raises(ProviderError, match=message):
                await p.chat(dict(USER))
        finally:
            await p.aclose()
    assert api.refusals[0][0] == (404 if vendor == "ollama" else 400)
