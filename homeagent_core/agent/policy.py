"""Tool policy per role and person, and the settings no model tool may change.

A policy is three lists of ``fnmatch`` patterns over tool names: ``deny``, ``ask`` (the owner
is asked first, :mod:`homeagent_core.agent.approvals`) and ``allow``. A person's own lists are
looked at first; the first list of theirs with a matching pattern decides. Otherwise their
role's lists decide the same way (deny, then ask, then allow). A tool no list matches is
denied. The owner is always allowed everything.

The policy is applied twice: when the tools are offered (a denied tool is left out of the
model request, an ``ask`` tool is offered) and again when a call is executed (a denied call
fails with a message saying who was refused what, and why).

Guarded settings (:func:`is_guarded`) decide rights: who may run programs, read files, log in,
install plugins, which model and keys are used. Only the owner changes them, through the CLI
or the web UI; a model tool (``config_set``), an out-of-process or Lua plugin's settings write
is refused whoever's turn it is.
"""

from __future__ import annotations

import enum
import fnmatch
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from homeagent_core.agent.people import SYSTEM, PeopleError
from homeagent_sdk.errors import HomeAgentError
from homeagent_sdk.types import Principal

if TYPE_CHECKING:
    from homeagent_core.agent.people import PeopleRegistry

__all__ = [
    "GUARDED_SETTINGS",
    "OWNER_DOORS",
    "Decision",
    "GuardedSetting",
    "ToolPolicy",
    "door_of",
    "guard_setting",
    "is_guarded",
]

log = logging.getLogger(__name__)

#: Settings that decide rights: never changed by a model tool or a plugin's settings write.
GUARDED_SETTINGS: tuple[str, ...] = (
    "core.people.*",
    "core.llm.*",
    "core.embeddings.api_key",
    "plugin.cmd.*",
    "plugin.files.*",
    "plugin.agentcli.*",
    "plugin.webui.*",
    "plugin.cli.*",
    "plugin.pluginmgr.*",
    "plugin.mcp.servers",
    "plugin.web.allow_private",
    "plugin.calendar.calendars",
    "plugin.calendar.passwords",
    "plugin.calendar.subscriptions",
    "plugin.calendar.allow_private",
)

#: Doors of the core itself whose inputs without a principal come from the owner: the library
#: API (in-process code), the terminal socket (its file mode admits only the daemon's user),
#: the web UI and its /v1 API (``webui``, ``webui/<device>``, ``http``: the one admin login and
#: admin key) and the kernel's own jobs (sub-agents, residents, triage). A source ``x/y`` is
#: the door ``x``.
OWNER_DOORS: frozenset[str] = frozenset(
    {
        "library",
        "cli",
        "cli_socket",
        "webui",
        "http",
        "timer",
        "reminders",
        "agentcli",
        "mcp",
        "kernel",
        "spawn_child",
        "resident_send",
    }
)


def door_of(source: str) -> str:
    """The door of an input source: ``webui/phone`` is the door ``webui``."""
    return source.split("/", 1)[0]


class Decision(enum.StrEnum):
    """What the policy says about one tool for one principal."""

    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class GuardedSetting(HomeAgentError):
    """A guarded setting was to be changed by a model tool or a plugin."""


def is_guarded(key: str) -> bool:
    """Whether ``key`` is a guarded setting (see :data:`GUARDED_SETTINGS`)."""
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in GUARDED_SETTINGS)


def guard_setting(key: str, writer: str) -> None:
    """Refuse a write of a guarded ``key`` by ``writer`` (a model tool or a plugin).

    Raises:
        GuardedSetting: ``key`` is guarded; the message says why and how the owner changes it.
    """
    if is_guarded(key):
        raise GuardedSetting(
            f"{key} is a guarded setting (it decides who may do what); {writer} cannot change it. "
            f"The owner changes it with `homeagent config set {key} VALUE` or on the web UI's settings page"
        )


def _match(patterns: Iterable[str], tool: str) -> bool:
    return any(fnmatch.fnmatchcase(tool, p) for p in patterns)


class ToolPolicy:
    """Decides per principal which tools are offered and which calls run."""

    def __init__(self, people: PeopleRegistry) -> None:
        self.people = people

    def decide(self, principal: Principal | None, tool: str) -> Decision:
        """Allow, deny or ask for ``tool`` on behalf of ``principal`` (None: a guest)."""
        return self._rules(principal)(tool)

    def _rules(self, principal: Principal | None) -> Callable[[str], Decision]:
        """The decision function of ``principal``: the registry is read once, not per tool."""
        if principal is None:
            return lambda _tool: Decision.DENY
        if principal.role == "owner" and principal.person != SYSTEM.person:
            return lambda _tool: Decision.ALLOW
        lists: list[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = []
        if principal.person and principal.role != SYSTEM.role:
            person = self.people.get(principal.person)
            if person is not None:
                lists.append((person.deny, person.ask, person.allow))
        try:
            role = self.people.role(principal.role or "guest")
        except PeopleError:
            log.warning("principal %s has the unknown role %r; treated as a guest", principal.person, principal.role)
            return lambda _tool: Decision.DENY
        own = lists[0] if lists else None

        def decide(tool: str) -> Decision:
            if own is not None:
                for decision, patterns in zip((Decision.DENY, Decision.ASK, Decision.ALLOW), own, strict=True):
                    if _match(patterns, tool):
                        return decision
            if _match(role.deny, tool):
                return Decision.DENY
            if _match(role.ask, tool):
                return Decision.ASK
            if _match(role.allow, tool):
                return Decision.ALLOW
            return Decision.DENY

        return decide

    def offered(self, principal: Principal | None, names: Iterable[str]) -> list[str]:
        """The tool names of ``names`` that ``principal`` may be offered (allowed or asked)."""
        decide = self._rules(principal)
        return [n for n in names if decide(n) is not Decision.DENY]

    @staticmethod
    def refusal(principal: Principal | None, tool: str) -> str:
        """The message of a denied call."""
        who = principal.person if principal is not None and principal.person else "a guest"
        role = principal.role if principal is not None and principal.role else "guest"
        return (
            f"{tool} is not allowed for {who} (role {role}); the owner can change the rights with "
            f"`homeagent people role` or a person's own policy (docs/PEOPLE.md)"
        )
