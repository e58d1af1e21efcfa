"""Every exception HomeAgent raises on purpose.

The tree::

    HomeAgentError                      base of everything below
    ├── UsageError                      a developer used the API wrongly (fix the code)
    │   └── SyncInAsyncError            a *_sync method was called inside a running event loop
    ├── ConfigError                     a config key or value is invalid
    │   ├── UnknownConfigKey            the key is not declared and not in a free namespace
    │   └── ConfigValueError            the value has the wrong type or is out of range
    ├── PluginError                     a plugin failed; carries ``plugin_name``
    │   ├── PluginLoadError             import, registration or startup failed
    │   └── PluginValidationError       a plugin broke a hook or registry contract
    ├── ToolError                       a tool call could not run (bad arguments, timeout, crash)
    ├── ProviderError                   an LLM source failed (HTTP, adapter, all sources down)
    ├── ModalityUnsupported             an embedding provider cannot embed that kind of input
    ├── MemoryStoreError                a memory layer refused an operation (corrupt blob, ...)
    └── DataDirError                    the data directory cannot be created or written

Two audiences: :class:`UsageError` and its children are mistakes in code that calls
HomeAgent; every other error is a runtime condition a user may see, so its message says what
was wrong and how to fix it. The CLI turns :class:`HomeAgentError` into a clean message and a
non-zero exit code instead of a traceback.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ConfigValueError",
    "DataDirError",
    "HomeAgentError",
    "MemoryStoreError",
    "ModalityUnsupported",
    "PluginError",
    "PluginLoadError",
    "PluginValidationError",
    "ProviderError",
    "SyncInAsyncError",
    "ToolError",
    "UnknownConfigKey",
    "UsageError",
]


class HomeAgentError(Exception):
    """Base class of every error HomeAgent raises deliberately."""


class UsageError(HomeAgentError):
    """The API was used wrongly; the message says what to change in the calling code."""


class SyncInAsyncError(UsageError):
    """A ``*_sync`` method was called while an event loop is running in this thread."""


class ConfigError(HomeAgentError):
    """A configuration key or value is invalid."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class UnknownConfigKey(ConfigError):
    """The key is neither declared by a ConfigDef nor inside a free-form namespace."""


class ConfigValueError(ConfigError):
    """A value does not match its ConfigDef (type, range or options)."""


class PluginError(HomeAgentError):
    """A plugin failed; ``plugin_name`` names it."""

    def __init__(self, message: str, *, plugin_name: str | None = None) -> None:
        super().__init__(message)
        self.plugin_name = plugin_name


class PluginLoadError(PluginError):
    """A plugin could not be imported, registered or started."""


class PluginValidationError(PluginError):
    """A plugin broke a hook or registry contract (wrong return type, duplicate name...)."""


class ToolError(HomeAgentError):
    """A tool call could not run: invalid arguments, timeout, or the tool raised."""


class ProviderError(HomeAgentError):
    """An LLM source failed, or every configured source did."""


class ModalityUnsupported(HomeAgentError):
    """An embedding provider was asked to embed a modality it does not support.

    Never answered by substituting another model's vector: callers fall back explicitly.
    """


class MemoryStoreError(HomeAgentError):
    """A memory store refused an operation (corrupt blob, ambiguous digest, size cap...)."""


class DataDirError(HomeAgentError):
    """The data directory cannot be created, or is not writable."""
