"""Kernel overhead of one turn with a zero-latency FakeModel.

Cases:

* ``turn``         — a plain turn (no tools called) with 1,000 events in the timeline;
* ``turn_tool``    — the same with one tool call (two model rounds);
* ``turn_stages10``— a plain turn with 10 plugins implementing all seven stages (async);
* ``stage10``      — one stage run with 10 trivial async handlers (microseconds).

Prints a markdown table of p50/p90 (``--json``: one JSON object with ``turn_p50_ms``,
``turn_tool_p50_ms``, ``stage10_p50_us`` and the other figures). Targets: plain turn p50
≤ 2 ms, stage with 10 async handlers ≤ 50 µs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import Row, arg_parser, emit

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


TARGETS = {"turn": "≤ 2 ms", "stage10": "≤ 50 µs"}


def main() -> None:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500, help="turns per case")
    parser.add_argument("--events", type=int, default=1000, help="timeline events before measuring")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        results = uvloop.run(run(args.n, args.events))
    else:
        results = asyncio.run(run(args.n, args.events))
    rows = []
    figures: dict[str, Any] = {}
    for name, values in results.items():
        scale, unit = (1e6, "us") if name == "stage10" else (1e3, "ms")
        row = Row.of(name, values, scale=scale, unit=unit, target=TARGETS.get(name, ""))
        rows.append(row)
        figures[f"{name}_p50_{unit}"] = round(row[f"p50 ({unit})"], 3)
        figures[f"{name}_p90_{unit}"] = round(row[f"p90 ({unit})"], 3)
    figures["events"] = args.events
    figures["loop"] = "uvloop" if args.uvloop else "asyncio"
    title = f"kernel turn overhead: zero-latency FakeModel, {args.events} timeline events, {figures['loop']}"
    emit(args, title, rows, figures)


if __name__ == "__main__":
    main()
