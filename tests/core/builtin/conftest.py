"""Runs built-in plugins inside a real ``App``: config store, bus, plugin host and kernel.

The model is a ``FakeModel`` (scripted replies); everything else is the production path:
the kernel collects the plugins' tools and channels, plugins inject through ``sdk.io``, and
``Harness.events`` records what the bus carried.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.app import App
from homeagent_sdk._fake_model import FakeModel
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Event, ToolCall, ToolResult


class Harness:
    """An App running the given built-ins on a FakeModel."""

    def __init__(
        self,
        data_dir: Path,
        modules: Sequence[str],
        overrides: dict[str, Any] | None,
        model: FakeModel,
        memory: bool,
    ) -> None:
        self.model = model
        self.app = App(
            data_dir,
            load_entrypoints=False,
            builtins=list(modules),
            provider=model,
            memory=memory,
            embedder=FakeEmbedder() if memory else None,
        )
        self.overrides = dict(overrides or {})
        self.events: list[Event] = []
        self._changed = asyncio.Condition()
        self.app.bus.subscribe(self._record, label="test-recorder")

    async def _record(self, event: Event) -> None:
        self.events.append(event)
        async with self._changed:
            self._changed.notify_all()

    async def wait_event(
        self, name: str, predicate: Callable[[Event], bool] = lambda e: True, *, count: int = 1, timeout: float = 10.0
    ) -> list[Event]:
        """Wait (bounded) until ``count`` events called ``name`` matching ``predicate`` arrived."""

        def matching() -> list[Event]:
            return [e for e in self.events if e.name == name and predicate(e)]

        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(matching()) >= count)
        return matching()

    @property
    def config(self) -> Any:
        return self.app.config

    @property
    def kernel(self) -> Any:
        return self.app.kernel

    @property
    def tools(self) -> Any:
        return self.app.kernel.tools

    @property
    def channels(self) -> Any:
        return self.app.kernel.channels

    def plugin(self, name: str) -> Any:
        return self.app.host.pm.get_plugin(name)

    async def start(self) -> Harness:
        self.app.declare_settings()  # plugin keys must be declared before they can be set
        for key, value in self.overrides.items():
            self.app.config.set(key, value)
        await self.app.start()
        failed = [f"{p.name}: {p.error}" for p in self.app.host.plugins() if p.status == "failed"]
        assert not failed, failed
        return self

    async def call(self, tool: str, /, **arguments: Any) -> ToolResult:
        return await self.tools.execute(ToolCall(id="t1", name=tool, arguments=arguments))

    async def ok(self, tool: str, /, **arguments: Any) -> str:
        result = await self.call(tool, **arguments)
        assert result.success, result.result
        return result.result

    async def fails(self, tool: str, /, **arguments: Any) -> str:
        result = await self.call(tool, **arguments)
        assert not result.success, result.result
        return result.result

    async def stop(self) -> None:
        await self.app.stop()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Any]:
    """``await harness([module, ...], {key: value}, data=, model=, memory=)`` -> a started Harness.

    ``memory=True`` opens the real memory system (graph, documents, knowledge) on a FakeEmbedder.
    """
    started: list[Harness] = []

    async def make(
        modules: Sequence[str],
        overrides: dict[str, Any] | None = None,
        *,
        data: Path | None = None,
        model: FakeModel | None = None,
        memory: bool = False,
    ) -> Harness:
        h = Harness(data or tmp_path / "data", modules, overrides, model or FakeModel(default="ok"), memory)
        started.append(h)
        return await h.start()

    yield make
    for h in reversed(started):
        if h.app.started:
            await h.stop()
