"""pluggy's hookimpl options: honoured on sequential hooks, refused on concurrent stage hooks."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from homeagent_core.app import App
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk import hookimpl
from homeagent_sdk.errors import PluginValidationError
from homeagent_sdk.testing import FakeModel
from homeagent_sdk.types import Event, StageContext


def make_app(tmp_path: Path, *plugins: object) -> App:
    return App(
        tmp_path / "data", load_entrypoints=False, builtins=(), plugins=plugins, provider=FakeModel(default="ok")
    )


class WrapsPreAction:
    name = "wraps_pre_action"

    @hookimpl(wrapper=True)
    def pre_action(self, ctx: StageContext) -> Generator[None, Any, Any]:
        ctx.extra["wrapped"] = True
        return (yield)


class OldStyleOnInput:
    name = "old_style_on_input"

    @hookimpl(hookwrapper=True)
    def on_input(self, ctx: StageContext) -> Generator[None, Any, None]:
        yield


class FirstOnOutput:
    name = "first_on_output"

    @hookimpl(tryfirst=True)
    async def after_output(self, ctx: StageContext) -> None:
        return None


@pytest.mark.parametrize(
    ("plugin", "hook", "option"),
    [
        (WrapsPreAction(), "pre_action", "wrapper=True"),
        (OldStyleOnInput(), "on_input", "hookwrapper=True"),
        (FirstOnOutput(), "after_output", "tryfirst=True"),
    ],
)
def test_wrappers_and_ordering_on_a_concurrent_stage_hook_are_refused_at_registration(
    plugin: Any, hook: str, option: str
) -> None:
    with pytest.raises(PluginValidationError) as info:
        create_plugin_manager(load_entrypoints=False, builtins=(), plugins=[plugin])
    message = str(info.value)
    name = plugin.name
    assert f"plugin {name!r}" in message and f"hook {hook}" in message and option in message
    assert "concurrently" in message and "plain @hookimpl" in message


def test_the_app_refuses_such_a_plugin_by_name(tmp_path: Path) -> None:
    with pytest.raises(PluginValidationError, match="plugin 'wraps_pre_action': hook pre_action"):
        make_app(tmp_path, WrapsPreAction())


async def test_lifecycle_and_registration_hooks_honour_wrappers_and_tryfirst_trylast(tmp_path: Path) -> None:
    calls: list[str] = []

    def plugin(name: str, *, tryfirst: bool = False, trylast: bool = False) -> object:
        class P:
            @hookimpl(tryfirst=tryfirst, trylast=trylast)
            async def startup(self, sdk: Any) -> None:
                calls.append(f"startup {name}")

            @hookimpl
            def shutdown(self) -> None:
                calls.append(f"shutdown {name}")

            @hookimpl
            def register_tools(self, registry: Any) -> None:
                def tool() -> str:
                    return name

                registry.add(tool, name=f"tool_{name}")

        p = P()
        p.name = name  # type: ignore[attr-defined]
        return p

    class Audit:
        """A new-style wrapper around startup and an old-style one around register_tools."""

        name = "audit"

        @hookimpl(wrapper=True)
        def startup(self, sdk: Any) -> Generator[None, Any, Any]:
            mine = sdk.name in ("a", "b", "c", "d")  # the app's own plugins are wrapped too
            if mine:
                calls.append(f"before {sdk.name}")
            result = yield  # the async impl has finished here
            if mine:
                calls.append(f"after {sdk.name}")
            return result

        @hookimpl(hookwrapper=True)
        def register_tools(self, registry: Any) -> Generator[None, pluggy.Result[Any], None]:
            outcome = yield
            outcome.get_result()
            if registry.plugin in ("a", "b", "c", "d"):
                calls.append(f"registered {[t.name for t in registry.added]}")

    app = make_app(tmp_path, plugin("a"), plugin("b", trylast=True), plugin("c", tryfirst=True), plugin("d"), Audit())
    async with app:
        assert [c for c in calls if c.startswith("registered")] == [
            "registered ['tool_a']",
            "registered ['tool_b']",
            "registered ['tool_c']",
            "registered ['tool_d']",
        ]
        started = [c for c in calls if not c.startswith("registered")]
        assert started == [
            "before c", "startup c", "after c",
            "before a", "startup a", "after a",
            "before d", "startup d", "after d",
            "before b", "startup b", "after b",
        ]  # fmt: skip
        assert app.kernel is not None
        reply = await app.kernel.ask("你好")
        assert reply == "ok"
        calls.clear()
    assert calls == ["shutdown d", "shutdown c", "shutdown b", "shutdown a"]


async def test_an_on_event_wrapper_sees_the_async_handlers_real_exception(tmp_path: Path) -> None:
    seen: list[str] = []

    class Listener:
        name = "listener"

        @hookimpl
        async def on_event(self, event: Event) -> None:
            if event.name == "agent_output":
                raise LookupError(f"cannot handle {event.data['content']!r}")

    class Guard:
        name = "guard"

        @hookimpl(wrapper=True)
        def on_event(self, event: Event) -> Generator[None, Any, Any]:
            try:
                return (yield)
            except LookupError as exc:
                seen.append(str(exc))
                return []

    async with make_app(tmp_path, Listener(), Guard()) as app:
        assert app.kernel is not None
        reply = await app.kernel.ask("你好")
        assert reply == "ok"
        await app.bus.drain(timeout=5)
    assert seen == ["cannot handle 'ok'"]
