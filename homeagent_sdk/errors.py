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
    ├── InputQueueFull                  the agent is busy: its input queue is full (retry later)
    ├── AgentClosed                     the agent shut down before an input was answered
    ├── ChannelSendError                a send to an output channel failed (unknown channel, type, ...)
    ├── DataDirError                    the data directory cannot be created or written
    └── DataFormatError                 a stored file is from a newer HomeAgent, or migrating it failed

Two audiences: :class:`UsageError` and its children are mistakes in code that calls
HomeAgent; every other error is a runtime condition a user may see, so its message says what
was wrong and how to fix it. The CLI turns :class:`HomeAgentError` into a clean message and a
non-zero exit code instead of a traceback.
"""

from __future__ import annotations

import math
import re

__all__ = [
    "AgentClosed",
    "ChannelSendError",
    "ConfigError",
    "ConfigValueError",
    "DataDirError",
    "DataFormatError",
    "HomeAgentError",
    "InputQueueFull",
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


class InputQueueFull(HomeAgentError):
    """The agent's input queue is full: the input was NOT accepted; send it again later.

    ``retry_after`` is a hint in seconds (about how long one turn takes now). The HTTP API
    answers 503 with a ``Retry-After`` header, the terminal socket an error line with
    ``"code": "busy"``, and ``sdk.io.inject_*`` raise this for in-process and out-of-process
    plugins alike. The message always starts with :attr:`PREFIX`.
    """

    PREFIX = "the agent is busy: its input queue is full"

    def __init__(self, message: str, *, retry_after: float = 5.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def retry_after_header(self) -> str:
        """``retry_after`` as an HTTP ``Retry-After`` value (whole seconds, at least 1)."""
        return str(max(1, math.ceil(self.retry_after)))

    @classmethod
    def from_message(cls, message: str) -> InputQueueFull | None:
        """Rebuild the error from its message (as it travels over a pipe), or None if it is another error."""
        start = message.find(cls.PREFIX)
        if start < 0:
            return None
        match = re.search(r"retry in about (\d+(?:\.\d+)?) s", message)
        return cls(message[start:], retry_after=float(match.group(1)) if match else 5.0)


class AgentClosed(HomeAgentError):
    """The agent shut down (or the turn was cancelled) before the input could be answered."""


class ChannelSendError(HomeAgentError):
    """A send to an output channel failed; the message says which and why."""


class MemoryStoreError(HomeAgentError):
    """A memory store refused an operation (corrupt blob, ambiguous digest, size cap...)."""


class DataDirError(HomeAgentError):
    """The data directory cannot be created, or is not writable."""


class DataFormatError(HomeAgentError):
    """A store's file is in a format this HomeAgent cannot read (newer), or migrating it failed.

    The message names the file, its format, the newest this HomeAgent reads, and what to do
    (upgrade HomeAgent or restore a backup); the file itself was left as it was.
    """
