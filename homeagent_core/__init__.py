"""HomeAgent core: the kernel, memory, plugins host and daemon.

Library use::

    from homeagent_core import Agent
    reply = await Agent(data_dir="./ha", llm={...}).ask("你好")

Importing this package loads nothing heavy and registers no plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from homeagent_sdk._version import __version__

if TYPE_CHECKING:
    from homeagent_core.app import App
    from homeagent_core.library import Agent

__all__ = ["Agent", "App", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Agent":
        from homeagent_core.library import Agent

        return Agent
    if name == "App":
        from homeagent_core.app import App

        return App
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
