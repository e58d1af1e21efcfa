"""LuaAdaptedProvider over real loopback HTTP: errors, timeouts, cancellation, fallbacks."""

from __future__ import annotations

import asyncio

import pytest
from provider_helpers import MakeProvider, collect
from provider_servers import FakeVendors

from homeagent_core.providers import ProviderError
from homeagent_core.providers.adapter import AdapterScript

MSG = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(("code", "kind"), [(401, "auth"), (403, "auth"), (429, "http"), (500, "http")])
async def test_error_status_names_source_adapter_and_reason(
    code: int, kind: str, vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, name="primary", model=f"error-{code}")
    for call in (p.chat(MSG), collect(p.chat_stream(MSG))):
        with pytest.raises(ProviderError) as info:
            await call
        assert info.value.kind == kind
        assert info.value.status == code
        assert "'primary'" in str(info.value)
        assert "'openai'" in str(info.value)
        assert f"simulated {code}" in str(info.value)


async def test_slow_non_stream_response_times_out(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="slow", timeout_s=0.2)
    with pytest.raises(ProviderError) as info:
        await p.chat(MSG)
    assert info.value.kind == "timeout"


async def test_slow_response_arrives_when_released(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    p = make_provider("openai", base, model="slow")
    task = asyncio.create_task(p.chat(MSG))
    async with asyncio.timeout(5):
        while not fake.requests:
            await asyncio.sleep(0.005)
    assert not task.done()
    fake.release.set()
    async with asyncio.timeout(5):
        resp = await task
    assert resp["content"].startswith("Hello there")


async def test_mid_stream_disconnect_raises_network_error(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="drop")
    got: list[dict[str, object]] = []
    with pytest.raises(ProviderError) as info:
        async for chunk in p.chat_stream(MSG):
            got.append(chunk)
    assert info.value.kind == "network"
    assert got  # partial output was delivered before the break


async def test_closing_the_stream_closes_the_http_request(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    p = make_provider("openai", base, model="hang")
    stream = p.chat_stream(MSG)
    first = await anext(stream)
    assert first["content"] == ""
    await stream.aclose()
    async with asyncio.timeout(5):
        await fake.stream_closed.wait()


async def test_cancelling_the_task_closes_the_http_request(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    p = make_provider("openai", base, model="hang")

    async def consume() -> None:
        async for _ in p.chat_stream(MSG):
            pass

    task = asyncio.create_task(consume())
    async with asyncio.timeout(5):
        await fake.stream_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(5):
        await fake.stream_closed.wait()


async def test_garbage_stream_lines_give_a_clear_error(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="garbage")
    with pytest.raises(ProviderError) as info:
        await collect(p.chat_stream(MSG))
    assert "not JSON" in str(info.value)
    assert "'openai'" in str(info.value)


async def test_error_finish_reason_as_only_chunk_fails(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="network_error")
    with pytest.raises(ProviderError) as info:
        await collect(p.chat_stream(MSG))
    assert info.value.kind == "stream"
    assert "network_error" in str(info.value)


async def test_clean_eof_without_done_synthesizes_done(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="no-done")
    chunks = await collect(p.chat_stream(MSG))
    assert chunks[-1]["done"] is True
    assert "".join(c["content"] for c in chunks) == "Hello from loopback"


async def test_sse_body_on_non_stream_request_is_parsed(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="sse-body")
    resp = await p.chat(MSG)
    assert resp["content"] == "Hello from loopback"
    assert resp["finish_reason"] == "stop"
    assert resp["token_usage"]["prompt"] == 20


async def test_vendor_non_json_body_is_a_clear_error(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    p = make_provider("openai", base, model="html")
    with pytest.raises(ProviderError) as info:
        await p.chat(MSG)
    assert "not JSON" in str(info.value)
    assert "<html>" in str(info.value)


async def test_connection_refused_is_a_network_error(make_provider: MakeProvider) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = make_provider("openai", f"http://127.0.0.1:{port}")
    with pytest.raises(ProviderError) as info:
        await p.chat(MSG)
    assert info.value.kind == "network"


def test_bad_adapters_fail_with_the_adapter_named() -> None:
    with pytest.raises(ProviderError, match=r"broken.*syntax error"):
        AdapterScript("return {", origin="/x/broken.lua")
    with pytest.raises(ProviderError, match=r"'noreq'.*no transform_request"):
        AdapterScript('return {name = "noreq"}', origin="/x/noreq.lua")
    with pytest.raises(ProviderError, match=r"must return a table"):
        AdapterScript("return 42", origin="/x/num.lua")
    with pytest.raises(ProviderError, match=r"instruction limit"):
        AdapterScript("while true do end", origin="/x/spin.lua", instruction_limit=100_000)


async def test_non_json_transform_output_is_a_clear_error(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    script = AdapterScript(
        'return {name = "nonjson", transform_request = function(r) return 42 end}', origin="nonjson.lua"
    )
    p = make_provider(script, base)
    with pytest.raises(ProviderError, match=r"'nonjson'.*expected a JSON string"):
        await p.chat(MSG)


async def test_failing_transform_response_falls_back_to_standard_parser(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    _, base = vendors
    script = AdapterScript(
        'return {name = "half", transform_request = function(r) return r end,'
        ' transform_response = function(r) return "not json" end,'
        ' transform_stream_chunk = function(l) error("boom") end}',
        origin="half.lua",
    )
    p = make_provider(script, base, model="m")
    resp = await p.chat(MSG)
    assert resp["content"].startswith("Hello there")
    chunks = await collect(p.chat_stream(MSG))  # Lua error per line -> standard chunk parser
    assert "".join(c["content"] for c in chunks) == "Hello from loopback"


async def test_minimal_adapter_uses_kernel_parsers_and_bearer(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    script = AdapterScript('return {name = "min", transform_request = function(r) return r end}', origin="min.lua")
    p = make_provider(script, base, api_key="k1", model="m")
    resp = await p.chat(MSG)
    assert resp["token_usage"]["cache_read"] == 4
    chunks = await collect(p.chat_stream(MSG))
    assert chunks[-1]["done"] is True
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer k1"
    assert fake.requests[-1]["path"] == "/chat/completions"


async def test_failing_build_headers_falls_back_to_static_headers(
    vendors: tuple[FakeVendors, str], make_provider: MakeProvider
) -> None:
    fake, base = vendors
    script = AdapterScript(
        'return {name = "hdr", headers = {["X-Static"] = "1"},'
        ' build_headers = function(meta) error("no signer") end,'
        " transform_request = function(r) return r end}",
        origin="hdr.lua",
    )
    p = make_provider(script, base, model="m")
    await p.chat(MSG)
    assert fake.requests[-1]["headers"]["x-static"] == "1"


def test_repr_never_shows_the_api_key(make_provider: MakeProvider) -> None:
    p = make_provider("openai", "http://127.0.0.1:9", api_key="sk-secret-123")
    assert "sk-secret" not in repr(p)
