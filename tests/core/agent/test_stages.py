"""StageRunner: concurrent handlers, errors and timeouts recorded, tool-stage semantics."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from homeagent_core import workers
from homeagent_core.agent.stages import StageRunner
from homeagent_core.events import EventBus
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk import hookimpl
from homeagent_sdk.types import StageContext, ToolCall, ToolResult


def runner(*plugins: object, timeout: float = 5.0, bus: EventBus | None = None) -> StageRunner:
    host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=plugins)
    return StageRunner(host, timeout=timeout, bus=bus)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown so a deliberately hung sync handler's thread ends."""
    event = threading.Event()
    yield event
    event.set()


async def test_handlers_of_one_stage_run_concurrently() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    class A:
        name = "a"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            a_started.set()
            await asyncio.wait_for(b_started.wait(), 2)  # only possible if B runs meanwhile
            ctx.extra["a"] = True

    class B:
        name = "b"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            b_started.set()
            await asyncio.wait_for(a_started.wait(), 2)
            ctx.extra["b"] = True

    ctx = StageContext()
    await runner(A(), B()).run("pre_action", ctx)
    assert ctx.extra == {"a": True, "b": True} and ctx.errors == []


async def test_a_handler_that_raises_is_recorded_and_the_others_finish(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        name = "broken"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            raise ValueError("bad input filter")

    class BrokenSync:
        name = "broken_sync"

        @hookimpl
        def on_input(self, ctx: StageContext) -> None:
            raise KeyError("missing")

    class Fine:
        name = "fine"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            await asyncio.sleep(0)
            ctx.extra["fine"] = True

    caplog.set_level(logging.ERROR)
    ctx = StageContext()
    await runner(Broken(), BrokenSync(), Fine()).run("on_input", ctx)
    assert ctx.extra == {"fine": True}
    assert sorted(ctx.errors) == [
        "on_input: plugin broken: ValueError: bad input filter",
        "on_input: plugin broken_sync: KeyError: 'missing'",
    ]
    assert any(r.exc_info and r.exc_info[0] is ValueError for r in caplog.records)


async def test_a_hanging_handler_is_cancelled_after_the_stage_timeout(release: threading.Event) -> None:
    cancelled = asyncio.Event()

    class HangsAsync:
        name = "hangs_async"

        @hookimpl
        async def post_action(self, ctx: StageContext) -> None:
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    class HangsSync:
        name = "hangs_sync"

        @hookimpl
        def post_action(self, ctx: StageContext) -> None:
            release.wait(10)

    class Quick:
        name = "quick"

        @hookimpl
        def post_action(self, ctx: StageContext) -> None:
            ctx.llm_text = "filtered"

    ctx = StageContext(llm_text="raw")
    await runner(HangsAsync(), HangsSync(), Quick(), timeout=0.2).run("post_action", ctx)
    assert ctx.llm_text == "filtered"
    assert sorted(ctx.errors) == [
        "post_action: plugin hangs_async: did not finish within 0.2 s and was cancelled",
        "post_action: plugin hangs_sync: did not finish within 0.2 s and was cancelled",
    ]
    assert cancelled.is_set()


async def test_a_single_hanging_handler_is_bounded_too() -> None:
    class Hangs:
        name = "hangs"

        @hookimpl
        async def after_output(self, ctx: StageContext) -> None:
            await asyncio.get_running_loop().create_future()

    ctx = StageContext()
    await runner(Hangs(), timeout=0.1).run("after_output", ctx)
    assert ctx.errors == ["after_output: plugin hangs: did not finish within 0.1 s and was cancelled"]


async def test_before_toolcall_returns_rejections_and_may_rewrite_arguments() -> None:
    class Guard:
        name = "guard"

        @hookimpl
        def before_toolcall(self, ctx: StageContext, call: ToolCall) -> str | None:
            return "不允许删除文件" if call.name == "rm" else None

    class Rewriter:
        name = "rewriter"

        @hookimpl
        async def before_toolcall(self, ctx: StageContext, call: ToolCall) -> None:
            call.arguments["path"] = "/safe" + call.arguments.get("path", "")

    stages = runner(Guard(), Rewriter())
    ok = ToolCall("1", "ls", {"path": "/tmp"})
    assert await stages.run("before_toolcall", StageContext(), call=ok) == []
    assert ok.arguments == {"path": "/safe/tmp"}
    assert await stages.run("before_toolcall", StageContext(), call=ToolCall("2", "rm", {})) == ["不允许删除文件"]


async def test_own_tools_scope_limits_a_handler_to_its_plugins_tools() -> None:
    seen: list[str] = []

    class Scoped:
        name = "files"
        scope = "own_tools"

        @hookimpl
        def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> None:
            seen.append(call.name)
            result.result = "redacted"

    stages = runner(Scoped())
    mine = ToolResult("1", "read_file", True, "secret")
    await stages.run("after_toolcall", StageContext(), call=ToolCall("1", "read_file", {}, plugin="files"), result=mine)
    other = ToolResult("2", "weather", True, "sunny")
    await stages.run(
        "after_toolcall", StageContext(), call=ToolCall("2", "weather", {}, plugin="weather"), result=other
    )
    assert seen == ["read_file"]
    assert (mine.result, other.result) == ("redacted", "sunny")


async def test_a_wrong_return_type_is_recorded_naming_plugin_and_stage() -> None:
    class Wrong:
        name = "wrong"

        @hookimpl
        def before_output(self, ctx: StageContext) -> Any:
            return {"final_text": "x"}

    ctx = StageContext()
    await runner(Wrong()).run("before_output", ctx)
    assert ctx.errors == [
        "before_output: plugin wrong: returned dict; "
        "stage hooks return None (before_toolcall may return a rejection string)"
    ]


async def test_a_stage_event_is_published_for_stages_with_handlers() -> None:
    class P:
        name = "p"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            return None

    bus = EventBus()
    got: list[dict[str, Any]] = []
    bus.subscribe(lambda e: got.append(e.data), "stage")
    stages = runner(P(), bus=bus)
    await stages.run("on_input", StageContext())
    await stages.run("pre_action", StageContext())  # no handlers: nothing published
    await bus.drain()
    assert [(g["stage"], g["handlers"]) for g in got] == [("on_input", 1)]
    await bus.aclose()


async def test_handlers_that_suspend_in_every_usual_way_still_complete() -> None:
    loop = asyncio.get_running_loop()
    failing: asyncio.Future[None] = loop.create_future()
    loop.call_soon(failing.set_exception, LookupError("upstream said no"))

    class Yields:
        name = "yields"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            await asyncio.sleep(0)  # a bare yield
            await asyncio.sleep(0)
            ctx.extra["yields"] = True

    class CatchesFutureError:
        name = "catches"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            try:
                await failing
            except LookupError as exc:
                ctx.extra["caught"] = str(exc)

    class AwaitsTask:
        name = "awaits_task"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            async def inner() -> int:
                await asyncio.sleep(0)
                return 7

            ctx.extra["task"] = await asyncio.create_task(inner())

    class RaisesLater:
        name = "raises_later"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            await asyncio.sleep(0)
            raise ValueError("after a suspension")

    ctx = StageContext()
    await runner(Yields(), CatchesFutureError(), AwaitsTask(), RaisesLater()).run("on_input", ctx)
    assert ctx.extra == {"yields": True, "caught": "upstream said no", "task": 7}
    assert ctx.errors == ["on_input: plugin raises_later: ValueError: after a suspension"]


async def test_the_handler_cache_follows_plugin_registration() -> None:
    class First:
        name = "first"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            ctx.extra.setdefault("ran", []).append("first")

    class Second:
        name = "second"

        @hookimpl
        async def on_input(self, ctx: StageContext) -> None:
            ctx.extra.setdefault("ran", []).append("second")

    stages = runner(First())
    ctx = StageContext()
    await stages.run("on_input", ctx)
    stages.host.register(Second())
    await stages.run("on_input", ctx)
    stages.host.unregister("first")
    await stages.run("on_input", ctx)
    assert ctx.extra["ran"] == ["first", "first", "second", "second"]


async def test_a_handlers_own_timeout_and_self_cancel_end_only_that_handler(make_kernel: Any) -> None:
    """Each handler runs in its own task: what it does to "its" task never reaches the turn."""

    class OwnTimeout:
        name = "own_timeout"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            try:
                async with asyncio.timeout(0.01):
                    await asyncio.Event().wait()  # never set: the handler's own deadline ends it
            except TimeoutError:
                ctx.extra["own_timeout"] = "gave up on its own"

    class CancelsItself:
        name = "cancels_itself"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)

    class Bystander:
        name = "bystander"

        @hookimpl
        async def pre_action(self, ctx: StageContext) -> None:
            await asyncio.sleep(0)
            ctx.extra["bystander"] = True

    seen: list[StageContext] = []

    class Spy:
        name = "spy"

        @hookimpl
        def after_output(self, ctx: StageContext) -> None:
            seen.append(ctx)

    kernel = await make_kernel(OwnTimeout(), CancelsItself(), Bystander(), Spy())
    reply = await kernel.ask("你好", timeout=10)
    assert reply == "ok"
    assert reply.errors == ["pre_action: plugin cancels_itself: CancelledError: the handler's task was cancelled"]
    assert seen[0].extra["own_timeout"] == "gave up on its own" and seen[0].extra["bystander"] is True
    assert kernel.loop.failures == 0


async def test_a_sync_handler_that_hangs_every_turn_never_starves_another_plugins_handler(
    release: threading.Event,
) -> None:
    """Its abandoned threads are replaced; past two of them the plugin is refused, not queued."""

    class HangsSync:
        name = "hangs_sync"

        @hookimpl
        def pre_action(self, ctx: StageContext) -> None:
            release.wait(30)

    class QuickSync:
        name = "quick_sync"

        @hookimpl
        def pre_action(self, ctx: StageContext) -> None:
            ctx.extra["quick"] = True

    stages = runner(HangsSync(), QuickSync(), timeout=0.2)
    errors: list[list[str]] = []
    try:
        for _ in range(12):  # more turns than the pool has threads
            ctx = StageContext()
            await stages.run("pre_action", ctx)
            assert ctx.extra.get("quick") is True, ctx.errors
            errors.append(ctx.errors)
        assert all(len(e) == 1 and e[0].startswith("pre_action: plugin hangs_sync: ") for e in errors)
        assert errors[0] == ["pre_action: plugin hangs_sync: did not finish within 0.2 s and was cancelled"]
        assert "PoolRefused: plugin hangs_sync: not called, 2 of its earlier calls are still running" in errors[-1][0]
        (stats,) = [s for s in workers.stats() if s["name"] == "stage-sync" and s["abandoned"]]
        assert stats["abandoned"] == 2 and stats["refused_total"] == 10
        assert {s["owner"] for s in stats["stuck"]} == {"hangs_sync"}
        assert all(s["call"].endswith("HangsSync.pre_action") for s in stats["stuck"])
    finally:
        release.set()
        stages.close()
