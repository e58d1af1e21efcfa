"""HomeAgent plugin SDK: everything a plugin author imports.

Mark hook implementations with :data:`hookimpl`::

    from homeagent_sdk import hookimpl

    @hookimpl
    def register_tools(registry):
        registry.add(lookup_weather)

The SDK never imports ``homeagent_core``.
"""

from __future__ import annotations

import pluggy

from homeagent_sdk._names import PROJECT_NAME
from homeagent_sdk._version import __version__
from homeagent_sdk.embeddings import EmbeddingInfo, EmbeddingProvider, EmbedInput
from homeagent_sdk.errors import (
    HomeAgentError,
    ModalityUnsupported,
    PluginError,
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
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

__all__ = [
    "PROJECT_NAME",
    "STAGES",
    "Caps",
    "ChannelDef",
    "ConfigDef",
    "ContentBlock",
    "Doc",
    "EmbedInput",
    "EmbeddingInfo",
    "EmbeddingProvider",
    "Entity",
    "Event",
    "HomeAgentError",
    "InjectOptions",
    "MediaAttachment",
    "ModalityUnsupported",
    "PluginError",
    "Priority",
    "Relation",
    "StageContext",
    "TextEvent",
    "ToolCall",
    "ToolDef",
    "ToolError",
    "ToolOptions",
    "ToolResult",
    "Triple",
    "UsageError",
    "__version__",
    "hookimpl",
]
