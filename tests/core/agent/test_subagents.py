"""spawn_child / child_result."""

from __future__ import annotations

import asyncio
from typing import Any

from homeagent_sdk._fake_model import FakeModel, ToolCallReply

MakeKernel = Any


async def test_a_child_runs_its_task_in_the_background_and_reports_its_result(make_kernel: MakeKernel) -> None:
    child_may_finish = asyncio.Event()

    async def responder(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        if "子代理" in messages[0]["content"]:  # the child's own loop
            await child_may_finish.wait()
            return "子任务结果：42"
        if len(model.requests) == 1:
            return ToolCallReply("spawn_child", {"task": "算出答案", "max_turns": 3})
        return "已安排"

    model = FakeModel(responder=responder)
    kernel = await make_kernel(model=model)
    reply = await kernel.ask("后台算一下")
    assert reply == "已安排"
    assert "已启动子代理 child_1（最多 3 轮）" in reply.tool_results[0].result
    assert kernel.children.report("child_1").startswith("child_1 仍在运行")
    child_request = next(r for r in model.requests if "子代理" in r["messages"][0]["content"])
    child_tools = {t["function"]["name"] for t in child_request["tools"]}
    assert "spawn_child" not in child_tools and "get_plugin_tools" in child_tools
    child_may_finish.set()
    child = await kernel.children.wait("child_1", timeout=5)
    assert child.status == "done"
    assert kernel.children.report("child_1") == "子任务结果：42"


async def test_child_arguments_are_validated_and_unknown_ids_explained(make_kernel: MakeKernel) -> None:
    model = FakeModel(
        [
            ToolCallReply(
                calls=[("spawn_child", {"task": "x", "max_turns": 31}), ("child_result", {"task_id": "child_9"})]
            ),
            "ok",
        ]
    )
    kernel = await make_kernel(model=model)
    reply = await kernel.ask("x")
    too_many, unknown = reply.tool_results
    assert not too_many.success and "max_turns must be <= 30, got 31" in too_many.result
    assert not unknown.success and "unknown task_id 'child_9'" in unknown.result
    assert kernel.children.children == {}


async def test_a_failing_child_reports_why(make_kernel: MakeKernel) -> None:
    model = FakeModel([RuntimeError("source down")])
    kernel = await make_kernel(model=model)
    child = kernel.children.spawn("do it", 2)
    await kernel.children.wait(child.task_id, timeout=5)
    assert kernel.children.report(child.task_id) == f"{child.task_id} 失败：RuntimeError: source down"
