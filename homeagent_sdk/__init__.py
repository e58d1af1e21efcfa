"""HomeAgent plugin SDK: everything a plugin author imports.

Mark hook implementations with :data:`hookimpl`::

    from homeagent_sdk import hookimpl

    from homeagent_sdk import ToolRegistryProtocol, hookimpl

    @hookimpl
    def register_tools(registry: ToolRegistryProtocol) -> None:
        registry.add(lookup_weather)

The Protocols a hook is handed (``ToolRegistryProtocol``, ``ChannelRegistry``, ``PluginSDK``...)
are exported here so plugins can type their hook implementations.

The SDK never imports ``homeagent_core``.
"""

from __future__ import annotations

import pluggy

from homeagent_sdk import _names
from homeagent_sdk._version import __version__
from homeagent_sdk.api import (
    NOTIFY_EVENT,
    AdapterRegistry,
    ChannelRegistry,
    CommandApp,
    EmbeddingRegistry,
    PluginSDK,
    RouteRegistry,
    SettingsRegistry,
    ToolRegistryProtocol,
)
from homeagent_sdk.embeddings import EmbeddingInfo, EmbeddingProvider, EmbedInput
from homeagent_sdk.errors import (
    ConfigError,
    HomeAgentError,
    ModalityUnsupported,
    PluginError,
    PluginValidationError,
    ToolError,
    UsageError,
)
from homeagent_sdk.types import (
    STAGES,
    Caps,
    ChannelDef,
    ConfigDef,
    ContentBlock,
    Doc,
    Entity,
    Event,
    InjectOptions,
    MediaAttachment,
    Principal,
    Priority,
    Relation,
    StageContext,
    TextEvent,
    ToolCall,
    ToolDef,
    ToolOptions,
    ToolResult,
    Triple,
)

#: Marks a function or method as a HomeAgent hook implementation.
hookimpl = pluggy.HookimplMarker(_names.PROJECT_NAME)

__all__ = [
    "NOTIFY_EVENT",
    "STAGES",
    "AdapterRegistry",
    "Caps",
    "ChannelDef",
    "ChannelRegistry",
    "CommandApp",
    "ConfigDef",
    "ConfigError",
    "ContentBlock",
    "Doc",
    "EmbedInput",
    "EmbeddingInfo",
    "EmbeddingProvider",
    "EmbeddingRegistry",
    "Entity",
    "Event",
    "HomeAgentError",
    "InjectOptions",
    "MediaAttachment",
    "ModalityUnsupported",
    "PluginError",
    "PluginSDK",
    "PluginValidationError",
    "Principal",
    "Priority",
    "Relation",
    "RouteRegistry",
    "SettingsRegistry",
    "StageContext",
    "TextEvent",
    "ToolCall",
    "ToolDef",
    "ToolError",
    "ToolOptions",
    "ToolRegistryProtocol",
    "ToolResult",
    "Triple",
    "UsageError",
    "__version__",
    "hookimpl",
]
