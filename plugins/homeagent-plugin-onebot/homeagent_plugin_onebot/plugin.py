"""The ``onebot`` plugin: QQ (through NapCat or any OneBot v11 implementation) as a chat door.

Inputs arrive on ``qq:private:<QQ number>`` and ``qq:group:<group number>``; replies go out
through the ``qq`` output channel (text split to ``text_limit``, images, voice, files).
Access, pairing, groups and people are the channel kit's (:mod:`homeagent_sdk.bridge`).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import logging
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from homeagent_plugin_onebot.link import OneBotLink, TokenRejected
from homeagent_plugin_onebot.message import parse_message
from homeagent_sdk import (
    ChannelRegistry,
    ConfigDef,
    MediaAttachment,
    PluginSDK,
    RouteRegistry,
    SettingsRegistry,
    hookimpl,
)
from homeagent_sdk.bridge import ChatBridge, pairing_routes
from homeagent_sdk.channels import (
    Backoff,
    Conversation,
    IncomingMessage,
    MediaRef,
    OutgoingMedia,
    Sender,
    reconnect_setting,
)
from homeagent_sdk.ssrf import AddressPolicy, download_capped

__all__ = ["CHANNEL", "OneBotBridge", "OneBotPlugin", "make_plugin"]

log = logging.getLogger("homeagent.plugin.onebot")

CHANNEL = "qq"
#: QQ's own limit is about 4,500 characters; stay below it.
TEXT_LIMIT = 3000
MAX_MEDIA = 20 * 1024 * 1024

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"#!AMR", "audio/amr"),
    (b"#!SILK", "audio/silk"),
    (b"\x02#!SILK", "audio/silk"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"%PDF", "application/pdf"),
)


def sniff_mime(data: bytes, kind: str) -> str:
    """The MIME type of received media, from its first bytes (QQ file names say little)."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return {"image": "image/jpeg", "record": "audio/amr", "video": "video/mp4"}.get(kind, "application/octet-stream")


class OneBotBridge(ChatBridge):
    """The QQ side of the channel kit, over a :class:`OneBotLink`."""

    def __init__(self, sdk: Any) -> None:
        super().__init__(sdk, channel=CHANNEL, platform="qq", label="QQ", default_text_limit=TEXT_LIMIT)
        settings = sdk.settings
        self.link = OneBotLink(
            mode=str(settings.get("mode", "forward") or "forward"),
            on_event=self.on_event,
            access_token=str(settings.get("access_token", "") or ""),
            ws_url=str(settings.get("ws_url", "") or ""),
            listen_host=str(settings.get("listen_host", "127.0.0.1") or "127.0.0.1"),
            listen_port=int(settings.get("listen_port", 6700) or 0),
            backoff=Backoff.from_settings(settings),
        )
        self.nickname = ""
        self.last_heartbeat = 0.0
        self.dropped = 0
        self._sent_ids: collections.deque[str] = collections.deque(maxlen=500)

    # ------------------------------------------------------------------ events

    async def on_event(self, event: dict[str, Any]) -> None:
        """One event frame from the implementation."""
        post_type = event.get("post_type")
        if post_type == "meta_event":
            self._meta(event)
            return
        if post_type != "message":
            return  # notices, requests, our own sent messages (message_sent)
        message_type = event.get("message_type")
        user_id = event.get("user_id")
        if message_type not in ("private", "group") or not isinstance(user_id, int | str) or not str(user_id):
            self.dropped += 1
            log.warning("onebot: dropped a malformed message event (type %r, user_id %r)", message_type, user_id)
            return
        self_id = str(event.get("self_id") or self.link.self_id or "")
        if self_id and not self.link.self_id:
            self.link.self_id = self_id
        if str(user_id) == self_id:
            return
        try:
            if message_type == "group":
                conv = Conversation("group", str(event.get("group_id")))
            else:
                conv = Conversation("private", str(user_id))
        except ValueError as exc:
            self.dropped += 1
            log.warning("onebot: dropped a message event: %s", exc)
            return
        sender = event.get("sender") if isinstance(event.get("sender"), dict) else {}
        assert isinstance(sender, dict)
        name = str(sender.get("card") or sender.get("nickname") or "").strip()
        parsed = parse_message(event.get("message", event.get("raw_message", "")), self_id)
        if parsed.malformed:
            log.warning("onebot: skipped %d malformed segment(s) in message %s", parsed.malformed,
                        event.get("message_id"))
        if parsed.unknown:
            log.debug("onebot: unknown segment types %s", parsed.unknown)
        media = [
            MediaRef(kind, str(data.get("name") or data.get("file") or kind)[:200],
                     {k: str(data[k]) for k in ("url", "file") if data.get(k)})
            for kind, data in parsed.media
        ]
        text = parsed.text
        if not text and not parsed.media:
            self.dropped += 1
            log.warning("onebot: dropped message %s: nothing readable in it", event.get("message_id"))
            return
        if parsed.reply_to:
            text = f"(reply to message {parsed.reply_to}) {text}".strip()
        names = [self.nickname] if self.nickname else []
        mentioned = parsed.at_me or (parsed.reply_to != "" and parsed.reply_to in self._sent_ids)
        message = IncomingMessage(
            conversation=conv,
            sender=Sender(str(user_id), name),
            text=text,
            media=media,
            mentioned=mentioned or (bool(names) and conv.is_group and self.nickname in text),
            message_id=str(event.get("message_id", "")),
        )
        outcome = await self.handle(message)
        log.debug("onebot: message %s from %s in %s: %s", message.message_id, user_id, conv.key, outcome)

    def _meta(self, event: dict[str, Any]) -> None:
        kind = event.get("meta_event_type")
        if kind == "heartbeat":
            self.last_heartbeat = time.time()
        elif kind == "lifecycle":
            if event.get("self_id"):
                self.link.self_id = str(event["self_id"])
            log.info("onebot: lifecycle %s (self %s)", event.get("sub_type"), self.link.self_id)

    async def fetch_media(self, media: MediaRef) -> MediaAttachment | None:
        """A received image / voice / file / video, fetched once the sender passed access.

        ``base64://`` inline data is decoded (capped before decoding); an http(s) URL is
        downloaded through the SSRF guard, streamed and stopped at the cap, every redirect hop
        checked (the implementation's own host is allowed: it serves its media cache); a local
        path (``file://`` or bare) is never opened, whoever names it.
        """
        ref = media.ref.get("url") or media.ref.get("file") or ""
        if ref.startswith("base64://"):
            encoded = ref[len("base64://") :]
            if len(encoded) * 3 // 4 > MAX_MEDIA:
                log.warning("onebot: inline %s over %d bytes; skipped", media.kind, MAX_MEDIA)
                return None
            blob = base64.b64decode(encoded, validate=False)
        elif ref.startswith(("http://", "https://")):
            blob = await download_capped(ref, self._media_policy(), max_bytes=MAX_MEDIA)
        else:
            log.info("onebot: %s %r is not a URL; local paths are never opened", media.kind, ref[:100])
            return None
        if not blob:
            return None
        return MediaAttachment(mime=sniff_mime(blob, media.kind), data=blob, name=Path(media.name).name or media.kind)

    def _media_policy(self) -> AddressPolicy:
        """Public addresses, plus the implementation's own host in forward mode (every port: it
        serves its media cache on a port of its own)."""
        host = urlsplit(self.link.ws_url).hostname if self.link.mode == "forward" else None
        if not host:
            return AddressPolicy()
        return AddressPolicy.parse([f"[{host}]:*" if ":" in host else f"{host}:*"])

    # ------------------------------------------------------------------ sending

    @staticmethod
    def _target(conv: Conversation) -> tuple[str, dict[str, Any]]:
        ident: int | str = int(conv.id) if conv.id.isdigit() else conv.id
        if conv.is_group:
            return "send_group_msg", {"group_id": ident}
        return "send_private_msg", {"user_id": ident}

    async def _send(self, conv: Conversation, segments: list[dict[str, Any]]) -> None:
        action, params = self._target(conv)
        data = await self.link.call(action, {**params, "message": segments})
        if isinstance(data, dict) and data.get("message_id") is not None:
            self._sent_ids.append(str(data["message_id"]))

    async def send_text(self, conversation: Conversation, text: str) -> None:
        await self._send(conversation, [{"type": "text", "data": {"text": text}}])

    async def send_media(self, conversation: Conversation, media: OutgoingMedia) -> None:
        file = media.url or "base64://" + base64.b64encode(media.data or b"").decode("ascii")
        if media.kind == "image":
            await self._send(conversation, [{"type": "image", "data": {"file": file}}])
        elif media.kind == "audio":
            await self._send(conversation, [{"type": "record", "data": {"file": file}}])
        else:
            ident: int | str = int(conversation.id) if conversation.id.isdigit() else conversation.id
            if conversation.is_group:
                await self.link.call("upload_group_file", {"group_id": ident, "file": file, "name": media.name})
            else:
                await self.link.call("upload_private_file", {"user_id": ident, "file": file, "name": media.name})

    async def login(self) -> None:
        """Once connected, learn our QQ number and nickname (``get_login_info``); the nickname counts
        as a mention."""
        try:
            await self.link.wait_connected()
        except TokenRejected:
            return  # the link has logged why
        try:
            info = await self.link.call("get_login_info")
        except Exception as exc:
            log.warning("onebot: get_login_info failed: %s", exc)
            return
        if isinstance(info, dict):
            self.link.self_id = str(info.get("user_id") or self.link.self_id)
            self.nickname = str(info.get("nickname") or "")
            log.info("onebot: logged in as %s (%s)", self.nickname, self.link.self_id)


class OneBotPlugin:
    """The plugin object (``make_plugin`` gives each agent its own)."""

    name = "onebot"

    def __init__(self) -> None:
        self.bridge: OneBotBridge | None = None
        self._login: asyncio.Task[None] | None = None

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="mode", type="select", default="forward", options=["forward", "reverse"], category="connection",
            restart_required=True,
            description="forward: connect to the implementation's WebSocket server (ws_url); reverse: let it "
            "connect to us (listen_host:listen_port).",
        ))
        registry.add(ConfigDef(
            key="ws_url", type="string", default="ws://127.0.0.1:3001", category="connection", restart_required=True,
            description="Forward mode: the implementation's universal WebSocket URL (NapCat: a WebSocket server).",
        ))
        registry.add(ConfigDef(
            key="listen_host", type="string", default="127.0.0.1", category="connection", restart_required=True,
            description="Reverse mode: address to listen on for the implementation's connection.",
        ))
        registry.add(ConfigDef(
            key="listen_port", type="int", default=6700, min=0, max=65535, category="connection",
            restart_required=True, description="Reverse mode: port to listen on (0 = any free port).",
        ))
        registry.add(ConfigDef(
            key="access_token", type="password", default="", secret=True, category="connection",
            restart_required=True,
            description="The implementation's access token (sent as Authorization: Bearer). Reverse mode "
            "refuses every connection while it is empty.",
        ))
        registry.add(reconnect_setting(
            minimum=0.01, description="Seconds before the first reconnect; doubles up to 60 s.",
        ))
        for definition in ChatBridge.config_defs(text_limit=TEXT_LIMIT):
            registry.add(definition)

    @hookimpl
    def register_routes(self, router: RouteRegistry) -> None:
        for path, endpoint, methods in pairing_routes(lambda: self.bridge.pairing if self.bridge else None):
            router.add(path, endpoint, methods=methods)

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChatBridge.channel_def(CHANNEL, label="QQ", send=self.deliver, description="QQ chats (OneBot)"))

    async def deliver(self, payload: str, meta: dict[str, Any], type: str = "text") -> str:
        if self.bridge is None:
            raise RuntimeError("the onebot plugin has not started")
        return await self.bridge.deliver(payload, meta, type)

    @hookimpl
    async def startup(self, sdk: PluginSDK) -> None:
        """Start the link without waiting for the implementation: forward mode connects (and logs
        in) in the background, so the daemon's other doors open at once."""
        bridge = OneBotBridge(sdk)
        self.bridge = bridge
        try:
            await bridge.link.start()
        except Exception:
            bridge.close()
            self.bridge = None
            raise
        if bridge.link.mode == "forward":
            self._login = asyncio.get_running_loop().create_task(bridge.login())
        else:
            sdk.log.info("onebot: waiting for the implementation on ws://%s:%s/", bridge.link.listen_host,
                         bridge.link.listen_port)

    @hookimpl
    async def shutdown(self) -> None:
        if self._login is not None:
            self._login.cancel()
        if self.bridge is not None:
            await self.bridge.link.close()
            self.bridge.close()
            self.bridge = None


def make_plugin() -> OneBotPlugin:
    return OneBotPlugin()
