"""Sub-agents: ``spawn_child(task, max_turns)`` runs a child tool loop in the background.

A child gets the task as its only input, the kernel's tools except ``llm_set_source`` and
``resident_agents`` (and except ``spawn_child`` / ``child_result`` once it is as deep as
children may go), no memory and no output channel of its own (it may still call ``output_send__*`` tools). The tool set
is enforced, not only offered: a call to any other tool is refused. ``child_result(task_id)``
reports whether it is still running, its answer, or why it failed. Task ids are ``child_1``,
``child_2``, ... per kernel.

Limits: ``max_running`` children at once; children of children only down to ``max_depth``
(a top-level turn is depth 0, its children depth 1); at most ``max_per_turn`` children in
all for one top-level turn, its children's children included. The depth and the shared
count travel with the running code in a context variable, so they follow the child's own
task and any tasks it starts.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated

__all__ = ["CHILD_EXCLUDED_TOOLS", "CHILD_TOOLS", "ChildTask", "SubAgents"]

log = logging.getLogger(__name__)

#: Tools a child may not call (at the depth limit, which is the default of 1).
CHILD_EXCLUDED_TOOLS = frozenset({"spawn_child", "child_result", "llm_set_source", "resident_agents"})
#: The tools that spawn and query children.
CHILD_TOOLS = frozenset({"spawn_child", "child_result"})

MIN_TURNS, MAX_TURNS, DEFAULT_TURNS = 1, 30, 5


@dataclass
class _Tree:
    """What one top-level turn and all of its descendants share: how many children they spawned."""

    spawned: int = 0


@dataclass(frozen=True)
class _Lineage:
    depth: int
    tree: _Tree


#: The lineage of the code running now (None outside any turn, e.g. a direct library call).
_LINEAGE: contextvars.ContextVar[_Lineage | None] = contextvars.ContextVar("homeagent_child_lineage", default=None)


@dataclass
class ChildTask:
    """One spawned child and its outcome."""

    task_id: str
    task: str
    max_turns: int
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    result: str | None = None
    error: str | None = None
    runner: asyncio.Task[str] | None = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "failed"
        if self.result is not None:
            return "done"
        return "running"


class SubAgents:
    """Spawns and tracks child runs.

    :param run_child: ``run_child(task, max_turns) -> answer`` (the kernel's child runner; it
        runs inside the child's lineage, so :meth:`depth` is the child's depth there).
    :param max_running: most children running at once.
    :param max_depth: deepest child level (1: only top-level turns spawn children).
    :param max_per_turn: most children one top-level turn spawns, descendants included.
    """

    def __init__(
        self,
        run_child: Callable[[str, int], Awaitable[str]],
        *,
        max_running: int = 8,
        max_depth: int = 1,
        max_per_turn: int = 16,
    ) -> None:
        self._run_child = run_child
        self.max_running = max_running
        self.max_depth = max_depth
        self.max_per_turn = max_per_turn
        self.children: dict[str, ChildTask] = {}
        self._ids = itertools.count(1)

    @staticmethod
    def begin_turn() -> contextvars.Token[_Lineage | None]:
        """Mark the code that follows as a new top-level turn (depth 0, nothing spawned yet)."""
        return _LINEAGE.set(_Lineage(0, _Tree()))

    @staticmethod
    def end_turn(token: contextvars.Token[_Lineage | None]) -> None:
        _LINEAGE.reset(token)

    @staticmethod
    def depth() -> int:
        """How deep the running code is: 0 in a top-level turn, 1 in its children, ..."""
        lineage = _LINEAGE.get()
        return lineage.depth if lineage is not None else 0

    def may_spawn(self) -> bool:
        """Whether the running code is shallow enough to spawn children."""
        return self.depth() < self.max_depth

    def running(self) -> int:
        return sum(1 for c in self.children.values() if c.status == "running")

    def spawn(self, task: str, max_turns: int = DEFAULT_TURNS) -> ChildTask:
        """Start a child for ``task``.

        Raises:
            ValueError: ``max_turns`` outside 1..30, empty task, the depth or per-turn count
                limit reached, or too many children running.
        """
        if not task.strip():
            raise ValueError("task must describe what the child should do")
        if not MIN_TURNS <= max_turns <= MAX_TURNS:
            raise ValueError(f"max_turns must be between {MIN_TURNS} and {MAX_TURNS}, got {max_turns}")
        lineage = _LINEAGE.get() or _Lineage(0, _Tree())
        if lineage.depth >= self.max_depth:
            raise ValueError(
                f"a child at depth {lineage.depth} may not spawn children: the limit is "
                f"{self.max_depth} level(s) (setting core.agent.child_max_depth); do the task yourself"
            )
        if lineage.tree.spawned >= self.max_per_turn:
            raise ValueError(
                f"this turn already spawned {lineage.tree.spawned} children, the limit "
                "(setting core.agent.child_max_per_turn); collect their results with child_result instead"
            )
        if self.running() >= self.max_running:
            raise ValueError(f"{self.max_running} children are already running; wait for one with child_result")
        lineage.tree.spawned += 1
        child = ChildTask(f"child_{next(self._ids)}", task, max_turns)
        context = contextvars.copy_context()
        context.run(_LINEAGE.set, _Lineage(lineage.depth + 1, lineage.tree))
        child.runner = asyncio.get_running_loop().create_task(self._run(child), name=child.task_id, context=context)
        self.children[child.task_id] = child
        return child

    async def _run(self, child: ChildTask) -> str:
        try:
            answer = await self._run_child(child.task, child.max_turns)
        except asyncio.CancelledError:
            child.error = "cancelled"
            raise
        except Exception as exc:
            log.error("child %s failed", child.task_id, exc_info=True)
            child.error = f"{type(exc).__name__}: {exc}"
            answer = ""
        else:
            child.result = answer
        finally:
            child.finished = time.monotonic()
        return answer

    def report(self, task_id: str) -> str:
        """What ``child_result`` answers for ``task_id``."""
        child = self.children.get(task_id)
        if child is None:
            known = ", ".join(self.children) or "none"
            raise KeyError(f"unknown task_id {task_id!r} (known: {known})")
        if child.status == "running":
            return f"{task_id} 仍在运行（已运行 {time.monotonic() - child.started:.0f} 秒），稍后再查询"
        if child.status == "failed":
            return f"{task_id} 失败：{child.error}"
        return child.result or ""

    async def wait(self, task_id: str, timeout: float = 30.0) -> ChildTask:
        """Wait (bounded) for a child to finish; returns it."""
        child = self.children[task_id]
        if child.runner is not None and not child.runner.done():
            async with asyncio.timeout(timeout):
                await asyncio.wait((child.runner,))
        return child

    async def aclose(self) -> None:
        """Cancel every running child."""
        tasks = [c.runner for c in self.children.values() if c.runner is not None and not c.runner.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # ------------------------------------------------------------------ tools

    def tool_functions(self) -> list[Callable[..., object]]:
        """The ``spawn_child`` and ``child_result`` tool functions."""

        async def spawn_child(
            task: Annotated[str, "子任务的完整描述（子代理看不到当前对话）"],
            max_turns: Annotated[int, {"minimum": MIN_TURNS, "maximum": MAX_TURNS}] = DEFAULT_TURNS,
        ) -> str:
            """启动一个子代理在后台执行任务，立即返回任务 ID；用 child_result(task_id) 取结果。

            Args:
                task: 子任务的完整描述（子代理看不到当前对话）
                max_turns: 子代理最多的工具调用轮数（1-30，默认 5）
            """
            child = self.spawn(task, max_turns)
            return (
                f"已启动子代理 {child.task_id}（最多 {max_turns} 轮）；"
                f'稍后调用 child_result(task_id="{child.task_id}") 获取结果'
            )

        async def child_result(task_id: Annotated[str, "spawn_child 返回的任务 ID，例如 child_1"]) -> str:
            """查询子代理任务的状态或结果。"""
            return self.report(task_id)

        return [spawn_child, child_result]
