"""What a resident sub-agent may call: a scope of the main agent's tools, never the ones only it may use.

No resident creates residents, spawns children, switches the model source or changes the
persona (:data:`RESIDENT_EXCLUDED_TOOLS`); only the main agent maintains memory
(:data:`MEMORY_MAINTENANCE_TOOLS`). A resident's :class:`ScopedTools` refuses those calls with
an explicit message whatever the model tries, and holds its scratch memory's tools
(:data:`SCRATCH_MEMORY_TOOLS`) in place of the main memory's.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from homeagent_core.agent.tools import ToolRegistry
from homeagent_sdk.types import ToolCall, ToolDef, ToolResult

__all__ = [
    "MEMORY_MAINTENANCE_TOOLS", "MEMORY_PLUGIN", "RESIDENT_EXCLUDED_TOOLS", "SCRATCH_MEMORY_TOOLS", "ScopedTools",
]

log = logging.getLogger(__name__)

#: Tools no resident gets, whatever its scope says.
RESIDENT_EXCLUDED_TOOLS = frozenset(
    {"resident_agents", "spawn_child", "child_result", "llm_set_source", "persona_set"}
)
#: Memory-maintenance tools: only the main agent maintains memory; residents are refused.
MEMORY_MAINTENANCE_TOOLS = frozenset(
    {"memory_merge", "memory_purge", "memory_edit", "memory_delete_entity", "memory_block_merge"}
)
#: Plugin whose tools a resident's scratch memory replaces.
MEMORY_PLUGIN = "memory"
#: Tool names a scratch memory offers (the memory tools bound to the scratch graph).
SCRATCH_MEMORY_TOOLS = frozenset(
    {
        "memory_recall",
        "memory_commit",
        "memory_introspect",
        "memory_path",
        "person_query",
        "person_set_trait",
        "person_relate",
        "person_network",
    }
)


def _maintenance_refusal(name: str) -> str:
    return (
        f"常驻子代理不能调用记忆维护工具 {name}（memory-maintenance tools are refused in a resident "
        "sub-agent）：记忆的合并、清除、修改和删除只能由主代理执行；请在汇报中说明需要维护的内容，"
        "或用 memory_commit 记录到自己的临时记忆"
    )


class ScopedTools(ToolRegistry):
    """A resident's tool registry: its scope of the kernel's tools plus its scratch-memory tools.

    Memory-maintenance tools are refused with the explicit message, before anything else.
    """

    def put(self, tool: ToolDef) -> None:
        self._tools[tool.name] = tool
        self.version += 1

    async def execute(
        self, call: ToolCall, *, timeout: float | None = None, allowed: Collection[str] | None = None
    ) -> ToolResult:
        if call.name in MEMORY_MAINTENANCE_TOOLS:
            log.warning("resident tool call %s refused: memory maintenance", call.name)
            return ToolResult(call.id, call.name, False, _maintenance_refusal(call.name), MEMORY_PLUGIN)
        if call.name in RESIDENT_EXCLUDED_TOOLS:
            log.warning("resident tool call %s refused: not for residents", call.name)
            text = (
                f"常驻子代理不能调用 {call.name}（not available to resident sub-agents）：常驻子代理不能创建常驻子代理"
                "或子代理，也不能切换模型源或修改人格；需要时在汇报中请主代理处理"
            )
            return ToolResult(call.id, call.name, False, text, "kernel")
        return await super().execute(call, timeout=timeout, allowed=allowed)
