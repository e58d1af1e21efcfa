"""spawn_child / child_result."""

from __future__ import annotations

import asyncio
from typing import Any

from homeagent_core.agent.kernel import KernelSettings
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


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def _is_child(request: dict[str, Any]) -> bool:
    return "子代理" in request["messages"][0]["content"]


async def test_a_child_that_calls_spawn_child_anyway_is_refused(make_kernel: MakeKernel) -> None:
    """The child is not offered spawn_child; a model that names it anyway gets a refusal."""

    def responder(request: dict[str, Any]) -> Any:
        done = _tool_messages(request)
        if _is_child(request):
            if not done:  # a misbehaving child model: spawn a grandchild regardless
                return ToolCallReply("spawn_child", {"task": "再派一个子代理"})
            return "子任务完成：" + done[-1]
        if not done:
            return ToolCallReply("spawn_child", {"task": "后台做事"})
        return "已安排"

    kernel = await make_kernel(model=FakeModel(responder=responder))
    assert await kernel.ask("安排一下", timeout=10) == "已安排"
    child = await kernel.children.wait("child_1", timeout=10)
    assert child.status == "done"
    assert "工具 spawn_child 在本次运行中不可用（not allowed in this run" in (child.result or "")
    assert list(kernel.children.children) == ["child_1"]


async def test_children_nest_only_down_to_the_depth_limit(make_kernel: MakeKernel) -> None:
    def responder(request: dict[str, Any]) -> Any:
        done = _tool_messages(request)
        offered = {t["function"]["name"] for t in request.get("tools", ())}
        if _is_child(request):
            if not done:
                return ToolCallReply("spawn_child", {"task": "更深一层"})
            return f"offered spawn_child={'spawn_child' in offered}; " + done[-1]
        return ToolCallReply("spawn_child", {"task": "第一层"}) if not done else "已安排"

    settings = KernelSettings(child_max_depth=2)
    kernel = await make_kernel(model=FakeModel(responder=responder), settings=settings)
    assert await kernel.ask("安排一下", timeout=10) == "已安排"
    first = await kernel.children.wait("child_1", timeout=10)
    second = await kernel.children.wait("child_2", timeout=10)
    assert "offered spawn_child=True" in (first.result or "") and "已启动子代理 child_2" in (first.result or "")
    assert "offered spawn_child=False" in (second.result or "")
    assert "spawn_child 在本次运行中不可用" in (second.result or "")
    assert list(kernel.children.children) == ["child_1", "child_2"]


async def test_one_turn_spawns_at_most_the_per_turn_count(make_kernel: MakeKernel) -> None:
    release = asyncio.Event()

    async def responder(request: dict[str, Any]) -> Any:
        if _is_child(request):
            await release.wait()
            return "done"
        if not _tool_messages(request):
            return ToolCallReply(calls=[("spawn_child", {"task": f"任务 {i}"}) for i in range(3)])
        return "已安排"

    settings = KernelSettings(child_max_per_turn=2)
    kernel = await make_kernel(model=FakeModel(responder=responder), settings=settings)
    reply = await kernel.ask("派三个", timeout=10)
    results = [r.result for r in reply.tool_results]
    assert [r.success for r in reply.tool_results] == [True, True, False]
    assert "this turn already spawned 2 children" in results[2] and "core.agent.child_max_per_turn" in results[2]
    release.set()
    # The count is per top-level turn: the next turn may spawn again.
    assert (await kernel.ask("再派三个", timeout=10)).tool_results[0].success


async def test_a_consolidation_turn_cannot_call_the_tools_it_was_not_given(make_kernel: MakeKernel) -> None:
    def responder(request: dict[str, Any]) -> Any:
        done = _tool_messages(request)
        if not done:
            return ToolCallReply("spawn_child", {"task": "整理时偷偷派子代理"})
        return "整理完毕：" + done[-1]

    kernel = await make_kernel(model=FakeModel(responder=responder))
    reply = await asyncio.wait_for(kernel.submit_self_input("整理记忆"), 10)
    assert "spawn_child 在本次运行中不可用" in reply
    assert kernel.children.children == {}
