"""The kernel object: scheduler, event loop, stages, tools, channels, prompt and sub-agents.

``Kernel(host, bus, provider, settings=..., memory=..., data_dir=...)`` needs no config
store: the app maps config keys onto :class:`KernelSettings`. ``await kernel.start()`` runs
the registration hooks (tools, input and output channels), adds the kernel's own tools and
starts the event loop; ``await kernel.aclose()`` cancels what is in flight and fails what is
still waiting. ``kernel.io`` is the IO facade for the kernel and built-ins (``io_for(name,
external=True)`` gives an out-of-process plugin its clamped one); ``ask`` / ``stream`` are
the library entry points. ``host`` is the plugin host as the kernel sees it
(:class:`~homeagent_core.hookhost.HookHost`): the kernel never imports the plugins package.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, overload, runtime_checkable

from homeagent_core.agent.approvals import Rights
from homeagent_core.agent.channels import (
    CONSOLIDATION_CHANNEL,
    SEND_PREFIX,
    ChannelRegistry,
    PluginChannelRegistry,
)
from homeagent_core.agent.loop import AgentClosed, EventLoop, KernelIO
from homeagent_core.agent.prompt import PromptBuilder, Timeline
from homeagent_core.agent.reply import Reply
from homeagent_core.agent.resident_tool import resident_agents_tool
from homeagent_core.agent.residents import Residents
from homeagent_core.agent.scheduler import END_OF_STREAM, InputItem, Scheduler
from homeagent_core.agent.settings import KernelSettings
from homeagent_core.agent.stages import StageRunner
from homeagent_core.agent.subagents import CHILD_EXCLUDED_TOOLS, CHILD_TOOLS, SubAgents
from homeagent_core.agent.tools import PluginToolRegistry, ToolRegistry
from homeagent_core.agent.triage import Triage, is_status_query
from homeagent_core.agent.turn import Turn
from homeagent_core.agent.turn_host import TurnMemory
from homeagent_core.aio import await_me_maybe
from homeagent_core.events import EventBus
from homeagent_core.hookhost import HookHost
from homeagent_core.stream import RESET, ROUND
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.api import ChatProvider
from homeagent_sdk.errors import PluginError, ToolError, UsageError
from homeagent_sdk.types import ChannelDef, Event, InjectOptions, MediaAttachment, ToolDef

__all__ = ["KERNEL_PLUGIN", "Kernel", "KernelSettings", "SourceSwitcher", "StreamPart", "TurnMemory"]

log = logging.getLogger(__name__)

#: Owner name of the kernel's own tools.
KERNEL_PLUGIN = "kernel"
#: Longest persona ``persona_set`` (and the web UI) accepts.
PERSONA_MAX_CHARS = 20_000
CHILD_CHANNEL = "_child_"


@runtime_checkable
class SourceSwitcher(Protocol):
    """What a provider offers for the ``llm_list_sources`` / ``llm_set_source`` tools."""

    def list_sources(self) -> Any: ...

    def set_source(self, name: str) -> Any: ...


class Kernel:
    """The agent kernel. See the module docstring."""

    def __init__(
        self,
        host: HookHost,
        bus: EventBus,
        provider: ChatProvider,
        *,
        settings: KernelSettings | None = None,
        memory: TurnMemory | None = None,
        data_dir: Path | str | None = None,
    ) -> None:
        self.host = host
        self.bus = bus
        self.provider = provider
        self.settings = settings or KernelSettings()
        self.memory = memory
        self.data_dir = Path(data_dir) if data_dir is not None else None
        s = self.settings
        self.tools = ToolRegistry(default_timeout=s.tool_timeout, on_add=self._noted, on_remove=self._dropped)
        self.channels = ChannelRegistry()
        self.scheduler = Scheduler(
            capacity=s.queue_capacity,
            cooldown=s.preempt_cooldown,
            dedup_window=s.dedup_window,
            door_share=s.queue_capacity - s.queue_capacity // 4,
        )
        self.stages = StageRunner(host, timeout=s.stage_timeout, bus=bus)
        self.timeline = Timeline(s.max_context_size)
        self.prompt = PromptBuilder(
            system_prompt=s.system_prompt, persona=s.personal_prompt, context_window=s.context_window
        )
        self.children = SubAgents(
            self._run_child,
            max_running=s.max_children,
            max_depth=s.child_max_depth,
            max_per_turn=s.child_max_per_turn,
        )
        self.residents = Residents(self, s.residents)
        self.triage = Triage(self)
        self.io = KernelIO(self, KERNEL_PLUGIN, max_level=4)
        self._library_io = KernelIO(self, "library", max_level=4)
        self.loop = EventLoop(self.scheduler, self._run_item)
        self.own_timeline = memory is None or not hasattr(memory, "timeline")
        #: People, tool policy and approvals; set by the app (None: every tool allowed).
        self.rights: Rights | None = None
        self.turn: Turn | None = None
        self.started = False

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Collect plugin tools and channels, add the kernel tools, start the event loop."""
        if self.started:
            return
        await self._load_persona()
        self.register_plugins()
        self._add_kernel_tools()
        self.loop.start()
        self.started = True
        self.triage.start()
        await self.residents.start()

    def register_plugins(self) -> None:
        """Collect every plugin's tools and channels (``register_*`` hooks), once per plugin.

        Also usable without starting the kernel, to list what plugins contribute.
        """
        registrations: list[tuple[str, Callable[[str], Any]]] = [
            ("register_tools", lambda name: PluginToolRegistry(self.tools, name)),
            (
                "register_input_channels",
                lambda name: PluginChannelRegistry(self.channels, name, "input", self._on_channel("input")),
            ),
            (
                "register_output_channels",
                lambda name: PluginChannelRegistry(self.channels, name, "output", self._on_channel("output")),
            ),
        ]
        for hook, make in registrations:
            made: list[str] = []

            def factory(name: str, make: Callable[[str], Any] = make, made: list[str] = made) -> Any:
                made.append(name)
                return make(name)

            registered = self.host.call_register(hook, factory)
            for name in made:
                if name not in registered:  # failed: the host marked it; remove what it left
                    self.detach_plugin(name)

    async def aclose(self) -> None:
        """Cancel the turn and children in flight; fail inputs still waiting."""
        if not self.started:
            self.stages.close()
            return
        self.started = False
        await self.triage.aclose()
        await self.residents.aclose()
        await self.children.aclose()
        await self.loop.aclose()
        self.stages.close()

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _load_persona(self) -> None:
        if self.data_dir is None:
            return
        path = self.data_dir / "personal" / "personal.md"
        text = await asyncio.to_thread(_read_text, path)
        if text is not None and text.strip():
            self.prompt.persona = text

    # ------------------------------------------------------------------ plugins

    def _noted(self, tool: ToolDef) -> None:
        self.host.note_contribution(tool.plugin, "tools", tool.name)

    def _dropped(self, tool: ToolDef) -> None:
        self.host.drop_contribution(tool.plugin, "tools", tool.name)

    def _on_channel(self, kind: str) -> Callable[[ChannelDef], None]:
        def added(channel: ChannelDef) -> None:
            self.host.note_contribution(channel.plugin, f"{kind}_channels", channel.name)
            if kind == "output":
                for tool in self.channels.tools_for(channel.name):
                    self.tools.add(tool, plugin=channel.plugin)

        return added

    def attach_plugin(self, name: str) -> None:
        """Run ``register_tools`` / ``register_input_channels`` / ``register_output_channels`` of one plugin.

        For a plugin (re)loaded after start. A plugin whose registration fails has everything
        it registered removed again and is marked failed on the host.

        Raises:
            PluginError: registration failed.
        """
        hooks: list[tuple[str, Callable[[], Any]]] = [
            ("register_tools", lambda: PluginToolRegistry(self.tools, name)),
            (
                "register_input_channels",
                lambda: PluginChannelRegistry(self.channels, name, "input", self._on_channel("input")),
            ),
            (
                "register_output_channels",
                lambda: PluginChannelRegistry(self.channels, name, "output", self._on_channel("output")),
            ),
        ]
        for hook, make in hooks:
            if not any(handler.plugin_name == name for handler in self.host.handlers(hook)):
                continue
            try:
                self.host.call_registration(hook, name, **{self.host.spec_argname(hook): make()})
            except Exception as exc:
                self.detach_plugin(name)
                self.host.record_failure(name, exc)
                raise PluginError(f"plugin {name!r}: {hook} failed: {exc}", plugin_name=name) from exc

    def detach_plugin(self, name: str) -> list[str]:
        """Remove every tool and channel of ``name`` (before a reload, or after a crash)."""
        self.channels.remove_plugin(name)
        return self.tools.remove_plugin(name)

    # ------------------------------------------------------------------ kernel tools

    def _add_kernel_tools(self) -> None:
        tools = self.tools
        channels = self.channels

        def get_plugin_tools(plugin: str) -> str:
            """返回某个插件的全部工具定义（名称、描述、参数 JSON Schema）。

            Args:
                plugin: 插件名（见系统提示中的工具目录）
            """
            groups = tools.by_plugin()
            if plugin not in groups:
                raise ValueError(f"unknown plugin {plugin!r}; plugins with tools: {', '.join(groups)}")
            return json.dumps(
                [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in groups[plugin]],
                ensure_ascii=False,
            )

        def output_list_channels() -> str:
            """列出所有输出通道及其能力、是否同步、对应的发送工具。"""
            return json.dumps(channels.describe_outputs(), ensure_ascii=False)

        def input_channels() -> str:
            """列出所有输入通道及其记忆策略。"""
            return json.dumps(channels.describe_inputs(), ensure_ascii=False)

        for fn in (get_plugin_tools, output_list_channels, input_channels):
            if fn.__name__ not in tools:
                tools.add(fn, plugin=KERNEL_PLUGIN, parallel_safe=True)
        for child_tool in self.children.tool_functions():
            if getattr(child_tool, "__name__", "") not in tools:
                tools.add(child_tool, plugin=KERNEL_PLUGIN)
        if self.data_dir is not None and "persona_set" not in tools:
            tools.add(self._persona_set, plugin=KERNEL_PLUGIN, name="persona_set", serial=True)
        if "resident_agents" not in tools:
            tools.add(resident_agents_tool(self.residents), plugin=KERNEL_PLUGIN, serial=True)
        provider = self.provider
        if isinstance(provider, SourceSwitcher) and "llm_list_sources" not in tools:

            async def llm_list_sources() -> str:
                """列出已配置的 LLM 源及其状态。"""
                return _json(await await_me_maybe(provider.list_sources()))

            async def llm_set_source(name: str) -> str:
                """切换当前使用的 LLM 源。

                Args:
                    name: 源名称（见 llm_list_sources）
                """
                result = await await_me_maybe(provider.set_source(name))
                return _json(result) if result not in (None, True) else f"已切换到 LLM 源 {name}"

            tools.add(llm_list_sources, plugin=KERNEL_PLUGIN, parallel_safe=True)
            tools.add(llm_set_source, plugin=KERNEL_PLUGIN, serial=True)

    def modalities(self) -> frozenset[str] | None:
        """Media kinds the active source takes (``image``, ``audio``), or None when the provider
        does not say (then media goes to it as content blocks)."""
        probe = getattr(self.provider, "modalities", None)
        return frozenset(probe()) if callable(probe) else None

    async def _persona_set(self, content: str) -> str:
        """修改人格设定：整体替换人格文本，写入 personal/personal.md（网页设置页编辑的同一个文件），下一轮起生效。

        Args:
            content: 完整的新人格设定文本（会替换旧的全部内容）
        """
        text = content.strip()
        if not text:
            raise ToolError("persona_set needs the full new persona text; it was empty")
        if len(text) > PERSONA_MAX_CHARS:
            raise ToolError(f"the persona is {len(text)} characters; at most {PERSONA_MAX_CHARS} are allowed")
        assert self.data_dir is not None
        folder = self.data_dir / "personal"
        await asyncio.to_thread(_atomic_write, folder / "personal.md", text)
        await asyncio.to_thread(_atomic_write, folder / ".persona_choice", "custom")
        self.prompt.persona = text
        return f"人格设定已更新（{len(text)} 字），写入 {folder / 'personal.md'}，下一轮起生效。"

    # ------------------------------------------------------------------ inputs

    def io_for(self, source: str, *, external: bool = False, shared_door: bool = False) -> KernelIO:
        """The IO facade of one plugin; out-of-process ones are clamped to L3. ``shared_door``
        (a plugin's ``sdk.io``) limits the source to the scheduler's ``door_share`` of the queue."""
        return KernelIO(self, source, max_level=3 if external else 4, shared_door=shared_door)

    def make_item(
        self,
        text: str,
        channel: str,
        *,
        source: str,
        level: int = 0,
        options: InjectOptions | None = None,
        attachments: list[MediaAttachment] | None = None,
        reply: bool = False,
        sink: asyncio.Queue[Any] | None = None,
    ) -> InputItem:
        """An input with its channel's memory policy applied (options win over the channel)."""
        ch = self.channels.input(channel)
        opts = options or InjectOptions()
        cleaner = ch.cleaner if ch is not None else None
        if opts.cleaner_name:
            named = self.channels.input(opts.cleaner_name)
            if named is not None and named.cleaner is not None:
                cleaner = named.cleaner
        return InputItem(
            text=text,
            channel=channel,
            source=source,
            level=level,
            attachments=list(attachments or ()),
            no_memory=opts.no_memory or (ch.no_memory if ch is not None else False),
            context_policy=opts.context_policy or (ch.context_policy if ch is not None else ""),
            recall_policy=opts.recall_policy or (ch.recall_policy if ch is not None else ""),
            cleaner=cleaner,
            message_id=opts.message_id,
            reply=_reply_future() if reply or sink is not None else None,
            sink=sink,
            extra={"principal": opts.principal} if opts.principal is not None else {},
        )

    def submit(self, item: InputItem) -> InputItem:
        """Hand an input to the scheduler.

        Raises:
            UsageError: the kernel is not started.
            InputQueueFull: backpressure.
        """
        if not self.started:
            raise UsageError("the kernel is not running: `await kernel.start()` first (or use `async with`)")
        if self.turn is not None and not item.channel.startswith("_") and is_status_query(item.text):
            # "What are you doing?" while busy: answered now from the scheduler's state; the
            # running turn is neither queued behind nor cancelled, whatever the level.
            item.settle(self.triage.answer_status(item))
            return item
        self.scheduler.submit(item)
        self.triage.poke()
        return item

    def submit_self_input(self, text: str) -> asyncio.Future[Reply]:
        """Queue an internal job (memory consolidation); the future gets the model's answer.

        It runs on the pseudo output channel ``_consolidation_``, after waiting user inputs,
        is never recorded in memory and never sent to a channel.
        """
        if not self.started:
            raise UsageError("the kernel is not running: `await kernel.start()` first")
        future: asyncio.Future[Reply] = _reply_future()
        item = InputItem(text=text, channel=CONSOLIDATION_CHANNEL, source=KERNEL_PLUGIN, no_memory=True, reply=future)
        self.scheduler.submit_self(item)
        return future

    def stop(self) -> int:
        """Stop the running turn and drop what is queued now; returns how many inputs were dropped."""
        return self.scheduler.stop()

    # ------------------------------------------------------------------ library API

    async def ask(
        self, text: str, channel: str = "library", *, options: InjectOptions | None = None, timeout: float | None = None
    ) -> Reply:
        """Send ``text`` and wait for the reply (``str(reply)`` is its text)."""
        return await self._library_io.inject_input_sync(text, channel, options, timeout=timeout)  # type: ignore[return-value]

    @overload
    def stream(
        self,
        text: str,
        channel: str = "library",
        *,
        options: InjectOptions | None = None,
        source: str = "library",
        parts: Literal[False] = False,
    ) -> AsyncIterator[str]: ...

    @overload
    def stream(
        self,
        text: str,
        channel: str = "library",
        *,
        options: InjectOptions | None = None,
        source: str = "library",
        parts: Literal[True],
    ) -> AsyncIterator[StreamPart]: ...

    async def stream(
        self,
        text: str,
        channel: str = "library",
        *,
        options: InjectOptions | None = None,
        source: str = "library",
        parts: bool = False,
    ) -> AsyncIterator[Any]:
        """Send ``text`` and yield the reply's content deltas as they stream in.

        When the provider restarts a reply (a stream ``reset``), text already yielded is not
        repeated. Raises what the turn raised, after the deltas it produced. ``source`` names
        the sender (events; with ``options.message_id``, de-duplication). With ``parts=True``
        it yields :class:`StreamPart` items instead: ``content`` and ``reasoning`` deltas of
        this input's own turn in arrival order, then one ``done`` part carrying the final
        :class:`Reply`.
        """
        async for part in self.open_stream(text, channel, options=options, source=source, parts=parts):
            yield part

    def open_stream(
        self,
        text: str,
        channel: str = "library",
        *,
        options: InjectOptions | None = None,
        source: str = "library",
        parts: bool = False,
    ) -> AsyncIterator[Any]:
        """:meth:`stream`, with the input submitted now rather than at the first iteration.

        For callers that must learn about backpressure before they answer (an HTTP response
        whose headers are not sent yet).

        Raises:
            InputQueueFull: the input queue is full; nothing was submitted.
        """
        sink: asyncio.Queue[Any] = asyncio.Queue()
        item = self.make_item(text, channel, source=source, level=_level(options), options=options, sink=sink)
        thoughts: list[str] = []
        if parts:

            def on_reasoning(event: Event) -> None:
                # Only this input's turn: deltas of other turns on the same channel are not ours.
                turn = self.turn
                if turn is not None and turn.item is item:
                    thoughts.append(str(event.data.get("reasoning_content") or ""))
                    sink.put_nowait(_THOUGHT)

            unsubscribe = self.bus.subscribe(on_reasoning, "reasoning_delta", maxsize=100_000, label="stream")
            try:
                item = self.submit(item)
            except BaseException:
                unsubscribe()
                raise
            assert item.reply is not None
            # Ends with the turn, even if nobody ever iterates (a client that went away).
            item.reply.add_done_callback(lambda _reply: unsubscribe())
        else:
            item = self.submit(item)
        return self._deltas(item, sink, thoughts, parts)

    async def _deltas(
        self, item: InputItem, sink: asyncio.Queue[Any], thoughts: list[str], parts: bool
    ) -> AsyncIterator[Any]:
        assert item.reply is not None
        content, reasoning = _Replayed(), _Replayed()
        anything = False
        while True:
            delta = await sink.get()
            while thoughts:  # reasoning delivered before this delta came first
                out = reasoning.feed(thoughts.pop(0))
                if out:
                    yield StreamPart("reasoning", out)
            if delta is _THOUGHT:
                continue
            if delta is END_OF_STREAM:
                break
            if delta is ROUND:
                content.round()
                reasoning.round()
                continue
            if delta is RESET:
                content.reset()
                reasoning.reset()
                continue
            out = content.feed(delta)
            if out:
                anything = True
                yield StreamPart("content", out) if parts else out
        reply = await item.reply
        if not anything and str(reply):
            yield StreamPart("content", str(reply)) if parts else str(reply)
        if parts:
            full = reply.reasoning_content or ""
            if full.startswith(reasoning.emitted) and len(full) > len(reasoning.emitted):
                yield StreamPart("reasoning", full[len(reasoning.emitted) :])
            yield StreamPart("done", reply=reply)

    # ------------------------------------------------------------------ running inputs

    async def _run_item(self, item: InputItem) -> None:
        token = self.children.begin_turn()
        try:
            await self._run_top_level(item)
        finally:
            self.children.end_turn(token)

    async def _run_top_level(self, item: InputItem) -> None:
        if item.self_input:
            await self._run_consolidation(item)
            return
        turn = Turn(self, item)
        self.turn = turn
        self.scheduler.running = turn
        self.triage.poke()
        try:
            reply = await turn.run()
        except asyncio.CancelledError:
            for injected in turn.injected:
                injected.settle(AgentClosed("the turn this interrupt was injected into was cancelled"))
            raise
        except Exception as exc:
            for injected in turn.injected:
                injected.settle(exc)
            self.bus.publish(
                "agent_error", {"error": f"{type(exc).__name__}: {exc}", "channel": item.channel, **turn.who}
            )
            raise
        finally:
            self.triage.turn_finished(time.monotonic() - turn.started)
            self.scheduler.running = None
            self.turn = None
            self.scheduler.finished(item)
            for injected in turn.injected:
                self.scheduler.finished(injected)
        item.settle(reply)
        for injected in turn.injected:
            injected.settle(reply)

    async def _run_consolidation(self, item: InputItem) -> None:
        turn = Turn(self, item)
        self.scheduler.running = turn
        try:
            names = [n for n in self.tools.names() if not n.startswith(SEND_PREFIX) and n not in CHILD_EXCLUDED_TOOLS]
            system = (
                f"{self.prompt.head()}\n\n（内部整理任务：输出通道 {CONSOLIDATION_CHANNEL}，"
                "不要向用户发送消息，直接给出结论。）"
            )
            text = await turn.run_plain(system, names, self.settings.consolidation_max_turns)
        finally:
            self.scheduler.running = None
        item.settle(Reply(text, channel=CONSOLIDATION_CHANNEL, errors=turn.ctx.errors))

    async def _run_child(self, task: str, max_turns: int) -> str:
        item = InputItem(text=task, channel=CHILD_CHANNEL, source="spawn_child", no_memory=True)
        turn = Turn(self, item)
        # Runs in the child's own lineage: children of children only while above the depth limit.
        excluded = CHILD_EXCLUDED_TOOLS - (CHILD_TOOLS if self.children.may_spawn() else frozenset())
        names = [n for n in self.tools.names() if n not in excluded]
        system = (
            f"{self.prompt.head()}\n\n你是一个子代理：独立完成下面的任务（看不到主对话），完成后用文本给出最终结果。"
        )
        return await turn.run_plain(system, names, max_turns)

    def status(self) -> dict[str, Any]:
        """A snapshot for status pages: queue, turns, tools, channels."""
        return {
            "running": self.loop.running,
            "busy": self.turn is not None,
            "queued": len(self.scheduler),
            "self_queued": self.scheduler.pending_self,
            "turns": self.loop.turns,
            "failed_turns": self.loop.failures,
            "rejected_inputs": self.scheduler.rejected,
            "tools": len(self.tools),
            "input_channels": sorted(self.channels.inputs),
            "output_channels": sorted(self.channels.outputs),
            "children": {k: c.status for k, c in self.children.children.items()},
            "residents": {r.name: r.status for r in self.residents.agents.values()},
        }


@dataclass(frozen=True)
class StreamPart:
    """One item of ``Kernel.stream(..., parts=True)``.

    ``kind`` is ``"content"`` or ``"reasoning"`` (``text`` is the delta) or ``"done"``
    (``reply`` is the turn's :class:`Reply`, with usage and the full reasoning).
    """

    kind: str
    text: str = ""
    reply: Reply | None = None


#: Wakes a stream's consumer when a reasoning delta of its turn arrived on the bus.
_THOUGHT = object()


class _Replayed:
    """Text yielded in one model round; swallows what a restarted (reset) stream repeats."""

    def __init__(self) -> None:
        self.emitted = ""
        self.replay: str | None = None

    def round(self) -> None:
        self.emitted, self.replay = "", None

    def reset(self) -> None:
        self.replay = ""

    def feed(self, delta: str) -> str:
        """The part of ``delta`` not yielded yet ("" when it repeats earlier text)."""
        if self.replay is None:
            self.emitted += delta
            return delta
        self.replay += delta
        if self.emitted.startswith(self.replay):
            return ""
        common = len(self.emitted) if self.replay.startswith(self.emitted) else 0
        self.emitted, self.replay = self.replay, None
        return self.emitted[common:]


def _reply_future() -> asyncio.Future[Any]:
    """A future for a reply; its exception counts as seen even if the waiter gave up."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.add_done_callback(lambda f: None if f.cancelled() else f.exception())
    return future


def _level(options: InjectOptions | None) -> int:
    if options is None or options.priority is None:
        return 0
    return min(options.priority.rank, 4)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, text)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
