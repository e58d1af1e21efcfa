"""People's bad input on a real App: a link revoked mid-turn, approvals whose asker changed.

Decided and documented in docs/PEOPLE.md: a turn keeps the rights it started with (they are
resolved once, when it starts); the next input from a revoked account is a guest's. An
approval is not run when its asker was removed, got another role, or the chat account they
asked from was unlinked since: the owner is told why, and they can ask again.
"""

from __future__ import annotations

from typing import Any

import pytest

from homeagent_core.agent.approvals import ApprovalError
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import InjectOptions, Principal

CMD = "homeagent_core.builtin.cmd"
TIMER = "homeagent_core.builtin.timer"
CMD_ON = {"plugin.cmd.enabled": True, "plugin.cmd.allow_root": True}


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or ()}


def from_qq(account: str) -> InjectOptions:
    return InjectOptions(principal=Principal(door="qq", account=account))


async def test_a_link_revoked_mid_turn_ends_with_that_turn(harness):
    state: dict[str, Any] = {}

    def answer(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "tool":
            return "two timers are set"
        if "list my timers" in str(request["messages"][-1]["content"]) and "revoked" not in state:
            state["revoked"] = True
            h.app.people.unlink("kid", "qq", "10001", by="owner (test)")  # while the turn runs
            return ToolCallReply("timer_list", {})
        return "hello"

    model = FakeModel(responder=answer)
    h = await harness([TIMER], model=model)
    h.app.people.add("kid", "child")
    h.app.people.link("kid", "qq", "10001")
    reply = await h.kernel.ask("list my timers", options=from_qq("10001"))
    # The running turn kept the rights it started with: its tool ran, its second request offered the same tools.
    assert reply.tool_results[0].success, reply.tool_results[0].result
    first, second = model.requests[0], model.requests[1]
    assert "timer_set" in offered(first) and offered(second) == offered(first)
    # The next input from that account is a guest's: no tools.
    await h.kernel.ask("list my timers again", options=from_qq("10001"))
    assert "tools" not in model.requests[-1]
    rows = [(r.action, r.detail) for r in h.app.people.audit_rows(10)]
    assert ("person_unlink", "kid: qq 10001") in rows


async def test_an_approval_is_not_run_when_its_asker_changed_since(harness):
    model = FakeModel(default="waits")
    h = await harness([CMD], CMD_ON, model=model)
    people = h.app.people
    for name in ("mum", "ann", "gran"):
        people.add(name, "adult")
    people.link("mum", "qq", "20002")
    for options in (from_qq("20002"), InjectOptions(principal=Principal(person="ann")),
                    InjectOptions(principal=Principal(person="gran"))):
        model.add(ToolCallReply("cmd_run", {"command": "echo should-not-run"}), "it waits")
        await h.kernel.ask("run it", options=options)
    approvals = h.app.rights.approvals
    assert [(a.id, a.principal.person) for a in approvals.list()] == [(1, "mum"), (2, "ann"), (3, "gran")]

    people.unlink("mum", "qq", "20002")
    people.set_role("ann", "child")
    people.remove("gran")
    with pytest.raises(ApprovalError, match="the qq account 20002 that asked is no longer linked to mum"):
        await approvals.decide(1, True)
    with pytest.raises(ApprovalError, match=r"ann's role changed since asking \(adult -> child\)"):
        await approvals.decide(2, True)
    with pytest.raises(ApprovalError, match="gran was removed since asking; cmd_run was not run"):
        await approvals.decide(3, True)
    assert len(h.plugin("cmd").history) == 0
    assert [a.status for a in approvals.list(pending_only=False)] == ["withdrawn"] * 3
    with pytest.raises(ApprovalError, match="already withdrawn"):
        await approvals.decide(1, False)
    history = {row["id"]: row for row in await approvals.history()}
    assert "no longer linked" in history[1]["result"]


async def test_unlinking_what_is_not_linked_is_refused(harness):
    h = await harness([], model=FakeModel(default="ok"))
    h.app.people.add("kid", "child")
    h.app.people.link("kid", "qq", "1")
    from homeagent_core.agent.people import PeopleError

    with pytest.raises(PeopleError, match=r"qq account '2' is not linked to 'kid' \(linked: qq 1\)"):
        h.app.people.unlink("kid", "qq", "2")
    with pytest.raises(PeopleError, match="unknown person 'nobody'"):
        h.app.people.unlink("nobody", "qq", "1")
