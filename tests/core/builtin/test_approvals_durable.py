"""Approvals on a real App: kept in ``people.db`` across a restart, decided once, by the owner only."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.agent.approvals import ApprovalError
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.types import InjectOptions, Principal

CMD = "homeagent_core.builtin.cmd"
CMD_ON = {"plugin.cmd.enabled": True, "plugin.cmd.allow_root": True}


def as_(person: str) -> InjectOptions:
    return InjectOptions(principal=Principal(person=person))


async def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def told(model: FakeModel, text: str) -> str:
    for request in model.requests:
        last = str(request["messages"][-1]["content"])
        if text in last:
            return last
    return ""


async def test_a_restart_closes_a_pending_approval_tells_the_asker_and_keeps_the_history(harness, tmp_path: Path):
    data = tmp_path / "data"
    first = FakeModel([ToolCallReply("cmd_run", {"command": "echo before-restart"}), "it waits"], default="ok")
    h = await harness([CMD], CMD_ON, data=data, model=first)
    h.app.people.add("mum", "adult")
    await h.kernel.ask("run it", options=as_("mum"))
    assert [a.id for a in h.app.rights.approvals.list()] == [1]
    await h.stop()
    with sqlite3.connect(data / "people.db") as db:  # the request was on disk before the asker was told
        assert db.execute("SELECT id, person, tool, status FROM approvals").fetchall() == [
            (1, "mum", "cmd_run", "pending")
        ]

    second = FakeModel([ToolCallReply("cmd_run", {"command": "echo after-restart"}), "waits again"], default="relayed")
    h2 = await harness([CMD], CMD_ON, data=data, model=second)
    await wait_for(lambda: told(second, "[审批 #1]"))
    assert "the daemon restarted before the owner decided; ask again" in told(second, "[审批 #1]")
    with pytest.raises(ApprovalError, match=r"approval #1 \(cmd_run for mum\) was already interrupted"):
        await h2.app.rights.approvals.decide(1, True)
    assert len(h2.plugin("cmd").history) == 0
    # Ids go on where the last run stopped: #1 never names a new call.
    await h2.kernel.ask("run it again", options=as_("mum"))
    assert [a.id for a in h2.app.rights.approvals.list()] == [2]
    await h2.app.rights.approvals.decide(2, True, by="owner (test)")
    await wait_for(lambda: told(second, "[审批 #2]"))
    history = {row["id"]: row for row in await h2.app.rights.approvals.history()}
    assert history[1]["status"] == "interrupted" and history[1]["decided_by"] == "restart"
    assert history[2]["status"] == "approved" and history[2]["decided_by"] == "owner (test)"
    await wait_for(lambda: "after-restart" in h2.app.rights.approvals.store.get(2).result)  # type: ignore[union-attr]
    outcomes = [(r.person, r.outcome, r.detail) for r in h2.app.people.audit_rows(20) if r.action == "cmd_run"]
    assert ("mum", "interrupted", "approval #1") in outcomes and ("mum", "approved", "approval #2") in outcomes


async def test_two_decisions_at_once_exactly_one_wins(harness):
    model = FakeModel([ToolCallReply("cmd_run", {"command": "echo once"}), "waits"], default="relayed")
    h = await harness([CMD], CMD_ON, model=model)
    h.app.people.add("mum", "adult")
    await h.kernel.ask("run it", options=as_("mum"))
    approvals = h.app.rights.approvals
    results = await asyncio.gather(
        approvals.decide(1, True), approvals.decide(1, False), approvals.decide(1, True), return_exceptions=True
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1 and len(lost) == 2, results
    assert all(isinstance(e, ApprovalError) and "already" in str(e) for e in lost), lost
    await wait_for(lambda: told(model, "[审批 #1]"))
    ran = 1 if won[0].status == "approved" else 0
    assert len(h.plugin("cmd").history) == ran
    (row,) = await approvals.history()
    assert row["status"] == won[0].status


async def test_only_the_owner_decides(harness):
    model = FakeModel([ToolCallReply("cmd_run", {"command": "echo x"}), "waits"], default="relayed")
    h = await harness([CMD], CMD_ON, model=model)
    h.app.people.add("mum", "adult")
    h.app.people.add("dad", "adult")
    await h.kernel.ask("run it", options=as_("mum"))
    approvals = h.app.rights.approvals
    dad = h.app.people.principal(h.app.people.get("dad"), "qq", account="777")
    with pytest.raises(ApprovalError, match=r"only the owner decides approvals; dad \(role adult\) cannot"):
        await approvals.decide(1, True, decider=dad)
    guest = h.app.people.principal(None, "qq", account="888")
    with pytest.raises(ApprovalError, match=r"a guest \(role guest\) cannot"):
        await approvals.decide(1, True, decider=guest)
    assert approvals.get(1).status == "pending" and len(h.plugin("cmd").history) == 0
    owner = h.app.people.principal(h.app.people.owner(), "qq", account="1")
    await approvals.decide(1, False, decider=owner)
    assert approvals.get(1).status == "denied"
