"""Chat history for the web UI, assembled from bus events across every channel.

A user message starts on ``raw_input``; tool calls and reasoning attach to the pending
assistant message; ``agent_output`` completes it. At most 200 messages are kept, persisted
atomically to ``<plugin data>/chat_history.json`` at most every few seconds and on shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

from homeagent_sdk.types import Event

__all__ = ["ChatHistory"]

log = logging.getLogger(__name__)

HIDDEN_CHANNELS = frozenset({"_consolidation_", "http"})


class ChatHistory:
    """The last ``limit`` chat messages."""

    def __init__(self, path: Path, *, limit: int = 200, save_delay_s: float = 3.0) -> None:
        self.path = path
        self.limit = limit
        self.save_delay_s = save_delay_s
        self.messages: list[dict[str, Any]] = []
        self._pending: dict[str, Any] | None = None
        self._save_task: asyncio.Task[None] | None = None
        self._dirty = False
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("chat history %s unreadable (%s); starting empty", self.path, exc)
            return
        if isinstance(data, list):
            self.messages = [m for m in data if isinstance(m, dict) and "role" in m][-self.limit :]

    def handle(self, event: Event) -> None:
        """Bus subscriber."""
        data = event.data
        if data.get("channel") in HIDDEN_CHANNELS:
            return
        if event.name == "raw_input" and not data.get("interrupt"):
            self._append({"role": "user", "content": data.get("text", ""), "channel": data.get("channel", ""),
                          "time": event.timestamp})
            self._pending = {"role": "assistant", "content": "", "tools": [], "reasoning": "",
                             "channel": data.get("channel", "")}
        elif event.name == "tool_call" and self._pending is not None:
            self._pending["tools"].append(
                {"name": data.get("name"), "arguments": data.get("arguments"), "success": data.get("success"),
                 "result": str(data.get("result", ""))[:500]}
            )
        elif event.name == "agent_output":
            message = self._pending or {"role": "assistant", "tools": [], "channel": data.get("channel", "")}
            message["content"] = data.get("content", "")
            message["reasoning"] = data.get("reasoning_content", "") or message.get("reasoning", "")
            message["time"] = event.timestamp
            self._pending = None
            self._append(message)

    def _append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        del self.messages[: -self.limit]
        self._dirty = True
        self._schedule_save()

    def page(self, limit: int | None = None, before: int | None = None) -> dict[str, Any]:
        """``{messages, total, offset, has_more}``; ``before`` is an index into the history."""
        end = len(self.messages) if before is None else max(0, min(before, len(self.messages)))
        start = 0 if limit is None else max(0, end - limit)
        return {"messages": self.messages[start:end], "total": len(self.messages), "offset": start,
                "has_more": start > 0}

    def _schedule_save(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.save()
            return
        if self._save_task is None or self._save_task.done():
            self._save_task = loop.create_task(self._save_later())

    async def _save_later(self) -> None:
        await asyncio.sleep(self.save_delay_s)
        await asyncio.to_thread(self.save)

    def save(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.messages, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path)

    async def aclose(self) -> None:
        if self._save_task is not None and not self._save_task.done():
            self._save_task.cancel()
        self.save()
