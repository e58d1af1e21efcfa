"""Ask the owner: tool calls that wait for the owner's decision, and the rights of a turn.

A call the policy answers with ``ask`` (an adult's ``cmd_run``, by default) does not run. It
becomes a pending :class:`Approval`, stored in ``<data>/people.db``
(:mod:`homeagent_core.agent.approval_store`): the bus event ``approval_requested`` announces it
(the web UI shows it with Approve / Deny; :mod:`homeagent_core.builtin.approvals_chat` sends it
to the owner's linked chat accounts), and the CLI (``homeagent people approvals`` / ``approve
ID`` / ``deny ID``), the web UI, the owner's chat reply (``同意 N`` / ``拒绝 N``) and
``sdk.services.rights`` decide it. The turn that asked answers at once (the model is told the
call waits for the owner), so other people's turns go on meanwhile. When the owner decides:

* approve — the call runs with the asker's rights and its result comes back to the asker as a
  new input on the channel they asked on (``[审批 #ID] …``), answered by the model;
* deny — the asker is told it was "denied by the owner";
* no answer within ``core.people.approval_timeout`` (default 10 minutes) — the asker is told
  "no answer in 10 minutes".

Only the owner decides. Deciding an approval twice (two decisions at once: exactly one wins),
an unknown one, or one whose turn was stopped before it finished is refused with a clear error.
A daemon restart closes the approvals it left pending as ``interrupted`` and tells each asker
to ask again (:meth:`Approvals.recover`): a call is never run later from a stored record. Every
outcome is in the audit log (``asked``, ``approved``, ``denied-by-owner``, ``expired``,
``interrupted``), next to each tool call's ``allowed`` / ``denied``, and the approvals with
their outcomes stay listed (``homeagent people audit``, the web UI's People page).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from homeagent_core.agent.approval_store import ApprovalStore, approval_dict
from homeagent_core.agent.people import DOOR_PLATFORM, SYSTEM, PeopleRegistry
from homeagent_core.agent.policy import OWNER_DOORS, Decision, ToolPolicy, door_of, guard_setting
from homeagent_core.durations import format_duration
from homeagent_sdk.current import CURRENT_PRINCIPAL as _CURRENT_PRINCIPAL
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.types import Principal, ToolCall, ToolResult

if TYPE_CHECKING:
    from homeagent_core.events import EventBus

__all__ = [
    "CURRENT_PRINCIPAL",
    "DEFAULT_APPROVAL_TIMEOUT",
    "TRUSTED_DOORS",
    "Approval",
    "ApprovalError",
    "Approvals",
    "Rights",
]

log = logging.getLogger(__name__)

DEFAULT_APPROVAL_TIMEOUT = 600.0
#: Doors that may name the person speaking (the core's own, and approvals' follow-ups).
TRUSTED_DOORS: frozenset[str] = OWNER_DOORS | {"approvals"}
#: The principal of the turn running in this task (sub-agents, residents and tools started
#: from a turn inherit it: they run with their creator's rights, never more).
#: (Defined in the SDK, :mod:`homeagent_sdk.current`, so memory and plugins read it without the kernel.)
CURRENT_PRINCIPAL = _CURRENT_PRINCIPAL

Deliver = Callable[[Principal, str, str], Awaitable[None]]
Execute = Callable[[ToolCall], Awaitable[ToolResult]]


class ApprovalError(HomeAgentError):
    """An approval cannot be decided (unknown, already decided, its turn stopped)."""


@dataclass
class Approval:
    """One call waiting for the owner."""

    id: int
    principal: Principal
    call: ToolCall
    channel: str
    created: float
    status: str = "pending"
    result: str = ""
    decided_by: str = ""
    execute: Execute | None = field(default=None, repr=False)
    stopped: Callable[[], bool] | None = field(default=None, repr=False)
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return approval_dict(self.id, self.principal, self.call, self.channel, self.created, self.status,
                             self.decided_by, None, self.result)


class Approvals:
    """The "ask the owner" calls of one running agent, kept in ``people.db``.

    A request and a decision are on disk before they are acknowledged. At start
    (:meth:`recover`) an approval still pending from the daemon's last run is closed as
    ``interrupted`` and its asker is told to ask again: the call it held (the tool, the asking
    turn's tool set, whether that turn was stopped) ended with the process, and a call is never
    run later on a record alone, whose person may have lost the right since.
    """

    def __init__(
        self,
        people: PeopleRegistry,
        bus: EventBus | None = None,
        *,
        timeout: Callable[[], float] = lambda: DEFAULT_APPROVAL_TIMEOUT,
        deliver: Deliver | None = None,
        store: ApprovalStore | None = None,
    ) -> None:
        self.people = people
        self.bus = bus
        self.timeout = timeout
        self.deliver = deliver
        self.store = store if store is not None else ApprovalStore(people.path)
        self._items: dict[int, Approval] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def request(
        self,
        principal: Principal,
        call: ToolCall,
        channel: str,
        execute: Execute,
        *,
        stopped: Callable[[], bool] | None = None,
    ) -> Approval:
        """File ``call`` for the owner's decision (stored first); publishes ``approval_requested``."""
        created = time.time()
        approval_id = await asyncio.to_thread(self.store.insert, principal, call, channel, created)
        approval = Approval(approval_id, principal, call, channel, created, execute=execute, stopped=stopped)
        self._items[approval.id] = approval
        seconds = max(0.001, float(self.timeout()))
        loop = asyncio.get_running_loop()
        approval.timer = loop.call_later(seconds, self._expire, approval.id, seconds)
        await asyncio.to_thread(self.people.audit, principal, call.name, "asked", f"approval #{approval.id}")
        if self.bus is not None:
            self.bus.publish("approval_requested", approval.to_dict())
        log.info("approval #%d: %s asks to run %s", approval.id, principal.person or "a guest", call.name)
        return approval

    def list(self, *, pending_only: bool = True) -> builtins.list[Approval]:
        """The approvals of this run (pending ones only by default), oldest first."""
        items = sorted(self._items.values(), key=lambda a: a.id)
        return [a for a in items if a.status == "pending"] if pending_only else items

    async def history(self, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """The newest ``limit`` approvals with their outcomes, earlier runs included, newest first."""
        rows = await asyncio.to_thread(self.store.rows, limit)
        return [r.to_dict() for r in rows]

    def get(self, approval_id: int) -> Approval:
        """The approval ``approval_id`` of this run.

        Raises:
            ApprovalError: no such approval (one of an earlier run is named with its outcome).
        """
        approval = self._items.get(int(approval_id))
        if approval is None:
            old = self.store.get(int(approval_id))
            if old is not None:
                raise ApprovalError(
                    f"approval #{old.id} ({old.call.name} for {old.principal.person or 'a guest'}) was already "
                    f"{old.status}; nothing changed" + (f" ({old.result})" if old.result else "")
                )
            pending = ", ".join(f"#{a.id}" for a in self.list()) or "none"
            raise ApprovalError(f"there is no approval #{approval_id}; pending: {pending}")
        return approval

    async def decide(
        self, approval_id: int, approve: bool, *, by: str = "owner", decider: Principal | None = None
    ) -> Approval:
        """Approve (run the call) or deny approval ``approval_id``.

        ``decider`` is who decides, when a door knows it (a chat account, a web login): only
        the owner may. Of two decisions of one approval at once exactly one wins; the other
        is told it was already decided.

        Raises:
            ApprovalError: not the owner, unknown, already decided or expired, or its turn was stopped.
        """
        if decider is not None and (decider.role != "owner" or decider.person == SYSTEM.person):
            who = decider.person or "a guest"
            raise ApprovalError(
                f"only the owner decides approvals; {who} (role {decider.role or 'guest'}) cannot. Nothing changed"
            )
        approval = await asyncio.to_thread(self.get, approval_id)
        if approval.status != "pending":
            raise self._already(approval)
        if approval.stopped is not None and approval.stopped():
            await self._close(approval, "withdrawn", by="stopped turn")
            raise ApprovalError(
                f"approval #{approval.id} belongs to a turn that was stopped before it finished; "
                f"{approval.call.name} was not run"
            )
        changed = await asyncio.to_thread(self._asker_changed, approval) if approve else ""
        if changed:
            await self._close(approval, "withdrawn", by=by, result=changed)
            await asyncio.to_thread(
                self.people.audit, approval.principal, approval.call.name, "withdrawn", f"approval #{approval.id}"
            )
            raise ApprovalError(f"approval #{approval.id}: {changed}; {approval.call.name} was not run")
        status = "approved" if approve else "denied"
        await self._close(approval, status, by=by)
        approval.decided_by = by
        if not approve:
            await asyncio.to_thread(
                self.people.audit, approval.principal, approval.call.name, "denied-by-owner", f"approval #{approval.id}"
            )
            self._spawn(self._tell(approval, f"{approval.call.name} was denied by the owner; it did not run."))
            return approval
        await asyncio.to_thread(
            self.people.audit, approval.principal, approval.call.name, "approved", f"approval #{approval.id}"
        )
        self._spawn(self._run(approval))
        return approval

    @staticmethod
    def _already(approval: Approval) -> ApprovalError:
        return ApprovalError(
            f"approval #{approval.id} ({approval.call.name} for {approval.principal.person or 'a guest'}) "
            f"was already {approval.status}; nothing changed"
        )

    def _asker_changed(self, approval: Approval) -> str:
        """Why the asker's rights are not the ones they asked with any more ("" when they are):
        removed, another role, or the chat account they asked from no longer linked to them."""
        asker = approval.principal
        if not asker.person:
            return ""
        person = self.people.get(asker.person)
        if person is None:
            return f"{asker.person} was removed since asking"
        if person.role != asker.role:
            return f"{asker.person}'s role changed since asking ({asker.role} -> {person.role}); they can ask again"
        if asker.account:
            linked = self.people.person_for_identity(asker.door, asker.account)
            if linked is None or linked.name != person.name:
                return f"the {asker.door} account {asker.account} that asked is no longer linked to {asker.person}"
        return ""

    async def _close(self, approval: Approval, status: str, *, by: str, result: str = "") -> None:
        """Claim ``approval`` for ``status`` (at once, on the loop: a second decision sees it
        decided), then store it; a refused store undoes the claim."""
        if approval.status != "pending":
            raise self._already(approval)
        approval.status = status
        try:
            stored = await asyncio.to_thread(
                self.store.finish, approval.id, status, by=by, at=time.time(), result=result
            )
        except Exception as exc:
            approval.status = "pending"
            raise ApprovalError(
                f"approval #{approval.id}: the decision could not be stored ({exc}); try again"
            ) from exc
        if not stored:  # decided by another process on the same data directory
            row = await asyncio.to_thread(self.store.get, approval.id)
            approval.status = row.status if row is not None else "withdrawn"
            raise self._already(approval)
        approval.result = result or approval.result
        if approval.timer is not None:
            approval.timer.cancel()
            approval.timer = None
        if self.bus is not None:
            self.bus.publish("approval_decided", approval.to_dict())

    def _expire(self, approval_id: int, seconds: float) -> None:
        approval = self._items.get(approval_id)
        if approval is None or approval.status != "pending":
            return
        self._spawn(self._expired(approval, seconds))

    async def _expired(self, approval: Approval, seconds: float) -> None:
        wait = format_duration(seconds)
        try:
            await self._close(approval, "expired", by="timeout", result=f"no answer in {wait}")
        except ApprovalError:
            return  # decided in the meantime
        await asyncio.to_thread(
            self.people.audit, approval.principal, approval.call.name, "expired", f"approval #{approval.id}"
        )
        await self._tell(approval, f"{approval.call.name} did not run: no answer in {wait} from the owner.")

    async def withdraw_stopped(self) -> int:
        """Withdraw pending approvals whose turn was stopped; returns how many."""
        count = 0
        for approval in self.list():
            if approval.stopped is not None and approval.stopped():
                with contextlib.suppress(ApprovalError):
                    await self._close(approval, "withdrawn", by="stopped turn")
                    count += 1
        return count

    async def recover(self) -> int:
        """Close the approvals left pending by the daemon's last run and tell each asker; returns how many.

        Call once the doors are open (the askers' channels exist again).
        """
        text = "the daemon restarted before the owner decided; ask again"
        rows = await asyncio.to_thread(self.store.interrupt_pending, time.time(), text)
        for row in rows:
            approval = Approval(row.id, row.principal, row.call, row.channel, row.created, status="interrupted",
                                result=text, decided_by="restart")
            self._items[row.id] = approval
            await asyncio.to_thread(
                self.people.audit, row.principal, row.call.name, "interrupted", f"approval #{row.id}"
            )
            if self.bus is not None:
                self.bus.publish("approval_decided", approval.to_dict())
            self._spawn(self._tell(approval, f"{row.call.name} did not run: {text}."))
        if rows:
            log.warning("%d approval(s) were pending when the daemon stopped; closed, and their askers told", len(rows))
        return len(rows)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, approval: Approval) -> None:
        assert approval.execute is not None
        token = CURRENT_PRINCIPAL.set(approval.principal)
        try:
            result = await approval.execute(approval.call)
        except Exception as exc:  # the tool registry turns tool errors into results; this is a bug guard
            result = ToolResult(approval.call.id, approval.call.name, False, f"{type(exc).__name__}: {exc}")
        finally:
            CURRENT_PRINCIPAL.reset(token)
        approval.result = result.result[:4000]
        try:
            await asyncio.to_thread(self.store.set_result, approval.id, approval.result)
        except Exception as exc:
            log.warning("approval #%d: its result could not be stored: %s", approval.id, exc)
        outcome = "ok" if result.success else "failed"
        await self._tell(approval, f"the owner approved {approval.call.name}; it ran ({outcome}):\n{approval.result}")

    async def _tell(self, approval: Approval, text: str) -> None:
        if self.deliver is None:
            return
        try:
            await self.deliver(approval.principal, approval.channel, f"[审批 #{approval.id}] {text}")
        except Exception as exc:
            log.warning("approval #%d: the outcome could not be delivered: %s", approval.id, exc)

    async def aclose(self) -> None:
        """Cancel the expiry timers and the follow-ups in flight; close the store.

        Approvals still pending stay pending on disk; the next start closes them (:meth:`recover`).
        """
        for approval in self._items.values():
            if approval.timer is not None:
                approval.timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.to_thread(self.store.close)


class Rights:
    """What a turn asks about rights: the principal of an input, the tools offered, each call."""

    def __init__(
        self, people: PeopleRegistry, approvals: Approvals, *, is_external: Callable[[str], bool] = lambda _: False
    ) -> None:
        self.people = people
        self.policy = ToolPolicy(people)
        self.approvals = approvals
        #: Whether a source is a plugin that is not built in: such a plugin never counts as one
        #: of the core's doors, even when it took the name of one (a package called ``http``).
        self.is_external = is_external

    def resolve(self, source: str, claim: Principal | None, *, self_input: bool = False) -> Principal:
        """The principal of an input from ``source`` that says it comes from ``claim``.

        Only the core's own doors may name a person; a chat door names an account, which
        counts only when the owner linked it (``homeagent people link``). An input that
        names nobody is the owner's from the core's doors, the inherited principal inside a
        turn (sub-agents, residents), the linked person's from a plugin the owner linked as a
        door (``homeagent people link NAME door PLUGIN``), and a guest's from anywhere else.
        """
        if self_input:
            return SYSTEM
        inherited = CURRENT_PRINCIPAL.get()
        base = door_of(source)
        core_door = not self.is_external(base)
        door = claim.door if claim is not None and claim.door else source
        thread = claim.thread if claim is not None else ""
        account = claim.account if claim is not None else ""
        if claim is not None and claim.person and base in TRUSTED_DOORS and core_door:
            if claim.person == SYSTEM.person:
                return SYSTEM
            return self.people.principal(self.people.get(claim.person), door, thread=thread)
        if claim is not None and account:
            person = self.people.person_for_identity(claim.door or source, account)
            return self.people.principal(person, door, thread=thread, account=account)
        if inherited is not None:
            return inherited
        if claim is None and base in OWNER_DOORS and core_door:
            return self.people.principal(self.people.owner(), door, thread=thread)
        if not account:
            # The owner may let a plugin speak for someone: `homeagent people link NAME door PLUGIN`.
            person = self.people.person_for_identity(DOOR_PLATFORM, source)
            return self.people.principal(person, door, thread=thread)
        return self.people.principal(None, door, thread=thread, account=account)

    def current(self) -> Principal | None:
        """The principal of the turn (or approved call) running in this task, None outside one."""
        return CURRENT_PRINCIPAL.get()

    def guard_setting(self, key: str, writer: str) -> None:
        """Refuse a write of a guarded ``key`` by ``writer`` (:func:`homeagent_core.agent.policy.guard_setting`)."""
        guard_setting(key, writer)

    def offered(self, principal: Principal, names: Iterable[str]) -> list[str]:
        """The tools of ``names`` offered to ``principal``."""
        return self.policy.offered(principal, names)

    async def check(
        self,
        principal: Principal,
        call: ToolCall,
        channel: str,
        execute: Execute,
        *,
        stopped: Callable[[], bool] | None = None,
    ) -> ToolResult | None:
        """None when ``call`` may run now; else the result the model gets instead.

        A denied call gets a failed result naming the rule; an ``ask`` call is filed for the
        owner and the model is told it waits.
        """
        decision = self.policy.decide(principal, call.name)
        if decision is Decision.ALLOW:
            await asyncio.to_thread(self.people.audit, principal, call.name, "allowed")
            return None
        if decision is Decision.DENY:
            await asyncio.to_thread(self.people.audit, principal, call.name, "denied")
            return ToolResult(call.id, call.name, False, self.policy.refusal(principal, call.name), call.plugin)
        approval = await self.approvals.request(principal, call, channel, execute, stopped=stopped)
        wait = format_duration(float(self.approvals.timeout()))
        return ToolResult(
            call.id,
            call.name,
            False,
            f"{call.name} needs the owner's approval: request #{approval.id} is waiting (up to {wait}). "
            "It runs when the owner approves and its result is sent to you then; tell the person it is waiting.",
            call.plugin,
        )

    def audit_outcome(self, principal: Principal, call: ToolCall, outcome: str) -> None:
        """Record an extra outcome of ``call`` (e.g. rejected by a stage handler)."""
        self.people.audit(principal, call.name, outcome)
