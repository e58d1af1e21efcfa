"""What the built-ins that fire something later share (timers, reminders).

Each keeps its pending items in a SQLite file of its own (:func:`open_store`), lists them a page
at a time (:func:`page`), and when one comes due hands it to the agent as an L3 interrupt that is
never remembered, on the conversation it was set from and with the rights of the person who set
it (:func:`deliver`). Delivery waits until the turn handling it ended, so the caller deletes the
item only then: a daemon killed in between delivers it again after the next start (at least
once, never lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from homeagent_sdk import InjectOptions, Principal, Priority
from homeagent_sdk._schema import StoreSchema, open_schema
from homeagent_sdk.errors import AgentClosed, DataFormatError, InputQueueFull

if TYPE_CHECKING:
    from homeagent_core.plugins.sdk import ScopedSDK

__all__ = ["PAGE", "TURN_WAIT", "cancel_all", "deliver", "open_store", "page"]

T = TypeVar("T")

PAGE = 20  # items one list call returns at most
TURN_WAIT = 6 * 3600  # a turn longer than this is not waited for; the item counts as delivered


def open_store(path: Path, schema: StoreSchema) -> sqlite3.Connection:
    """Open (creating or migrating) the SQLite file at ``path`` in WAL mode, for use from any thread.

    Raises:
        DataFormatError: the file is of a newer or unknown format (the connection is closed).
    """
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    try:
        open_schema(db, path, schema)
    except DataFormatError:
        db.close()
        raise
    return db


def page(items: Sequence[T], offset: int) -> tuple[list[T], int | None]:
    """The :data:`PAGE` items from ``offset``, and the offset of the next page (None: no more)."""
    chunk = list(items[offset : offset + PAGE])
    more = offset + len(chunk) < len(items)
    return chunk, offset + len(chunk) if more else None


async def cancel_all(tasks: dict[str, asyncio.Task[None]]) -> None:
    """Cancel every waiting task, wait until each has stopped, and forget them."""
    running = list(tasks.values())
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    tasks.clear()


async def deliver(
    sdk: ScopedSDK, log: logging.Logger, what: str, text: str, *, door: str, channel: str = "", person: str = ""
) -> bool:
    """Inject ``text`` and wait until the turn handling it ended; False if it must be delivered again.

    ``what`` names the item in log lines (``"timer timer_3"``). It goes to ``channel`` (the chat
    conversation it was set from), else to the input channel ``door``, as ``person`` at that door
    when one set it. A full input queue is waited out (late rather than never); a stopping agent
    means it is delivered again after the next start; a turn that fails or runs longer than
    :data:`TURN_WAIT` counts as delivered (it is not repeated).
    """
    principal = Principal(person=person, door=door) if person else None
    options = InjectOptions(no_memory=True, priority=Priority.L3, principal=principal)
    while True:
        try:
            await sdk.io.inject_input_sync(text, channel or door, options, timeout=TURN_WAIT)
            return True
        except InputQueueFull as exc:  # busy: deliver a little late rather than not at all
            log.warning("%s: %s; trying again in %s s", what, exc, exc.retry_after_header)
            await asyncio.sleep(float(exc.retry_after_header))
        except AgentClosed:
            log.info("%s: the agent stopped before its turn ended; it fires after the next start", what)
            return False
        except TimeoutError:
            log.warning("%s: its turn still runs after %d s; counting it as fired", what, TURN_WAIT)
            return True
        except Exception as exc:  # the turn it started failed: it fired, do not repeat it
            log.warning("%s: the turn it started failed (%s: %s)", what, type(exc).__name__, exc)
            return True
