"""ProviderError: the one exception LLM sources raise, carrying which source failed and why."""

from __future__ import annotations

from homeagent_sdk.errors import ProviderError as _SdkProviderError

__all__ = ["ProviderError"]


class ProviderError(_SdkProviderError):
    """An LLM source (or every source) failed.

    Subclass of :class:`homeagent_sdk.errors.ProviderError`, so plugins can catch it without
    importing the core. ``kind`` is one of ``"adapter"`` (the Lua script failed or returned
    garbage), ``"http"`` (non-200 answer), ``"auth"`` (401/403: the source is disabled until
    its config changes), ``"network"`` (connect/read failure, mid-stream disconnect),
    ``"timeout"``, ``"stream"`` (a stream that carried an error instead of text), ``"config"``
    and ``"exhausted"`` (every candidate failed). The message names the source and adapter.
    """

    def __init__(
        self,
        reason: str,
        *,
        source: str = "",
        adapter: str = "",
        kind: str = "adapter",
        status: int | None = None,
    ) -> None:
        where = ", ".join(
            p for p in (f"source {source!r}" if source else "",
                        f"adapter {adapter!r}" if adapter else "") if p
        )
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.source = source
        self.adapter = adapter
        self.kind = kind
        self.status = status
