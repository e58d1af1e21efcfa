"""Channel kit: the parts every chat-app bridge needs, written once.

A bridge (QQ through OneBot, Telegram, ...) maps each platform conversation to a
:class:`Conversation` (``private:<id>`` or ``group:<id>``). It registers **one** output
channel (``qq``) and injects every conversation's inputs on ``<channel>:<conversation>``
(``qq:group:678``): the kernel resolves such names to the registered channel, so the turn's
reply comes back to the channel's ``send`` with ``meta["conversation"]`` naming the chat.

This module holds the small pure pieces: conversations and senders, reply splitting to a
platform's length limit, reconnect backoff, rate limits and mention detection.
:mod:`homeagent_sdk.pairing` holds the access policy (allowlist plus pairing codes) and
:mod:`homeagent_sdk.bridge` the :class:`~homeagent_sdk.bridge.ChatBridge` base class that ties
them to the SDK. ``docs/WRITING_CHANNELS.md`` walks through a new bridge.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from homeagent_sdk.types import ConfigDef, MediaAttachment

if TYPE_CHECKING:
    from homeagent_sdk.api import SettingsAPI

__all__ = [
    "RECONNECT_MAX_S",
    "Backoff",
    "Conversation",
    "IncomingMessage",
    "MediaRef",
    "OutgoingMedia",
    "RateLimiter",
    "Sender",
    "SlidingWindow",
    "mentions_name",
    "reconnect_setting",
    "split_text",
]

_KINDS = ("private", "group")
_ID = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Conversation:
    """One chat on a platform: a private chat with a person or a group.

    ``key`` (``private:12345`` / ``group:678``) is what travels in channel names and in
    ``meta["conversation"]``.
    """

    kind: str
    id: str

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"conversation kind {self.kind!r} is not one of {', '.join(_KINDS)}")
        if not _ID.match(self.id):
            raise ValueError(f"conversation id {self.id!r} must be 1-64 characters from A-Z a-z 0-9 _ . @ -")

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"

    @property
    def is_group(self) -> bool:
        return self.kind == "group"

    @classmethod
    def parse(cls, key: str) -> Conversation:
        """``"group:678"`` -> ``Conversation("group", "678")``.

        Raises:
            ValueError: not ``private:<id>`` or ``group:<id>``.
        """
        kind, sep, ident = str(key).strip().partition(":")
        if not sep:
            raise ValueError(f'conversation {key!r} must look like "private:<id>" or "group:<id>"')
        return cls(kind, ident)


@dataclass(frozen=True, slots=True)
class Sender:
    """Who wrote a message: the platform account id and the name the platform shows."""

    account: str
    name: str = ""


@dataclass(slots=True)
class IncomingMessage:
    """A message a bridge received, in platform-neutral form.

    ``mentioned`` is the platform's own signal (an @ of the bot, a reply to the bot); the
    kit also counts the agent's configured names in ``text`` as a mention.
    ``attachments`` carry media bytes the platform delivered inline; ``media`` the media a
    message only announces (a URL, a file id), which the bridge fetches — through
    ``ChatBridge.fetch_media`` — only once the sender has passed the access check.
    """

    conversation: Conversation
    sender: Sender
    text: str
    attachments: list[MediaAttachment] = field(default_factory=list)
    mentioned: bool = False
    message_id: str = ""
    media: list[MediaRef] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MediaRef:
    """Media a message announced but nobody fetched yet: ``kind`` (image, record, file...),
    a display ``name`` and the platform's own reference (``ref``: a URL, a file id...)."""

    kind: str
    name: str
    ref: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutgoingMedia:
    """Media the agent sends: bytes (from the media store or a file) or a URL the platform fetches."""

    kind: str
    name: str = ""
    mime: str = ""
    data: bytes | None = None
    url: str = ""


# --------------------------------------------------------------------------- splitting

#: Break points, best first: paragraph, line, sentence end, clause, space.
_BREAKS: tuple[str, ...] = ("\n\n", "\n", "。", "！", "？", ". ", "! ", "? ", "；", "; ", "，", ", ", " ")


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` characters at natural break points.

    Breaks at the last paragraph, line, sentence or clause end, or space that keeps a part
    within ``limit`` and at least half full; otherwise cuts hard. Empty text gives ``[]``.

    Raises:
        ValueError: ``limit`` < 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = 0
        for mark in _BREAKS:
            at = window.rfind(mark)
            if at >= limit // 2:
                cut = at + len(mark)
                break
        if cut <= 0:
            cut = limit
        part, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if part:
            parts.append(part)
    if rest:
        parts.append(rest)
    return parts


# --------------------------------------------------------------------------- mentions


def mentions_name(text: str, names: Iterable[str]) -> bool:
    """Whether ``text`` mentions one of ``names`` (case-insensitive, with or without ``@``).

    Latin names must stand as a word (``bot`` does not match ``robots``); CJK names match
    anywhere, since CJK text has no spaces.
    """
    lowered = text.casefold()
    for name in names:
        name = name.strip().casefold()
        if not name:
            continue
        if re.search(r"[\u3040-\u30ff\u3400-\u9fff]", name):
            if name in lowered:
                return True
        elif re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", lowered):
            return True
    return False


# --------------------------------------------------------------------------- backoff

#: The longest reconnect delay: the ``reconnect_min`` setting doubles up to this many seconds.
RECONNECT_MAX_S = 60


def reconnect_setting(
    *,
    minimum: float = 0.05,
    description: str = "Seconds before the first reconnect after the connection dropped; doubles up to 60 s.",
) -> ConfigDef:
    """The ``reconnect_min`` setting (seconds, default 1; ``minimum`` the least accepted) of a
    plugin that keeps a connection; add it in ``register_settings`` and build the plugin's
    :class:`Backoff` with :meth:`Backoff.from_settings`."""
    return ConfigDef(key="reconnect_min", type="float", default=1.0, min=minimum, max=RECONNECT_MAX_S,
                     category="connection", description=description)


class Backoff:
    """Reconnect delays: ``initial`` doubling up to ``maximum``, with ±``jitter`` spread.

    ``delay()`` returns the next delay; ``reset()`` after a connection worked.
    """

    def __init__(
        self,
        initial: float = 1.0,
        maximum: float = 60.0,
        *,
        factor: float = 2.0,
        jitter: float = 0.1,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial <= 0 or maximum < initial or factor < 1:
            raise ValueError("backoff needs 0 < initial <= maximum and factor >= 1")
        self.initial, self.maximum, self.factor, self.jitter = initial, maximum, factor, jitter
        self._rand = rand
        self.attempts = 0

    @classmethod
    def from_settings(cls, settings: SettingsAPI) -> Backoff:
        """From the plugin's ``reconnect_min`` setting (:func:`reconnect_setting`) up to
        :data:`RECONNECT_MAX_S`."""
        return cls(float(settings.get("reconnect_min", 1.0) or 1.0), float(RECONNECT_MAX_S))

    def delay(self) -> float:
        base = min(self.maximum, self.initial * self.factor**self.attempts)
        self.attempts += 1
        spread = base * self.jitter * (2 * self._rand() - 1)
        return max(0.0, min(self.maximum, base + spread))

    def reset(self) -> None:
        self.attempts = 0

    async def sleep(self) -> float:
        """Wait the next delay; returns it."""
        seconds = self.delay()
        await asyncio.sleep(seconds)
        return seconds


# --------------------------------------------------------------------------- rate limits


class RateLimiter:
    """A token bucket per key: ``rate`` messages per second, bursts up to ``burst``.

    Outgoing messages ``await acquire(key)`` (waits for a token); incoming floods use
    :class:`SlidingWindow` instead, which drops rather than waits.
    """

    def __init__(self, rate: float, burst: int = 1, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate limiter needs rate > 0 and burst >= 1")
        self.rate, self.burst = rate, burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def _take(self, key: str) -> float:
        """Take a token if there is one (returns 0) or say how long until there is one."""
        now = self._clock()
        tokens, stamp = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - stamp) * self.rate)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1 - tokens) / self.rate

    async def acquire(self, key: str = "") -> None:
        while (wait := self._take(key)) > 0:
            await asyncio.sleep(wait)


class SlidingWindow:
    """At most ``limit`` events per ``window`` seconds per key; ``allow(key)`` says whether one more fits."""

    def __init__(self, limit: int, window: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("sliding window needs limit >= 1 and window > 0")
        self.limit, self.window = limit, window
        self._clock = clock
        self._events: dict[str, deque[float]] = {}

    def allow(self, key: str) -> bool:
        now = self._clock()
        events = self._events.setdefault(key, deque())
        while events and now - events[0] >= self.window:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        return True
