"""The child side of the out-of-process plugin protocol.

``serve(plugin)`` runs a hook-based plugin object in its own process, speaking NDJSON on
stdin/stdout with the host (see ``docs/PROTOCOL.md``). :mod:`homeagent_sdk.proc.wire` holds
the framing and the request/response peer both sides use.
"""

from __future__ import annotations

from homeagent_sdk.proc.runtime import STAGES, ChildRuntime, serve
from homeagent_sdk.proc.wire import (
    DEFAULT_MAX_FRAME,
    PROTOCOL_VERSION,
    FrameTooLarge,
    Peer,
    PeerClosed,
    RemoteError,
)

__all__ = [
    "DEFAULT_MAX_FRAME",
    "PROTOCOL_VERSION",
    "STAGES",
    "ChildRuntime",
    "FrameTooLarge",
    "Peer",
    "PeerClosed",
    "RemoteError",
    "serve",
]
