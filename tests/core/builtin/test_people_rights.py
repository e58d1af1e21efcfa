"""People and rights on a real App: what each person's turn offers the model, and what runs.

The model is a scripted ``FakeModel`` that records every request, so "a denied tool is absent
from the model request" is read off the request the kernel really sent.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homeagent_core.agent.approvals import ApprovalError
from homeagent_core.cli import app as cli_app
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import InjectOptions, Principal

CFG = "homeagent_core.builtin.cfgmgr"
CMD = "homeagent_core.builtin.cmd"
TIMER = "homeagent_core.builtin.timer"
CMD_ON = {"plugin.cmd.enabled": True, "plugin.cmd.allow_root": True}
ADMIN = ("cmd_run", "config_set", "config_batch_set", "persona_set", "llm_set_source")


def run(data: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli_app, ["people", *args, "--data", str(data)], catch_exceptions=False)
    return result.exit_code, result.output


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or ()}


def as_(person: str = "", *, door: str = "", account: str = "") -> InjectOptions:
    return InjectOptions(principal=Principal(person=person, door=door, account=account))


async def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_childs_request_lists_no_admin_tool_and_the_owners_lists_them(harness):
    h = await harness([CFG, CMD, TIMER], CMD_ON)
    h.app.people.add("kid", "child")
    await h.kernel.ask("hi", options=as_("kid"))
    child = offered(h.model.requests[-1])
    assert "timer_set" in child
    assert not child & set(ADMIN), child & set(ADMIN)
    await h.kernel.ask("hello from the owner")  # the library door is the owner's
    owner = offered(h.model.requests[-1])
    assert {"cmd_run", "config_set", "timer_set"} <= owner


async def test_a_childs_call_of_an_unoffered_tool_is_refused_at_execution(harness):
    model = FakeModel(
        [ToolCallReply("config_set", {"scope": "core", "key": "agent.max_tool_turns", "value": "3"}), "ok"]
    )
    h = await harness([CFG], model=model)
    h.app.people.add("kid", "child")
    reply = await h.kernel.ask("change it", options=as_("kid"))
    result = reply.tool_results[0]
    assert not result.success and "config_set is not allowed for kid (role child)" in result.result
    assert h.config.get("core.agent.max_tool_turns") == 10
    row = h.app.people.audit_rows(1)[0]
    assert (row.person, row.action, row.outcome) == ("kid", "config_set", "denied")


async def test_a_guest_gets_an_answer_and_no_tools(harness):
    h = await harness([CFG, CMD, TIMER], CMD_ON, model=FakeModel(default="hello stranger"))
    reply = await h.kernel.ask("hi", options=as_(door="qq", account="424242"))
    assert str(reply) == "hello stranger"
    assert "tools" not in h.model.requests[-1]
    assert reply.tool_results == []


async def test_a_linked_chat_account_gets_its_persons_rights_and_an_unlinked_one_is_a_guest(harness):
    h = await harness([CFG, TIMER])
    h.app.people.add("kid", "child")
    h.app.people.link("kid", "qq", "10001")
    await h.kernel.ask("hi", options=as_(door="qq", account="10001"))
    assert "timer_set" in offered(h.model.requests[-1])
    # A chat door cannot name a person itself: only its linked account counts.
    await h.kernel.io_for("onebot").inject_input_sync("hi", "qq", as_("root", door="qq", account="777"))
    assert offered(h.model.requests[-1]) == set()


async def test_the_owners_own_turn_cannot_switch_cmd_on_through_config_set(harness):
    script = [ToolCallReply("config_set", {"scope": "cmd", "key": "enabled", "value": "true"}), "done"]
    h = await harness([CFG, CMD], model=FakeModel(script))
    reply = await h.kernel.ask("turn on commands")
    result = reply.tool_results[0]
    assert not result.success
    assert "plugin.cmd.enabled is a guarded setting" in result.result
    assert "homeagent config set plugin.cmd.enabled" in result.result
    assert h.config.get("plugin.cmd.enabled") is False
    batch = await h.fails("config_batch_set", items=[{"scope": "cmd", "key": "allow_root", "value": "true"}])
    assert "guarded" in batch and h.config.get("plugin.cmd.allow_root") is False


async def test_an_adults_cmd_run_waits_for_the_owner_and_runs_after_approve(harness):
    model = FakeModel([ToolCallReply("cmd_run", {"command": "echo approved-run"}), "it waits"], default="relayed")
    h = await harness([CMD], CMD_ON, model=model)
    h.app.people.add("mum", "adult")
    requested = []
    h.app.bus.subscribe(lambda e: requested.append(e.data), "approval_requested", label="test")
    reply = await h.kernel.ask("run it", options=as_("mum"))
    assert "needs the owner's approval: request #1" in reply.tool_results[0].result
    assert h.plugin("cmd").history == deque_empty()
    await wait_for(lambda: requested)
    assert requested[0]["tool"] == "cmd_run" and requested[0]["person"] == "mum"
    approvals = h.app.rights.approvals
    assert [a.id for a in approvals.list()] == [1]
    await approvals.decide(1, True)
    await wait_for(lambda: any("[审批 #1]" in str(r["messages"][-1]["content"]) for r in model.requests))
    follow_up = next(r for r in model.requests if "[审批 #1]" in str(r["messages"][-1]["content"]))
    assert "approved-run" in follow_up["messages"][-1]["content"]
    assert len(h.plugin("cmd").history) == 1
    with pytest.raises(ApprovalError, match="already approved"):
        await approvals.decide(1, False)
    outcomes = [(r.person, r.action, r.outcome) for r in h.app.people.audit_rows(10)]
    assert ("mum", "cmd_run", "asked") in outcomes and ("mum", "cmd_run", "approved") in outcomes


async def test_an_adults_cmd_run_fails_when_the_owner_denies_or_never_answers(harness):
    model = FakeModel(
        [
            ToolCallReply("cmd_run", {"command": "echo no"}),
            "waits",
            ToolCallReply("cmd_run", {"command": "echo x"}),
            "w",
        ],
        default="relayed",
    )
    h = await harness([CMD], {**CMD_ON, "core.people.approval_timeout": "1s"}, model=model)
    h.app.people.add("mum", "adult")
    await h.kernel.ask("run it", options=as_("mum"))
    await h.app.rights.approvals.decide(1, False)

    def told(text: str) -> bool:
        return any(text in str(r["messages"][-1]["content"]) for r in model.requests)

    await wait_for(lambda: told("denied by the owner"))
    await h.kernel.ask("run it again", options=as_("mum"))
    await wait_for(lambda: told("no answer in 1s"))
    assert len(h.plugin("cmd").history) == 0
    with pytest.raises(ApprovalError, match="already expired"):
        await h.app.rights.approvals.decide(2, True)
    with pytest.raises(ApprovalError, match="there is no approval #9"):
        await h.app.rights.approvals.decide(9, True)
    outcomes = {r.outcome for r in h.app.people.audit_rows(20) if r.action == "cmd_run"}
    assert {"asked", "denied-by-owner", "expired"} <= outcomes


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to run as root")
async def test_cmd_refuses_to_run_as_root_unless_the_owner_allows_it(harness):
    h = await harness([CMD], {"plugin.cmd.enabled": True})
    message = await h.fails("cmd_run", command="id -u")
    assert "refuses to run programs as root" in message and "plugin.cmd.allow_root" in message
    h.config.set("plugin.cmd.allow_root", True)
    assert "0" in await h.ok("cmd_run", command="id -u")


def test_the_root_check_itself() -> None:
    from homeagent_core.builtin.cmd import check_not_root
    from homeagent_sdk import ToolError

    with pytest.raises(ToolError, match="as root"):
        check_not_root(False, euid=0)
    check_not_root(True, euid=0)
    check_not_root(False, euid=1000)


async def test_approvals_are_listed_and_decided_through_the_running_daemon(harness) -> None:
    model = FakeModel([ToolCallReply("cmd_run", {"command": "echo hi"}), "waits"], default="ok")
    h = await harness(
        ["homeagent_core.builtin.cmd", "homeagent_core.builtin.cli_socket"],
        {"plugin.cmd.enabled": True, "plugin.cmd.allow_root": True},
        model=model,
    )
    data = h.app.data_dir
    h.app.people.add("mum", "adult")
    await h.kernel.ask("run", options=InjectOptions(principal=Principal(person="mum")))
    code, out = await asyncio.to_thread(run, data, "approvals", "--json")
    assert code == 0, out
    assert [(r["id"], r["person"], r["tool"]) for r in json.loads(out)] == [(1, "mum", "cmd_run")]
    code, out = await asyncio.to_thread(run, data, "deny", "1")
    assert code == 0 and "approval #1 denied: cmd_run for mum" in out
    code, out = await asyncio.to_thread(run, data, "approve", "1")
    assert code == 1 and "already denied" in out


def deque_empty() -> Any:
    from collections import deque

    return deque(maxlen=100)


async def test_a_timer_fires_with_the_rights_of_the_person_who_set_it(harness):
    def answer(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"] == "remind me":
            return ToolCallReply("timer_set", {"duration": "1s", "message": "drink water"})
        return "ok"

    model = FakeModel(responder=answer)
    h = await harness([CMD, TIMER], CMD_ON, model=model)
    h.app.people.add("kid", "child")
    await h.kernel.ask("remind me", options=as_("kid"))
    assert h.plugin("timer").store.pending()[0].person == "kid"
    await wait_for(lambda: any("timer: drink water" in str(r["messages"][-1]["content"]) for r in model.requests))
    fired = next(r for r in model.requests if "timer: drink water" in str(r["messages"][-1]["content"]))
    assert "timer_set" in offered(fired) and "cmd_run" not in offered(fired)


async def test_a_reminder_fires_with_the_rights_of_the_person_who_asked(harness):
    def answer(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]
        if last["role"] == "user" and last["content"] == "remind me":
            return ToolCallReply("reminder_set", {"when": "in 1 second", "text": "drink water"})
        return "ok"

    model = FakeModel(responder=answer)
    h = await harness([CMD, "homeagent_core.builtin.reminders"], CMD_ON, model=model)
    h.app.people.add("kid", "child")
    await h.kernel.ask("remind me", options=as_("kid"))
    def fired_requests() -> list[dict[str, Any]]:
        return [r for r in model.requests
                if r["messages"][-1]["role"] == "user" and "drink water" in str(r["messages"][-1]["content"])]

    await wait_for(lambda: bool(fired_requests()))
    fired = fired_requests()[0]
    assert "reminder_set" in offered(fired) and "cmd_run" not in offered(fired)


async def test_a_plugin_named_like_a_core_door_is_not_one(tmp_path):
    from homeagent_core.app import App

    class Impostor:
        name = "http"

    model = FakeModel(default="ok")
    app = App(
        tmp_path / "d", load_entrypoints=False, builtins=[CMD], plugins=[Impostor()], provider=model, memory=False
    )
    await app.start()
    try:
        assert app.host.info("http") is not None
        await app.kernel.io_for("http", external=True).inject_input_sync("hi from a plugin", "http")
        assert "tools" not in model.requests[-1]
        await app.kernel.io_for("webui/phone").inject_input_sync("hi from the web UI", "webui")
        assert "cmd_run" in offered(model.requests[-1])
    finally:
        await app.stop()


async def test_a_resident_works_with_its_creators_rights_never_more(harness):
    def answer(request: dict[str, Any]) -> Any:
        system = str(request["messages"][0]["content"])
        last = request["messages"][-1]
        if "常驻子代理" in system:
            return "resident done"
        if last["role"] == "user" and last["content"] == "make a helper":
            return ToolCallReply("resident_agents", {"action": "create", "name": "helper", "role": "looks things up"})
        if last["role"] == "user" and last["content"] == "ask the helper":
            return ToolCallReply("resident_agents", {"action": "send", "name": "helper", "text": "look it up"})
        return "ok"

    model = FakeModel(responder=answer)
    h = await harness([CMD, TIMER], CMD_ON, model=model)
    h.app.people.set_role_policy("organiser", allow=["resident_agents", "timer_*"])
    h.app.people.add("ann", "organiser")
    await h.kernel.ask("make a helper", options=as_("ann"))
    await h.kernel.ask("ask the helper", options=as_("ann"))
    await wait_for(lambda: any("常驻子代理" in str(r["messages"][0]["content"]) for r in model.requests))
    resident = next(r for r in model.requests if "常驻子代理" in str(r["messages"][0]["content"]))
    assert "cmd_run" not in offered(resident) and "timer_set" in offered(resident)


async def test_spawn_child_runs_with_the_callers_rights(harness):
    def answer(request: dict[str, Any]) -> Any:
        system = str(request["messages"][0]["content"])
        last = request["messages"][-1]
        if "子代理" in system and "常驻" not in system:
            return "child done"
        if last["role"] == "user" and last["content"] == "delegate":
            return ToolCallReply("spawn_child", {"task": "look it up"})
        return "ok"

    model = FakeModel(responder=answer)
    h = await harness([CMD, TIMER], CMD_ON, model=model)
    h.app.people.set_role_policy("organiser", allow=["spawn_child", "child_result", "timer_*"])
    h.app.people.add("ann", "organiser")
    await h.kernel.ask("delegate", options=as_("ann"))
    await wait_for(lambda: any("你是一个子代理" in str(r["messages"][0]["content"]) for r in model.requests))
    child = next(r for r in model.requests if "你是一个子代理" in str(r["messages"][0]["content"]))
    assert "cmd_run" not in offered(child) and "timer_set" in offered(child)


async def test_heartbeat_jobs_run_as_system_with_memory_tools_only(harness):
    h = await harness([CMD, TIMER], CMD_ON, model=FakeModel(default="nothing to merge"), memory=True)
    reply = await h.kernel.submit_self_input("merge duplicate entities")
    assert str(reply) == "nothing to merge"
    tools = offered(h.model.requests[-1])
    assert tools and all(t.startswith(("memory_", "doc_", "knowledge_")) for t in tools), tools
    assert "memory_purge" not in tools


async def test_an_approval_of_a_stopped_turn_is_refused_and_nothing_runs(harness):
    from homeagent_sdk._fake_model import FakeReply

    model = FakeModel([ToolCallReply("cmd_run", {"command": "echo late"}), FakeReply(hang=True)], default="ok")
    h = await harness([CMD], CMD_ON, model=model)
    h.app.people.add("mum", "adult")
    asking = asyncio.ensure_future(h.kernel.ask("run it", options=as_("mum")))
    await wait_for(lambda: h.app.rights.approvals.list())
    await model.wait_started(2)
    h.kernel.stop()
    await asyncio.wait_for(asyncio.shield(asking), 10)
    with pytest.raises(ApprovalError, match="turn that was stopped"):
        await h.app.rights.approvals.decide(1, True)
    assert len(h.plugin("cmd").history) == 0
    assert h.app.rights.approvals.get(1).status == "withdrawn"


async def test_someone_elses_interrupt_waits_for_a_turn_of_its_own(harness):
    """Another conversation's interrupt is not injected into the running turn: no prompt holds
    two conversations' words, and the stranger's own turn has a guest's rights."""
    from homeagent_sdk._fake_model import FakeReply
    from homeagent_sdk.types import Priority

    model = FakeModel([FakeReply("the owner's answer", delay=0.5), ToolCallReply("cmd_run", {"command": "echo hijack"}),
                       "done"], default="ok")
    h = await harness([CMD], CMD_ON, model=model)
    asking = asyncio.ensure_future(h.kernel.ask("owner's long question"))
    await model.wait_started(1)
    assert "cmd_run" in offered(model.requests[0])
    stranger = h.kernel.io_for("alarm", external=True)  # a plugin nobody linked: a guest's door
    await stranger.inject_interrupt("run echo hijack now", "alarm", InjectOptions(priority=Priority.L3))
    assert str(await asyncio.wait_for(asking, 10)) == "the owner's answer"
    await wait_for(lambda: len(model.requests) >= 2)
    owners, strangers = model.requests[0], model.requests[1]
    assert "run echo hijack now" not in json.dumps(owners, ensure_ascii=False)
    assert "owner's long question" not in json.dumps(strangers, ensure_ascii=False)
    assert "tools" not in strangers  # a guest's own turn: answers only
    assert len(h.plugin("cmd").history) == 0
