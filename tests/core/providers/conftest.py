"""Fixtures: a running loopback vendor server and a factory of providers aimed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from provider_helpers import ADAPTERS, MakeProvider
from provider_servers import FakeVendors, LoopbackServer

from homeagent_core.providers.adapter import AdapterScript, LuaAdaptedProvider, load_adapter


@pytest.fixture
async def vendors() -> AsyncIterator[tuple[FakeVendors, str]]:
    """(server state, base URL) of a fresh loopback vendor server."""
    fake = FakeVendors()
    async with LoopbackServer(fake.app()) as srv:
        yield fake, srv.base_url
        fake.release.set()


@pytest.fixture
async def make_provider() -> AsyncIterator[MakeProvider]:
    """Build a LuaAdaptedProvider from a bundled adapter name or a compiled script."""
    made: list[LuaAdaptedProvider] = []

    def make(adapter: str | AdapterScript, base_url: str, **kw: Any) -> LuaAdaptedProvider:
        script = adapter if isinstance(adapter, AdapterScript) else \
            load_adapter(ADAPTERS / f"{adapter}.lua")
        p = LuaAdaptedProvider(kw.pop("name", "src"), script, base_url=base_url, **kw)
        made.append(p)
        return p

    yield make
    for p in made:
        await p.aclose()
