"""Resident sub-agents: long-lived helpers with their own queue, working context and scratch memory.

A resident (a shopping-list keeper, a reminder agent, a research errand) is created with a
name, a role and optionally a tool scope. Each one has

- its own :class:`~homeagent_core.agent.scheduler.Scheduler` and worker task, so a message to
  it never waits behind the main agent's turn (and the main agent never waits for it);
- its own working context (the last ``context_size`` messages of its own conversation);
- a temporary graph memory (a scratch graph under ``<data>/residents/<name>/graph.db``): its
  ``memory_*`` / ``person_*`` tools read and write that graph, never the main memory;
  memory-maintenance tools (merge, purge, edit, delete) are refused with an explicit message;
- a tool scope: a subset of the main agent's tools, enforced at execution (a call to any
  other tool is refused, whatever the model tries). No resident may create residents or
  spawn children.

When a resident finishes a message it reports back to the main agent as an input on the
channel ``_resident_`` (source ``resident:<name>``). ``reclaim`` merges what it stored in its
scratch graph into the main memory. ``destroy(residual="keep")`` hands its still-queued
messages to the main agent; ``residual="drop"`` discards them.

Durability: the definition, the queue (including the message being worked on) and the
working context are written to ``<data>/residents/<name>/state.json`` (tmp file, fsync,
rename) whenever they change, and reloaded when the kernel starts, so residents survive a
daemon restart and pick up where they were. Writes land in the order they were made, and a
write still running in its thread when the resident is destroyed does nothing once the folder
is gone (a destroyed resident never comes back).

Limits: at most ``max_residents``; each resident runs at most ``turns_per_hour`` messages
and ``tokens_per_hour`` model tokens in any hour (beyond that its messages wait, and
``inspect`` says until when).
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import logging
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from homeagent_core.agent.loop import InputHost
from homeagent_core.agent.reply import Reply
from homeagent_core.agent.resident_scope import (
    MEMORY_MAINTENANCE_TOOLS,
    MEMORY_PLUGIN,
    RESIDENT_EXCLUDED_TOOLS,
    SCRATCH_MEMORY_TOOLS,
    ScopedTools,
)
from homeagent_core.agent.resident_state import HOUR, Resident, ScratchLike, StateFile, read_states
from homeagent_core.agent.scheduler import InputItem, Scheduler
from homeagent_core.agent.settings import ResidentLimits
from homeagent_core.agent.turn import Turn
from homeagent_core.agent.turn_host import TurnHost
from homeagent_sdk.current import CURRENT_PRINCIPAL
from homeagent_sdk.errors import UsageError
from homeagent_sdk.types import InjectOptions, Principal, Triple

# The record of one resident and its state file (resident_state.py) and what a resident may call
# (resident_scope.py) have modules of their own; their public names stay importable from here.
__all__ = [
    "MEMORY_MAINTENANCE_TOOLS",
    "RESIDENT_CHANNEL",
    "RESIDENT_EXCLUDED_TOOLS",
    "Resident",
    "ResidentHost",
    "ResidentLimits",
    "Residents",
    "ScratchLike",
]

log = logging.getLogger(__name__)

#: Channel on which residents report back to the main agent.
RESIDENT_CHANNEL = "_resident_"
_NAME = re.compile(r"^[^\W_][\w-]{0,31}$")

#: Set while a resident's own turn runs: residents may not create residents.
_IN_RESIDENT: contextvars.ContextVar[str] = contextvars.ContextVar("homeagent_resident", default="")


class ResidentHost(TurnHost, InputHost, Protocol):
    """What the residents use of the main kernel: what a turn needs, where their reports go,
    the data folder their state lives in, and whether the kernel runs."""

    data_dir: Path | None
    started: bool


class Residents:
    """The kernel's resident sub-agents (``kernel.residents``; the library's ``agent.residents``).

    :param kernel: the main kernel (its provider, tools, stages and event bus are shared; see
        :class:`ResidentHost`).
    :param limits: pool limits.
    """

    def __init__(self, kernel: ResidentHost, limits: ResidentLimits | None = None) -> None:
        self.kernel = kernel
        self.limits = limits or ResidentLimits()
        self.agents: dict[str, Resident] = {}
        #: Opens a resident's scratch memory in a folder (set by the memory system; None: no memory).
        self.scratch_factory: Callable[[Path], ScratchLike] | None = None
        #: Merges triples into the main memory; returns how many were stored (set by the memory system).
        self.reclaimer: Callable[[list[Triple]], Awaitable[int]] | None = None
        self.started = False

    def use_memory(
        self,
        scratch_factory: Callable[[Path], ScratchLike],
        reclaimer: Callable[[list[Triple]], Awaitable[int]],
    ) -> None:
        """Give residents scratch memories and a way to merge what they learned (the memory system calls it)."""
        self.scratch_factory, self.reclaimer = scratch_factory, reclaimer

    @property
    def root(self) -> Path | None:
        data = self.kernel.data_dir
        return data / "residents" if data is not None else None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Reload the residents persisted under ``<data>/residents`` and start their workers."""
        self.started = True
        root = self.root
        if root is None:
            return
        states = await asyncio.to_thread(read_states, root)
        for state in states:
            try:
                resident = self._restore(state)
            except (KeyError, ValueError, TypeError, UsageError) as exc:
                self.agents.pop(str(state.get("name")), None)
                log.error("resident state of %r is damaged (%s); it was not restored", state.get("name"), exc)
                continue
            self._start_worker(resident)
            log.info("resident %s restored (%d queued)", resident.name, len(resident.scheduler))

    def _restore(self, state: dict[str, Any]) -> Resident:
        resident = self._make(str(state["name"]), str(state.get("role", "")), state.get("tools"), check=False)
        resident.created = float(state.get("created", resident.created))
        context = [m for m in state.get("context", []) if isinstance(m, dict)]
        resident.context = [{"role": str(m["role"]), "content": str(m["content"])} for m in context]
        resident.last_output = str(state.get("last_output", ""))
        resident.last_task = str(state.get("last_task", ""))
        resident.done = int(state.get("done", 0))
        resident.failed = int(state.get("failed", 0))
        resident.usage.extend((float(t), int(n)) for t, n in state.get("usage", []))
        creator = state.get("creator")
        resident.creator = Principal.from_dict(creator) if isinstance(creator, dict) else None
        for text in state.get("queue", []):  # accepted before the restart: all of it, even beyond capacity
            resident.scheduler.submit(self._item(resident, str(text)), restored=True)
        return resident

    async def aclose(self) -> None:
        """Stop every worker (what is queued stays persisted for the next start)."""
        self.started = False
        workers = [r.worker for r in self.agents.values() if r.worker is not None and not r.worker.done()]
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.wait(workers, timeout=5.0)
        for resident in self.agents.values():
            if resident.scratch is not None:
                resident.scratch.close()

    # ------------------------------------------------------------------ operations

    def list(self) -> list[dict[str, Any]]:
        """Every resident's summary."""
        return [r.summary() for r in self.agents.values()]

    def get(self, name: str) -> Resident:
        resident = self.agents.get(name)
        if resident is None:
            known = ", ".join(self.agents) or "none"
            raise UsageError(f"no resident named {name!r} (residents: {known}); create it first")
        return resident

    async def create(self, name: str, role: str, tools: builtins.list[str] | None = None) -> Resident:
        """Create and start a resident.

        Raises:
            UsageError: a bad or taken name, an empty role, unknown or excluded tools, the
                pool is full, or the caller is itself a resident.
        """
        if _IN_RESIDENT.get():
            raise UsageError(
                f"resident {_IN_RESIDENT.get()!r} may not create residents: only the main agent does that"
            )
        if name in self.agents:
            raise UsageError(f"a resident named {name!r} already exists; send it messages or destroy it first")
        if len(self.agents) >= self.limits.max_residents:
            raise UsageError(
                f"{len(self.agents)} residents exist, the limit (setting core.agent.residents.max); "
                "destroy one before creating another"
            )
        resident = self._make(name, role, tools)
        resident.creator = CURRENT_PRINCIPAL.get()
        self._start_worker(resident)
        await self._persist(resident)
        self.kernel.bus.publish("resident", {"type": "created", "name": name, "role": resident.role})
        return resident

    def _make(self, name: str, role: str, tools: builtins.list[str] | None, *, check: bool = True) -> Resident:
        if not isinstance(name, str) or not _NAME.match(name):
            raise UsageError(
                f"resident name {name!r} must be 1-32 letters, digits, '_' or '-', starting with a letter or digit"
            )
        if not isinstance(role, str) or not role.strip():
            raise UsageError("role must say what the resident is for, e.g. 'keeps the shopping list'")
        if tools is not None and check:
            if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
                raise UsageError("tools must be a list of tool names")
            available = set(self.kernel.tools.names()) | SCRATCH_MEMORY_TOOLS
            excluded = sorted(set(tools) & (RESIDENT_EXCLUDED_TOOLS | MEMORY_MAINTENANCE_TOOLS))
            if excluded:
                raise UsageError(
                    f"tools {excluded} cannot be given to a resident (residents create no residents, spawn "
                    "no children, switch no model source, change no persona and do no memory maintenance)"
                )
            unknown = sorted(set(tools) - available)
            if unknown:
                raise UsageError(f"unknown tools {unknown}; the main agent's tools: {', '.join(sorted(available))}")
        resident = Resident(
            name=name,
            role=role.strip(),
            tools=list(dict.fromkeys(tools)) if tools is not None else None,
            scheduler=Scheduler(capacity=self.limits.queue_capacity, dedup_window=0.0),
        )
        self.agents[name] = resident
        return resident

    def _scratch(self, resident: Resident) -> ScratchLike | None:
        """The resident's scratch memory, opened on first use (None without a data dir or memory)."""
        root = self.root
        if resident.scratch is None and root is not None and self.scratch_factory is not None:
            resident.scratch = self.scratch_factory(root / resident.name)
        return resident.scratch

    def _item(self, resident: Resident, text: str) -> InputItem:
        return InputItem(text=text, channel=f"resident:{resident.name}", source="resident_send", no_memory=True)

    async def send(self, name: str, text: str, *, wait: bool = False, timeout: float | None = 300.0) -> Reply | int:
        """Queue ``text`` for resident ``name``.

        Returns the queue position (1 = next), or with ``wait=True`` the resident's reply.

        Raises:
            UsageError: unknown resident, empty text, or the resident was stopped.
            InputQueueFull: its queue is full.
            TimeoutError: ``wait`` and no reply within ``timeout`` seconds (it stays queued).
        """
        resident = self.get(name)
        if not isinstance(text, str) or not text.strip():
            raise UsageError("text must say what the resident should do")
        if resident.stopped:
            raise UsageError(f"resident {name!r} is stopped; destroy it or create a new one")
        item = self._item(resident, text.strip())
        item.reply = asyncio.get_running_loop().create_future()
        item.reply.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        resident.scheduler.submit(item)
        await self._persist(resident)
        if not wait:
            return len(resident.scheduler)
        async with asyncio.timeout(timeout):
            reply: Reply = await asyncio.shield(item.reply)
        return reply

    def inspect(self, name: str) -> dict[str, Any]:
        """Everything about one resident: definition, state, queue, context, usage."""
        resident = self.get(name)
        out = resident.summary()
        out["context"] = list(resident.context)
        out["tool_scope"] = sorted(self.scope(resident))
        return out

    async def compress(self, name: str) -> str:
        """Summarise the resident's working context into one message; returns the summary."""
        resident = self.get(name)
        if not resident.context:
            return f"resident {name!r} has no working context to compress"
        transcript = "\n".join(f"{m['role']}: {m['content']}" for m in resident.context)
        response = await self.kernel.provider.chat(
            {
                "model": self.kernel.settings.model,
                "messages": [
                    {
                        "role": "system",
                        "content": "把下面的工作记录压缩成简短的要点摘要，保留事实、待办和结论，不要编造。",
                    },
                    {"role": "user", "content": transcript},
                ],
            }
        )
        summary = str(response.get("content") or "").strip()
        if not summary:
            raise UsageError("the model returned an empty summary; the context was left as it was")
        before = len(resident.context)
        resident.context = [{"role": "assistant", "content": f"[之前工作的摘要] {summary}"}]
        await self._persist(resident)
        log.info("resident %s context compressed from %d messages", name, before)
        return summary

    async def reclaim(self, name: str) -> dict[str, Any]:
        """Merge what the resident stored in its scratch memory into the main memory."""
        resident = self.get(name)
        scratch = self._scratch(resident)
        triples = await scratch.alearned() if scratch is not None else []
        if not triples:
            return {"name": name, "triples": 0, "stored": 0}
        if self.reclaimer is None:
            raise UsageError("the main memory is not available (the agent runs without memory); nothing was merged")
        stored = await self.reclaimer(triples)
        self.kernel.bus.publish("resident", {"type": "reclaimed", "name": name, "triples": len(triples)})
        return {"name": name, "triples": len(triples), "stored": stored}

    async def stop(self, name: str) -> int:
        """Stop the resident's work in progress and drop its queue; it stays defined. Returns dropped count."""
        resident = self.get(name)
        dropped = self._drain(resident, "stopped")
        running = resident.scheduler.running
        if running is not None:
            running.stop()
        await self._persist(resident)
        return dropped

    async def destroy(self, name: str, residual: Literal["keep", "drop"] = "keep") -> dict[str, Any]:
        """Stop and remove a resident; its queued messages go to the main agent (keep) or are dropped."""
        if residual not in ("keep", "drop"):
            raise UsageError(f"residual must be 'keep' or 'drop', got {residual!r}")
        resident = self.get(name)
        resident.stopped = True
        left = ([resident.current] if resident.current is not None else []) + resident.scheduler.drain()
        handed = 0
        if residual == "keep":
            for item in left:
                if self._to_main(resident, f"[常驻代理 {name} 已销毁，未完成的任务转交主代理] {item.text}"):
                    handed += 1
        for item in left:
            item.settle(UsageError(f"resident {name!r} was destroyed ({residual}); the message was not answered"))
        worker = resident.worker
        if worker is not None and not worker.done():
            worker.cancel()
            await asyncio.wait((worker,), timeout=5.0)
        if resident.scratch is not None:
            resident.scratch.close()
        del self.agents[name]
        root = self.root
        if root is not None:
            disk = resident.disk = resident.disk or StateFile(root / name)
            await asyncio.to_thread(disk.remove)
        self.kernel.bus.publish("resident", {"type": "destroyed", "name": name, "residual": residual})
        return {"name": name, "residual": residual, "pending": len(left), "handed_to_main": handed}

    def _drain(self, resident: Resident, why: str) -> int:
        items = resident.scheduler.drain()
        for item in items:
            item.settle(UsageError(f"resident {resident.name!r} was {why}; the message was dropped"))
        return len(items)

    # ------------------------------------------------------------------ working

    def scope(self, resident: Resident) -> set[str]:
        """The tool names the resident may call now."""
        registry = self._registry(resident)
        names = set(registry.names()) - RESIDENT_EXCLUDED_TOOLS - MEMORY_MAINTENANCE_TOOLS
        if resident.tools is not None:
            names &= set(resident.tools)
        return names

    def _registry(self, resident: Resident) -> ScopedTools:
        tools = self.kernel.tools
        scratch_memory = self._scratch(resident)
        if (
            resident.registry is not None
            and resident.registry_version == tools.version
            and (scratch_memory is None) == (resident.registry_scratch is None)
        ):
            return resident.registry
        registry = ScopedTools(default_timeout=tools.default_timeout)
        scratch = scratch_memory.tools() if scratch_memory is not None else []
        for tool in tools.tools():
            if tool.plugin == MEMORY_PLUGIN or tool.name in RESIDENT_EXCLUDED_TOOLS:
                continue  # the main memory's tools: replaced by the scratch memory's
            registry.put(tool)
        for tool in scratch:
            registry.put(tool)
        resident.registry, resident.registry_version = registry, tools.version
        resident.registry_scratch = scratch_memory
        return registry

    def _start_worker(self, resident: Resident) -> None:
        context = contextvars.copy_context()
        context.run(_IN_RESIDENT.set, resident.name)
        resident.worker = asyncio.get_running_loop().create_task(
            self._work(resident), name=f"resident-{resident.name}", context=context
        )

    async def _work(self, resident: Resident) -> None:
        while not resident.stopped:
            item = await resident.scheduler.next()
            resident.current = item
            try:
                await self._within_budget(resident)
                await self._run(resident, item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                resident.failed += 1
                log.error("resident %s failed on %r", resident.name, item.text[:80], exc_info=True)
                item.settle(exc)
            finally:
                resident.current = None
                resident.activity = "idle"
                resident.scheduler.running = None
            await self._persist(resident)

    async def _within_budget(self, resident: Resident) -> None:
        limits = self.limits
        while True:
            now = time.time()
            turns, tokens = resident.used(now)
            if turns < limits.turns_per_hour and tokens < limits.tokens_per_hour:
                resident.waiting_until = None
                return
            resident.waiting_until = resident.usage[0][0] + HOUR
            resident.activity = "waiting for its hourly budget"
            log.info("resident %s over its hourly budget until %s", resident.name, time.ctime(resident.waiting_until))
            await asyncio.sleep(max(0.0, resident.waiting_until - now))

    async def _run(self, resident: Resident, item: InputItem) -> None:
        kernel = self.kernel
        turn = Turn(kernel, item)
        turn.tools = self._registry(resident)
        resident.scheduler.running = turn
        resident.activity = f"working on: {item.text[:80]}"
        names = sorted(self.scope(resident))
        system = (
            f"{kernel.prompt.head()}\n\n你是常驻子代理「{resident.name}」，职责：{resident.role}。"
            "你有自己的工作上下文和临时记忆（memory_* 工具只读写你的临时记忆）。"
            "完成收到的消息后，用文本给出结果；结果会汇报给主代理。"
        )
        history = [{"role": m["role"], "content": m["content"]} for m in resident.context]
        text = await turn.run_plain(system, names, self.limits.max_tool_turns, history=history)
        usage = turn._usage
        # the unified usage shape (providers/wire.py): prompt / completion / total
        tokens = int(usage.get("total") or (usage.get("prompt") or 0) + (usage.get("completion") or 0))
        resident.usage.append((time.time(), tokens))
        if turn.stopped:
            item.settle(Reply("", channel=item.channel, stopped=True, errors=turn.ctx.errors))
            return
        resident.context += [{"role": "user", "content": item.text}, {"role": "assistant", "content": text}]
        del resident.context[: max(0, len(resident.context) - self.limits.context_size)]
        resident.last_task, resident.last_output = item.text, text
        resident.done += 1
        reply = Reply(
            text, usage=usage, channel=item.channel, errors=turn.ctx.errors, tool_results=turn.ctx.tool_results
        )
        item.settle(reply)
        kernel.bus.publish("resident", {"type": "output", "name": resident.name, "task": item.text, "content": text})
        if self.limits.report and text:
            self._to_main(resident, f"[常驻代理 {resident.name} 汇报] 任务：{item.text}\n结果：{text}")

    def _to_main(self, resident: Resident, text: str) -> bool:
        """Hand ``text`` to the main agent as an input on the resident channel: as its creator,
        in their own conversation, or from the door ``resident:<name>`` when no person created it."""
        kernel = self.kernel
        if not kernel.started:
            return False
        creator, source, options = resident.creator, f"resident:{resident.name}", None
        if creator is not None and creator.person:  # "resident_send" is a core door: it may name the person
            source, door = "resident_send", f"resident:{resident.name}"
            options = InjectOptions(principal=Principal(person=creator.person, door=door, thread=creator.thread))
        try:
            kernel.submit(kernel.make_item(text, RESIDENT_CHANNEL, source=source, options=options))
        except Exception as exc:
            log.warning("resident %s could not report to the main agent: %s", resident.name, exc)
            return False
        return True

    # ------------------------------------------------------------------ persistence

    async def _persist(self, resident: Resident) -> None:
        root = self.root
        if root is None or self.agents.get(resident.name) is not resident:
            return
        disk = resident.disk = resident.disk or StateFile(root / resident.name)
        # Numbered now, written in a thread: a cancelled caller (destroy cancels the worker) may
        # leave the thread running; the file object orders the writes and refuses them once removed.
        await asyncio.to_thread(disk.write, disk.number(), resident.state())


