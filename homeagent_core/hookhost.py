"""What the kernel needs of the plugin host: a hook's handlers, and registration calls per plugin.

:class:`HookHost` is the seam between the kernel (``homeagent_core.agent``) and the plugin
host (:class:`homeagent_core.plugins.manager.PluginHost`, which satisfies it): the kernel and
its stage runner are typed against this protocol and never import the plugins package.
:class:`HookHandler` — one plugin's implementation of one hook — is the value both sides pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import pluggy

__all__ = ["HookHandler", "HookHost"]

R = TypeVar("R")


@dataclass(frozen=True)
class HookHandler:
    """One plugin's implementation of a hook, callable with keyword arguments."""

    plugin_name: str
    function: Callable[..., Any]
    argnames: tuple[str, ...]
    scope: str = ""
    impl: pluggy.HookImpl | None = field(default=None, compare=False, repr=False)

    def __call__(self, **kwargs: Any) -> Any:
        return self.function(*[kwargs[name] for name in self.argnames])


class HookHost(Protocol):
    """The hooks the kernel calls and the plugin bookkeeping it reports to."""

    @property
    def pm(self) -> pluggy.PluginManager:
        """The pluggy manager (the stage runner checks its hook relay for changed impls)."""
        ...

    def handlers(self, hook_name: str, *, reverse: bool = False) -> list[HookHandler]:
        """The plain impls of one hook, in the order sequential hooks call them."""
        ...

    def stage_handlers(self, stage: str) -> list[HookHandler]:
        """The handlers of one of the seven stages."""
        ...

    def call_register(self, hook_name: str, make_registry: Callable[[str], R]) -> dict[str, R]:
        """Call a ``register_*`` hook once per plugin; a plugin whose impl raises is marked failed."""
        ...

    def call_registration(self, hook_name: str, plugin_name: str, **kwargs: Any) -> None:
        """Run one plugin's impl of a registration hook."""
        ...

    def spec_argname(self, hook_name: str) -> str:
        """The name of a registration hook's one argument."""
        ...

    def record_failure(self, name: str, error: BaseException | str, *, kind: str = "", distribution: str = "") -> None:
        """Mark a plugin failed (and unregister it)."""
        ...

    def note_contribution(self, plugin_name: str, kind: str, item: str) -> None:
        """Record what a plugin registered (a tool, a channel), for listings."""
        ...

    def drop_contribution(self, plugin_name: str, kind: str, item: str) -> None:
        """Forget a contribution recorded with :meth:`note_contribution`."""
        ...
