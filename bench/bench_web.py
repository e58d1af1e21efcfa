"""Benchmark of the senses: web page fetch + extraction, and the cost of describing an image.

Run ``python bench/bench_web.py`` for a markdown table (median and p90), or with ``--json``
for one JSON object with ``fetch_extract_p50_ms``, ``fetch_p50_ms``, ``extract_p50_ms``,
``describe_overhead_ms`` and ``describe_total_p50_ms`` (medians).

* fetch + extract: a 200 KB Chinese HTML article from a loopback server, through the SSRF
  guard (DNS check, guarded connect), the capped body read, and trafilatura extraction to
  Markdown — what one ``web_fetch`` call costs besides the network. The cache is off.
* describe overhead: an attached receipt PNG the text-only main source cannot see, through the
  ``senses`` built-in of a real agent: signature check, media store write (sha256, SQLite),
  base64 data URL, request and note building — everything but the model call, i.e. minus the
  time spent inside the fallback source's ``chat`` (its Lua adapter, measured by
  ``bench_providers.py``, and the HTTP round trip to the model). ``describe_total_p50_ms``
  includes that call against a loopback OpenAI-compatible server; on this machine a loopback
  POST with a body costs ~40 ms of TCP delayed-ACK wait, which a real remote model dwarfs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "core" / "builtin"))

from _harness import Row, arg_parser, emit, percentile  # noqa: E402
from media_servers import FakeOpenAI, receipt_png  # noqa: E402
from web_servers import Loopback, pages_app  # noqa: E402

from homeagent_core.app import App  # noqa: E402
from homeagent_core.builtin.web_fetch import Fetcher, extract  # noqa: E402
from homeagent_sdk.ssrf import AddressPolicy  # noqa: E402
from homeagent_sdk.testing import FakeEmbedder  # noqa: E402
from homeagent_sdk.types import MediaAttachment  # noqa: E402

ROUNDS = 30


async def fetch_extract() -> tuple[list[float], list[float], list[float], int]:
    """(fetch+extract, fetch, extract) seconds per round and the page size."""
    both, fetch_only, extract_only = [], [], []
    size = 0
    async with Loopback(pages_app()) as srv:
        fetcher = Fetcher(AddressPolicy.parse("127.0.0.1"), cache_ttl=0)
        try:
            for i in range(ROUNDS + 3):
                t0 = time.perf_counter()
                result = await fetcher.fetch(f"{srv.url}/big")
                t1 = time.perf_counter()
                text = await asyncio.to_thread(extract, result, 1_000_000)
                t2 = time.perf_counter()
                assert "社区服务" in text
                size = len(result.body)
                if i >= 3:  # warm-up: first import of trafilatura and lxml
                    both.append(t2 - t0)
                    fetch_only.append(t1 - t0)
                    extract_only.append(t2 - t1)
        finally:
            await fetcher.aclose()
    return both, fetch_only, extract_only, size


async def describe_overhead() -> tuple[list[float], list[float]]:
    """(overhead, total) seconds per described image."""
    fake = FakeOpenAI()
    overhead, total = [], []
    png = receipt_png()
    async with Loopback(fake.app()) as srv:
        with tempfile.TemporaryDirectory() as tmp:
            config: dict[str, Any] = {"core.llm.provider": "main",
                                      "core.input_processing.image.fallback_provider": "eyes"}
            for name, model, extra in (("main", "text-only", {}), ("eyes", "vision-1", {"vision": True})):
                for key, value in {"base_url": f"{srv.url}/v1", "model": model, "adapter": "openai",
                                   "api_key": "k", **extra}.items():
                    config[f"core.llm.sources.{name}.{key}"] = value
            app = App(Path(tmp) / "data", load_entrypoints=False, builtins=["homeagent_core.builtin.senses"],
                      memory=True, embedder=FakeEmbedder(), overrides=config, local_plugins=False)
            await app.start()
            try:
                plugin = app.host.pm.get_plugin("senses")
                _config, provider = app.provider.source("eyes")
                in_chat: list[float] = []
                chat = provider.chat

                async def timed_chat(request: dict[str, Any]) -> dict[str, Any]:
                    t = time.perf_counter()
                    try:
                        return await chat(request)  # type: ignore[no-any-return]
                    finally:
                        in_chat.append(time.perf_counter() - t)

                provider.chat = timed_chat
                for i in range(ROUNDS + 3):
                    att = MediaAttachment(mime="image/png", data=png, name="receipt.png")
                    before = len(in_chat)
                    t0 = time.perf_counter()
                    note = await plugin._sense(att)
                    elapsed = time.perf_counter() - t0
                    assert "合计" in note, note
                    model_time = sum(in_chat[before:])
                    if i >= 3:
                        total.append(elapsed)
                        overhead.append(elapsed - model_time)
            finally:
                await app.stop()
    return overhead, total


def main() -> None:
    args = arg_parser(__doc__.splitlines()[0]).parse_args()
    both, fetch_only, extract_only, size = asyncio.run(fetch_extract())
    overhead, total = asyncio.run(describe_overhead())
    kb = f"{size / 1024:.0f} KB HTML"
    rows = [
        Row.of(f"web_fetch: fetch + extract, {kb}", both),
        Row.of(f"web_fetch: fetch only (guard, read), {kb}", fetch_only),
        Row.of(f"web_fetch: extract only (trafilatura), {kb}", extract_only),
        Row.of("describe image: overhead (all but the model)", overhead),
        Row.of("describe image: total incl. the model call (loopback)", total),
    ]
    figures = {
        "fetch_extract_p50_ms": round(statistics.median(both) * 1e3, 2),
        "fetch_extract_p90_ms": round(percentile(both, 90) * 1e3, 2),
        "fetch_p50_ms": round(statistics.median(fetch_only) * 1e3, 2),
        "extract_p50_ms": round(statistics.median(extract_only) * 1e3, 2),
        "page_bytes": size,
        "describe_overhead_ms": round(statistics.median(overhead) * 1e3, 2),
        "describe_overhead_p90_ms": round(percentile(overhead, 90) * 1e3, 2),
        "describe_total_p50_ms": round(statistics.median(total) * 1e3, 2),
    }
    emit(args, "Senses: web fetch and image description", rows, figures)


if __name__ == "__main__":
    main()
