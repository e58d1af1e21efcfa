"""The web UI as an output channel: ``output_send__webui`` puts a message, an image or a file in
front of the person in every open tab (pushed over SSE, a browser notification when the tab is
hidden).

What is sent becomes an ``agent_output`` event with ``kind: "channel_output"`` (its own chat
bubble) and a record of the conversation log (so the history keeps it). A local file is
copied to ``<data>/webui_files/<16 hex>.<ext>`` and served, to a logged-in browser only, from
``/files/<name>``; an extension a browser could run (``.html``, ``.svg``, ``.js``, ...) or
none at all becomes ``.bin``. An http(s) URL is passed through as it is.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_sdk._atomic import atomic_file
from homeagent_sdk.errors import ChannelSendError
from homeagent_sdk.threads import thread_of

if TYPE_CHECKING:
    from homeagent_core.events import EventBus

__all__ = ["CHANNEL", "DANGEROUS_EXTENSIONS", "WebChannel", "stored_name"]

CHANNEL = "webui"
#: Extensions a browser might execute or render as a page: stored as ``.bin`` instead.
DANGEROUS_EXTENSIONS = frozenset({"", ".html", ".htm", ".xhtml", ".svg", ".js", ".mjs", ".exe", ".sh", ".bat", ".cmd",
                                  ".ps1"})
HELP = """output_send__webui 把内容推送到网页端（所有打开的标签页；页面在后台时弹出浏览器通知）。
type: text（payload 为消息文本，支持 Markdown）、image 或 file（payload 为本机文件路径或 http(s) URL）。
meta（可选 JSON 对象）: {"caption": "图片或文件的说明文字"}。"""


def stored_name(original: str) -> str:
    """``<16 hex>.<ext>`` for a sent file; a dangerous or missing extension becomes ``.bin``."""
    suffix = Path(original).suffix.lower()
    if suffix in DANGEROUS_EXTENSIONS or len(suffix) > 12 or not suffix[1:].isalnum():
        suffix = ".bin"
    return secrets.token_hex(8) + suffix


def _as_text(data: dict[str, Any]) -> str:
    """What a sent message says in the conversation log (and so in the chat history)."""
    text = str(data.get("content") or "")
    url = data.get("url")
    if not url:
        return text
    name = str(data.get("name") or "file").replace("]", ")").replace("[", "(")
    link = f"![{name}]({url})" if data["output_type"] == "image" else f"[📎 {name}]({url})"
    return f"{text}\n\n{link}" if text else link


class WebChannel:
    """The ``send`` of the ``webui`` output channel."""

    def __init__(
        self, bus: EventBus, files_dir: Path, *, max_bytes: int, clients: Any = None, log: Any = None,
        rights: Any = None,
    ) -> None:
        self.bus, self.files_dir, self.max_bytes = bus, files_dir, max_bytes
        self._clients = clients
        #: The person registry's rights (``current()``: the principal of the turn sending), or None.
        self.rights = rights
        #: The conversation log (``TextLog``) the chat history is read from; None without memory.
        self.log = log

    async def send(self, payload: str, meta: dict[str, Any] | str | None = None, type: str = "text") -> str:
        """Show ``payload`` in the browser; returns what happened, for the model.

        Raises:
            ChannelSendError: an unknown type, or a file that is missing or too large.
        """
        if isinstance(meta, str):
            try:
                meta = json.loads(meta) if meta.strip() else {}
            except ValueError:
                meta = {}
        meta = meta if isinstance(meta, dict) else {}
        if type == "text" and "source" in meta and not meta.get("proactive"):
            return "shown"  # the reply of a turn that came in on the web UI: its agent_output shows it
        data: dict[str, Any] = {"kind": "channel_output", "output_type": type, "channel": CHANNEL,
                                "source": str(meta.get("source") or "agent")}
        if meta.get("proactive"):
            data["input_channel"] = meta.get("input_channel", "")
        if type == "text":
            data["content"] = payload
        elif type in ("image", "file"):
            data.update(await self._attach(payload))
            data["content"] = str(meta.get("caption") or "")
        else:
            raise ChannelSendError(f"webui cannot send type {type!r}; use text, image or file")
        who = self._who()
        data.update(who)
        if self.log is not None:
            # Kept in the conversation log, so the history shows it after a reload; a file is a
            # Markdown link (an image an inline image) to its /files/ address.
            await self.log.aappend("assistant", _as_text(data), channel=CHANNEL, source=data["source"], **who)
        self.bus.publish("agent_output", data, source="webui")
        tabs = self._clients() if callable(self._clients) else None
        return "sent to the web UI" + (f" ({tabs} open tabs)" if tabs is not None else "")

    def _who(self) -> dict[str, str]:
        """The person and thread of the turn sending (a reminder's: whoever set it), so only that
        person's page shows it and their thread keeps it; ``{}`` outside a turn (the owner's)."""
        principal = self.rights.current() if self.rights is not None else None
        if principal is None or principal.role == "system":
            return {}
        return {"person": principal.person, "thread": thread_of(principal)}

    async def _attach(self, payload: str) -> dict[str, Any]:
        target = payload.strip()
        if target.startswith(("http://", "https://")):
            return {"url": target, "name": target.rsplit("/", 1)[-1] or target}
        path = Path(target).expanduser()
        if not path.is_file():
            raise ChannelSendError(f"no such file: {target!r}; send a local file path or an http(s) URL")
        size = path.stat().st_size
        if size > self.max_bytes:
            raise ChannelSendError(f"{path.name} is {size} bytes; the web UI takes at most {self.max_bytes}")
        name = stored_name(path.name)
        await asyncio.to_thread(self._copy, path, name)
        return {"url": f"/files/{name}", "name": path.name, "size": size, "stored": name}

    def _copy(self, path: Path, name: str) -> None:
        self.files_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with atomic_file(self.files_dir / name) as fh, open(path, "rb") as src:
            shutil.copyfileobj(src, fh)
