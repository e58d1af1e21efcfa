"""``ChatBridge``: the platform-neutral half of a chat-app bridge.

A bridge plugin subclasses :class:`ChatBridge`, implements :meth:`ChatBridge.send_text` and
:meth:`ChatBridge.send_media` for its platform, feeds every received message to
`ChatBridge.handle`, and registers :meth:`ChatBridge.channel_def` in
``register_output_channels``. The base class does the rest, the same way for every
platform:

* **access** — private senders on the allowlist pass; any other gets a pairing code and
  nothing else until the owner runs ``homeagent pairing approve CODE``; a group is paired the
  same way the first time it mentions the agent; denied senders are ignored; codes are capped,
  rate-limited and expire per platform (see :class:`~homeagent_sdk.pairing.PairingStore`);
* **groups** — a group message goes in only when it mentions the agent (the platform's @, or
  one of the agent's names in the text), unless the group's setting says otherwise; the
  chatter of an approved group that does not mention the agent is *remembered*: written to
  the conversation log with the speaker's name (no reply, no model call) and shown to the
  model, as what was said before, the next time the group mentions it (``remember`` per group);
* **people** — every sender is linked to a person of the social layer (``小王``, or
  ``小王 (QQ 12345)`` when a person of that name exists: display names never merge
  identities; the owner links explicitly with ``pairing approve CODE --person``), and the
  injected text names the speaker: ``小王 (QQ 12345): 今天吃什么`` — so memory and the prompt
  know who said what; rights are not the social layer's: each input carries a ``Principal``
  naming the sender's account, and the kernel grants the rights of the person the owner linked
  it to (``homeagent people link``), a guest's otherwise;
* **approvals** — when a call waits for the owner, each account the owner linked on this
  platform gets the request as a private message through the output channel named after the
  platform (so name the bridge's channel ``platform``, as the QQ and Telegram bridges do), and
  the owner's reply ``同意 N`` / ``拒绝 N`` decides it before the model sees it (the core's
  ``approvals_chat`` built-in; docs/PEOPLE.md);
* **floods and huge messages** — more than ``flood_limit`` messages a minute from one sender
  are dropped; text over ``max_input_chars`` is cut with a note;
* **re-deliveries** — the platform's message id goes with the input
  (``InjectOptions.message_id``), so a message the platform delivers twice is answered once;
* **a busy agent** — when the agent's input queue refuses a message (it is full, or this door
  already holds its share of it), the conversation gets a busy notice naming when to try again
  (at most one per conversation while the agent stays busy) and one log line, never a traceback;
* **replies** — split to the platform's ``text_limit`` at natural breaks, paced by a
  per-conversation token bucket; images and files from the media store (digest), a local
  file, or a URL.

Settings (``plugin.<name>.*``; :meth:`ChatBridge.config_defs` declares them): ``access``
(``pairing`` | ``allowlist`` | ``open``), ``allow_from``, ``groups``, ``mention_names``,
``text_limit``, ``send_rate``, ``flood_limit``, ``max_input_chars``.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import dataclasses
import json
import logging
import mimetypes
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_sdk.channels import (
    Conversation,
    IncomingMessage,
    MediaRef,
    OutgoingMedia,
    RateLimiter,
    Sender,
    SlidingWindow,
    mentions_name,
    split_text,
)
from homeagent_sdk.errors import HomeAgentError, InputQueueFull
from homeagent_sdk.i18n import SDK, language_of_text
from homeagent_sdk.pairing import PAIRING_FILE, AccessDecision, PairingStore
from homeagent_sdk.types import Caps, ChannelDef, ConfigDef, InjectOptions, MediaAttachment, Principal, TextEvent

if TYPE_CHECKING:
    from homeagent_sdk.api import PluginSDK

__all__ = ["ChatBridge", "pairing_routes"]

_MAX_MEDIA_FILE = 50 * 1024 * 1024
#: Remembered group chatter shown to the model with the next mention: at most this many lines ...
_BACKLOG_LINES = 20
#: ... and this many characters (the newest are kept).
_BACKLOG_CHARS = 4000


class ChatBridge(abc.ABC):
    """Base class of chat-app bridges; see the module docstring.

    :param sdk: the plugin's SDK (from ``startup``).
    :param channel: the output channel name (``qq``, ``telegram``); inputs arrive on
        ``<channel>:<conversation>``.
    :param platform: the platform's id in the social layer and the pairing table (``qq``).
    :param label: how the platform is named to people (``QQ``, ``Telegram``).
    :param default_text_limit: the platform's longest message, used when ``text_limit`` is unset.
    """

    caps: int = int(Caps.TEXT | Caps.IMAGE | Caps.FILE | Caps.AUDIO)

    def __init__(
        self, sdk: PluginSDK, *, channel: str, platform: str, label: str, default_text_limit: int = 4000
    ) -> None:
        self.sdk = sdk
        self.channel = channel
        self.platform = platform
        self.label = label
        self.log: logging.Logger = sdk.log
        self.default_text_limit = default_text_limit
        self.pairing = PairingStore(Path(sdk.data_dir) / PAIRING_FILE)
        self._send_rate = RateLimiter(self._float("send_rate", 1.0), burst=5)
        self._floods = SlidingWindow(max(1, self._int("flood_limit", 20)), 60.0)
        self._people: dict[str, str] = {}
        self._social_ok = True
        self._memory_ok = True
        self._backlog: dict[str, collections.deque[str]] = {}
        self._conversation_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        #: conversation key -> when its last busy notice was sent (monotonic seconds)
        self._busy_noticed: dict[str, float] = {}
        self.busy_refused = 0
        self.pairing_limited = 0
        self._pairing_limit_logged = float("-inf")

    # ------------------------------------------------------------------ settings

    @staticmethod
    def config_defs(*, text_limit: int = 4000) -> list[ConfigDef]:
        """The settings every bridge has; add them in ``register_settings``."""
        return [
            ConfigDef(
                key="access", type="select", default="pairing", options=["pairing", "allowlist", "open"],
                category="access",
                description="Who may talk to the agent: pairing (unknown senders get a code to approve with "
                "`homeagent pairing approve`), allowlist (only allow_from), open (anyone; not for public bots).",
            ),
            ConfigDef(
                key="allow_from", type="string", default="", category="access",
                description="Comma-separated account ids (and group:<id>) that need no pairing.",
            ),
            ConfigDef(
                key="groups", type="json", default={}, category="access",
                description='Per-group settings: {"<group id>": {"require_mention": false, "remember": false, '
                '"trusted": true}}; "*" applies to every group. Groups answer only when mentioned unless '
                "require_mention is false; what an approved group says without mentioning the agent is kept "
                "for the next mention (no reply) unless remember is false, and written to the conversation log "
                "(so memory) only when the group is trusted.",
            ),
            ConfigDef(
                key="mention_names", type="string", default="", category="access",
                description="Comma-separated names that count as mentioning the agent in groups (besides @).",
            ),
            ConfigDef(
                key="text_limit", type="int", default=text_limit, min=16, max=100_000, category="limits",
                description="Longest message the platform accepts; longer replies are split.",
            ),
            ConfigDef(
                key="send_rate", type="float", default=1.0, min=0.01, max=100, category="limits",
                description="Messages per second sent to one conversation (bursts of 5).",
            ),
            ConfigDef(
                key="flood_limit", type="int", default=20, min=1, max=10_000, category="limits",
                description="Messages per minute accepted from one sender; the rest are dropped.",
            ),
            ConfigDef(
                key="max_input_chars", type="int", default=8000, min=100, max=1_000_000, category="limits",
                description="Longest incoming text passed to the agent; longer text is cut with a note.",
            ),
        ]

    def _float(self, key: str, default: float) -> float:
        try:
            return float(self.sdk.settings.get(key, default) or default)
        except (TypeError, ValueError):
            return default

    def _int(self, key: str, default: int) -> int:
        try:
            return int(self.sdk.settings.get(key, default) or default)
        except (TypeError, ValueError):
            return default

    def _list(self, key: str) -> list[str]:
        raw = self.sdk.settings.get(key, "") or ""
        items = raw if isinstance(raw, list) else str(raw).split(",")
        return [str(i).strip() for i in items if str(i).strip()]

    def group_setting(self, group: str, key: str, default: Any) -> Any:
        groups = self.sdk.settings.get("groups", {}) or {}
        if isinstance(groups, str):
            try:
                groups = json.loads(groups)
            except json.JSONDecodeError:
                groups = {}
        if not isinstance(groups, dict):
            return default
        for name in (group, "*"):
            entry = groups.get(name)
            if isinstance(entry, dict) and key in entry:
                return entry[key]
        return default

    @property
    def text_limit(self) -> int:
        return max(16, self._int("text_limit", self.default_text_limit))

    # ------------------------------------------------------------------ the output channel

    @classmethod
    def channel_def(
        cls, name: str, *, label: str, send: Callable[..., Awaitable[Any]], description: str = ""
    ) -> ChannelDef:
        """The output channel to add in ``register_output_channels``.

        Registration runs before ``startup`` creates the bridge, so ``send`` is usually a
        plugin method that forwards to :meth:`deliver` of the bridge made at start.
        """
        return ChannelDef(
            name=name,
            description=description or f"{label} chats",
            caps=cls.caps,
            sync=True,
            send=send,
            help='{"conversation": "private:<account id>"} or {"conversation": "group:<group id>"}; '
            "replies to a message from this platform need no meta. type image/file/audio: payload is a "
            "media digest, a local file path or an http(s) URL.",
        )

    # ------------------------------------------------------------------ incoming

    async def handle(self, message: IncomingMessage) -> str:
        """Pass one received message through access, groups and people to the agent.

        Returns what happened: ``"injected"``, ``"remembered"`` (group chatter), ``"pairing"`` or
        ``"ignored: <why>"``. Messages of one conversation are handled one at a time, in the order
        they arrived, even when the platform link delivers each in its own task: a reply, the log
        and the backlog never see them reordered.
        """
        lock = self._conversation_locks.get(message.conversation.key)
        if lock is None:
            lock = self._conversation_locks[message.conversation.key] = asyncio.Lock()
        async with lock:
            return await self._handle(message)

    async def _handle(self, message: IncomingMessage) -> str:
        conv, sender = message.conversation, message.sender
        if not self._floods.allow(f"{conv.key}/{sender.account}"):
            self.log.warning("%s: flood from %s in %s; message dropped", self.label, sender.account, conv.key)
            return "ignored: flood"
        if conv.is_group:
            mentioned = message.mentioned or mentions_name(message.text, self._list("mention_names"))
            if bool(self.group_setting(conv.id, "require_mention", True)) and not mentioned:
                return await self._remember(message)
            decision = self._access(f"group:{conv.id}", f"group {conv.id}")
        else:
            decision = self._access(sender.account, sender.name)
        if decision.action == "ignore":
            if decision.reason and decision.reason != "denied":
                self._pairing_limited(decision.reason)
            return f"ignored: {decision.reason or 'denied'}"
        if decision.action == "pair":
            if decision.notify:
                await self._send_pairing_code(conv, decision.code, message.text)
            return "pairing"
        if message.media:  # only now, for a sender who passed access, is anything fetched
            message = await self._fetch_announced(message)
        person = await self.person_for(sender, decision.person if not conv.is_group else "")
        text = self._clip(message.text)
        speaker = self.speaker(person, sender)
        line = f"{speaker}: {text}" if text else f"{speaker}:"
        backlog = self._backlog.pop(conv.key, None)
        # an untrusted group's chatter informs this answer and is written nowhere
        no_memory = bool(backlog) and not bool(self.group_setting(conv.id, "trusted", False))
        if backlog:
            line = "Said in this group since you last spoke (not to you):\n" + "\n".join(backlog) + "\n\n" + line
        name = f"{self.channel}:{conv.key}"
        await self.on_inject(conv)
        # Who speaks: the kernel gives the sender the rights of the person the owner linked
        # this account to (`homeagent people link`); an unlinked sender is a guest. The
        # platform's message id goes along: a message the platform delivers twice is answered once.
        options = InjectOptions(
            no_memory=no_memory,
            principal=Principal(door=self.platform, account=sender.account, thread=f"{self.platform}:{conv.key}"),
            message_id=f"{conv.key}/{message.message_id}" if message.message_id else "",
        )
        try:
            if message.attachments:
                await self.sdk.io.inject_media(line, message.attachments, name, options)
            else:
                await self.sdk.io.inject_text(line, name, options)
        except InputQueueFull as exc:
            await self._busy(conv, exc, message.text)
            return "ignored: busy"
        self._busy_noticed.pop(conv.key, None)
        return "injected"

    async def _busy(self, conv: Conversation, exc: InputQueueFull, said: str = "") -> None:
        """The agent refused a message (queue full): tell the conversation once, log one line."""
        self.busy_refused += 1
        now = time.monotonic()
        last = self._busy_noticed.get(conv.key)
        if last is not None and now - last < max(60.0, exc.retry_after):
            return
        self._busy_noticed[conv.key] = now
        if len(self._busy_noticed) > 1000:
            self._busy_noticed.pop(next(iter(self._busy_noticed)))
        self.log.warning("%s: a message in %s was not accepted: %s", self.label, conv.key, exc)
        language = language_of_text(said, default="")
        if language:
            text = SDK.text(language, "busy.refused", seconds=exc.retry_after_header)
        else:
            text = "\n".join(SDK.both("busy.refused", seconds=exc.retry_after_header).values())
        try:
            await self.send_text(conv, text)
        except Exception as send_error:
            self.log.warning("%s: busy notice to %s not delivered: %s", self.label, conv.key, send_error)

    async def fetch_media(self, media: MediaRef) -> MediaAttachment | None:
        """The bytes of media a message announced, or ``None`` when it cannot be had.

        Called only for senders who passed the access check, one call per item. Platforms whose
        messages announce media override this; fetch through :func:`homeagent_sdk.ssrf.download_capped`
        (a URL a sender names is checked like any web tool's) and never open a local path a
        sender names.
        """
        return None

    async def _fetch_announced(self, message: IncomingMessage) -> IncomingMessage:
        attachments = list(message.attachments)
        notes: list[str] = []
        for media in message.media:
            try:
                attachment = await self.fetch_media(media)
            except Exception as exc:  # a platform's download failing must not lose the message
                self.log.warning("%s: %s %s could not be fetched: %s", self.label, media.kind, media.name, exc)
                attachment = None
            if attachment is None:
                notes.append(f"[{media.kind}: could not be downloaded]")
            else:
                attachments.append(attachment)
        text = " ".join([message.text, *notes]).strip()
        return dataclasses.replace(message, text=text, attachments=attachments, media=[])

    async def _remember(self, message: IncomingMessage) -> str:
        """Keep group chatter that does not mention the agent: no reply, no model call.

        Only approved (or allowlisted) groups whose ``remember`` setting is not false; the line
        (``小王 (QQ 12345): text``) waits, bounded, to be shown to the model with the group's next
        mention. It goes to the conversation log — and so into memory and later prompts — only
        when the owner marked the group ``trusted``: anyone in a group can write there, so
        chatter nobody addressed to the agent is no lasting channel into its memory by default
        (the mention that shows an untrusted group's chatter is answered without being stored).
        """
        conv, sender = message.conversation, message.sender
        if not bool(self.group_setting(conv.id, "remember", True)):
            return "ignored: not mentioned"
        if self._access_for_send(f"group:{conv.id}") != "allow":
            return "ignored: not mentioned"
        person = await self.person_for(sender)
        text = self._clip(message.text)
        kinds = [a.name or a.mime or "file" for a in message.attachments] + [m.name or m.kind for m in message.media]
        if kinds:
            text = " ".join([text, *(f"[{k}]" for k in kinds)]).strip()
        line = f"{self.speaker(person, sender)}: {text}"
        backlog = self._backlog.setdefault(conv.key, collections.deque(maxlen=_BACKLOG_LINES))
        backlog.append(line)
        while len(backlog) > 1 and sum(len(x) + 1 for x in backlog) > _BACKLOG_CHARS:
            backlog.popleft()
        if self._memory_ok and bool(self.group_setting(conv.id, "trusted", False)):
            event = TextEvent(role="user", content=line, timestamp=time.time(), channel=f"{self.channel}:{conv.key}")
            try:
                await self.sdk.memory.append_text(event, source=self.sdk.name)
            except HomeAgentError as exc:
                self._memory_ok = False
                self.log.info("%s: group chatter is not logged (%s); kept for the next mention only", self.label, exc)
            except Exception as exc:
                self.log.warning("%s: group chatter in %s not logged: %s", self.label, conv.key, exc)
        return "remembered"

    async def on_inject(self, conversation: Conversation) -> None:
        """Called right before a message goes to the agent (typing indicators); default: nothing."""
        return  # optional hook: platforms without a typing indicator need nothing here

    def _access(self, account: str, name: str) -> AccessDecision:
        mode = str(self.sdk.settings.get("access", "pairing") or "pairing")
        allowed = mode == "open" or account in self._list("allow_from")
        if mode == "allowlist" and not allowed:
            row = self.pairing.get(self.platform, account)
            return AccessDecision("allow", person=row.person) if row and row.status == "approved" else (
                AccessDecision("ignore")
            )
        return self.pairing.check(self.platform, account, name, allowed=allowed)

    def _pairing_limited(self, reason: str) -> None:
        """A new sender got no code (a pairing limit): one log line a minute, not one per sender."""
        self.pairing_limited += 1
        now = time.monotonic()
        if now - self._pairing_limit_logged >= 60.0:
            self._pairing_limit_logged = now
            self.log.warning(
                "%s: new senders get no pairing code for now (%s; %d ignored so far); "
                "approve or deny the waiting codes with `homeagent pairing list`",
                self.label, reason, self.pairing_limited,
            )

    async def _send_pairing_code(self, conv: Conversation, code: str, said: str = "") -> None:
        self.sdk.events.publish(
            "pairing_requested", {"plugin": self.sdk.name, "platform": self.platform, "conversation": conv.key,
                                  "code": code},
        )
        # In the language the sender wrote in; both languages when their message had no words.
        language = language_of_text(said, default="")
        if language:
            text = SDK.text(language, "pairing.code", code=code)
        else:
            text = "\n\n".join(SDK.both("pairing.code", code=code).values())
        try:
            await self.send_text(conv, text)
        except Exception as exc:
            self.log.warning("%s: pairing code to %s not delivered: %s", self.label, conv.key, exc)

    def _clip(self, text: str) -> str:
        limit = self._int("max_input_chars", 8000)
        if len(text) <= limit:
            return text
        return f"{text[:limit]} […cut {len(text) - limit} characters]"

    # ------------------------------------------------------------------ people

    def speaker(self, person: str, sender: Sender) -> str:
        """How the speaker is named in the injected text: ``小王 (QQ 12345)``."""
        tag = f"{self.label} {sender.account}"
        return person if tag in person else f"{person} ({tag})"

    async def person_for(self, sender: Sender, approved_as: str = "") -> str:
        """The person ``sender`` is in the social layer; links a new sender to one.

        ``approved_as`` is the person the owner named when approving: linking to an existing
        person is always explicit. Otherwise a new sender becomes a new person named after their
        display name, or ``Name (QQ 12345)`` when a person of that name already exists (a sender
        calling themselves "Mum" is not the owner's Mum). Without a social layer (memory off)
        the display name is used as is.
        """
        cached = self._people.get(sender.account)
        if cached is not None and not approved_as:
            return cached
        fallback = sender.name.strip() or f"{self.label} {sender.account}"
        person = fallback
        if self._social_ok:
            try:
                known = await self.sdk.social.person_for_account(self.platform, sender.account)
                if approved_as and known != approved_as:
                    person = approved_as
                    await self.sdk.social.link_account(person, self.platform, sender.account)
                elif known:
                    person = known
                else:  # a display name never merges identities: a taken name gets the account
                    if await self.sdk.social.person(fallback):
                        person = f"{fallback} ({self.label} {sender.account})"
                    await self.sdk.social.link_account(person, self.platform, sender.account)
            except HomeAgentError as exc:
                self._social_ok = False
                self.log.info("%s: people are not linked (%s); using display names", self.label, exc)
            except Exception as exc:
                self.log.warning("%s: could not link %s to a person: %s", self.label, sender.account, exc)
        self._people[sender.account] = person
        return person

    # ------------------------------------------------------------------ outgoing

    async def deliver(self, payload: str, meta: dict[str, Any], type: str = "text") -> str:
        """The output channel's ``send``: route to the conversation, split, pace, send.

        Raises:
            ValueError: no or a malformed conversation, or one that is not approved.
        """
        target = meta.get("conversation") or meta.get("to")
        if not target:
            raise ValueError('meta needs {"conversation": "private:<id>"} or {"conversation": "group:<id>"}')
        conv = Conversation.parse(str(target))
        account = f"group:{conv.id}" if conv.is_group else conv.id
        if self._access_for_send(account) != "allow":
            raise ValueError(f"{conv.key} has not been approved; the owner approves contacts with homeagent pairing")
        if type == "text":
            parts = split_text(payload, self.text_limit)
            for part in parts:
                await self._send_rate.acquire(conv.key)
                await self.send_text(conv, part)
            return f"{len(parts)} message(s) sent to {conv.key}"
        media = await self.load_media(payload, type)
        await self._send_rate.acquire(conv.key)
        await self.send_media(conv, media)
        return f"{type} sent to {conv.key}"

    def _access_for_send(self, account: str) -> str:
        mode = str(self.sdk.settings.get("access", "pairing") or "pairing")
        if mode == "open" or account in self._list("allow_from"):
            return "allow"
        row = self.pairing.get(self.platform, account)
        return "allow" if row is not None and row.status == "approved" else "deny"

    async def load_media(self, payload: str, kind: str) -> OutgoingMedia:
        """Resolve what the model named: an http(s) URL, a local file, or a media-store digest.

        Raises:
            ValueError: none of those, or a file over 50 MiB.
        """
        ref = payload.strip()
        if ref.startswith(("http://", "https://")):
            return OutgoingMedia(kind, name=ref.rsplit("/", 1)[-1], url=ref)
        path = Path(ref).expanduser()
        if ref and path.is_file():
            size = path.stat().st_size
            if size > _MAX_MEDIA_FILE:
                raise ValueError(f"{path} is {size} bytes; files up to {_MAX_MEDIA_FILE} bytes can be sent")
            data = await asyncio.to_thread(path.read_bytes)
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            return OutgoingMedia(kind, name=path.name, mime=mime, data=data)
        try:
            stored = await self.sdk.media.get(ref.removeprefix("sha256:"))
        except Exception as exc:
            raise ValueError(
                f"{ref!r} is neither an http(s) URL, an existing file, nor a media digest ({exc})"
            ) from None
        return OutgoingMedia(kind, name=stored.name or stored.digest[:12], mime=stored.mime, data=stored.data)

    # ------------------------------------------------------------------ platform parts

    @abc.abstractmethod
    async def send_text(self, conversation: Conversation, text: str) -> None:
        """Send one text message (already within ``text_limit``). Platform-specific."""

    @abc.abstractmethod
    async def send_media(self, conversation: Conversation, media: OutgoingMedia) -> None:
        """Send one image, voice note or file. Platform-specific."""

    def close(self) -> None:
        self.pairing.close()


def pairing_routes(
    store: Callable[[], PairingStore | None],
) -> list[tuple[str, Callable[..., Awaitable[Any]], list[str]]]:
    """JSON routes for the web UI (add them in ``register_routes``; mounted under ``/plugins/<name>/``).

    ``GET /pairing`` lists requests (``?status=pending``); ``POST /pairing/approve`` with
    ``{"code": "K7M2QX", "person": "小王"}`` and ``POST /pairing/deny`` with ``{"code": ...}``
    decide one; ``POST /pairing/revoke`` with ``{"code": ...}`` forgets one (a new code next time).
    ``store`` returns the running bridge's table (None before start: 503).
    """
    from starlette.responses import JSONResponse

    def current() -> PairingStore | JSONResponse:
        table = store()
        if table is None:
            return JSONResponse({"error": "the bridge has not started"}, status_code=503)
        return table

    async def listing(request: Any) -> Any:
        table = current()
        if isinstance(table, JSONResponse):
            return table
        status = request.query_params.get("status") or None
        if status not in (None, "pending", "approved", "denied"):
            return JSONResponse({"error": "status must be pending, approved or denied"}, status_code=400)
        return JSONResponse([r.to_dict() for r in table.list(status)])

    async def decide(request: Any, action: str) -> Any:
        table = current()
        if isinstance(table, JSONResponse):
            return table
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("code"), str):
            return JSONResponse({"error": 'send a JSON object {"code": "<pairing code>"}'}, status_code=400)
        try:
            if action == "approve":
                decided = table.approve(body["code"], person=str(body.get("person") or ""))
            elif action == "deny":
                decided = table.deny(body["code"])
            else:
                decided = table.revoke(body["code"])
        except KeyError as exc:
            return JSONResponse({"error": str(exc.args[0])}, status_code=404)
        return JSONResponse(decided.to_dict())

    async def approve(request: Any) -> Any:
        return await decide(request, "approve")

    async def deny(request: Any) -> Any:
        return await decide(request, "deny")

    async def revoke(request: Any) -> Any:
        return await decide(request, "revoke")

    return [
        ("/pairing", listing, ["GET"]),
        ("/pairing/approve", approve, ["POST"]),
        ("/pairing/deny", deny, ["POST"]),
        ("/pairing/revoke", revoke, ["POST"]),
    ]
