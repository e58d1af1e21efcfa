"""Web UI latency and throughput over real HTTP on 127.0.0.1, zero-latency FakeModel.

The daemon (an ``App`` with the web UI, no memory) runs on its own event loop in a thread;
the clients run on the main loop, so client work does not slow the server down.

Cases:

* ``first_byte``   — ``POST /v1/chat/completions`` with ``stream: true``: time from sending
  the request to the first streamed content delta (the answer's first token; target p50
  ≤ 20 ms). ``first_sse_byte`` is the time to the first byte of the stream (the role chunk).
* ``sse_fanout``   — 100 SSE clients on ``/api/v1/events``; a burst of aggregate events is
  published and timed until every client has read every event (events/s = events in the
  burst / time; each event is delivered 100 times).
* ``kernel_status``— ``GET /api/v1/kernel`` from 8 keep-alive clients (requests/s), and the
  latency of one client alone.

``--json`` keys: ``first_byte_p50_ms``, ``first_sse_byte_p50_ms``, ``sse_100_events_per_s``,
``sse_deliveries_per_s``, ``kernel_status_rps``, ``kernel_status_p50_ms``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import httpx
from _harness import Row, arg_parser, emit

API_KEY = "bench-api-key-0123456789"
ANSWER = "好的，这是一个用来测量首字节延迟的回答，会被分成若干块流式输出。"


class Daemon:
    """An App with the web UI on a free port, on its own loop in a thread."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="daemon", daemon=True)
        self.app: Any = None
        self.url = ""

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        from homeagent_core.app import App
        from homeagent_sdk.testing import FakeModel

        self.thread.start()

        async def start() -> None:
            self.app = App(self.data_dir, load_entrypoints=False, builtins=("homeagent_core.builtin.webui",),
                           provider=FakeModel(default=ANSWER, chunk_size=4), memory=False, local_plugins=False)
            self.app.services.listen_port = 0
            await self.app.start()
            plugin = self.app.host.pm.get_plugin("webui")
            if plugin is None or not plugin.port:
                raise RuntimeError(f"the web UI did not start: {self.app.status()}")
            self.url = plugin.url

        self.call(start())

    def stop(self) -> None:
        self.call(self.app.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def first_byte(url: str, n: int) -> tuple[list[float], list[float]]:
    """(time to first SSE byte, time to first content delta) for ``n`` streamed completions."""
    body = {"model": "homeagent", "stream": True, "messages": [{"role": "user", "content": "你好"}]}
    first_bytes, first_tokens = [], []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30) as client:
        for i in range(n + 5):
            body["messages"][0]["content"] = f"你好 {i}"  # distinct inputs: no de-duplication
            t0 = time.perf_counter()
            got_byte = got_token = None
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if got_byte is None:
                        got_byte = time.perf_counter() - t0
                    if got_token is None and '"content":"' in line and '"content":""' not in line:
                        got_token = time.perf_counter() - t0
            if got_byte is None or got_token is None:
                raise RuntimeError("a streamed completion had no content delta")
            if i >= 5:  # warm-up
                first_bytes.append(got_byte)
                first_tokens.append(got_token)
    return first_bytes, first_tokens


async def _sse_client(host: str, port: int, ready: asyncio.Event, want: int, done: list[float],
                      opened: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET /api/v1/events HTTP/1.1\r\nHost: {host}\r\nX-API-Key: {API_KEY}\r\n"
                 "Accept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    marker = b"event: tool_call\n"
    seen, tail = 0, b""
    opened.append(1)
    try:
        await ready.wait()
        while seen < want:
            data = await reader.read(65536)
            if not data:
                raise RuntimeError("an SSE stream ended early")
            chunk = tail + data
            seen += chunk.count(marker)
            tail = chunk[-(len(marker) - 1):]
            if tail.endswith(b"\n"):
                tail = b""
        done.append(time.perf_counter())
    finally:
        writer.close()


async def sse_fanout(daemon: Daemon, clients: int, events: int, rounds: int) -> list[float]:
    """Seconds for ``events`` events to reach all ``clients``, per round."""
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    hub = daemon.app.host.pm.get_plugin("webui").state.hub
    times = []
    for _ in range(rounds):
        ready, done, opened = asyncio.Event(), [], []
        tasks = [asyncio.create_task(_sse_client(host, int(port), ready, events, done, opened))
                 for _ in range(clients)]
        async with asyncio.timeout(30):
            while hub.client_count < clients:
                await asyncio.sleep(0.01)
        ready.set()

        async def burst() -> None:
            for i in range(events):
                daemon.app.bus.publish("tool_call", {"name": f"bench_{i}", "channel": "bench", "success": True})

        t0 = time.perf_counter()
        daemon.call(burst())
        async with asyncio.timeout(60):
            await asyncio.gather(*tasks)
        times.append(max(done) - t0)
        async with asyncio.timeout(30):
            while hub.client_count:
                await asyncio.sleep(0.01)
    return times


async def kernel_status(url: str, workers: int, per_worker: int) -> tuple[float, list[float]]:
    """(requests/s with ``workers`` clients, single-client latencies)."""
    headers = {"X-API-Key": API_KEY}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
        latencies = []
        for i in range(per_worker + 10):
            t0 = time.perf_counter()
            response = await client.get("/api/v1/kernel")
            response.raise_for_status()
            if i >= 10:
                latencies.append(time.perf_counter() - t0)

    async def worker() -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
            for _ in range(per_worker):
                (await client.get("/api/v1/kernel")).raise_for_status()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return workers * per_worker / (time.perf_counter() - t0), latencies


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="streamed completions timed")
    parser.add_argument("--clients", type=int, default=100, help="SSE clients")
    parser.add_argument("--events", type=int, default=1000, help="events per SSE burst")
    parser.add_argument("--rounds", type=int, default=5, help="SSE bursts")
    parser.add_argument("--requests", type=int, default=250, help="kernel status requests per client")
    args = parser.parse_args()
    os.environ["HOMEAGENT_WEBUI_API_KEY"] = API_KEY
    with tempfile.TemporaryDirectory(prefix="bench-webui-") as tmp:
        daemon = Daemon(Path(tmp) / "data")
        daemon.start()
        try:
            first_bytes, first_tokens = asyncio.run(first_byte(daemon.url, args.n))
            fanout = asyncio.run(sse_fanout(daemon, args.clients, args.events, args.rounds))
            rps, latencies = asyncio.run(kernel_status(daemon.url, 8, args.requests))
        finally:
            daemon.stop()
    per_s = [args.events / t for t in fanout]
    rows = [
        Row.of("first_byte (first content delta)", first_tokens, target="≤ 20 ms"),
        Row.of("first_sse_byte (role chunk)", first_bytes),
        Row.of(f"sse_fanout {args.clients} clients × {args.events} events", fanout, unit="ms",
               **{"events/s": statistics.median(per_s)}),
        Row.of("kernel_status (1 client)", latencies, **{"req/s (8 clients)": rps}),
    ]
    figures = {
        "first_byte_p50_ms": round(statistics.median(first_tokens) * 1e3, 3),
        "first_sse_byte_p50_ms": round(statistics.median(first_bytes) * 1e3, 3),
        f"sse_{args.clients}_events_per_s": round(statistics.median(per_s), 1),
        "sse_deliveries_per_s": round(statistics.median(per_s) * args.clients, 1),
        "kernel_status_rps": round(rps, 1),
        "kernel_status_p50_ms": round(statistics.median(latencies) * 1e3, 3),
    }
    emit(args, "web UI over HTTP: zero-latency FakeModel, asyncio", rows, figures)


if __name__ == "__main__":
    main()
