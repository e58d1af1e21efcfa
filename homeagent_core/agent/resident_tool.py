"""The ``resident_agents`` tool: the main agent's handle on its resident sub-agents."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from homeagent_core.agent.residents import RESIDENT_CHANNEL, Residents
from homeagent_sdk.errors import UsageError

__all__ = ["resident_agents_tool"]


def resident_agents_tool(residents: Residents) -> Callable[..., Awaitable[str]]:
    """The ``resident_agents`` tool function over ``residents``."""

    async def resident_agents(
        action: Literal["list", "create", "send", "inspect", "compress", "reclaim", "destroy"],
        name: str = "",
        role: str = "",
        tools: list[str] | None = None,
        text: str = "",
        residual: Literal["keep", "drop"] = "keep",
    ) -> str:
        """管理常驻子代理（长期运行的助手，各有自己的队列、工作上下文和临时记忆，完成后向你汇报）。

        Args:
            action: list 列出；create 创建(name, role, tools?)；send 发消息(name, text)；inspect 查看(name)；
                compress 压缩其上下文(name)；reclaim 把它学到的内容并入主记忆(name)；destroy 销毁(name, residual)
            name: 常驻子代理名称（字母、数字、_、-）
            role: create 时：它的职责
            tools: create 时：允许使用的工具名列表（省略则为主代理的全部可用工具）
            text: send 时：要它做的事
            residual: destroy 时：未完成的消息 keep 转交主代理（默认）或 drop 丢弃
        """
        if action == "list":
            return _dumps(residents.list()) if residents.agents else "没有常驻子代理（用 action=create 创建）"
        if not name:
            raise UsageError(f"action {action!r} needs the resident's name")
        if action == "create":
            resident = await residents.create(name, role, tools)
            scope = ", ".join(sorted(residents.scope(resident)))
            return f"已创建常驻子代理 {name}（职责：{resident.role}）；可用工具：{scope}"
        if action == "send":
            position = await residents.send(name, text)
            return f"已发给常驻子代理 {name}（队列位置 {position}）；完成后它会在 {RESIDENT_CHANNEL} 通道向你汇报"
        if action == "inspect":
            return _dumps(residents.inspect(name))
        if action == "compress":
            return f"已压缩 {name} 的工作上下文：{await residents.compress(name)}"
        if action == "reclaim":
            result = await residents.reclaim(name)
            return f"已把 {name} 临时记忆中的 {result['triples']} 条关系并入主记忆"
        result = await residents.destroy(name, residual)
        return (
            f"已销毁常驻子代理 {name}；未完成的消息 {result['pending']} 条"
            + (f"，{result['handed_to_main']} 条已转交给你" if residual == "keep" else "，已丢弃")
        )

    return resident_agents


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
