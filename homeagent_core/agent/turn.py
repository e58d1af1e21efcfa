"""One turn: an input in, one reply out, through the seven stages and the tool loop.

::

    on_input → record input (memory, durable) → prune → recall → prompt → pre_action
    tool loop (at most max_tool_turns rounds with tool calls):
        interrupts → model call (streamed) → post_action
        for each call: before_toolcall (reject / rewrite) → execute → after_toolcall
        exit when: no tool calls | all rejected | limit reached (then one last call without tools)
    record reply → before_output → deliver → after_output

``ctx.response`` set by any stage short-circuits straight to ``after_output``; ``ctx.drop``
set by ``on_input`` discards the input silently. An interrupt that preempts the turn cancels
the in-flight model call and is injected before the next call as a system message
``[打断消息][来源:<src>][输出通道:<ch>] <text>``; interrupts are never recorded in memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from homeagent_core.agent.approvals import CURRENT_PRINCIPAL
from homeagent_core.agent.channels import SEND_PREFIX
from homeagent_core.agent.model_answer import add_usage, assistant_message, read_answer, read_stream
from homeagent_core.agent.policy import Decision
from homeagent_core.agent.prompt import estimate_tokens, user_content
from homeagent_core.agent.reply import Reply
from homeagent_core.agent.scheduler import InputItem
from homeagent_core.agent.speaker import speaker, who_of
from homeagent_core.agent.tools import run_batch
from homeagent_core.agent.turn_host import TurnHost, TurnMemory
from homeagent_core.stream import RESET, ROUND
from homeagent_sdk.types import Principal, StageContext, ToolCall, ToolResult

# Reply, TurnHost, TurnMemory, speaker and who_of have modules of their own (reply.py, turn_host.py,
# speaker.py); they stay importable from here, as before.
__all__ = [
    "INTERRUPT_PREFIX", "RESET", "ROUND", "Reply", "Turn", "TurnHost", "TurnMemory", "interrupt_text", "speaker",
    "who_of",
]

log = logging.getLogger(__name__)

INTERRUPT_PREFIX = "[打断消息]"


def interrupt_text(item: InputItem) -> str:
    """The system message an interrupt becomes inside a running turn."""
    return f"{INTERRUPT_PREFIX}[来源:{item.source}][输出通道:{item.channel}] {item.text}"


class _Cancelled(Exception):
    """The model call was cancelled by an interrupt or a stop."""


class Turn:
    """The state of one turn; also the scheduler's handle on the running turn."""

    def __init__(self, kernel: TurnHost, item: InputItem) -> None:
        self.k = kernel
        self.item = item
        self.level = item.level
        #: Who the input comes from; rights are decided from this, never from ``ctx.principal``.
        self.principal: Principal | None = None
        #: Other people whose interrupts were injected into this turn: it then acts only with the
        #: rights all of them share.
        self.others: list[Principal] = []
        if kernel.rights is not None:
            self.principal = speaker(kernel, item)
        #: The conversation this input belongs to and who said it, on every event the turn publishes
        #: (the web UI shows each person only their own threads' events).
        self.who = who_of(kernel, item, self.principal)
        self.ctx = StageContext(
            raw_message=item.text,
            source=item.source,
            channel=item.channel,
            no_memory=item.no_memory or item.interrupt,
            interrupt=item.interrupt,
            attachments=list(item.attachments),
            principal=self.principal if kernel.rights is not None else item.extra.get("principal"),
        )
        self.accepting = False
        self.stopped = item.stopped
        self.injected: list[InputItem] = []
        self._pending: list[InputItem] = []
        self._llm_task: asyncio.Task[dict[str, Any]] | None = None
        self._usage: dict[str, Any] = {}
        self._sink = item.sink
        #: Tool names this turn may call (None: all); enforced by ``ToolRegistry.execute``.
        self.allowed: frozenset[str] | None = None
        #: The registry this turn's tool calls go to (a resident's own scoped one, or the kernel's).
        self.tools = kernel.tools
        #: When the turn started and what it is doing now (for status answers while it runs).
        self.started = time.monotonic()
        self.activity = "starting"
        self.rounds = 0
        #: Whether the model called an ``output_send__*`` tool (its reply then goes nowhere else).
        self.sent_explicitly = False

    # ------------------------------------------------------------------ scheduler handle

    def accepts_interrupts(self, item: InputItem | None = None) -> bool:
        """Whether an interrupt may be injected now: only while the turn is listening, and only
        one of the same conversation thread. Someone else's thread's interrupt waits for a
        turn of its own, so no turn's prompt holds another conversation's words."""
        if not (self.accepting and not self.stopped):
            return False
        return item is None or self._thread_of(item) == self.who["thread"]

    def _thread_of(self, item: InputItem) -> str:
        return who_of(self.k, item)["thread"]

    def interrupt(self, item: InputItem) -> None:
        """Inject ``item`` before the next model call, cancelling the one in flight."""
        self._note_speaker(item)
        self._pending.append(item)
        self.injected.append(item)
        self.level = max(self.level, item.level)
        task = self._llm_task
        if task is not None and not task.done():
            task.cancel()

    def stop(self) -> None:
        """Cancel the in-flight model call and end the turn without a reply."""
        self.stopped = True
        task = self._llm_task
        if task is not None and not task.done():
            task.cancel()

    # ------------------------------------------------------------------ main path

    async def run(self) -> Reply:
        """Run the whole turn for ``self.item``."""
        token = CURRENT_PRINCIPAL.set(self.principal)
        try:
            return await self._run()
        finally:
            CURRENT_PRINCIPAL.reset(token)

    async def _run(self) -> Reply:
        k, item, ctx = self.k, self.item, self.ctx
        if k.channels.output(item.channel) is not None:
            k.channels.last_active = item.channel
        k.bus.publish(
            "raw_input",
            {"text": item.text, "channel": item.channel, "source": item.source, "interrupt": item.interrupt,
             "attachments": [{"name": a.name, "mime": a.mime} for a in item.attachments or ()], **self.who},
        )
        await k.stages.run("on_input", ctx)
        if ctx.drop:
            return Reply("", channel=item.channel, dropped=True, errors=ctx.errors)
        if ctx.response is not None:
            return await self._short_circuit(recorded=False)
        record = not item.interrupt
        recorded_event = None
        if record:
            if k.memory is not None:
                await k.memory.record_input(ctx, item)
            if k.own_timeline:
                recorded_event = k.timeline.append(
                    "user", ctx.raw_message, channel=item.channel, source=item.source, thread=self.who["thread"]
                )
            if k.memory is not None:
                await k.memory.prune(ctx)
        blocks: list[str] = []
        if k.memory is not None:
            blocks = list(await k.memory.recall(ctx))
        ctx.memory = [{"type": "recall", "text": b} for b in blocks]
        current = {"role": "user", "content": user_content(ctx.raw_message, ctx.attachments, k.modalities())}
        history = None
        if not k.own_timeline and k.memory is not None:
            timeline_fn: Callable[..., Any] = k.memory.timeline  # type: ignore[attr-defined]
            history = await timeline_fn(ctx, k.prompt.target)
        messages, stats = k.prompt.build(
            channel=item.channel,
            sync_reply=item.reply is not None,
            tools=k.tools,
            channels=k.channels,
            memory_blocks=blocks,
            current=current,
            current_tokens=estimate_tokens(ctx.raw_message),
            timeline=k.timeline,
            timeline_messages=history,
            exclude=recorded_event,
            thread=self.who["thread"],
        )
        ctx.context_msgs = messages
        ctx.extra["budget"] = stats
        if self.stopped:
            ctx.response = ""
            return await self._short_circuit(recorded=record)
        await k.stages.run("pre_action", ctx)
        if ctx.response is not None:
            return await self._short_circuit(recorded=record)
        self.accepting = True
        try:
            final = await self.tool_loop(ctx, ctx.context_msgs, self._offered(None), k.settings.max_tool_turns)
        finally:
            self.accepting = False
        if self.stopped:
            ctx.response = ""
            return await self._short_circuit(recorded=record)
        if ctx.response is not None:
            return await self._short_circuit(recorded=record)
        ctx.final_text = final
        if record:
            await self._record_output()
        await k.stages.run("before_output", ctx)
        await self._deliver(ctx.final_text)
        await k.stages.run("after_output", ctx)
        return self._reply(ctx.final_text)

    async def _short_circuit(self, *, recorded: bool) -> Reply:
        """``ctx.response`` is the reply: deliver it and run ``after_output`` only."""
        ctx = self.ctx
        ctx.final_text = ctx.response or ""
        if recorded and not self.stopped and ctx.final_text:
            await self._record_output()
        if not self.stopped:
            await self._deliver(ctx.final_text)
        await self.k.stages.run("after_output", ctx)
        return self._reply(ctx.final_text)

    async def _record_output(self) -> None:
        k, ctx = self.k, self.ctx
        if k.own_timeline and ctx.final_text:
            k.timeline.append(
                "assistant", ctx.final_text, channel=ctx.channel, source="agent", thread=self.who["thread"]
            )
        if k.memory is not None:
            await k.memory.record_output(ctx)

    async def _deliver(self, text: str) -> None:
        """Publish ``agent_output`` and hand the text to a sync output channel.

        A proactive input (an interrupt from a channel nobody reads, e.g. a timer firing) is
        answered on the channel the person last talked on, unless the model already sent
        something itself with ``output_send__*``.
        """
        k, ctx = self.k, self.ctx
        channel = k.channels.output(ctx.channel)
        target = ctx.channel
        meta: dict[str, Any] = {"source": ctx.source}
        if channel is None and ctx.interrupt and not self.sent_explicitly and k.channels.last_active:
            target = k.channels.last_active
            channel = k.channels.output(target)
            meta = {"source": ctx.source, "proactive": True, "input_channel": ctx.channel}
        data: dict[str, Any] = {
            "content": text,
            "channel": ctx.channel,
            "source": ctx.source,
            "reasoning_content": ctx.reasoning_content,
            "usage": dict(self._usage),
            **self.who,
        }
        if target != ctx.channel:
            data["delivered_to"] = target
        k.bus.publish("agent_output", data)
        if channel is not None and (channel.sync or target != ctx.channel) and text:
            try:
                await k.channels.send(target, text, meta, "text")
            except Exception as exc:
                ctx.errors.append(f"deliver: {exc}")
                log.warning("reply could not be delivered to channel %s: %s", target, exc)

    def _reply(self, text: str) -> Reply:
        ctx = self.ctx
        return Reply(
            text,
            usage=self._usage,
            reasoning_content=ctx.reasoning_content,
            channel=ctx.channel,
            stopped=self.stopped,
            interrupted=bool(self.injected) or ctx.interrupt,
            errors=ctx.errors,
            tool_results=ctx.tool_results,
        )

    # ------------------------------------------------------------------ plain runs

    async def run_plain(
        self, system: str, tool_names: list[str], max_turns: int, *, history: list[dict[str, Any]] | None = None
    ) -> str:
        """A turn without memory or output (sub-agents, residents, consolidation jobs).

        Only ``tool_names`` are offered to the model, and only they may run: a call to any
        other tool is refused as a failed tool result. The tool stages still run, so plugins
        that audit tool calls see these too. ``history`` (a resident's working context) goes
        between the system message and the input.
        """
        ctx = self.ctx
        self.allowed = frozenset(tool_names)
        tools = self._offered(tool_names)
        ctx.context_msgs = [
            {"role": "system", "content": system},
            *(history or ()),
            {"role": "user", "content": user_content(ctx.raw_message, ctx.attachments, self.k.modalities())},
        ]
        token = CURRENT_PRINCIPAL.set(self.principal)
        try:
            final = await self.tool_loop(ctx, ctx.context_msgs, tools, max_turns)
        finally:
            CURRENT_PRINCIPAL.reset(token)
        if ctx.response is not None:
            final = ctx.response
        ctx.final_text = final
        return final

    # ------------------------------------------------------------------ rights

    def _offered(self, names: list[str] | None) -> list[dict[str, Any]]:
        """The schemas of ``names`` (None: every tool) the turn's principal may be offered."""
        rights = self.k.rights
        if rights is None:
            return self.tools.schemas(names)
        assert self.principal is not None
        return self.tools.schemas(rights.offered(self.principal, names if names is not None else self.tools.names()))

    def _note_speaker(self, item: InputItem) -> None:
        """Remember the principal of an interrupt from someone else (see :attr:`others`)."""
        rights = self.k.rights
        if rights is None or self.principal is None:
            return
        other = rights.resolve(item.source, item.extra.get("principal"), self_input=item.self_input)
        if (other.person, other.role) != (self.principal.person, self.principal.role):
            self.others.append(other)

    def _shared(self, tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        """``tools`` less those another speaker of this turn may not use."""
        rights = self.k.rights
        if not self.others or not tools or rights is None:
            return tools
        names = {t["function"]["name"] for t in tools}
        for other in self.others:
            names &= set(rights.offered(other, names))
        return [t for t in tools if t["function"]["name"] in names]

    async def _refused(self, call: ToolCall) -> ToolResult | None:
        """None when the principal may run ``call`` now; else the result the model gets.

        With other speakers in the turn, the most restricted of them decides (deny, then ask).
        """
        rights = self.k.rights
        if rights is None:
            return None
        assert self.principal is not None
        tools, allowed = self.tools, self.allowed

        async def later(approved: ToolCall) -> ToolResult:
            return await tools.execute(approved, allowed=allowed)

        principal = self.principal
        if self.others:
            rank = {Decision.DENY: 0, Decision.ASK: 1, Decision.ALLOW: 2}
            speakers = [self.principal, *self.others]
            principal = min(speakers, key=lambda p: rank[rights.policy.decide(p, call.name)])
        return await rights.check(principal, call, self.ctx.channel, later, stopped=lambda: self.stopped)

    # ------------------------------------------------------------------ the tool loop

    async def tool_loop(
        self,
        ctx: StageContext,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_turns: int,
    ) -> str:
        """Model calls and tool rounds until the model answers without tools; returns its text."""
        k = self.k
        rounds = 0
        while True:
            if self.stopped:
                return ""
            self._drain_interrupts(ctx, messages)
            limited = rounds >= max_turns
            if limited and not ctx.extra.get("max_tool_turns_reached"):
                ctx.extra["max_tool_turns_reached"] = True
                messages.append(
                    {
                        "role": "system",
                        "content": f"已达到工具调用上限（{max_turns} 轮），不能再调用工具；请根据已有结果直接回答。",
                    }
                )
            self.rounds = rounds
            self.activity = "thinking"
            try:
                response = await self._call_model(ctx, messages, None if limited else self._shared(tools), rounds)
            except _Cancelled:
                continue
            ctx.llm_text = response["content"]
            ctx.reasoning_content = response["reasoning_content"]
            ctx.tool_calls = response["tool_calls"]
            ctx.token_usage = response["usage"]
            add_usage(self._usage, response["usage"])
            k.bus.publish(
                "agent_llm_chain",
                {
                    "round": rounds + 1,
                    "channel": ctx.channel,
                    "content": ctx.llm_text,
                    "reasoning_content": ctx.reasoning_content,
                    "tool_calls": [c.to_dict() for c in ctx.tool_calls],
                    "usage": response["usage"],
                    "finish_reason": response["finish_reason"],
                    **self.who,
                },
            )
            await k.stages.run("post_action", ctx)
            if ctx.response is not None:
                return ctx.response
            calls = list(ctx.tool_calls)
            if calls and limited:
                log.warning("model asked for %d tool calls after the tool-turn limit; ignored", len(calls))
                calls = []
            if not calls:
                if self._pending and not self.stopped:
                    # An interrupt arrived after the call finished: let the model see it.
                    messages.append({"role": "assistant", "content": ctx.llm_text})
                    continue
                return ctx.llm_text
            rounds += 1
            messages.append(assistant_message(ctx.llm_text, ctx.reasoning_content, calls))
            outcomes = await run_batch(
                calls, lambda c: self._one_call(ctx, c), parallel=self.tools.batch_is_parallel(calls)
            )
            for result, _rejected in outcomes:
                messages.append({"role": "tool", "tool_call_id": result.call_id, "content": result.result})
            shown = [a for r, _ in outcomes for a in r.attachments if a.data and a.mime.startswith("image/")]
            if shown:
                content = user_content("[工具返回的图片]", shown, k.modalities())
                if isinstance(content, list):  # only for a model that takes images
                    messages.append({"role": "user", "content": content})
            ctx.tool_results.extend(r for r, _ in outcomes)
            if all(rejected for _, rejected in outcomes):
                if ctx.llm_text:
                    return ctx.llm_text
                return "（工具调用均被拒绝：" + "；".join(r.result for r, _ in outcomes) + "）"

    async def _one_call(self, ctx: StageContext, call: ToolCall) -> tuple[ToolResult, bool]:
        k = self.k
        tool = self.tools.get(call.name)
        call.plugin = tool.plugin if tool is not None else ""
        if call.name.startswith(SEND_PREFIX):
            self.sent_explicitly = True
        started = time.perf_counter()
        self.activity = f"tool {call.name}"
        rejections = await k.stages.run("before_toolcall", ctx, call=call)
        if rejections:
            result = ToolResult(call.id, call.name, False, "工具调用被拒绝：" + "；".join(rejections), call.plugin)
            rejected = True
        else:
            rejected = False
            refused = await self._refused(call)
            if refused is not None:
                result = refused
            else:
                result = await self.tools.execute(call, allowed=self.allowed)
                await k.stages.run("after_toolcall", ctx, call=call, result=result)
        k.bus.publish(
            "tool_call",
            {
                "id": call.id,
                "name": call.name,
                "plugin": call.plugin,
                "arguments": call.arguments,
                "success": result.success,
                "rejected": rejected,
                "result": result.result[:2000],
                "ms": round((time.perf_counter() - started) * 1000, 3),
                "channel": ctx.channel,
                **self.who,
            },
        )
        return result, rejected

    def _drain_interrupts(self, ctx: StageContext, messages: list[dict[str, Any]]) -> None:
        if not self._pending:
            return
        for item in self._pending:
            messages.append({"role": "system", "content": interrupt_text(item)})
            ctx.extra.setdefault("interrupts", []).append(
                {"text": item.text, "source": item.source, "channel": item.channel, "level": item.level}
            )
        self._pending.clear()

    # ------------------------------------------------------------------ the model call

    async def _call_model(
        self, ctx: StageContext, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, rounds: int
    ) -> dict[str, Any]:
        settings = self.k.settings
        request: dict[str, Any] = {"model": settings.model, "messages": messages, "stream": settings.stream}
        if tools:
            request["tools"] = tools
        if settings.temperature is not None:
            request["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            request["max_tokens"] = settings.max_tokens
        if self._sink is not None:
            self._sink.put_nowait(ROUND)
        task = asyncio.get_running_loop().create_task(self._request(request, rounds))
        self._llm_task = task
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._llm_task = None
        if task.cancelled():
            self._emit_reset()
            raise _Cancelled
        return task.result()

    async def _request(self, request: dict[str, Any], rounds: int) -> dict[str, Any]:
        provider = self.k.provider
        timeout = self.k.settings.llm_timeout
        async with asyncio.timeout(timeout):
            if request["stream"] and hasattr(provider, "chat_stream"):
                return await read_stream(provider.chat_stream(request), rounds, self._emit, self._emit_reset)
            raw = await provider.chat(request)
        return read_answer(raw, rounds, self._emit)

    def _emit(self, name: str, text: str) -> None:
        key = "content" if name == "content_delta" else "reasoning_content"
        self.k.bus.publish(name, {key: text, "channel": self.ctx.channel, **self.who})
        if self._sink is not None and name == "content_delta":
            self._sink.put_nowait(text)

    def _emit_reset(self) -> None:
        self.k.bus.publish("content_delta", {"content": "", "reset": True, "channel": self.ctx.channel, **self.who})
        if self._sink is not None:
            self._sink.put_nowait(RESET)
