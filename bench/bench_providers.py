"""Benchmark of the provider adapter path: per-request and per-chunk overhead, stream throughput.

Run ``python bench/bench_providers.py`` for a markdown table (median and p90), or with
``--json`` for one JSON object with ``request_overhead_us``, ``chunk_overhead_us`` and
``stream_chunks_per_s`` (medians), plus ``request_overhead_p90_us``, ``chunk_overhead_p90_us``,
``request_overhead_anthropic_us``, ``stream_chunks_per_s_slowest`` (the slowest of the
rounds), ``request_overhead_cpu_us`` and ``chunk_overhead_cpu_us`` (median CPU time per call,
which a busy machine does not inflate); throughput is listed below the table.

* request overhead: a 20-message unified request through request preparation, orjson, the
  adapter's Lua ``transform_request`` and header building, plus ``transform_response`` of a
  vendor answer and its validation — everything the adapter path adds to one HTTP call.
  Targets: ≤ 300 µs per request, ≤ 30 µs per stream chunk.
* chunk overhead: one OpenAI ``chat.completion.chunk`` line through ``transform_stream_chunk``
  and validation.
* stream throughput: chunks/s of a real streamed response from the loopback server of the test
  suite (server and client share one process and event loop, so this is a lower bound).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "core" / "providers"))

from _harness import Row, arg_parser, emit, percentile  # noqa: E402

from homeagent_core.providers.adapter import LuaAdaptedProvider, load_adapter  # noqa: E402
from homeagent_core.providers.deploy import bundled_adapters_dir  # noqa: E402


def request_20() -> dict[str, Any]:
    """A realistic 20-message conversation with a tool round trip and two tool schemas."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "你是一个家庭助理。" * 20}]
    for i in range(9):
        msgs.append({"role": "user", "content": f"第{i}个问题：今天的天气怎么样？ please answer "
                                                "with some detail about the forecast." * 2})
        msgs.append({"role": "assistant", "content": f"Answer {i}: it will be sunny with a "
                                                     "light breeze and 21°C.\nEnjoy!" * 2})
    msgs.append({"role": "user", "content": "thanks"})
    tools = [{"type": "function", "function": {
        "name": f"tool_{k}", "description": "does a thing",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "days": {"type": "integer"}},
                       "required": ["city"]}}} for k in range(2)]
    return {"model": "", "messages": msgs, "tools": tools, "stream": False}


RESPONSE = orjson.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "It will be sunny tomorrow, around 21°C. " * 5}}],
    "usage": {"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960,
              "prompt_tokens_details": {"cached_tokens": 512}}}).decode()

CHUNK = orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                      "model": "m", "choices": [{"index": 0, "delta": {"content": " sunny"},
                                                 "finish_reason": None}]}).decode()


CPU_US: dict[str, float] = {}
"""Median CPU (thread) time per call of each measure: stable even on a busy machine, where
wall-clock medians include time the process spent descheduled."""


def timed(fn: Callable[[], object], rounds: int, inner: int, label: str) -> list[float]:
    """Wall-clock microseconds per call for ``rounds`` batches of ``inner`` calls."""
    for _ in range(inner):
        fn()
    out, cpu = [], []
    for _ in range(rounds):
        t, c = time.perf_counter(), time.thread_time()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t) / inner * 1e6)
        cpu.append((time.thread_time() - c) / inner * 1e6)
    CPU_US[label] = statistics.median(cpu)
    return out


def request_path(adapter: str) -> list[float]:
    script = load_adapter(bundled_adapters_dir() / f"{adapter}.lua")
    p = LuaAdaptedProvider("bench", script, base_url="http://127.0.0.1:1", api_key="k",
                           model="bench-model")
    req = request_20()
    body = RESPONSE
    if adapter == "anthropic":
        body = orjson.dumps({"type": "message", "role": "assistant", "stop_reason": "end_turn",
                             "content": [{"type": "text", "text": "sunny " * 40}],
                             "usage": {"input_tokens": 900, "output_tokens": 60}}).decode()

    def once() -> None:
        p.build(req, stream=False)
        p.parse_response(body)

    return timed(once, 30, 100, adapter)


def chunk_path() -> list[float]:
    script = load_adapter(bundled_adapters_dir() / "openai.lua")
    p = LuaAdaptedProvider("bench", script, base_url="http://127.0.0.1:1")
    state = script.new_stream_state()
    return timed(lambda: p.parse_stream_payload(CHUNK, 1, state), 30, 1000, "chunk")


async def stream_throughput(n_chunks: int = 5000, rounds: int = 5) -> list[float]:
    from provider_servers import FakeVendors, LoopbackServer

    fake = FakeVendors()
    rates = []
    async with LoopbackServer(fake.app()) as srv:
        script = load_adapter(bundled_adapters_dir() / "openai.lua")
        p = LuaAdaptedProvider("bench", script, base_url=srv.base_url, model="count")
        req = {"messages": [{"role": "user", "content": "go"}], "max_tokens": n_chunks}
        for _ in range(rounds):
            t = time.perf_counter()
            count = 0
            async for _chunk in p.chat_stream(req):
                count += 1
            rates.append(count / (time.perf_counter() - t))
        await p.aclose()
    return rates


def main() -> None:
    args = arg_parser(__doc__.splitlines()[0]).parse_args()
    req = request_path("openai")
    req_anthropic = request_path("anthropic")
    chunk = chunk_path()
    rates = asyncio.run(stream_throughput())
    rows = [
        Row.of("request overhead, openai adapter, 20 messages", req, scale=1, unit="µs",
               **{"cpu p50 (µs)": CPU_US["openai"]}, target="≤ 300 µs"),
        Row.of("request overhead, anthropic adapter, 20 messages", req_anthropic, scale=1,
               unit="µs", **{"cpu p50 (µs)": CPU_US["anthropic"]}, target="≤ 300 µs"),
        Row.of("stream chunk overhead, openai adapter", chunk, scale=1, unit="µs",
               **{"cpu p50 (µs)": CPU_US["chunk"]}, target="≤ 30 µs"),
    ]
    figures = {
        "request_overhead_us": round(statistics.median(req), 1),
        "chunk_overhead_us": round(statistics.median(chunk), 2),
        "stream_chunks_per_s": round(statistics.median(rates)),
        "request_overhead_p90_us": round(percentile(req, 90), 1),
        "chunk_overhead_p90_us": round(percentile(chunk, 90), 2),
        "request_overhead_anthropic_us": round(statistics.median(req_anthropic), 1),
        "stream_chunks_per_s_slowest": round(min(rates)),
        "request_overhead_cpu_us": round(CPU_US["openai"], 1),
        "chunk_overhead_cpu_us": round(CPU_US["chunk"], 2),
    }
    emit(args, "Provider adapter path", rows, figures)


if __name__ == "__main__":
    main()
