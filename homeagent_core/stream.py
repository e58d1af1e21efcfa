"""Markers on a turn's delta stream: the sink queue a caller hands ``kernel.submit``.

A sink receives text deltas (``str``) and these markers, compared by identity. They live here,
outside the kernel package, so a channel plugin that streams a turn (the terminal socket) reads
its stream without importing the kernel.
"""

from __future__ import annotations

__all__ = ["END_OF_STREAM", "RESET", "ROUND"]


class _Marker:
    """A named stream marker (identity is what counts; the name is for debugging)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


#: The partial text streamed so far must be discarded (the model call is redone).
RESET = _Marker("RESET")
#: A new model call of the same turn starts.
ROUND = _Marker("ROUND")
#: The turn ended: no more deltas.
END_OF_STREAM = _Marker("END_OF_STREAM")
