"""Background migration of stored vectors to the active embedding space.

Every stored vector carries the fingerprint of the space it was computed in (``vec_model``).
When the active space changes, :func:`reembed_stale` walks the rows, re-embeds those whose
fingerprint is empty or different, in batches, and writes each batch back together with the
new fingerprint. It is resumable by construction: rows written back carry the new fingerprint,
so a restarted run skips them. Rows whose modality the active provider cannot embed are left
as they are (never given another model's vector) and counted.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from homeagent_sdk.embeddings import EmbeddingProvider, EmbedInput, InvalidEmbedInput
from homeagent_sdk.errors import ModalityUnsupported

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ReembedStats", "Row", "WriteBack", "reembed_stale"]

log = logging.getLogger(__name__)

Row = tuple[Any, "str | EmbedInput", "str | None"]
"""``(row_id, payload, vec_model)``: payload is text or an :class:`EmbedInput`."""

WriteBack = Callable[[list[tuple[Any, "npt.NDArray[np.float32]", str]]], "Awaitable[None] | None"]
"""Receives ``[(row_id, vector, fingerprint), ...]``; may be sync (run in a thread) or async."""


@dataclass
class ReembedStats:
    """What one run did."""

    seen: int = 0
    current: int = 0
    reembedded: int = 0
    unsupported: int = 0
    invalid: int = 0
    batches: int = 0

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


async def _rows(source: AsyncIterable[Any] | Iterable[Any]) -> AsyncIterable[Row]:
    """Flatten single rows and batches (lists/tuples of rows) from a sync or async source."""

    def flat(item: Any) -> Iterable[Row]:
        if isinstance(item, list) or (isinstance(item, tuple) and item and isinstance(item[0], (tuple, list))):
            return [tuple(r) for r in item]
        return [tuple(item)]

    if isinstance(source, AsyncIterable):
        async for item in source:
            for row in flat(item):
                yield row
    else:
        for item in source:
            for row in flat(item):
                yield row


async def _write(write_back: WriteBack, batch: list[tuple[Any, Any, str]]) -> None:
    if inspect.iscoroutinefunction(write_back):
        await write_back(batch)
        return
    result = await asyncio.to_thread(write_back, batch)
    if inspect.isawaitable(result):
        await result


async def reembed_stale(
    rows: AsyncIterable[Any] | Iterable[Any],
    provider: EmbeddingProvider,
    write_back: WriteBack,
    *,
    batch_size: int = 64,
) -> ReembedStats:
    """Re-embed every row whose ``vec_model`` differs from ``provider``'s fingerprint.

    Args:
        rows: ``(row_id, payload, vec_model)`` rows or lists of them, sync or async. Sources
            may pre-filter with ``vec_model != fingerprint``; rows already current are skipped
            here anyway.
        provider: the active embedding space.
        write_back: called once per batch with ``[(row_id, vector, fingerprint), ...]``.
        batch_size: rows per embedding call and per write-back.
    """
    fingerprint = provider.info.fingerprint
    stats = ReembedStats()
    pending: list[tuple[Any, EmbedInput]] = []

    async def flush() -> None:
        if not pending:
            return
        items = list(pending)
        pending.clear()
        try:
            vectors = await provider.embed([inp for _, inp in items])
            good: Sequence[tuple[Any, EmbedInput]] = items
        except InvalidEmbedInput:
            # Find the bad rows one by one so the good ones of the batch still migrate.
            good, rows_out = [], []
            for row_id, inp in items:
                try:
                    rows_out.append((await provider.embed([inp]))[0])
                    good.append((row_id, inp))
                except InvalidEmbedInput as exc:
                    stats.invalid += 1
                    log.warning("row %r cannot be re-embedded: %s", row_id, exc)
            if not good:
                return
            import numpy as np

            vectors = np.stack(rows_out)
        await _write(write_back, [(rid, vectors[i], fingerprint) for i, (rid, _) in enumerate(good)])
        stats.reembedded += len(good)
        stats.batches += 1

    async for row_id, payload, vec_model in _rows(rows):
        stats.seen += 1
        if vec_model == fingerprint:
            stats.current += 1
            continue
        item = EmbedInput.of_text(payload) if isinstance(payload, str) else payload
        try:
            provider.check_inputs([item])
        except ModalityUnsupported:
            stats.unsupported += 1
            continue
        pending.append((row_id, item))
        if len(pending) >= batch_size:
            await flush()
    await flush()
    if stats.reembedded or stats.unsupported or stats.invalid:
        log.info("re-embedded stale vectors into %s: %s", fingerprint, stats.to_dict())
    return stats
