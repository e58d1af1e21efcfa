"""Loop-lag monitor: logs every stretch in which the event loop was blocked, with the stack.

The event loop must never wait on blocking work; when something does block it, this says
what. A timer on the loop beats every ``threshold / 5`` seconds; a watchdog thread notices a
beat that is overdue and takes the loop thread's stack while the loop is still stuck (the
blocking code is on it right then). When the loop gets to the late beat, a lag over the
threshold is logged as a warning with that stack and counted in :meth:`LoopWatch.stats`
(``homeagent doctor`` shows it from the running daemon). A callback that runs for
``threshold`` seconds delays a beat by at least ``threshold - threshold / 5``, so every such
callback is caught; the logged figure is how late the beat ran.

It is off unless asked for: ``HOMEAGENT_DEBUG=1`` watches with a 50 ms threshold,
``HOMEAGENT_LOOP_WATCH_MS=<ms>`` with another one (``0`` turns it off). The daemon starts it
from :func:`from_env`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from typing import Any

__all__ = ["DEFAULT_THRESHOLD_MS", "LoopWatch", "active", "from_env"]

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD_MS = 50.0
_KEPT = 5  # the latest stalls kept for stats()

_active: LoopWatch | None = None


class LoopWatch:
    """Watches one running event loop for callbacks that block it.

    :param loop: the loop to watch (its thread is the one whose stack is taken).
    :param threshold: seconds of lag that count as a stall.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, threshold: float = DEFAULT_THRESHOLD_MS / 1000) -> None:
        if threshold <= 0:
            raise ValueError(f"loop watch threshold must be above 0 s, got {threshold}")
        self.loop = loop
        self.threshold = threshold
        self.interval = threshold / 5
        self._lock = threading.Lock()
        self._due = 0.0
        self._beat_no = 0
        self._stacks: dict[int, tuple[float, str]] = {}  # beat number -> (when taken, stack)
        self._stalls = 0
        self._worst = 0.0
        self._latest: deque[dict[str, Any]] = deque(maxlen=_KEPT)
        self._handle: asyncio.TimerHandle | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_thread = 0

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        """Start watching; call it from the loop's own thread."""
        if self._thread is not None:
            return
        self._loop_thread = threading.get_ident()
        self._schedule(time.monotonic())
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the beat and the watchdog thread (waits for the thread, at most a second)."""
        global _active
        if _active is self:
            _active = None
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._thread is not None:
            self._thread.join(1.0)
            self._thread = None

    def _schedule(self, now: float) -> None:
        with self._lock:
            self._due = now + self.interval
            self._beat_no += 1
        self._handle = self.loop.call_later(self.interval, self._beat)

    def _beat(self) -> None:
        now = time.monotonic()
        with self._lock:
            lag = now - self._due
            taken = self._stacks.pop(self._beat_no, None)
            self._stacks.clear()
        if lag >= self.threshold - self.interval:
            self._record(lag, taken)
        if not self._stop.is_set():
            self._schedule(now)

    def _watch(self) -> None:
        """Watchdog thread: take the loop thread's stack while a beat is overdue."""
        poll = self.interval / 2
        while not self._stop.wait(poll):
            with self._lock:
                due, beat = self._due, self._beat_no
                if beat in self._stacks:
                    continue
            overdue = time.monotonic() - due
            if overdue < (self.threshold - self.interval) / 2:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            if frame is None:
                continue
            stack = "".join(traceback.format_stack(frame))
            del frame
            with self._lock:
                if self._beat_no == beat:  # still the same stall
                    self._stacks[beat] = (overdue, stack)

    def _record(self, lag: float, taken: tuple[float, str] | None) -> None:
        ms = lag * 1000
        stack = taken[1] if taken else ""
        with self._lock:
            self._stalls += 1
            self._worst = max(self._worst, ms)
            self._latest.append({"ms": round(ms, 1), "at": time.time(), "stack": stack})
        log.warning(
            "event loop blocked for at least %.0f ms (loop watch threshold %.0f ms): something ran on the loop "
            "that should run in a worker thread or be awaited; the loop thread was at:\n%s",
            ms,
            self.threshold * 1000,
            stack or "  (the stack was not taken in time)\n",
        )

    # ------------------------------------------------------------------ reporting

    def stats(self) -> dict[str, Any]:
        """``{threshold_ms, stalls, worst_ms, latest: [{ms, at, stack}]}`` (latest last)."""
        with self._lock:
            return {
                "threshold_ms": round(self.threshold * 1000, 1),
                "stalls": self._stalls,
                "worst_ms": round(self._worst, 1),
                "latest": list(self._latest),
            }


def _threshold_from_env() -> float | None:
    """Seconds from ``HOMEAGENT_LOOP_WATCH_MS`` / ``HOMEAGENT_DEBUG``, or ``None`` (off).

    Raises:
        ValueError: ``HOMEAGENT_LOOP_WATCH_MS`` is not a number of milliseconds.
    """
    raw = os.environ.get("HOMEAGENT_LOOP_WATCH_MS", "").strip()
    if raw:
        try:
            ms = float(raw)
        except ValueError:
            raise ValueError(
                f"HOMEAGENT_LOOP_WATCH_MS must be milliseconds such as 50 (0 turns the loop watch off), got {raw!r}"
            ) from None
        return ms / 1000 if ms > 0 else None
    debug = os.environ.get("HOMEAGENT_DEBUG", "").strip().lower()
    if debug and debug not in ("0", "false", "no", "off"):
        return DEFAULT_THRESHOLD_MS / 1000
    return None


def from_env(loop: asyncio.AbstractEventLoop | None = None) -> LoopWatch | None:
    """Start a :class:`LoopWatch` on ``loop`` (the running one) when the environment asks for one.

    The watch started becomes :func:`active`; returns it, or ``None`` when watching is off.

    Raises:
        ValueError: ``HOMEAGENT_LOOP_WATCH_MS`` is not a number of milliseconds.
    """
    global _active
    threshold = _threshold_from_env()
    if threshold is None:
        return None
    watch = LoopWatch(loop or asyncio.get_running_loop(), threshold=threshold)
    watch.start()
    _active = watch
    log.info("loop watch on: event-loop stalls over %.0f ms are logged with their stack", threshold * 1000)
    return watch


def active() -> LoopWatch | None:
    """The watch :func:`from_env` started last (``None`` when watching is off)."""
    return _active
