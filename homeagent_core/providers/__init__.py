"""LLM providers: sandboxed Lua adapters, LuaAdaptedProvider, ProviderManager, deployment.

Imports are lazy (PEP 562 ``__getattr__``) so ``import homeagent_core.providers`` does not pull
in lupa or httpx; they load on first use of a provider or sandbox.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from homeagent_core.providers.errors import ProviderError

if TYPE_CHECKING:
    from homeagent_core.providers.adapter import AdapterScript, LuaAdaptedProvider, load_adapter
    from homeagent_core.providers.deploy import (
        bundled_adapters_dir,
        deploy_bundled_adapters,
        list_adapters,
        resolve_adapter,
    )
    from homeagent_core.providers.lua import LuaSandbox, LuaScriptError
    from homeagent_core.providers.manager import ProviderManager, SourceConfig

__all__ = [
    "AdapterScript",
    "LuaAdaptedProvider",
    "LuaSandbox",
    "LuaScriptError",
    "ProviderError",
    "ProviderManager",
    "SourceConfig",
    "bundled_adapters_dir",
    "deploy_bundled_adapters",
    "list_adapters",
    "load_adapter",
    "resolve_adapter",
]

_LAZY = {
    "AdapterScript": "adapter",
    "LuaAdaptedProvider": "adapter",
    "load_adapter": "adapter",
    "bundled_adapters_dir": "deploy",
    "deploy_bundled_adapters": "deploy",
    "list_adapters": "deploy",
    "resolve_adapter": "deploy",
    "LuaSandbox": "lua",
    "LuaScriptError": "lua",
    "ProviderManager": "manager",
    "SourceConfig": "manager",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
