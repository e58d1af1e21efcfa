"""The ``telegram`` plugin: Telegram as a chat door, by long polling the Bot API or a webhook.

Built on python-telegram-bot's :class:`telegram.Bot` (httpx underneath, like the rest of
HomeAgent) pointed at ``api_base`` (default ``https://api.telegram.org``; a local Bot API
server or a test double work the same). Inputs arrive on ``telegram:private:<user id>`` and
``telegram:group:<chat id>``; replies go out through the ``telegram`` output channel.
Access, pairing, groups and people are the channel kit's (:mod:`homeagent_sdk.bridge`).

``mode`` picks how updates arrive: ``polling`` (``getUpdates``; any webhook left set is
deleted first, since Telegram refuses ``getUpdates`` while one is active) or ``webhook``
(``setWebhook`` with a ``secret_token``; updates are POSTed to the plugin's own listener,
:mod:`homeagent_plugin_telegram.webhook`).

Replies are sent as plain text (no ``parse_mode``), so nothing the model writes can break
Telegram's Markdown parser. While a turn runs the chat shows "typing…".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from homeagent_plugin_telegram.webhook import WebhookServer, new_secret, valid_secret
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
from homeagent_sdk.errors import PluginError

__all__ = ["CHANNEL", "TelegramBridge", "TelegramPlugin", "make_plugin"]

log = logging.getLogger("homeagent.plugin.telegram")

# python-telegram-bot 22.2+ warns on every flood-control answer that `retry_after` will become a
# timedelta; opting in to the timedelta values of its next major version silences that, and
# `_seconds` reads either form (21.x ignores the variable).
os.environ.setdefault("PTB_TIMEDELTA", "1")

CHANNEL = "telegram"
#: Telegram's limit for one message is 4096 characters.
TEXT_LIMIT = 4096
MAX_MEDIA = 20 * 1024 * 1024
#: Typing indicators last about 5 s on the client; renew a little earlier.
TYPING_EVERY = 4.0
TYPING_MAX = 120.0
SEND_RETRIES = 3


class TelegramBridge(ChatBridge):
    """The Telegram side of the channel kit."""

    def __init__(self, sdk: Any) -> None:
        settings = sdk.settings
        token = str(settings.get("bot_token", "") or "").strip()
        if not token:
            raise PluginError(
                "plugin.telegram.bot_token is not set: create a bot with @BotFather and run "
                "`homeagent config set plugin.telegram.bot_token <token>`",
                plugin_name="telegram",
            )
        mode = str(settings.get("mode", "polling") or "polling")
        hook = _webhook_settings(settings) if mode == "webhook" else ("", "")
        super().__init__(sdk, channel=CHANNEL, platform="telegram", label="Telegram", default_text_limit=TEXT_LIMIT)
        from telegram import Bot
        from telegram.request import HTTPXRequest
        base = str(settings.get("api_base", "") or "https://api.telegram.org").rstrip("/")
        self.poll_timeout = int(settings.get("poll_timeout", 30) or 30)
        proxy = str(settings.get("proxy", "") or "") or None
        self._requests = (
            HTTPXRequest(connection_pool_size=8, proxy=proxy),
            HTTPXRequest(read_timeout=self.poll_timeout + 10, proxy=proxy),
        )
        self.bot = Bot(
            token,
            base_url=f"{base}/bot",
            base_file_url=f"{base}/file/bot",
            request=self._requests[0],
            get_updates_request=self._requests[1],
        )
        self.backoff = Backoff.from_settings(settings)
        self.username = ""
        self.bot_id = 0
        self.offset: int | None = None
        self.conflicts = 0
        self.last_error = ""
        self._typing: dict[str, asyncio.Task[None]] = {}
        self._poller: asyncio.Task[None] | None = None
        self.mode = mode
        self.webhook: WebhookServer | None = None
        self._hook_url, self._hook_secret = hook
        self._redact = _RedactToken(token)
        for name in _URL_LOGGERS:
            logging.getLogger(name).addFilter(self._redact)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Check the token (``getMe``), then poll in the background.

        Raises:
            PluginError: the token was refused.
        """
        from telegram.error import InvalidToken, TelegramError

        try:
            await self.bot.initialize()
            me = self.bot.bot
        except InvalidToken as exc:
            raise PluginError(
                f"Telegram refused plugin.telegram.bot_token ({exc}); copy the token @BotFather gave you "
                "again: `homeagent config set plugin.telegram.bot_token <token>`",
                plugin_name="telegram",
            ) from None
        except TelegramError as exc:
            self.last_error = str(exc)
            log.warning("telegram: getMe failed (%s); polling anyway and retrying", exc)
        else:
            self.username, self.bot_id = me.username or "", me.id
            log.info("telegram: %s as @%s", "webhook" if self.mode == "webhook" else "polling", self.username)
        if self.mode == "webhook":
            await self._start_webhook()
        else:
            self._poller = asyncio.get_running_loop().create_task(self._poll(), name="telegram-poll")

    async def _start_webhook(self) -> None:
        """Listen, then ask Telegram to POST updates to ``webhook_url`` with our secret.

        Raises:
            PluginError: the listener's address cannot be bound, or Telegram refused the URL.
        """
        from telegram.error import BadRequest, TelegramError

        settings = self.sdk.settings
        host = str(settings.get("webhook_host", "127.0.0.1") or "127.0.0.1")
        port = int(settings.get("webhook_port", 8443) or 0)
        self.webhook = WebhookServer(host=host, port=port, path=urlsplit(self._hook_url).path or "/",
                                     secret=self._hook_secret, on_update=self._on_webhook)
        try:
            await self.webhook.start()
        except OSError as exc:
            raise PluginError(
                f"telegram: cannot listen for the webhook on {host}:{port} ({exc}); set "
                "plugin.telegram.webhook_host / webhook_port to a free local address",
                plugin_name="telegram",
            ) from None
        log.info("telegram: webhook listener on http://%s:%s%s for %s", host, self.webhook.port, self.webhook.path,
                 self._hook_url)
        try:
            await self._set_webhook()
        except BadRequest as exc:
            raise PluginError(
                f"Telegram refused plugin.telegram.webhook_url {self._hook_url!r}: {exc}. It must be a public "
                "HTTPS URL on port 443, 80, 88 or 8443 that reaches this listener",
                plugin_name="telegram",
            ) from None
        except TelegramError as exc:
            self.last_error = str(exc)
            log.warning("telegram: setWebhook failed (%s); retrying in the background", exc)
            self._poller = asyncio.get_running_loop().create_task(self._retry_webhook(), name="telegram-webhook-set")

    async def _set_webhook(self) -> None:
        await self._call("setWebhook", lambda: self.bot.set_webhook(
            self._hook_url, allowed_updates=["message"], secret_token=self._hook_secret,
        ))
        self.last_error = ""
        log.info("telegram: webhook set to %s", self._hook_url)

    async def _retry_webhook(self) -> None:
        from telegram.error import TelegramError

        while True:
            await self.backoff.sleep()
            try:
                await self._set_webhook()
            except TelegramError as exc:
                self.last_error = str(exc)
                log.info("telegram: setWebhook failed (%s); retrying", exc)
            else:
                self.backoff.reset()
                return

    async def _on_webhook(self, data: dict[str, Any]) -> None:
        from telegram import Update

        update = Update.de_json(data, self.bot)
        if update is not None:
            await self._on_update(update)

    async def stop(self) -> None:
        for task in [self._poller, *self._typing.values()]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._typing.clear()
        if self.webhook is not None:  # the webhook stays set: Telegram keeps updates until we are back
            await self.webhook.close()
        with contextlib.suppress(Exception):
            await self.bot.shutdown()
        for request in self._requests:  # a Bot whose initialize() failed does not close them itself
            with contextlib.suppress(Exception):
                await request.shutdown()
        for name in _URL_LOGGERS:
            logging.getLogger(name).removeFilter(self._redact)
        self.close()

    # ------------------------------------------------------------------ polling

    async def _leave_webhook(self) -> None:
        """Delete a webhook left from webhook mode: Telegram answers getUpdates with 409 while one is set."""
        from telegram.error import TelegramError

        try:
            await self.bot.delete_webhook()
        except TelegramError as exc:
            log.info("telegram: deleteWebhook failed (%s); polling anyway", exc)

    async def _poll(self) -> None:
        from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

        await self._leave_webhook()
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=self.offset, timeout=self.poll_timeout, allowed_updates=["message"]
                )
            except asyncio.CancelledError:
                raise
            except RetryAfter as exc:
                wait = _seconds(exc.retry_after)
                log.warning("telegram: flood control on getUpdates; waiting %.0f s", wait)
                await asyncio.sleep(wait)
                continue
            except Conflict as exc:
                self.conflicts += 1
                self.last_error = f"409 conflict: {exc}"
                log.error(
                    "telegram: another client is polling this bot or a webhook is set (%s); stop the other "
                    "instance or delete the webhook. Retrying with backoff.", exc,
                )
                await self.backoff.sleep()
                continue
            except InvalidToken as exc:
                self.last_error = f"token refused: {exc}"
                log.error("telegram: the bot token was refused (%s); set plugin.telegram.bot_token", exc)
                await self.backoff.sleep()
                continue
            except TelegramError as exc:
                self.last_error = str(exc)
                log.info("telegram: getUpdates failed (%s); retrying", exc)
                await self.backoff.sleep()
                continue
            self.backoff.reset()
            for update in updates:
                self.offset = update.update_id + 1
                try:
                    await self._on_update(update)
                except Exception:
                    log.exception("telegram: update %s could not be handled", update.update_id)

    async def _on_update(self, update: Any) -> None:
        message = update.message
        if message is None or message.from_user is None or message.chat is None:
            return
        if message.from_user.is_bot and message.from_user.id == self.bot_id:
            return
        chat = message.chat
        user = message.from_user
        try:
            if chat.type == "private":
                conv = Conversation("private", str(user.id))
            else:
                conv = Conversation("group", str(chat.id))
        except ValueError as exc:
            log.warning("telegram: message dropped: %s", exc)
            return
        text = message.text or message.caption or ""
        media = [MediaRef(name, name, {"file_id": file_id, "mime": mime}) for file_id, mime, name in _media_of(message)]
        notes: list[str] = []
        if message.sticker is not None:
            notes.append(f"[sticker {message.sticker.emoji or ''}]".replace(" ]", "]"))
        if notes:
            text = " ".join([text, *notes]).strip()
        if not text and not media:
            log.info("telegram: message %s has nothing readable; ignored", message.message_id)
            return
        reply_to = message.reply_to_message
        mentioned = bool(
            reply_to is not None and reply_to.from_user is not None and reply_to.from_user.id == self.bot_id
        )
        if self.username and f"@{self.username.casefold()}" in text.casefold():
            mentioned = True
            text = _strip_mention(text, self.username)
        name = user.full_name or user.username or str(user.id)
        incoming = IncomingMessage(conv, Sender(str(user.id), name), text, [], mentioned,
                                   str(message.message_id), media=media)
        outcome = await self.handle(incoming)
        log.debug("telegram: message %s in %s: %s", message.message_id, conv.key, outcome)

    async def fetch_media(self, media: MediaRef) -> MediaAttachment | None:
        """A photo, voice note or file, downloaded from Telegram once the sender passed access."""
        file_id, mime, name = media.ref["file_id"], media.ref["mime"], media.name
        try:
            file = await self.bot.get_file(file_id)
            if file.file_size and file.file_size > MAX_MEDIA:
                log.warning("telegram: %s is %d bytes; skipped", name, file.file_size)
                return None
            data = bytes(await file.download_as_bytearray())
        except Exception as exc:
            log.warning("telegram: %s could not be downloaded: %s", name, exc)
            return None
        return MediaAttachment(mime=mime, data=data, name=name)

    # ------------------------------------------------------------------ typing

    async def on_inject(self, conversation: Conversation) -> None:
        key = conversation.key
        if key not in self._typing:
            self._typing[key] = asyncio.get_running_loop().create_task(self._type(conversation))

    async def _type(self, conversation: Conversation) -> None:
        try:
            async with asyncio.timeout(TYPING_MAX):
                while True:
                    with contextlib.suppress(Exception):
                        await self.bot.send_chat_action(_chat_id(conversation), "typing")
                    await asyncio.sleep(TYPING_EVERY)
        except TimeoutError:
            pass
        finally:
            self._typing.pop(conversation.key, None)

    def _stop_typing(self, conversation: Conversation) -> None:
        task = self._typing.pop(conversation.key, None)
        if task is not None:
            task.cancel()

    # ------------------------------------------------------------------ sending

    async def _call(self, what: str, send: Any) -> Any:
        """Run one send, waiting out Telegram's flood control (429 retry_after) a few times."""
        from telegram.error import RetryAfter

        for attempt in range(SEND_RETRIES + 1):
            try:
                return await send()
            except RetryAfter as exc:
                if attempt == SEND_RETRIES:
                    raise
                wait = _seconds(exc.retry_after)
                log.warning("telegram: flood control on %s; retrying in %.0f s", what, wait)
                await asyncio.sleep(wait)
        return None

    async def send_text(self, conversation: Conversation, text: str) -> None:
        self._stop_typing(conversation)
        await self._call("sendMessage", lambda: self.bot.send_message(_chat_id(conversation), text))

    async def send_media(self, conversation: Conversation, media: OutgoingMedia) -> None:
        from telegram import InputFile

        self._stop_typing(conversation)
        chat = _chat_id(conversation)
        payload: Any = media.url or InputFile(media.data or b"", filename=media.name or "file")
        if media.kind == "image":
            await self._call("sendPhoto", lambda: self.bot.send_photo(chat, payload))
        elif media.kind == "audio":
            await self._call("sendVoice", lambda: self.bot.send_voice(chat, payload))
        else:
            await self._call("sendDocument", lambda: self.bot.send_document(chat, payload))


def _webhook_settings(settings: Any) -> tuple[str, str]:
    """``(webhook_url, secret)`` for webhook mode; the secret is ``webhook_secret`` or a new random one.

    Raises:
        PluginError: no HTTPS URL, or a secret Telegram would refuse.
    """
    url = str(settings.get("webhook_url", "") or "").strip()
    if not url.startswith("https://") or not urlsplit(url).hostname:
        raise PluginError(
            "plugin.telegram.mode is webhook but plugin.telegram.webhook_url is "
            f"{url or 'not set'!s}: set the public HTTPS URL Telegram should post to, e.g. "
            "`homeagent config set plugin.telegram.webhook_url https://home.example.com/telegram/hook` "
            "(or set plugin.telegram.mode polling)",
            plugin_name="telegram",
        )
    secret = str(settings.get("webhook_secret", "") or "").strip() or new_secret()
    if not valid_secret(secret):
        raise PluginError(
            "plugin.telegram.webhook_secret must be 1-256 characters from A-Z a-z 0-9 _ - (or empty for a "
            "random one at every start)",
            plugin_name="telegram",
        )
    return url, secret


class _RedactToken(logging.Filter):
    """Masks the bot token in log records: the Bot API puts it in every URL, and httpx logs URLs."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and self.token in record.msg:
            record.msg = record.msg.replace(self.token, "<bot token>")
        if isinstance(record.args, tuple):
            record.args = tuple(self._masked(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: self._masked(v) for k, v in record.args.items()}
        return True

    def _masked(self, arg: Any) -> Any:
        """``arg`` with the token masked; an argument without the token keeps its type (``%d``)."""
        if isinstance(arg, int | float):
            return arg
        text = str(arg)
        return text.replace(self.token, "<bot token>") if self.token in text else arg


#: Loggers that may see Bot API URLs.
_URL_LOGGERS = ("httpx", "httpcore", "telegram", "telegram.ext")


def _seconds(value: Any) -> float:
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    return max(0.0, min(float(seconds), 300.0))


def _chat_id(conversation: Conversation) -> int | str:
    ident = conversation.id
    return int(ident) if ident.lstrip("-").isdigit() else ident


def _strip_mention(text: str, username: str) -> str:
    import re

    return re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.IGNORECASE).strip()


def _media_of(message: Any) -> list[tuple[str, str, str]]:
    """``(file_id, mime, name)`` of the photo, voice note, audio, video or document of a message."""
    out: list[tuple[str, str, str]] = []
    if message.photo:
        fitting = [p for p in message.photo if not p.file_size or p.file_size <= MAX_MEDIA]
        best = max(fitting or message.photo, key=lambda p: p.width * p.height)
        out.append((best.file_id, "image/jpeg", "photo.jpg"))
    if message.voice is not None:
        out.append((message.voice.file_id, message.voice.mime_type or "audio/ogg", "voice.ogg"))
    if message.audio is not None:
        out.append((message.audio.file_id, message.audio.mime_type or "audio/mpeg", message.audio.file_name or "audio"))
    if message.document is not None:
        doc = message.document
        out.append((doc.file_id, doc.mime_type or "application/octet-stream", doc.file_name or "document"))
    return out


class TelegramPlugin:
    """The plugin object (``make_plugin`` gives each agent its own)."""

    name = "telegram"

    def __init__(self) -> None:
        self.bridge: TelegramBridge | None = None

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="bot_token", type="password", default="", secret=True, category="connection", restart_required=True,
            description="The bot's token from @BotFather.",
        ))
        registry.add(ConfigDef(
            key="api_base", type="string", default="https://api.telegram.org", category="connection",
            restart_required=True,
            description="Bot API base URL (a local telegram-bot-api server, or a mirror reachable from here).",
        ))
        registry.add(ConfigDef(
            key="proxy", type="string", default="", category="connection", restart_required=True,
            description="HTTP or SOCKS proxy URL for the Bot API (empty = none).",
        ))
        registry.add(ConfigDef(
            key="mode", type="select", default="polling", options=["polling", "webhook"], category="connection",
            restart_required=True,
            description="How updates arrive: polling (getUpdates; deletes a webhook left set) or webhook "
            "(Telegram POSTs to webhook_url, forwarded to this plugin's listener on webhook_host:webhook_port).",
        ))
        registry.add(ConfigDef(
            key="webhook_url", type="string", default="", category="connection", restart_required=True,
            description="Webhook mode: the public HTTPS URL (port 443, 80, 88 or 8443) Telegram posts updates to; "
            "a reverse proxy forwards it, same path, to webhook_host:webhook_port.",
        ))
        registry.add(ConfigDef(
            key="webhook_host", type="string", default="127.0.0.1", category="connection", restart_required=True,
            description="Webhook mode: the address the plugin's own webhook listener binds.",
        ))
        registry.add(ConfigDef(
            key="webhook_port", type="int", default=8443, min=0, max=65535, category="connection",
            restart_required=True, description="Webhook mode: the port of the webhook listener (0 = any free port).",
        ))
        registry.add(ConfigDef(
            key="webhook_secret", type="password", default="", secret=True, category="connection",
            restart_required=True,
            description="Webhook mode: the secret_token Telegram sends in X-Telegram-Bot-Api-Secret-Token "
            "(1-256 of A-Z a-z 0-9 _ -); empty = a new random one at every start.",
        ))
        registry.add(ConfigDef(
            key="poll_timeout", type="int", default=30, min=0, max=50, category="connection",
            restart_required=True, description="Long-polling timeout of getUpdates in seconds.",
        ))
        registry.add(reconnect_setting(
            minimum=0.01, description="Seconds before the first retry after a failed poll; doubles up to 60 s.",
        ))
        for definition in ChatBridge.config_defs(text_limit=TEXT_LIMIT):
            registry.add(definition)

    @hookimpl
    def register_routes(self, router: RouteRegistry) -> None:
        for path, endpoint, methods in pairing_routes(lambda: self.bridge.pairing if self.bridge else None):
            router.add(path, endpoint, methods=methods)

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        registry.add(ChatBridge.channel_def(CHANNEL, label="Telegram", send=self.deliver,
                                            description="Telegram chats"))

    async def deliver(self, payload: str, meta: dict[str, Any], type: str = "text") -> str:
        if self.bridge is None:
            raise RuntimeError("the telegram plugin has not started")
        return await self.bridge.deliver(payload, meta, type)

    @hookimpl
    async def startup(self, sdk: PluginSDK) -> None:
        bridge = TelegramBridge(sdk)
        try:
            await bridge.start()
        except Exception:
            await bridge.stop()
            raise
        self.bridge = bridge

    @hookimpl
    async def shutdown(self) -> None:
        if self.bridge is not None:
            await self.bridge.stop()
            self.bridge = None


def make_plugin() -> TelegramPlugin:
    return TelegramPlugin()
