"""Resident sub-agents: own queue and context, tool scope, limits, destroy, restart."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.agent.kernel import KernelSettings
from homeagent_core.agent.residents import RESIDENT_CHANNEL
from homeagent_core.agent.settings import ResidentLimits
from homeagent_core.library import Agent
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.errors import InputQueueFull, UsageError

MakeKernel = Any


def _resident(request: dict[str, Any]) -> str:
    """The resident a model request belongs to ("" for the main agent)."""
    head = str(request["messages"][0]["content"])
    if "常驻子代理「" not in head:
        return ""
    return head.split("常驻子代理「", 1)[1].split("」", 1)[0]


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_a_resident_works_on_its_own_queue_while_the_main_agent_is_busy(make_kernel: MakeKernel) -> None:
    main_may_finish = asyncio.Event()
    main_reports: list[str] = []

    async def responder(request: dict[str, Any]) -> Any:
        who = _resident(request)
        user = str(request["messages"][-1]["content"])
        if who == "shop":
            history = [m["content"] for m in request["messages"][1:-1]]
            return f"清单已更新：{user}（之前 {len(history)} 条记录）"
        if user.startswith("[常驻代理"):
            main_reports.append(user)
            return "收到汇报"
        await main_may_finish.wait()
        return "长任务完成"

    model = FakeModel(responder=responder)
    kernel = await make_kernel(model=model)
    resident = await kernel.residents.create("shop", "维护购物清单")
    long_turn = asyncio.ensure_future(kernel.ask("做一件很长的事"))
    async with asyncio.timeout(10):
        while kernel.turn is None:
            await asyncio.sleep(0)
    # The main agent is busy; the resident still answers, with its own working context.
    first = await kernel.residents.send("shop", "加牛奶", wait=True, timeout=10)
    second = await kernel.residents.send("shop", "加鸡蛋", wait=True, timeout=10)
    assert str(first) == "清单已更新：加牛奶（之前 0 条记录）"
    assert str(second) == "清单已更新：加鸡蛋（之前 2 条记录）"
    assert not long_turn.done()
    assert resident.done == 2 and resident.last_output == str(second)
    main_may_finish.set()
    assert await asyncio.wait_for(long_turn, 10) == "长任务完成"
    # Both results reach the main agent as inputs on the resident channel, after the long turn.
    async with asyncio.timeout(10):
        while len(main_reports) < 2:
            await asyncio.sleep(0.01)
    assert main_reports[0].startswith("[常驻代理 shop 汇报] 任务：加牛奶")
    assert kernel.loop.turns >= 3
    assert RESIDENT_CHANNEL == "_resident_"


async def test_a_resident_cannot_call_excluded_tools_even_if_its_model_tries(make_kernel: MakeKernel) -> None:
    tried = [
        ("output_list_channels", {}),  # a main-agent tool outside its scope
        ("memory_purge", {"criteria": {"subject": "x"}}),  # memory maintenance
        ("resident_agents", {"action": "create", "name": "sub", "role": "x"}),  # residents create no residents
        ("spawn_child", {"task": "x"}),
    ]

    def responder(request: dict[str, Any]) -> Any:
        if _resident(request) and not _tool_messages(request):
            return ToolCallReply(calls=tried)
        return "done"

    kernel = await make_kernel(model=FakeModel(responder=responder))
    await kernel.residents.create("narrow", "只查看插件工具", tools=["get_plugin_tools"])
    assert kernel.residents.scope(kernel.residents.get("narrow")) == {"get_plugin_tools"}
    reply = await kernel.residents.send("narrow", "试试别的工具", wait=True, timeout=10)
    results = {r.name: r for r in reply.tool_results}
    assert not any(r.success for r in results.values())
    assert "output_list_channels 在本次运行中不可用" in results["output_list_channels"].result
    assert "常驻子代理不能调用记忆维护工具 memory_purge" in results["memory_purge"].result
    assert "记忆的合并、清除、修改和删除只能由主代理执行" in results["memory_purge"].result
    assert "常驻子代理不能调用 resident_agents" in results["resident_agents"].result
    assert "不能创建常驻子代理或子代理" in results["spawn_child"].result
    assert list(kernel.residents.agents) == ["narrow"]
    with pytest.raises(UsageError, match=r"tools \['memory_edit'\] cannot be given to a resident"):
        await kernel.residents.create("bad", "x", tools=["memory_edit"])
    with pytest.raises(UsageError, match=r"unknown tools \['nope'\]"):
        await kernel.residents.create("bad", "x", tools=["nope"])


async def test_the_main_agent_manages_residents_with_the_tool(make_kernel: MakeKernel) -> None:
    def responder(request: dict[str, Any]) -> Any:
        if _resident(request):
            return "提醒已记下"
        done = _tool_messages(request)
        if not done:
            return ToolCallReply(
                calls=[
                    ("resident_agents", {"action": "create", "name": "remind", "role": "提醒事项"}),
                    ("resident_agents", {"action": "create", "name": "remind", "role": "again"}),
                    ("resident_agents", {"action": "send", "name": "ghost", "text": "x"}),
                ]
            )
        return "ok"

    kernel = await make_kernel(model=FakeModel(responder=responder))
    reply = await kernel.ask("建一个提醒助手")
    created, duplicate, unknown = reply.tool_results
    assert created.success and created.result.startswith("已创建常驻子代理 remind（职责：提醒事项）")
    assert not duplicate.success and "a resident named 'remind' already exists" in duplicate.result
    assert not unknown.success and "no resident named 'ghost' (residents: remind)" in unknown.result


async def test_destroy_drop_discards_the_queue_and_keep_hands_it_to_the_main_agent(make_kernel: MakeKernel) -> None:
    hold = asyncio.Event()
    main_inputs: list[str] = []

    async def responder(request: dict[str, Any]) -> Any:
        if _resident(request):
            await hold.wait()
            return "x"
        main_inputs.append(str(request["messages"][-1]["content"]))
        return "ok"

    kernel = await make_kernel(model=FakeModel(responder=responder), settings=KernelSettings(
        residents=ResidentLimits(report=False)))
    for name in ("a", "b"):
        await kernel.residents.create(name, "slow")
        for text in ("one", "two", "three"):
            await kernel.residents.send(name, f"{name}-{text}")
    async with asyncio.timeout(10):
        while kernel.residents.get("a").current is None or kernel.residents.get("b").current is None:
            await asyncio.sleep(0)
    assert kernel.residents.get("a").queued() == ["a-two", "a-three"]
    dropped = await kernel.residents.destroy("a", "drop")
    assert dropped == {"name": "a", "residual": "drop", "pending": 3, "handed_to_main": 0}
    kept = await kernel.residents.destroy("b")
    assert kept["handed_to_main"] == 3
    async with asyncio.timeout(10):
        while len(main_inputs) < 3:
            await asyncio.sleep(0.01)
    assert all(text.startswith("[常驻代理 b 已销毁，未完成的任务转交主代理] b-") for text in main_inputs)
    assert not any("a-" in text for text in main_inputs)
    assert kernel.residents.agents == {}
    with pytest.raises(UsageError, match="residual must be 'keep' or 'drop'"):
        await kernel.residents.destroy("a", "later")  # type: ignore[arg-type]


async def test_limits_on_count_and_hourly_turns(make_kernel: MakeKernel) -> None:
    limits = ResidentLimits(max_residents=1, turns_per_hour=1, report=False)
    kernel = await make_kernel(model=FakeModel(default="done"), settings=KernelSettings(residents=limits))
    await kernel.residents.create("one", "x")
    with pytest.raises(UsageError, match="1 residents exist, the limit"):
        await kernel.residents.create("two", "x")
    assert str(await kernel.residents.send("one", "first", wait=True, timeout=10)) == "done"
    await kernel.residents.send("one", "second")
    resident = kernel.residents.get("one")
    async with asyncio.timeout(10):
        while resident.waiting_until is None:
            await asyncio.sleep(0)
    assert resident.status == "over budget" and resident.queued() == []
    assert kernel.residents.inspect("one")["turns_last_hour"] == 1


async def test_the_hourly_token_budget_counts_the_tokens_the_model_reported(make_kernel: MakeKernel) -> None:
    limits = ResidentLimits(tokens_per_hour=100, report=False)
    kernel = await make_kernel(model=FakeModel(default="done"), settings=KernelSettings(residents=limits))
    await kernel.residents.create("one", "x")
    assert str(await kernel.residents.send("one", "x" * 800, wait=True, timeout=10)) == "done"
    assert kernel.residents.inspect("one")["tokens_last_hour"] >= 200  # what the model said it used
    await kernel.residents.send("one", "second")
    resident = kernel.residents.get("one")
    async with asyncio.timeout(10):
        while resident.waiting_until is None:
            await asyncio.sleep(0)
    assert resident.status == "over budget" and resident.queued() == []


async def test_a_resident_created_by_a_turn_survives_a_restart_and_its_learning_is_reclaimed(tmp_path: Path) -> None:
    hold = asyncio.Event()

    async def first_life(request: dict[str, Any]) -> Any:
        if _resident(request):
            await hold.wait()  # still working when the daemon goes down
            return "never"
        if not _tool_messages(request):
            return ToolCallReply(
                calls=[
                    ("resident_agents", {"action": "create", "name": "shop", "role": "维护购物清单"}),
                    ("resident_agents", {"action": "send", "name": "shop", "text": "记住：小王要买牛奶"}),
                ]
            )
        return "已安排"

    agent = Agent(tmp_path, provider=FakeModel(responder=first_life), load_entrypoints=False, builtins=())
    assert await agent.ask("建个购物助手，记住小王要买牛奶") == "已安排"
    await agent.residents.send("shop", "再加鸡蛋")
    async with asyncio.timeout(10):
        while agent.residents.get("shop").current is None:
            await asyncio.sleep(0)
    await agent.aclose()
    assert (tmp_path / "residents" / "shop" / "state.json").is_file()

    def second_life(request: dict[str, Any]) -> Any:
        if _resident(request) == "shop":
            if not _tool_messages(request):
                text = str(request["messages"][-1]["content"])
                if "牛奶" in text:
                    triple = {"subject": "小王", "relation": "要买", "object": "牛奶"}
                    return ToolCallReply("memory_commit", {"triples": [triple]})
                return "鸡蛋已加入"
            return "已记下牛奶"
        return "收到"

    agent = Agent(tmp_path, provider=FakeModel(responder=second_life), load_entrypoints=False, builtins=())
    await agent.start()
    try:
        resident = agent.residents.get("shop")
        assert resident.role == "维护购物清单"
        async with asyncio.timeout(15):
            while resident.done < 2:
                await asyncio.sleep(0.01)
        contents = [m["content"] for m in resident.context]
        assert contents == ["记住：小王要买牛奶", "已记下牛奶", "再加鸡蛋", "鸡蛋已加入"]
        # What it learned lives in its scratch graph, not in the main memory, until reclaimed.
        assert not (await agent.memory.recall(["小王"]))["relations"]
        assert await agent.residents.reclaim("shop") == {"name": "shop", "triples": 1, "stored": 1}
        recalled = await agent.memory.recall(["小王"])
        assert any(r["type"] == "要买" for r in recalled["relations"])
    finally:
        await agent.aclose()


async def test_damaged_resident_states_are_reported_and_skipped(
    make_kernel: MakeKernel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kernel = await make_kernel(model=FakeModel(default="ok"), data_dir=tmp_path)
    await kernel.residents.create("good", "keeps going")
    await kernel.residents.create("bent", "x")
    await kernel.aclose()
    root = tmp_path / "residents"
    (root / "broken").mkdir()
    (root / "broken" / "state.json").write_text("{not json", encoding="utf-8")
    bent = json.loads((root / "bent" / "state.json").read_text(encoding="utf-8"))
    bent["usage"] = [["yesterday", "lots"]]
    (root / "bent" / "state.json").write_text(json.dumps(bent), encoding="utf-8")
    reopened = await make_kernel(model=FakeModel(default="ok"), data_dir=tmp_path)
    assert list(reopened.residents.agents) == ["good"]
    assert "broken/state.json is unreadable" in caplog.text
    assert "resident state of 'bent' is damaged" in caplog.text
    assert str(await reopened.residents.send("good", "still there?", wait=True, timeout=10)) == "ok"


async def test_a_resident_saved_with_a_full_queue_comes_back_whole_and_the_kernel_starts(
    make_kernel: MakeKernel, tmp_path: Path
) -> None:
    hold = asyncio.Event()

    async def responder(request: dict[str, Any]) -> Any:
        await hold.wait()
        return "never"

    limits = ResidentLimits(queue_capacity=8, report=False)
    kernel = await make_kernel(
        model=FakeModel(responder=responder), settings=KernelSettings(residents=limits), data_dir=tmp_path
    )
    await kernel.residents.create("shop", "维护购物清单")
    await kernel.residents.send("shop", "item 0")
    resident = kernel.residents.get("shop")
    async with asyncio.timeout(10):
        while resident.current is None:
            await asyncio.sleep(0)
    for n in range(1, 9):  # 8 more: the queue is full, one more is in progress
        await kernel.residents.send("shop", f"item {n}")
    with pytest.raises(InputQueueFull):
        await kernel.residents.send("shop", "item 9")
    await kernel.aclose()
    saved = json.loads((tmp_path / "residents" / "shop" / "state.json").read_text(encoding="utf-8"))
    assert saved["queue"] == [f"item {n}" for n in range(9)]

    answered: list[str] = []

    def second_life(request: dict[str, Any]) -> Any:
        answered.append(str(request["messages"][-1]["content"]))
        return "ok"

    reopened = await make_kernel(
        model=FakeModel(responder=second_life), settings=KernelSettings(residents=limits), data_dir=tmp_path
    )
    assert reopened.started and list(reopened.residents.agents) == ["shop"]
    async with asyncio.timeout(15):
        while reopened.residents.get("shop").done < 9:
            await asyncio.sleep(0.01)
    assert answered == [f"item {n}" for n in range(9)]


async def test_a_state_write_still_running_when_the_resident_is_destroyed_does_not_bring_it_back(
    make_kernel: MakeKernel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, proceed, returned = threading.Event(), threading.Event(), threading.Event()
    real_to_thread = asyncio.to_thread

    async def to_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        # Holds the thread of the resident's state write after its first answer until the test says so.
        state = next((a for a in args if isinstance(a, dict) and "queue" in a), None)
        if state is None or state["done"] < 1 or entered.is_set():
            return await real_to_thread(func, *args, **kwargs)

        def held() -> Any:
            entered.set()
            proceed.wait(10)
            try:
                return func(*args, **kwargs)
            finally:
                returned.set()

        return await real_to_thread(held)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    limits = ResidentLimits(report=False)
    kernel = await make_kernel(
        model=FakeModel(default="done"), settings=KernelSettings(residents=limits), data_dir=tmp_path
    )
    await kernel.residents.create("shop", "维护购物清单")
    await kernel.residents.send("shop", "加牛奶")
    assert await real_to_thread(entered.wait, 10)  # the worker is writing state.json in a thread
    async with asyncio.timeout(10):
        assert (await kernel.residents.destroy("shop"))["name"] == "shop"
    assert not (tmp_path / "residents" / "shop").exists()
    proceed.set()
    assert await real_to_thread(returned.wait, 10)  # the write in flight has run to its end
    assert not (tmp_path / "residents" / "shop").exists()
    reopened = await make_kernel(model=FakeModel(default="ok"), data_dir=tmp_path)
    assert reopened.residents.agents == {}


async def test_a_residents_report_is_its_creators_in_their_own_conversation(tmp_path: Path) -> None:
    from homeagent_sdk.current import CURRENT_PRINCIPAL
    from homeagent_sdk.types import Principal

    async def responder(request: dict[str, Any]) -> Any:
        return "清单已更新" if _resident(request) else "收到汇报"

    agent = Agent(tmp_path, provider=FakeModel(responder=responder), load_entrypoints=False, builtins=())
    await agent.start()
    try:
        assert agent.app.people is not None
        agent.app.people.add("mum", "adult")
        kernel = agent.kernel
        token = CURRENT_PRINCIPAL.set(Principal(person="mum", role="adult", door="webui"))
        try:
            resident = await kernel.residents.create("shop", "维护购物清单")  # as a tool of mum's turn would
        finally:
            CURRENT_PRINCIPAL.reset(token)
        assert resident.state()["creator"]["person"] == "mum"
        await kernel.residents.send("shop", "加牛奶", wait=True, timeout=10)
        memory = agent.app.memory
        assert memory is not None

        def reports() -> list[dict[str, Any]]:
            return [r for r in memory.textlog.iter_records() if str(r.get("content", "")).startswith("[常驻代理")]

        async with asyncio.timeout(10):
            while not reports():
                await asyncio.sleep(0.01)
        report = reports()[0]
        marks = (report.get("person"), report.get("thread"), report.get("visibility"))
        assert marks == ("mum", "person:mum", "private")
    finally:
        await agent.aclose()
    again = Agent(tmp_path, provider=FakeModel(default="ok"), load_entrypoints=False, builtins=())
    await again.start()
    try:
        creator = again.kernel.residents.get("shop").creator  # read back from its state file
        assert creator is not None and creator.person == "mum"
    finally:
        await again.aclose()
