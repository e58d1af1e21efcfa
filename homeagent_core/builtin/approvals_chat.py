"""Built-in ``approvals_chat``: the owner's chat app gets approval requests and decides them.

When a call waits for the owner (:mod:`homeagent_core.agent.approvals`), each chat account the
owner linked (``homeagent people link OWNER qq 12345``) gets the request as a private message
through the chat bridge's output channel, which is named after its platform (``qq`` for the
OneBot bridge, ``telegram``)::

    [审批 #3] mum (adult, webui) 想运行 cmd_run：{"command": "ls /"}
    回复「同意 3」批准，「拒绝 3」拒绝（10 分钟内）。
    Reply "approve 3" or "deny 3" (within 10 minutes).

The owner's reply ``同意 3`` / ``approve 3`` / ``批准 3`` (approve) or ``拒绝 3`` / ``deny 3``
(deny) from a linked account decides it; the answer says what happened. The decision is taken
before the model sees anything: such a message never reaches the model and is not remembered.
The same words from anyone else (another person, a guest, a group member) decide nothing: they
are told that only the owner decides, and the message does not reach the model either.

A chat account gets the requests only when its bridge may send to it (the bridge's own access
rules: the owner's account is paired or on its ``allow_from`` list); a send that fails is
logged once per account and platform, and the web UI and CLI still decide.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Any

from homeagent_core.durations import format_duration
from homeagent_sdk import HomeAgentError, hookimpl
from homeagent_sdk.types import Event, Principal, StageContext

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import RightsAccess
    from homeagent_core.plugins.sdk import ScopedSDK

__all__ = ["ApprovalsChat", "make_plugin", "parse_decision", "request_text"]

PLUGIN_NAME = "approvals_chat"
#: Identity platforms that are not chat accounts (``door``: a whole plugin speaking for someone).
_NOT_CHAT = frozenset({"door"})
_ARGS_MAX = 300

log = logging.getLogger(__name__)

_WORDS = {"同意": True, "批准": True, "approve": True, "拒绝": False, "deny": False}
#: ``同意 3`` / ``approve #3`` / ``拒绝3。``, alone or after a chat bridge's ``speaker: `` prefix.
_DECISION = re.compile(r"^(?:[^\n]*:\s*)?(同意|批准|approve|拒绝|deny)\s*#?\s*(\d{1,12})\s*[。.!！]?$", re.IGNORECASE)


def parse_decision(text: str) -> tuple[bool, int] | None:
    """``(approve, id)`` when ``text`` is an approval reply (``同意 3``, ``deny 3``), else None."""
    match = _DECISION.match(text.strip())
    if match is None:
        return None
    return _WORDS[match.group(1).lower()], int(match.group(2))


def request_text(approval: dict[str, Any], wait: str) -> str:
    """The chat message that asks the owner about ``approval`` (an ``approval_requested`` payload)."""
    args = json.dumps(approval.get("arguments") or {}, ensure_ascii=False, default=str)
    if len(args) > _ARGS_MAX:
        args = args[: _ARGS_MAX - 1] + "…"
    n = approval["id"]
    who = f"{approval.get('person') or '(guest)'} ({approval.get('role') or 'guest'}, {approval.get('door') or '?'})"
    return (
        f"[审批 #{n}] {who} 想运行 {approval.get('tool')}：{args}\n"
        f"回复「同意 {n}」批准，「拒绝 {n}」拒绝（{wait} 内）。\n"
        f'Reply "approve {n}" or "deny {n}" (within {wait}).'
    )


class ApprovalsChat:
    """Sends approval requests to the owner's linked chat accounts; takes their replies."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self._failed: set[tuple[str, str]] = set()

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk

    def _rights(self) -> RightsAccess | None:
        services = self._sdk.services if self._sdk is not None else None
        return services.rights if services is not None else None

    # ------------------------------------------------------------------ requests out

    @hookimpl
    async def on_event(self, event: Event) -> None:
        if event.name != "approval_requested":
            return
        rights = self._rights()
        services = self._sdk.services if self._sdk is not None else None
        kernel = services.kernel if services is not None else None
        if rights is None or kernel is None:
            return
        people = rights.people
        owners = [p for p in await asyncio.to_thread(people.list) if p.role == "owner"]
        accounts = [(pl, acc) for p in owners for pl, acc in p.identities if pl not in _NOT_CHAT]
        if not accounts:
            return
        text = request_text(event.data, format_duration(float(rights.approvals.timeout())))
        for platform, account in accounts:
            if kernel.channels.output(platform) is None:
                continue  # no bridge for that platform runs now
            try:
                await kernel.channels.send(platform, text, {"conversation": f"private:{account}"})
            except HomeAgentError as exc:  # ChannelSendError: not paired, the link is down, ...
                if (platform, account) not in self._failed:
                    self._failed.add((platform, account))
                    log.warning("approval #%s could not be sent to the owner's %s account %s: %s",
                                event.data.get("id"), platform, account, exc)
            else:
                self._failed.discard((platform, account))

    # ------------------------------------------------------------------ replies in

    @hookimpl
    async def on_input(self, ctx: StageContext) -> None:
        principal = ctx.principal
        if principal is None or not principal.account:
            return  # only chat senders answer by message; the web UI and CLI have their own ways
        decision = parse_decision(ctx.raw_message)
        if decision is None:
            return
        rights = self._rights()
        if rights is None:
            return
        approve, approval_id = decision
        ctx.no_memory = True
        if principal.role != "owner":
            ctx.response = (
                f"只有主人可以审批；#{approval_id} 没有变化。\n"
                f"Only the owner decides approvals; nothing was decided about #{approval_id}."
            )
            log.info("approval #%d: %s on %s (%s) tried to decide it; refused", approval_id,
                     principal.person or "a guest", principal.door, principal.account)
            return
        ctx.response = await self._decide(rights, principal, approval_id, approve)

    @staticmethod
    async def _decide(rights: RightsAccess, owner: Principal, approval_id: int, approve: bool) -> str:
        try:
            decided = await rights.approvals.decide(
                approval_id, approve, by=f"{owner.person} ({owner.door})", decider=owner
            )
        except HomeAgentError as exc:  # ApprovalError: unknown, already decided, its turn stopped
            return f"#{approval_id}: {exc}"
        who = decided.principal.person or "a guest"
        n, tool = decided.id, decided.call.name
        if decided.status == "approved":
            return f"已批准 #{n}：{tool} 现在为 {who} 运行。\nApproved #{n}: {tool} runs for {who} now."
        return f"已拒绝 #{n}：{tool} 不会运行。\nDenied #{n}: {tool} will not run for {who}."


def make_plugin() -> ApprovalsChat:
    return ApprovalsChat()
