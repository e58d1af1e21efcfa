"""Kernel overhead of one turn with a zero-latency FakeModel.

Cases:

* ``turn``         — a plain turn (no tools called) with 1,000 events in the timeline;
* ``turn_tool``    — the same with one tool call (two model rounds);
* ``turn_stages10``— a plain turn with 10 plugins implementing all seven stages (async);
* ``stage10``      — one stage run with 10 trivial async handlers (microseconds).
* ``webui_turn``   — a whole turn through a real daemon (an ``App`` with memory and the web
  UI, its own event loop in a thread): ``POST /api/v1/chat`` over HTTP on 127.0.0.1, answered
  by the zero-latency FakeModel, on a young store (a new data directory) and on an old one
  (the same daemon after ``--old-docs`` documents were added). Each turn writes the timeline,
  the working context (pruned by relevance once full) and the document store.

Prints a markdown table of p50/p90 (``--json``: one JSON object with ``turn_p50_ms``,
``turn_tool_p50_ms``, ``stage10_p50_us``, ``webui_turn_p50_ms``, ``webui_turn_p95_ms``,
``webui_turn_old_p50_ms``, ``webui_turn_old_p95_ms``, ``webui_turn_cpu_ms`` and
``webui_turn_old_cpu_ms`` (CPU time of the whole process per turn, which a busy machine does
not inflate) and the other figures). Targets: plain turn p50 ≤ 2 ms, stage with 10 async
handlers ≤ 50 µs. ``--webui-only`` runs the daemon case alone: it uses only what every build
of the daemon has, so the same script times an older checkout
(``PYTHONPATH=<checkout> python bench/bench_turn.py --webui-only``).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
from _harness import Row, arg_parser, emit, percentile

from homeagent_core.agent.kernel import Kernel, KernelSettings
from homeagent_core.agent.stages import StageRunner
from homeagent_core.events import EventBus
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, FakeReply
from homeagent_sdk.types import StageContext, ToolCall, ToolResult

USAGE = {"prompt": 10, "completion": 2, "total": 12}


class Tools:
    name = "bench_tools"

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        async def lookup(key: str) -> str:
            """Look a key up."""
            return key

        registry.add(lookup)


def stage_plugin(n: int) -> object:
    class AllStages:
        name = f"stages{n}"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            return None

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            return None

        @hookimpl
        async def post_action(self, ctx: StageContext) -> None:
            return None

        @hookimpl
        async def before_toolcall(self, ctx: StageContext, call: ToolCall) -> None:
            return None

        @hookimpl
        async def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> None:
            return None

        @hookimpl
        async def before_output(self, ctx: StageContext) -> None:
            return None

        @hookimpl
        async def after_output(self, ctx: StageContext) -> None:
            return None

    return AllStages()


def responder(request: dict[str, Any]) -> Any:
    last = request["messages"][-1]
    if last["role"] == "user" and str(last["content"]).startswith("tool"):
        return FakeReply(tool_calls=[("lookup", {"key": "k"})], usage=USAGE)
    return FakeReply(content="好的，收到。", usage=USAGE)


async def make_kernel(plugins: list[object], events: int) -> tuple[Kernel, EventBus]:
    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=plugins)
    bus = EventBus()
    settings = KernelSettings(max_context_size=events + 16, context_window=200_000)
    kernel = Kernel(host, bus, FakeModel(responder=responder, chunk_size=16), settings=settings)
    await kernel.start()
    for n in range(events):
        role = "user" if n % 2 == 0 else "assistant"
        kernel.timeline.append(role, f"第 {n} 条历史消息：今天天气不错，我们聊了一些事情。")
    return kernel, bus


async def timed(fn: Callable[[int], Awaitable[Any]], n: int, warmup: int) -> list[float]:
    for i in range(warmup):
        await fn(-i - 1)
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        await fn(i)
        out.append(time.perf_counter() - t0)
    return out


async def run(n: int, events: int) -> dict[str, Any]:
    results: dict[str, list[float]] = {}

    kernel, bus = await make_kernel([Tools()], events)
    results["turn"] = await timed(lambda i: kernel.ask(f"问题 {i}"), n, 50)
    results["turn_tool"] = await timed(lambda i: kernel.ask(f"tool {i}"), n, 50)
    await kernel.aclose()
    await bus.aclose()

    kernel, bus = await make_kernel([Tools(), *(stage_plugin(i) for i in range(10))], events)
    results["turn_stages10"] = await timed(lambda i: kernel.ask(f"问题 {i}"), n, 50)
    await kernel.aclose()
    await bus.aclose()

    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=[stage_plugin(i) for i in range(10)])
    stages = StageRunner(host)
    ctx = StageContext()
    results["stage10"] = await timed(lambda i: stages.run("pre_action", ctx), n * 5, 200)
    stages.close()
    return results


API_KEY = "bench-api-key-0123456789"
TOPICS = ("天气", "晚饭", "周末的计划", "the garden", "a train ticket", "孩子的作业", "the printer", "体检报告")


class Daemon:
    """An App with memory and the web UI on a free port, on its own loop in a thread."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="daemon", daemon=True)
        self.app: Any = None
        self.url = ""

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 600.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        from homeagent_core.app import App

        self.thread.start()

        async def start() -> None:
            self.app = App(self.data_dir, load_entrypoints=False, builtins=("homeagent_core.builtin.webui",),
                           provider=FakeModel(default="好的，我记下了，还有别的吗？", chunk_size=8),
                           local_plugins=False)
            self.app.services.listen_port = 0
            await self.app.start()
            plugin = self.app.host.pm.get_plugin("webui")
            if plugin is None or not plugin.port:
                raise RuntimeError(f"the web UI did not start: {self.app.status()}")
            if self.app.memory is None:
                raise RuntimeError(f"memory did not start: {self.app.status()}")
            self.url = plugin.url

        self.call(start())

    def add_documents(self, n: int) -> None:
        """Age the store: ``n`` documents of conversation-like text, added in batches."""
        from homeagent_core.memory.documents.store import Document

        async def add() -> None:
            store = self.app.memory.documents
            for start in range(0, n, 1000):
                await store.add_many([
                    Document(content=f"第 {i} 条旧消息：我们聊过{TOPICS[i % len(TOPICS)]}，"
                                     f"还有 item {i * 7919 % 100_003} and note {i % 997}。")
                    for i in range(start, min(n, start + 1000))
                ])

        self.call(add())

    def stop(self) -> None:
        self.call(self.app.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def chat_turns(url: str, n: int, first: int, warmup: int) -> list[float]:
    """Seconds per ``POST /api/v1/chat`` for ``n`` turns after ``warmup`` (distinct messages)."""
    out = []
    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": API_KEY}, timeout=120) as client:
        for i in range(first, first + warmup + n):
            body = {"message": f"第 {i} 个问题：关于{TOPICS[i % len(TOPICS)]}，item {i * 31 % 1009} 怎么办？"}
            t0 = time.perf_counter()
            response = await client.post("/api/v1/chat", json=body)
            elapsed = time.perf_counter() - t0
            if response.status_code != 200:
                raise RuntimeError(f"/api/v1/chat answered {response.status_code}: {response.text[:200]}")
            if i >= first + warmup:
                out.append(elapsed)
    return out


def run_webui(n: int, old_docs: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """``webui_turn`` on a young store, then ``webui_turn_old`` after ``old_docs`` documents.

    Returns the seconds per turn of each, and each one's CPU seconds per turn (the whole
    process: daemon and client; a busy machine inflates the wall clock, not this).
    """
    os.environ["HOMEAGENT_WEBUI_API_KEY"] = API_KEY
    results: dict[str, list[float]] = {}
    cpu: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as tmp:
        daemon = Daemon(Path(tmp) / "data")
        daemon.start()
        try:
            c0 = time.process_time()
            results["webui_turn"] = asyncio.run(chat_turns(daemon.url, n, 0, 10))
            cpu["webui_turn"] = (time.process_time() - c0) / (n + 10)
            if old_docs:
                daemon.add_documents(old_docs)
                c0 = time.process_time()
                results["webui_turn_old"] = asyncio.run(chat_turns(daemon.url, n, n + 10, 10))
                cpu["webui_turn_old"] = (time.process_time() - c0) / (n + 10)
        finally:
            daemon.stop()
    return results, cpu


TARGETS = {"turn": "≤ 2 ms", "stage10": "≤ 50 µs"}


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500, help="turns per case")
    parser.add_argument("--events", type=int, default=1000, help="timeline events before measuring")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("--webui-turns", type=int, default=500, help="turns through the daemon per store")
    parser.add_argument("--old-docs", type=int, default=20_000, help="documents that age the store (0: young only)")
    parser.add_argument("--webui-only", action="store_true", help="only the daemon case (runs on older builds)")
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    if args.webui_only:
        pass
    elif args.uvloop:
        import uvloop

        results = uvloop.run(run(args.n, args.events))
    else:
        results = asyncio.run(run(args.n, args.events))
    cpu: dict[str, float] = {}
    if args.webui_turns:
        webui, cpu = run_webui(args.webui_turns, args.old_docs)
        results |= webui
    rows = []
    figures: dict[str, Any] = {}
    for name, values in results.items():
        scale, unit = (1e6, "us") if name == "stage10" else (1e3, "ms")
        row = Row.of(name, values, scale=scale, unit=unit, target=TARGETS.get(name, ""))
        rows.append(row)
        figures[f"{name}_p50_{unit}"] = round(row[f"p50 ({unit})"], 3)
        figures[f"{name}_p90_{unit}"] = round(row[f"p90 ({unit})"], 3)
        if name.startswith("webui_turn"):
            figures[f"{name}_p95_{unit}"] = round(percentile(values, 95) * scale, 3)
            figures[f"{name}_cpu_{unit}"] = round(cpu[name] * scale, 3)
    figures["old_docs"] = args.old_docs
    figures["events"] = args.events
    figures["loop"] = "uvloop" if args.uvloop else "asyncio"
    title = f"kernel turn overhead: zero-latency FakeModel, {args.events} timeline events, {figures['loop']}"
    emit(args, title, rows, figures)


if __name__ == "__main__":
    main()
