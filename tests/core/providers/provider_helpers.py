"""Helpers shared by the provider tests (a uniquely named module: ``conftest`` is ambiguous
when the whole suite runs)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from homeagent_core.providers.adapter import LuaAdaptedProvider
from homeagent_core.providers.deploy import bundled_adapters_dir

ADAPTERS = bundled_adapters_dir()

MakeProvider = Callable[..., LuaAdaptedProvider]


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drain a chunk iterator."""
    return [c async for c in it]


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold unified stream chunks the way the kernel does: text, and tool calls by index."""
    text = "".join(c.get("content", "") for c in chunks)
    calls: dict[int, dict[str, Any]] = {}
    for c in chunks:
        for frag in c.get("tool_calls", []):
            slot = calls.setdefault(frag["stream_index"], {"id": "", "name": "", "args": ""})
            slot["id"] = frag.get("id") or slot["id"]
            slot["name"] = frag.get("name") or slot["name"]
            slot["args"] += frag.get("raw_arguments", "")
    return {"content": text, "tool_calls": [calls[i] for i in sorted(calls)]}
