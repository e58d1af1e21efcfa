"""Backlog triage and status answers: nobody waits silently behind a long turn.

The agent runs one turn at a time. When the turn in progress has run longer than
``offload_after`` (``core.agent.offload_after``, 5 minutes by default, as in the original)
and inputs wait, a temporary triage assistant looks at the waiting inputs, oldest first, each
once, at most ``offload_max_inputs`` at a time (each look is a recall and model calls: the
next waiting input gets its look when one of them has finished). It has every output
channel's tools, no input channels and only read-only memory and knowledge tools. For each
input it either

- answers it from memory and knowledge: the answer is delivered to the sender's channel,
  recorded in memory like any reply, and the input leaves the queue (the main agent does not
  answer it again); or
- replies ``[BUSY]``: the sender gets "忙碌中，请稍候" (or the English notice, in the sender's
  language) with an estimate, and the input stays queued for the main agent.

A triage answer that arrives after the main agent already took the input is dropped.

Status questions ("你在做什么？", "what are you doing?") asked while a turn runs are answered at
once from the scheduler's state, without queueing and without cancelling the running turn,
whatever their interrupt level.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections import deque
from typing import Protocol

from homeagent_core.agent.channels import SEND_PREFIX
from homeagent_core.agent.reply import Reply
from homeagent_core.agent.residents import Residents
from homeagent_core.agent.scheduler import InputItem, Scheduler
from homeagent_core.agent.speaker import who_of
from homeagent_core.agent.turn import Turn
from homeagent_core.agent.turn_host import TurnHost
from homeagent_core.i18n import t

__all__ = [
    "BUSY_MARK",
    "READ_ONLY_TOOLS",
    "Triage",
    "TriageHost",
    "busy_notice",
    "is_status_query",
    "status_text",
]

log = logging.getLogger(__name__)

#: What the triage assistant answers when it cannot answer from memory.
BUSY_MARK = "[BUSY]"
#: Read-only memory and knowledge tools the triage assistant may use.
READ_ONLY_TOOLS = frozenset(
    {
        "memory_recall",
        "memory_introspect",
        "memory_path",
        "person_query",
        "person_network",
        "knowledge_search",
        "knowledge_list",
        "get_plugin_tools",
        "output_list_channels",
    }
)
#: Guess of one turn's length before any turn finished (seconds).
DEFAULT_TURN_SECONDS = 30.0

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_STATUS_ZH = re.compile(r"(你|您)?(现在|正在|在)(做|干|忙|搞)(什么|啥|嘛|些什么)|忙什么|在忙吗|进度(如何|怎么样)")
_STATUS_EN = re.compile(
    r"\b(what are you (doing|up to|working on)|what're you doing|are you busy|what's your status)\b", re.I
)


def is_zh(text: str) -> bool:
    return bool(_CJK.search(text))


def is_status_query(text: str) -> bool:
    """Whether ``text`` is only a short question about what the agent is doing."""
    stripped = text.strip()
    return len(stripped) <= 40 and bool(_STATUS_ZH.search(stripped) or _STATUS_EN.search(stripped))


def _minutes(seconds: float) -> int:
    return max(1, math.ceil(seconds / 60))


def _took(seconds: float, zh: bool) -> str:
    minutes, secs = divmod(int(seconds), 60)
    if zh:
        return f"{minutes} 分 {secs} 秒" if minutes else f"{secs} 秒"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def busy_notice(text: str, estimate_s: float) -> str:
    """The busy notice, in the language of ``text``."""
    return t("zh" if is_zh(text) else "en", "notice.busy", minutes=_minutes(estimate_s))


class TriageHost(TurnHost, Protocol):
    """What triage and status answers use of the kernel: what a turn needs, the turn in
    progress, the input queue and the residents (for "what are you doing?")."""

    turn: Turn | None
    scheduler: Scheduler
    residents: Residents


def status_text(kernel: TriageHost, question: str) -> str:
    """What the agent is doing now, from the scheduler's state, in the language of ``question``."""
    zh = is_zh(question)
    turn = kernel.turn
    waiting = len(kernel.scheduler)
    residents = [r for r in kernel.residents.agents.values() if r.current is not None]
    if turn is None:
        main = "我现在空闲，可以直接问我。" if zh else "I'm free right now; go ahead."
    else:
        item = turn.item
        elapsed = _took(time.monotonic() - turn.started, zh)
        snippet = item.text.strip().replace("\n", " ")[:40]
        if zh:
            main = (
                f"我正在处理来自 {item.source or item.channel}（{item.channel}）的「{snippet}」，已进行 {elapsed}，"
                f"当前：{_activity_zh(turn.activity)}（第 {turn.rounds + 1} 轮）。"
            )
        else:
            main = (
                f"I'm working on \"{snippet}\" from {item.source or item.channel} ({item.channel}) for {elapsed}; "
                f"right now: {turn.activity} (round {turn.rounds + 1})."
            )
    if zh:
        parts = [main, f"还有 {waiting} 条消息在排队。" if waiting else "没有其他消息在排队。"]
        if residents:
            parts.append("常驻代理：" + "；".join(f"{r.name} {r.activity}" for r in residents) + "。")
    else:
        parts = [main, f"{waiting} message(s) are waiting." if waiting else "Nothing else is waiting."]
        if residents:
            parts.append("Residents: " + "; ".join(f"{r.name} {r.activity}" for r in residents) + ".")
    return " ".join(parts) if not zh else "".join(parts)


def _activity_zh(activity: str) -> str:
    if activity.startswith("tool "):
        return f"调用工具 {activity[5:]}"
    return {"thinking": "思考中", "starting": "准备中"}.get(activity, activity)


class Triage:
    """The backlog-triage watcher of one kernel (``kernel.triage``)."""

    def __init__(self, kernel: TriageHost) -> None:
        self.kernel = kernel
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._passes: set[asyncio.Task[None]] = set()
        #: Triage passes (one per input) in flight; never more than ``offload_max_inputs``.
        self._looking: set[asyncio.Task[None]] = set()
        self.turn_seconds: deque[float] = deque(maxlen=20)
        self.answered = 0
        self.noticed = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self.kernel.settings.offload_after <= 0 or self._task is not None:
            return
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="homeagent-triage")

    async def aclose(self) -> None:
        tasks = [t for t in (self._task, *self._passes) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self._task = None

    def poke(self) -> None:
        """Something changed (an input arrived, a turn started): look again."""
        self._wake.set()

    def turn_finished(self, seconds: float) -> None:
        self.turn_seconds.append(seconds)

    # ------------------------------------------------------------------ watching

    @property
    def in_flight(self) -> int:
        """Triage passes running now."""
        return len(self._looking)

    def _eligible(self) -> list[InputItem]:
        """The oldest waiting inputs not triaged yet, as many as there are free triage slots."""
        free = self.kernel.settings.offload_max_inputs - len(self._looking)
        if free <= 0:
            return []
        return [
            item
            for item in self.kernel.scheduler.waiting()
            if not item.extra.get("triaged") and not item.channel.startswith("_") and not item.stopped
        ][:free]

    async def _watch(self) -> None:
        after = self.kernel.settings.offload_after
        while True:
            turn = self.kernel.turn
            timeout: float | None = None
            eligible = self._eligible() if turn is not None else []
            if turn is not None and eligible:
                due = turn.started + after - time.monotonic()
                if due <= 0:
                    self._triage(eligible)
                    continue
                timeout = due
            self._wake.clear()
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _triage(self, items: list[InputItem]) -> None:
        for item in items:
            item.extra["triaged"] = True
            task = asyncio.get_running_loop().create_task(self._one(item), name="homeagent-triage-pass")
            self._passes.add(task)
            self._looking.add(task)
            task.add_done_callback(self._pass_done)

    def _pass_done(self, task: asyncio.Task[None]) -> None:
        self._passes.discard(task)
        self._looking.discard(task)
        self.poke()  # a triage slot is free: the next waiting input may get its look

    def estimate(self, item: InputItem) -> float:
        """Seconds until the main agent probably gets to ``item``."""
        typical = sum(self.turn_seconds) / len(self.turn_seconds) if self.turn_seconds else DEFAULT_TURN_SECONDS
        turn = self.kernel.turn
        current = max(typical, time.monotonic() - turn.started) if turn is not None else 0.0
        waiting = self.kernel.scheduler.waiting()
        ahead = waiting.index(item) if item in waiting else 0
        return current + ahead * typical

    async def _one(self, item: InputItem) -> None:
        try:
            text = await self._ask(item)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("triage of the input from %s on %s failed", item.source, item.channel, exc_info=True)
            text = BUSY_MARK
        kernel = self.kernel
        if not text.strip() or BUSY_MARK in text:
            if item in kernel.scheduler.waiting():
                notice = busy_notice(item.text, self.estimate(item))
                self.noticed += 1
                await self._deliver(item, notice, "busy")
            return
        if not kernel.scheduler.remove(item):
            log.info("triage answer for the input from %s dropped: the main agent took it", item.source)
            return
        self.answered += 1
        await self._answer(item, text)

    async def _ask(self, item: InputItem) -> str:
        kernel = self.kernel
        # the same principal as the waiting input (its door's claim): recall and the read-only
        # tools then see only what the asker may see, never the owner's view
        shadow = InputItem(text=item.text, channel=item.channel, source=item.source, no_memory=True,
                           extra={k: v for k, v in item.extra.items() if k == "principal"},
                           shared_door=item.shared_door)
        turn = Turn(kernel, shadow)
        names = [n for n in kernel.tools.names() if n in READ_ONLY_TOOLS or n.startswith(SEND_PREFIX)]
        running = kernel.turn
        doing = running.item.text.strip()[:80] if running is not None else ""
        blocks: list[str] = []
        memory = kernel.memory
        if memory is not None and item.recall_policy != "none":
            try:
                blocks = list(await memory.recall(turn.ctx))
            except Exception:
                log.warning("triage recall failed", exc_info=True)
        system = "\n\n".join(
            [
                kernel.prompt.head(),
                "你是临时的分流助手：主代理正忙于一项长任务"
                + (f"（「{doing}」）" if doing else "")
                + "，下面这条消息在排队。只能用只读的记忆和知识工具。"
                "如果凭记忆和知识就能可靠地回答，直接给出简短回答（用提问者的语言）；"
                f"否则（需要执行操作、需要主代理的工作结果，或你不确定）只回复 {BUSY_MARK}，不要编造。",
                *blocks,
            ]
        )
        return await turn.run_plain(system, names, kernel.settings.offload_max_turns)

    async def _answer(self, item: InputItem, text: str) -> None:
        """Deliver a triage answer and record it like any reply."""
        kernel = self.kernel
        turn = Turn(kernel, item)
        ctx = turn.ctx
        if not item.no_memory:
            if kernel.memory is not None:
                await kernel.memory.record_input(ctx, item)
            if kernel.own_timeline:
                kernel.timeline.append(
                    "user", item.text, channel=item.channel, source=item.source, thread=turn.who["thread"]
                )
            ctx.final_text = text
            if kernel.own_timeline:
                kernel.timeline.append(
                    "assistant", text, channel=item.channel, source="triage", thread=turn.who["thread"]
                )
            if kernel.memory is not None:
                await kernel.memory.record_output(ctx)
        await self._deliver(item, text, "answer")
        kernel.scheduler.finished(item)
        reply = Reply(text, channel=item.channel, answered_by="triage")
        item.settle(reply)

    def answer_status(self, item: InputItem) -> Reply:
        """Answer a status question at once (delivered in the background); never queued, never remembered."""
        text = status_text(self.kernel, item.text)
        self.deliver_soon(item, text, "status")
        return Reply(text, channel=item.channel, answered_by="status")

    def deliver_soon(self, item: InputItem, text: str, kind: str) -> None:
        """Deliver ``text`` to ``item``'s channel in the background (from synchronous code)."""
        task = asyncio.get_running_loop().create_task(self._deliver(item, text, kind), name="homeagent-triage-send")
        self._passes.add(task)
        task.add_done_callback(self._passes.discard)

    async def _deliver(self, item: InputItem, text: str, kind: str) -> None:
        kernel = self.kernel
        kernel.bus.publish(
            "agent_output",
            # in the asker's thread only (the web UI shows each person their own threads' events)
            {"content": text, "channel": item.channel, "source": item.source, "triage": kind, **who_of(kernel, item)},
        )
        channel = kernel.channels.output(item.channel)
        if channel is not None and channel.send is not None:
            try:
                await kernel.channels.send(item.channel, text, {"source": item.source, "triage": kind}, "text")
            except Exception as exc:
                log.warning("triage %s could not be delivered to %s: %s", kind, item.channel, exc)
