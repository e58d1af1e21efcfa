"""System prompt assembly within a token budget, and the kernel's own conversation timeline.

Budget (as the original): ``target = min(context_window × 0.8, 600000)`` tokens. The fixed
parts (persona, output-channel rules, tool catalogue, the current input) are taken first;
of what is left, recalled memory may use at most one third and the timeline at most two
thirds. Budgets are ceilings, not targets.

Token counting uses a cheap estimate instead of a tokenizer, computed at C speed from the
UTF-8 length: every character outside ASCII counts as one token (CJK text is roughly one
token per character in common tokenizers) and ASCII text as one token per four characters.
It over-counts rather than under-counts for mixed text, which is the safe side for a budget.

The tool catalogue lists each plugin once (``name (N tools): first description``, cut at
60 characters); the model asks ``get_plugin_tools(plugin)`` for full definitions (the tool
definitions themselves are still sent with every request).
"""

from __future__ import annotations

import base64
import collections
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from homeagent_core.agent.channels import caps_names

if TYPE_CHECKING:
    from homeagent_core.agent.channels import ChannelRegistry
    from homeagent_core.agent.tools import ToolRegistry
    from homeagent_sdk.types import MediaAttachment

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "MAX_BUDGET",
    "PromptBuilder",
    "Timeline",
    "TimelineEvent",
    "estimate_tokens",
    "user_content",
]

MAX_BUDGET = 600_000

DEFAULT_SYSTEM_PROMPT = (
    "你是 HomeAgent，一个长期陪伴用户的个人助手。你记得过去的对话，按需调用工具，"
    "回答简洁、准确、诚实；不知道就说不知道。用户使用什么语言，就用什么语言回答。"
)


def estimate_tokens(text: str) -> int:
    """Cheap token estimate: non-ASCII characters count 1, ASCII characters 1/4."""
    n = len(text)
    if n == 0:
        return 0
    extra = len(text.encode("utf-8")) - n  # 2 extra bytes per CJK character, 1 for Latin-1...
    wide = min(n, (extra + 1) // 2)
    return wide + (n - wide + 3) // 4


@dataclass(slots=True)
class TimelineEvent:
    """One line of the recent conversation."""

    role: str
    content: str
    channel: str
    source: str
    timestamp: float
    tokens: int
    message: dict[str, Any]
    #: the conversation thread it belongs to (a turn's prompt shows only its own thread's lines)
    thread: str = "main"


class Timeline:
    """The recent conversation kept in memory (newest ``max_events``), for the prompt.

    This is the kernel's own working memory when no memory layer is plugged in; it is
    bounded, chronological and cheap to render (each event keeps its message and token count).
    """

    def __init__(self, max_events: int = 30) -> None:
        self._events: collections.deque[TimelineEvent] = collections.deque(maxlen=max(1, max_events))

    def append(
        self,
        role: str,
        content: str,
        *,
        channel: str = "",
        source: str = "",
        timestamp: float | None = None,
        thread: str = "main",
    ) -> TimelineEvent:
        event = TimelineEvent(
            role,
            content,
            channel,
            source,
            time.time() if timestamp is None else timestamp,
            estimate_tokens(content) + 4,
            {"role": role, "content": content},
            thread,
        )
        self._events.append(event)
        return event

    def __len__(self) -> int:
        return len(self._events)

    def events(self) -> list[TimelineEvent]:
        return list(self._events)

    def clear(self) -> None:
        self._events.clear()

    def resize(self, max_events: int) -> None:
        self._events = collections.deque(self._events, maxlen=max(1, max_events))

    def messages(
        self, budget: int, *, exclude: TimelineEvent | None = None, thread: str | None = None
    ) -> list[dict[str, Any]]:
        """The newest messages (of ``thread``, when given) that fit in ``budget`` tokens, oldest first."""
        out: list[dict[str, Any]] = []
        used = 0
        for event in reversed(self._events):
            if event is exclude or (thread is not None and event.thread != thread):
                continue
            used += event.tokens
            if used > budget:
                break
            out.append(event.message)
        out.reverse()
        return out


def user_content(
    text: str, attachments: Iterable[MediaAttachment] = (), accepts: Collection[str] | None = None
) -> str | list[dict[str, Any]]:
    """The ``content`` of a user message: plain text, or content blocks when media is attached.

    ``accepts`` names the media kinds the model takes (``image``, ``audio``; None = all). Media
    it cannot take becomes a note with its media id instead of a block it would reject.
    """
    blocks: list[dict[str, Any]] = []
    notes: list[str] = []
    for att in attachments:
        mime = att.mime or "application/octet-stream"
        kind = mime.split("/")[0]
        label = att.name or att.digest[:12] or "未命名"
        if att.data and kind in ("image", "audio") and accepts is not None and kind not in accepts:
            ref = f"，media_id {att.digest[:12]}" if att.digest else ""
            what = "图片" if kind == "image" else "音频"
            notes.append(f"[{what} {label} ({mime}{ref})：当前模型不能直接接收{what}]")
        elif att.data and kind == "image":
            url = f"data:{mime};base64,{base64.b64encode(att.data).decode('ascii')}"
            blocks.append({"type": "image_url", "image_url": {"url": url}})
        elif att.data and kind == "audio":
            url = f"data:{mime};base64,{base64.b64encode(att.data).decode('ascii')}"
            blocks.append({"type": "audio_url", "audio_url": {"url": url}})
        else:
            notes.append(f"[附件 {label} ({mime})]")
    body = " ".join([text, *notes]).strip() if notes else text
    if not blocks:
        return body
    return [{"type": "text", "text": body}, *blocks]


class PromptBuilder:
    """Builds the system prompt and the message list of a turn.

    :param system_prompt: the base instructions (``core.agent.system_prompt``).
    :param persona: the persona text (``core.agent.personal_prompt`` or
        ``<data>/personal/personal.md``), appended under its own heading.
    :param context_window: the model's context window in tokens.
    """

    def __init__(
        self, *, system_prompt: str = DEFAULT_SYSTEM_PROMPT, persona: str = "", context_window: int = 128_000
    ) -> None:
        self.system_prompt = system_prompt
        self.persona = persona
        self.context_window = context_window
        self._catalogue: tuple[int, str] = (-1, "")
        self._rules: dict[tuple[int, str, bool], str] = {}
        self._head: tuple[str, str, str] | None = None

    @property
    def target(self) -> int:
        """Total token budget of one request."""
        return int(min(self.context_window * 0.8, MAX_BUDGET))

    def head(self) -> str:
        """System prompt + persona."""
        key = (self.system_prompt, self.persona)
        if self._head is None or self._head[:2] != key:
            text = self.system_prompt.strip()
            if self.persona.strip():
                text = f"{text}\n\n## 人格设定\n{self.persona.strip()}"
            self._head = (*key, text)
        return self._head[2]

    def catalogue(self, tools: ToolRegistry) -> str:
        """Compact per-plugin tool summary (cached per registry version)."""
        if self._catalogue[0] == tools.version:
            return self._catalogue[1]
        lines = ["## 工具目录", "以下按插件列出可用工具；需要某插件的完整工具定义时调用 get_plugin_tools(plugin)。"]
        for plugin, defs in tools.by_plugin().items():
            first = (defs[0].description or defs[0].name).strip().splitlines()[0] if defs else ""
            if len(first) > 60:
                first = first[:59] + "…"
            lines.append(f"- {plugin or 'unknown'} ({len(defs)} tools): {first}")
        text = "\n".join(lines) if len(lines) > 2 else ""
        self._catalogue = (tools.version, text)
        return text

    def rules(self, channels: ChannelRegistry, channel: str, sync_reply: bool) -> str:
        """Output-channel rules for a turn that came in on ``channel``."""
        key = (channels.version, channel, sync_reply)
        cached = self._rules.get(key)
        if cached is not None:
            return cached
        lines = ["## 输出规则"]
        out = channels.output(channel)
        if sync_reply or (out is not None and out.sync):
            lines.append(f"当前输入来自通道 {channel}：直接用文本回复即可，回复会自动送达该通道。")
        elif out is not None:
            lines.append(f"当前输入来自异步通道 {channel}：回复不会自动送达，必须调用 output_send__{out.name} 发送。")
        if out is not None and channel != out.name:
            conversation = channel[len(out.name) + 1 :]
            meta = f'{{"conversation": "{conversation}"}}'
            lines.append(f"这是通道 {out.name} 的会话 {conversation}；另发消息到这里时 meta 用 {meta}。")
        else:
            lines.append(f"当前输入来自通道 {channel}：直接用文本回复。")
        if channels.outputs:
            lines.append("可用输出通道（调用 output_send__<通道> 主动发送；可多次调用，长消息可拆分发送）：")
            for c in channels.outputs.values():
                kinds = ",".join(caps_names(c.caps))
                lines.append(f"- {c.name}（{'同步' if c.sync else '异步'}；{kinds}）{c.description}")
        text = "\n".join(lines)
        if len(self._rules) > 256:
            self._rules.clear()
        self._rules[key] = text
        return text

    def build(
        self,
        *,
        channel: str,
        sync_reply: bool,
        tools: ToolRegistry,
        channels: ChannelRegistry,
        memory_blocks: list[str],
        current: dict[str, Any],
        current_tokens: int,
        timeline: Timeline | None,
        timeline_messages: list[dict[str, Any]] | None = None,
        exclude: TimelineEvent | None = None,
        thread: str | None = None,
    ) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """The messages of a turn and the budget figures used.

        ``timeline_messages`` (from a memory layer) replaces the kernel's own ``timeline``, of
        which only ``thread``'s lines are shown (all, when None).
        """
        parts = [self.head(), self.rules(channels, channel, sync_reply), self.catalogue(tools)]
        fixed_text = "\n\n".join(p for p in parts if p)
        fixed = estimate_tokens(fixed_text) + current_tokens
        remaining = max(0, self.target - fixed)
        memory_budget = remaining // 3
        memory_text, memory_used = _fit_blocks(memory_blocks, memory_budget)
        timeline_budget = remaining * 2 // 3
        if timeline_messages is None:
            history = timeline.messages(timeline_budget, exclude=exclude, thread=thread) if timeline is not None else []
        else:
            history = _fit_messages(timeline_messages, timeline_budget)
        system = f"{fixed_text}\n\n## 记忆\n{memory_text}" if memory_text else fixed_text
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, *history, current]
        stats = {
            "target": self.target,
            "fixed": fixed,
            "memory_budget": memory_budget,
            "memory_used": memory_used,
            "timeline_budget": timeline_budget,
            "timeline_messages": len(history),
        }
        return messages, stats


def _fit_blocks(blocks: list[str], budget: int) -> tuple[str, int]:
    """Join memory blocks in order while they fit; the first one that does not is cut."""
    kept: list[str] = []
    used = 0
    for block in blocks:
        if not block:
            continue
        cost = estimate_tokens(block)
        if used + cost <= budget:
            kept.append(block)
            used += cost
            continue
        room = budget - used
        if room > 16:
            # Cut by characters, proportionally to the estimate, leaving a marker.
            keep = max(1, int(len(block) * room / cost) - 2)
            kept.append(block[:keep] + "…")
            used += estimate_tokens(kept[-1])
        break
    return "\n\n".join(kept), used


def _fit_messages(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    used = 0
    for message in reversed(messages):
        content = message.get("content")
        used += estimate_tokens(content if isinstance(content, str) else str(content)) + 4
        if used > budget:
            break
        out.append(message)
    out.reverse()
    return out
