"""Backlog triage and status answers while the agent is busy with a long turn (real scheduling, real memory)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from homeagent_core.agent.triage import busy_notice, is_status_query
from homeagent_core.library import Agent
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import ChannelDef, Triple


class Household:
    """Three family members' chat channels and a long tool that holds the agent until released."""

    name = "household"

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.job_started = asyncio.Event()
        self.job_may_finish = asyncio.Event()

    @hookimpl
    def register_output_channels(self, registry: Any) -> None:
        for member in ("owner", "alice", "bob"):

            async def send(payload: str, meta: Any = None, type: str = "text", member: str = member) -> bool:
                self.sent.append((member, payload))
                return True

            registry.add(ChannelDef(name=member, sync=True, send=send))

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        async def long_job(task: str) -> str:
            """Runs a long terminal job."""
            self.job_started.set()
            async with asyncio.timeout(30):
                await self.job_may_finish.wait()
            return f"{task}: 完成"

        registry.add(long_job)

    def to(self, member: str) -> list[str]:
        return [text for who, text in self.sent if who == member]


def _is_triage(request: dict[str, Any]) -> bool:
    return "分流助手" in str(request["messages"][0]["content"])


def _tools_done(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


async def test_a_busy_household_is_triaged_and_everyone_gets_an_answer(tmp_path: Path) -> None:
    house = Household()
    main_inputs: list[str] = []

    def responder(request: dict[str, Any]) -> Any:
        user = str(request["messages"][-1]["content"]) if request["messages"][-1]["role"] == "user" else ""
        question = next(str(m["content"]) for m in reversed(request["messages"]) if m["role"] == "user")
        done = _tools_done(request)
        if _is_triage(request):
            if "WiFi" in question:
                if not done:
                    return ToolCallReply("memory_recall", {"query_intent": "WiFi密码"})
                return "WiFi 密码是 hello123" if "hello123" in done[0] else "[BUSY]"
            return "[BUSY]"
        if user:
            main_inputs.append(user)
        if "备份" in question:
            return "备份完成" if done else ToolCallReply("long_job", {"task": "备份照片"})
        if "机票" in question:
            return "已帮你查好明天的机票：CA1234 08:00"
        return "好的"

    model = FakeModel(responder=responder)
    agent = Agent(tmp_path, provider=model, plugins=[house], load_entrypoints=False, builtins=())
    agent.config.set("core.agent.offload_after", "0.2s")
    await agent.start()
    transcript: list[str] = []
    try:
        await agent.memory.commit([Triple("WiFi密码", "是", "hello123", sentence_text="家里的WiFi密码是hello123")])
        kernel = agent.kernel
        owner = asyncio.ensure_future(kernel.ask("把照片备份到硬盘", "owner"))
        async with asyncio.timeout(10):
            await house.job_started.wait()
        transcript.append("owner: 把照片备份到硬盘  -> agent runs long_job (held)")
        alice = asyncio.ensure_future(kernel.ask("家里的WiFi密码是多少？", "alice"))
        bob = asyncio.ensure_future(kernel.ask("帮我订明天去北京的机票", "bob"))

        # Alice's question is answered from memory by triage while the long turn still runs.
        answer = await asyncio.wait_for(alice, 10)
        assert str(answer) == "WiFi 密码是 hello123" and answer.answered_by == "triage"
        assert not owner.done()
        transcript.append(f"alice: 家里的WiFi密码是多少？  -> [triage] {answer}")
        # Bob's needs the main agent: he is told it is busy, with an estimate, and stays queued.
        async with asyncio.timeout(10):
            while not house.to("bob"):
                await asyncio.sleep(0.01)
        notice = house.to("bob")[0]
        assert notice.startswith("忙碌中，请稍候") and "分钟后回复你" in notice
        assert not bob.done() and [i.text for i in kernel.scheduler.waiting()] == ["帮我订明天去北京的机票"]
        transcript.append(f"bob: 帮我订明天去北京的机票  -> [triage] {notice}")

        # A status question is answered at once from the scheduler, without cancelling the turn.
        status = await asyncio.wait_for(kernel.ask("你在做什么？", "alice"), 5)
        assert status.answered_by == "status"
        assert "把照片备份到硬盘" in status and "调用工具 long_job" in status and "还有 1 条消息在排队" in status
        english = await asyncio.wait_for(kernel.ask("what are you doing?", "bob"), 5)
        assert "I'm working on" in english and "right now: tool long_job" in english
        assert not owner.done()
        transcript.append(f"alice: 你在做什么？  -> [status] {status}")
        transcript.append(f"bob: what are you doing?  -> [status] {english}")

        house.job_may_finish.set()
        assert str(await asyncio.wait_for(owner, 10)) == "备份完成"
        transcript.append("owner: -> [main] 备份完成")
        flight = await asyncio.wait_for(bob, 10)
        assert str(flight) == "已帮你查好明天的机票：CA1234 08:00" and flight.answered_by == ""
        transcript.append(f"bob: -> [main] {flight}")
        # The main agent answered Bob but not Alice again (triage already did), and the triage
        # answer is in memory: the main agent's next prompt shows it in the conversation.
        assert main_inputs == ["把照片备份到硬盘", "帮我订明天去北京的机票"]
        last_main = [r for r in model.requests if not _is_triage(r)][-1]
        assert "WiFi 密码是 hello123" in str(last_main["messages"])
        assert house.to("alice")[0] == "WiFi 密码是 hello123"
        assert house.to("bob")[-1] == "已帮你查好明天的机票：CA1234 08:00"
        assert house.to("owner") == ["备份完成"]
    finally:
        print("\n".join(["", "busy household transcript:", *transcript]))
        await agent.aclose()


async def test_nothing_is_triaged_when_the_threshold_is_not_reached(tmp_path: Path) -> None:
    house = Household()

    def responder(request: dict[str, Any]) -> Any:
        if _is_triage(request):
            return "不该被调用"
        if _tools_done(request):
            return "完成"
        return ToolCallReply("long_job", {"task": "x"}) if "长" in str(request["messages"][-1]["content"]) else "好"

    model = FakeModel(responder=responder)
    agent = Agent(tmp_path, provider=model, plugins=[house], load_entrypoints=False, builtins=())
    await agent.start()  # default threshold: 5 minutes
    try:
        owner = asyncio.ensure_future(agent.kernel.ask("长任务", "owner"))
        async with asyncio.timeout(10):
            await house.job_started.wait()
        bob = asyncio.ensure_future(agent.kernel.ask("你好", "bob"))
        await asyncio.sleep(0)
        house.job_may_finish.set()
        assert str(await asyncio.wait_for(owner, 10)) == "完成"
        assert str(await asyncio.wait_for(bob, 10)) == "好"
        assert not any(_is_triage(r) for r in model.requests) and house.to("bob") == ["好"]
    finally:
        await agent.aclose()


def test_status_questions_and_busy_notices_follow_the_senders_language() -> None:
    assert is_status_query("你在做什么？") and is_status_query("在忙什么呢") and is_status_query("What are you doing?")
    assert not is_status_query("你在做什么菜的时候最喜欢放盐？请详细介绍一下做法和配料比例以及注意事项，谢谢你啦啦啦")
    assert not is_status_query("帮我订机票")
    assert busy_notice("在吗", 30).startswith("忙碌中，请稍候") and "约 1 分钟" in busy_notice("在吗", 30)
    assert busy_notice("are you there", 150).startswith("Busy right now, please wait") and "about 3 min" in busy_notice(
        "are you there", 150
    )


async def test_triage_looks_at_no_more_waiting_inputs_at_once_than_offload_max_inputs(tmp_path: Path) -> None:
    house = Household()
    looking = 0
    peak = 0
    triaged: list[str] = []
    release = asyncio.Event()

    async def responder(request: dict[str, Any]) -> Any:
        nonlocal looking, peak
        question = next(str(m["content"]) for m in reversed(request["messages"]) if m["role"] == "user")
        if _is_triage(request):
            looking += 1
            peak = max(peak, looking)
            triaged.append(question)
            try:
                async with asyncio.timeout(10):
                    await release.wait()
            finally:
                looking -= 1
            return "[BUSY]"
        if "长任务" in question:
            return "完成" if _tools_done(request) else ToolCallReply("long_job", {"task": "x"})
        return "好"

    model = FakeModel(responder=responder)
    agent = Agent(tmp_path, provider=model, plugins=[house], load_entrypoints=False, builtins=())
    agent.config.set("core.agent.offload_after", "0.1s")
    agent.config.set("core.agent.offload_max_inputs", "8")
    await agent.start()
    try:
        kernel = agent.kernel
        owner = asyncio.ensure_future(kernel.ask("长任务", "owner"))
        async with asyncio.timeout(10):
            await house.job_started.wait()
        waiting = [asyncio.ensure_future(kernel.ask(f"问题 {n}", "bob")) for n in range(40)]
        async with asyncio.timeout(10):
            while len(triaged) < 8:
                await asyncio.sleep(0.01)
        # Eight looks are in flight (each a recall and a model call); the other 32 inputs wait their turn.
        marked = [item for item in kernel.scheduler.waiting() if item.extra.get("triaged")]
        assert (len(marked), len(triaged)) == (8, 8) and kernel.triage.in_flight == 8
        release.set()
        async with asyncio.timeout(20):
            while len(house.to("bob")) < 40:
                await asyncio.sleep(0.01)
        # Every waiting input was looked at once, oldest first, never more than eight at a time.
        assert sorted(triaged, key=lambda q: int(q.split()[1])) == [f"问题 {n}" for n in range(40)]
        assert triaged[:8] == [f"问题 {n}" for n in range(8)] and peak == 8
        assert all(notice.startswith("忙碌中，请稍候") for notice in house.to("bob"))
        house.job_may_finish.set()
        assert str(await asyncio.wait_for(owner, 10)) == "完成"
        assert [str(r) for r in await asyncio.wait_for(asyncio.gather(*waiting), 20)] == ["好"] * 40
    finally:
        await agent.aclose()


async def test_triage_reads_memory_as_the_waiting_persons_audience(tmp_path: Path) -> None:
    from homeagent_sdk.types import InjectOptions, Principal

    house = Household()
    secret = "下周三我要去医院复查，别跟孩子说"  # the owner's own private note

    def responder(request: dict[str, Any]) -> Any:
        done = _tools_done(request)
        if _is_triage(request):
            return "[BUSY]" if done else ToolCallReply("knowledge_search", {"query": "下周三"})
        if "备份" in str(request["messages"]):
            return "备份完成" if done else ToolCallReply("long_job", {"task": "备份照片"})
        return "好的"

    model = FakeModel(responder=responder)
    agent = Agent(tmp_path, provider=model, plugins=[house], load_entrypoints=False, builtins=())
    agent.config.set("core.agent.offload_after", "0.2s")
    await agent.start()
    try:
        people = agent.app.people
        assert people is not None
        people.add("mum", "adult")
        people.add("kid", "child")
        system = agent.app.memory
        assert system is not None
        owner_name = people.owner_name()  # the owner's private note: what a triage run as the owner would see
        await system.documents.add(secret, person=owner_name)
        await system.knowledge.create("health/checkup", secret, person=owner_name)
        kernel = agent.kernel
        owner = asyncio.ensure_future(kernel.ask("把照片备份到硬盘", "owner"))
        async with asyncio.timeout(10):
            await house.job_started.wait()
        kid = Principal(person="kid")
        asked = asyncio.ensure_future(kernel.ask("妈妈下周三要去哪里？", "alice", options=InjectOptions(principal=kid)))
        async with asyncio.timeout(10):
            while not house.to("alice"):
                await asyncio.sleep(0.01)
        triaged = [r for r in model.requests if _is_triage(r)]
        assert triaged and any(_tools_done(r) for r in triaged)  # recall ran, and the search answered
        for request in triaged:
            assert "医院" not in str(request), "the owner's private note reached the child's triage"
        house.job_may_finish.set()
        await asyncio.wait_for(owner, 10)
        await asyncio.wait_for(asked, 10)
    finally:
        await agent.aclose()
