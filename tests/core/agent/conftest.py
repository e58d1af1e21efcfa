"""Fixtures for kernel tests: a kernel factory over a real plugin host and event bus."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.agent.kernel import Kernel, KernelSettings
from homeagent_core.events import EventBus
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk._fake_model import FakeModel
from homeagent_sdk.types import Event

MakeKernel = Callable[..., Awaitable[Kernel]]


class EventLog:
    """Collects bus events; ``names()`` lists them in publication order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.name == name]

    def names(self) -> list[str]:
        return [e.name for e in self.events]


@pytest.fixture
def events() -> EventLog:
    return EventLog()


@pytest.fixture
async def make_kernel() -> AsyncIterator[MakeKernel]:
    made: list[tuple[Kernel, EventBus]] = []

    async def make(
        *plugins: object,
        model: Any = None,
        settings: KernelSettings | None = None,
        memory: Any = None,
        data_dir: Path | None = None,
        events: EventLog | None = None,
        start: bool = True,
    ) -> Kernel:
        host = create_plugin_manager(load_entrypoints=False, builtins=(), plugins=plugins)
        bus = EventBus()
        if events is not None:
            bus.subscribe(events, label="test")
        kernel = Kernel(
            host,
            bus,
            model if model is not None else FakeModel(default="ok"),
            settings=settings or KernelSettings(),
            memory=memory,
            data_dir=data_dir,
        )
        if start:
            await kernel.start()
        made.append((kernel, bus))
        return kernel

    yield make
    for kernel, bus in made:
        await kernel.aclose()
        await bus.aclose()
