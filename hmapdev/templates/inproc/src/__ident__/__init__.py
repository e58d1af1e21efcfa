"""__plugin_name__: an in-process HomeAgent plugin (installed with pip, found by entry point)."""

from __future__ import annotations

from typing import Any

from homeagent_sdk import hookimpl


async def __ident___greet(who: str) -> str:
    """Greet someone by name."""
    return f"Hello, {who}!"


@hookimpl
def register_tools(registry: Any) -> None:
    registry.add(__ident___greet)
