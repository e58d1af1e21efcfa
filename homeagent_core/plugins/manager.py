"""The plugin host: builds the pluggy manager and is the only code that calls hooks.

``create_plugin_manager()`` loads plugins in the fixed discovery order — entry points of the
``homeagent`` group, then the built-ins in :data:`DEFAULT_PLUGINS` — honouring the operator
switches ``HOMEAGENT_LOAD_PLUGINS`` (allowlist of entry-point plugins; empty = none),
``HOMEAGENT_DISABLE_PLUGINS`` (blocklist, any plugin) and ``HOMEAGENT_TRACE_PLUGINS`` (print
every hook call). A plugin that fails to import, register or start is recorded as failed with
its name, distribution and error, and everything else carries on.

:class:`PluginHost` is the typed facade over ``pm.hook``: the kernel asks it for the handlers
of a stage, the app asks it to run registration and lifecycle hooks per plugin.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import inspect
import logging
import os
import sys
import time
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pluggy

from homeagent_core.aio import await_me_maybe
from homeagent_core.hookhost import HookHandler
from homeagent_core.plugins.hookcall import acall_wrapped, is_wrapper
from homeagent_sdk import hookspecs
from homeagent_sdk._names import PROJECT_NAME
from homeagent_sdk.errors import PluginLoadError, PluginValidationError
from homeagent_sdk.types import STAGES, Event

__all__ = [
    "DEFAULT_PLUGINS",
    "ENTRYPOINT_GROUP",
    "SEQUENTIAL_HOOKS",
    "STAGES",
    "HookHandler",
    "PluginHost",
    "PluginInfo",
    "create_plugin_manager",
]

log = logging.getLogger(__name__)

ENTRYPOINT_GROUP = PROJECT_NAME

#: Built-in plugins, registered exactly like third-party ones (module paths).
DEFAULT_PLUGINS: tuple[str, ...] = (
    "homeagent_core.builtin.cfgmgr",
    "homeagent_core.builtin.pluginmgr",
    "homeagent_core.builtin.cli_socket",
    "homeagent_core.builtin.timer",
    "homeagent_core.builtin.reminders",
    "homeagent_core.builtin.calendar",
    "homeagent_core.builtin.cmd",
    "homeagent_core.builtin.files",
    "homeagent_core.builtin.agentcli",
    "homeagent_core.builtin.healthcheck",
    "homeagent_core.builtin.backup",
    "homeagent_core.builtin.mcp",
    "homeagent_core.builtin.web",
    "homeagent_core.builtin.senses",
    "homeagent_core.builtin.browser",
    "homeagent_core.builtin.approvals_chat",
    "homeagent_core.builtin.webui",
)

#: Hooks called one plugin at a time, in order: wrappers and tryfirst/trylast apply.
SEQUENTIAL_HOOKS: tuple[str, ...] = (
    "register_tools",
    "register_input_channels",
    "register_output_channels",
    "register_embedding_providers",
    "register_settings",
    "register_routes",
    "register_commands",
    "register_adapters",
    "startup",
    "shutdown",
    "on_event",
)

R = TypeVar("R")


@dataclass
class PluginInfo:
    """What the host knows about one plugin; ``homeagent plugins list`` prints it."""

    name: str
    kind: str
    version: str = ""
    distribution: str = ""
    status: str = "loaded"
    error: str = ""
    hooks: list[str] = field(default_factory=list)
    contributions: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "version": self.version,
            "distribution": self.distribution,
            "status": self.status,
            "error": self.error,
            "hooks": sorted(self.hooks),
            "contributions": {k: sorted(v) for k, v in self.contributions.items() if v},
        }


def _env_list(name: str) -> list[str] | None:
    """``None`` when the variable is unset, else its comma-separated, stripped items."""
    raw = os.environ.get(name)
    if raw is None:
        return None
    return [item.strip() for item in raw.split(",") if item.strip()]


class PluginHost:
    """Owns a ``pluggy.PluginManager`` and calls hooks on the kernel's behalf."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._info: dict[str, PluginInfo] = {}
        self._order: list[str] = []
        self._undo_trace: Callable[[], None] | None = None
        self.trace: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ registration

    def register(
        self,
        plugin: object,
        name: str | None = None,
        *,
        kind: str = "local",
        version: str = "",
        distribution: str = "",
    ) -> str:
        """Register a plugin object (a module or an instance); returns its name.

        Raises:
            PluginValidationError: ``plugin`` is a class, implements an unknown hook, or its
                hook signature does not match the spec (pluggy's message is kept).
        """
        if isinstance(plugin, type):
            raise PluginValidationError(
                f"plugin {name or plugin.__name__!r} was registered as the class "
                f"{plugin.__qualname__}; register an instance instead — did you forget ()?",
                plugin_name=name or plugin.__name__,
            )
        name = name or getattr(plugin, "name", None) or getattr(plugin, "__name__", None)
        if not isinstance(name, str) or not name:
            name = f"{type(plugin).__name__}-{id(plugin):x}"
        if self.pm.is_blocked(name):
            self._info[name] = PluginInfo(name, kind, version, distribution, status="blocked")
            return name
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            raise PluginValidationError(f"plugin {name!r}: {exc}", plugin_name=name) from exc
        except ValueError as exc:  # duplicate name or object
            raise PluginValidationError(f"plugin {name!r}: {exc}", plugin_name=name) from exc
        problem = self._stage_option_problem(plugin, name)
        if problem:
            self.pm.unregister(plugin)
            raise PluginValidationError(problem, plugin_name=name)
        hooks = sorted(c.name for c in self.pm.get_hookcallers(plugin) or [])
        self._info[name] = PluginInfo(name, kind, version, distribution, hooks=hooks)
        self._order.append(name)
        return name

    def _stage_option_problem(self, plugin: object, name: str) -> str:
        """Why ``plugin`` cannot keep one of its stage impls ("" when it can).

        Stage hooks run every plugin's impl concurrently on one ``StageContext``: there is no
        call chain a wrapper could wrap and no order tryfirst/trylast could change, so those
        options are refused instead of being silently ignored.
        """
        for caller in self.pm.get_hookcallers(plugin) or []:
            if caller.name not in STAGES:
                continue
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                used = [opt for opt in ("wrapper", "hookwrapper", "tryfirst", "trylast") if getattr(impl, opt)]
                if used:
                    options = ", ".join(f"{opt}=True" for opt in used)
                    return (
                        f"plugin {name!r}: hook {caller.name} ({impl.function.__qualname__}) is declared with "
                        f"@hookimpl({options}), which cannot apply to a stage hook: every plugin's {caller.name} "
                        "runs concurrently on the same StageContext, so there is no chain to wrap and no order; "
                        "use a plain @hookimpl (see docs/PLUGINS.md, 'Hook semantics')"
                    )
        return ""

    def unregister(self, name: str) -> None:
        """Remove a plugin; its registry contributions are removed by their owners."""
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin, name=name)
        if name in self._order:
            self._order.remove(name)

    def forget(self, name: str) -> None:
        """Drop what the host knows of an unregistered plugin (it was uninstalled while running)."""
        if self.pm.get_plugin(name) is None:
            self._info.pop(name, None)

    def record_failure(self, name: str, error: BaseException | str, *, kind: str = "", distribution: str = "") -> None:
        """Mark a plugin failed (and unregister it) so the rest can carry on."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        info = self._info.get(name) or PluginInfo(name, kind or "unknown", distribution=distribution)
        info.status, info.error = "failed", text
        self._info[name] = info
        self.unregister(name)
        log.error(
            "plugin %s%s failed: %s",
            name,
            f" (distribution {info.distribution})" if info.distribution else "",
            text,
        )

    def block(self, names: Iterable[str]) -> None:
        for name in names:
            self.pm.set_blocked(name)
            self._info.setdefault(name, PluginInfo(name, "unknown", status="blocked"))

    def load_module(self, module_path: str, *, kind: str = "builtin") -> str | None:
        """Import and register a plugin module by dotted path; failures are recorded."""
        name = module_path.rsplit(".", 1)[-1]
        if self.pm.is_blocked(name):
            self._info[name] = PluginInfo(name, kind, status="blocked")
            return None
        try:
            module = importlib.import_module(module_path)
            # A module with make_plugin() gets a fresh instance per host, so two agents in one
            # process never share plugin state; otherwise the module itself is the plugin.
            factory = getattr(module, "make_plugin", None)
            plugin = factory() if callable(factory) else module
            return self.register(plugin, name=getattr(module, "PLUGIN_NAME", name), kind=kind)
        except Exception as exc:
            self.record_failure(name, exc, kind=kind)
            return None

    def load_entrypoints(self, allow: Sequence[str] | None = None) -> None:
        """Load plugins of the ``homeagent`` entry-point group, one by one.

        ``allow`` None loads all; otherwise only entry points whose name is listed.
        """
        for ep in importlib.metadata.entry_points(group=ENTRYPOINT_GROUP):
            if allow is not None and ep.name not in allow:
                continue
            dist = ep.dist.name if ep.dist is not None else ""
            version = ep.dist.version if ep.dist is not None else ""
            if self.pm.is_blocked(ep.name) or self.pm.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
                factory = getattr(plugin, "make_plugin", None)
                if isinstance(plugin, types.ModuleType) and callable(factory):
                    plugin = factory()  # a fresh instance per host, as for built-ins
            except Exception as exc:
                self.record_failure(
                    ep.name,
                    PluginLoadError(f"error importing plugin {ep.name!r} ({ep.value}): {exc}"),
                    kind="entrypoint",
                    distribution=dist,
                )
                continue
            try:
                self.register(plugin, name=ep.name, kind="entrypoint", version=version, distribution=dist)
            except PluginValidationError as exc:
                self.record_failure(ep.name, exc, kind="entrypoint", distribution=dist)

    def enable_tracing(self, write: Callable[[str], None] | None = None) -> None:
        """Print every hook call with its arguments, impls and result (HOMEAGENT_TRACE_PLUGINS)."""
        out = write or (lambda text: print(text, file=sys.stderr))

        def before(hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]) -> None:
            names = ", ".join(impl.plugin_name for impl in impls)
            out(f"[trace] {hook_name}({', '.join(kwargs)}) -> impls: {names}")

        def after(
            outcome: pluggy.Result[Any], hook_name: str, impls: Sequence[pluggy.HookImpl], kwargs: Mapping[str, Any]
        ) -> None:
            exc = outcome.exception
            out(f"[trace] {hook_name} {'raised ' + repr(exc) if exc else 'returned ' + repr(outcome.get_result())}")

        self._undo_trace = self.pm.add_hookcall_monitoring(before, after)
        # The kernel runs stage handlers itself (concurrently, one by one), so pluggy never
        # sees those calls: the stage runner reports them through this writer instead.
        self.trace = out

    # ------------------------------------------------------------------ introspection

    def plugin_names(self) -> list[str]:
        """Registered plugins in registration order."""
        return [n for n in self._order if self.pm.get_plugin(n) is not None]

    def info(self, name: str) -> PluginInfo | None:
        return self._info.get(name)

    def plugins(self) -> list[PluginInfo]:
        """Every plugin the host has seen, including failed and blocked ones."""
        return list(self._info.values())

    def note_contribution(self, plugin_name: str, kind: str, item: str) -> None:
        """Record what a plugin registered (``tools``, ``channels``, ...) for listings."""
        info = self._info.get(plugin_name)
        if info is not None and item not in info.contributions.setdefault(kind, []):
            info.contributions[kind].append(item)

    def drop_contribution(self, plugin_name: str, kind: str, item: str) -> None:
        info = self._info.get(plugin_name)
        if info is not None and item in info.contributions.get(kind, []):
            info.contributions[kind].remove(item)

    def handlers(self, hook_name: str, *, reverse: bool = False) -> list[HookHandler]:
        """The plain (non-wrapper) impls of one hook, in the order sequential hooks call them.

        ``tryfirst`` impls come first and ``trylast`` ones last; within each group plugins keep
        their discovery (registration) order, or the reverse with ``reverse=True`` (used for
        ``shutdown``). Stage hooks run their handlers concurrently; they cannot carry these
        options (refused at registration), so for them this is simply discovery order.
        """
        caller = getattr(self.pm.hook, hook_name)
        rank = {name: i for i, name in enumerate(self._order)}
        direction = -1 if reverse else 1
        impls = sorted(
            (impl for impl in caller.get_hookimpls() if not is_wrapper(impl)),
            key=lambda impl: (
                0 if impl.tryfirst else 2 if impl.trylast else 1,
                direction * rank.get(impl.plugin_name, len(rank)),
            ),
        )
        out: list[HookHandler] = []
        for impl in impls:
            plugin = impl.plugin
            scope = getattr(plugin, "scope", "") or getattr(impl.function, "scope", "")
            out.append(HookHandler(impl.plugin_name, impl.function, tuple(impl.argnames), str(scope or ""), impl))
        return out

    def wrappers(self, hook_name: str) -> list[pluggy.HookImpl]:
        """The wrapper impls of a sequential hook, in pluggy's list order (the last is outermost)."""
        return [impl for impl in getattr(self.pm.hook, hook_name).get_hookimpls() if is_wrapper(impl)]

    def call_plugin(self, hook_name: str, plugin_name: str, **kwargs: Any) -> list[Any]:
        """Call one plugin's impl of a sync sequential hook through pluggy, inside every wrapper.

        pluggy's own hook calling (``subset_hook_caller``) runs it, so wrappers, old-style
        hookwrappers and hook-call tracing behave exactly as pluggy documents.
        """
        others = [
            impl.plugin
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls()
            if impl.plugin_name != plugin_name and not is_wrapper(impl)
        ]
        results: list[Any] = self.pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)
        return results

    async def acall(self, hook_name: str, handler: HookHandler, **kwargs: Any) -> Any:
        """Call one plugin's impl of an async-capable sequential hook inside every wrapper.

        Like :meth:`call_plugin`, but the impl may be ``async def``: it is awaited before the
        wrappers' teardowns run, so they see its real result or exception.
        """
        wrappers = self.wrappers(hook_name)
        if not wrappers or handler.impl is None:
            return await await_me_maybe(handler(**kwargs))
        if self.trace is not None:
            shown = f"{hook_name}({', '.join(kwargs)}) -> {handler.plugin_name}"
            self.trace(f"[trace] {shown} inside {len(wrappers)} wrapper(s)")
        return await acall_wrapped(wrappers, handler.impl, kwargs)

    def stage_handlers(self, stage: str) -> list[HookHandler]:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        return self.handlers(stage)

    # ------------------------------------------------------------------ registration hooks

    def call_register(self, hook_name: str, make_registry: Callable[[str], R]) -> dict[str, R]:
        """Call a ``register_*`` hook once per plugin with a registry stamped with its name.

        A plugin whose impl raises is marked failed; the others still register.
        """
        registries: dict[str, R] = {}
        argname = self.spec_argname(hook_name)
        for handler in self.handlers(hook_name):
            registry = make_registry(handler.plugin_name)
            try:
                self.call_registration(hook_name, handler.plugin_name, **{argname: registry})
            except Exception as exc:
                self.record_failure(handler.plugin_name, exc)
                continue
            registries[handler.plugin_name] = registry
        return registries

    def spec_argname(self, hook_name: str) -> str:
        """The name of a registration hook's one argument (``registry``, ``router``, ``app``)."""
        spec = getattr(self.pm.hook, hook_name).spec
        return spec.argnames[0] if spec is not None and spec.argnames else "registry"

    def call_registration(self, hook_name: str, plugin_name: str, **kwargs: Any) -> None:
        """Run one plugin's impl of a registration hook (through :meth:`call_plugin`).

        Raises:
            PluginValidationError: the impl returned an awaitable (registration hooks are sync).
            Exception: whatever the impl or a wrapper raised.
        """
        for result in self.call_plugin(hook_name, plugin_name, **kwargs):
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()
                raise PluginValidationError(
                    f"plugin {plugin_name!r}: hook {hook_name} must be sync "
                    f"(it returned an awaitable); register objects whose methods are async instead",
                    plugin_name=plugin_name,
                )

    # One typed method per registration hook (what the rest of the core calls).

    def register_tools(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_tools", make_registry)

    def register_input_channels(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_input_channels", make_registry)

    def register_output_channels(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_output_channels", make_registry)

    def register_embedding_providers(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_embedding_providers", make_registry)

    def register_settings(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_settings", make_registry)

    def register_routes(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_routes", make_registry)

    def register_adapters(self, make_registry: Callable[[str], R]) -> dict[str, R]:
        return self.call_register("register_adapters", make_registry)

    def register_commands(self, app: Any) -> None:
        for handler in self.handlers("register_commands"):
            try:
                self.call_registration("register_commands", handler.plugin_name, app=app)
            except Exception as exc:
                self.record_failure(handler.plugin_name, exc)

    # ------------------------------------------------------------------ lifecycle hooks

    async def startup(self, sdk_for: Callable[[str], Any], *, timeout: float = 30.0) -> list[str]:
        """Run each plugin's ``startup(sdk)`` with its own scoped SDK; returns the failures."""
        failed: list[str] = []
        for handler in self.handlers("startup"):
            name = handler.plugin_name
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(timeout):
                    await self.acall("startup", handler, sdk=sdk_for(name))
            except TimeoutError:
                self.record_failure(name, f"startup did not finish within {timeout:g} s")
                failed.append(name)
                continue
            except Exception as exc:
                log.debug("startup of %s raised", name, exc_info=True)
                self.record_failure(name, exc)
                failed.append(name)
                continue
            info = self._info.get(name)
            if info is not None:
                info.status = "started"
            log.debug("plugin %s started in %.1f ms", name, (time.perf_counter() - t0) * 1000)
        for name in self.plugin_names():
            info = self._info[name]
            if info.status == "loaded":
                info.status = "started"
        return failed

    async def shutdown(self, *, timeout: float = 10.0) -> None:
        """Run ``shutdown()`` in reverse start order (tryfirst / trylast still first / last).

        A failing or hanging one is logged.
        """
        for handler in self.handlers("shutdown", reverse=True):
            try:
                async with asyncio.timeout(timeout):
                    await self.acall("shutdown", handler)
            except TimeoutError:
                log.error("plugin %s: shutdown did not finish within %g s", handler.plugin_name, timeout)
            except Exception:
                log.exception("plugin %s: shutdown failed", handler.plugin_name)
            info = self._info.get(handler.plugin_name)
            if info is not None and info.status == "started":
                info.status = "stopped"

    def event_handlers(self) -> list[HookHandler]:
        return self.handlers("on_event")

    async def deliver_event(self, handler: HookHandler, event: Event) -> None:
        """Deliver one event to one plugin's ``on_event`` (inside the ``on_event`` wrappers)."""
        await self.acall("on_event", handler, event=event)


def create_plugin_manager(
    *,
    load_entrypoints: bool = True,
    allow: Sequence[str] | None = None,
    block: Iterable[str] = (),
    builtins: Sequence[str] | None = None,
    plugins: Iterable[object] = (),
    trace: bool | None = None,
) -> PluginHost:
    """Build a :class:`PluginHost` and load plugins in the fixed discovery order.

    :param load_entrypoints: load installed plugins of the ``homeagent`` entry-point group
        (tests pass ``False`` so installed third-party plugins never load).
    :param allow: only these entry-point plugins; defaults to ``HOMEAGENT_LOAD_PLUGINS``.
    :param block: plugin names never to register, added to ``HOMEAGENT_DISABLE_PLUGINS``.
    :param builtins: module paths of built-ins; defaults to :data:`DEFAULT_PLUGINS`.
    :param plugins: extra plugin objects registered last (library use, tests).
    :param trace: print hook calls; defaults to ``HOMEAGENT_TRACE_PLUGINS``.

    Raises:
        PluginValidationError: one of ``plugins`` is invalid (explicit objects fail loudly;
            discovered plugins are recorded as failed instead).
    """
    host = PluginHost()
    host.block([*block, *(_env_list("HOMEAGENT_DISABLE_PLUGINS") or [])])
    if allow is None:
        allow = _env_list("HOMEAGENT_LOAD_PLUGINS")
    if trace is None:
        trace = os.environ.get("HOMEAGENT_TRACE_PLUGINS", "") not in ("", "0", "false")
    if trace:
        host.enable_tracing()
    if load_entrypoints:
        host.load_entrypoints(allow)
    for module_path in DEFAULT_PLUGINS if builtins is None else builtins:
        host.load_module(module_path)
    for plugin in plugins:
        kind = "module" if isinstance(plugin, types.ModuleType) else "local"
        host.register(plugin, kind=kind)
    return host
