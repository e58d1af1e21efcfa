"""Out-of-process plugins, the plugin side: lifecycle, supervision, and the pluggy wrapper object.

A plugin directory ``<data>/plugins/<name>/`` holds ``plugin.json`` and an entry: an
executable ``plugin.bin`` (any language) or a ``plugin.pyz`` run with this interpreter. The
process itself — pipes, framing, exit detection, killing its process tree — is the
transport's business (:mod:`homeagent_core.plugins.proc_transport`); this module decides
what the process is for.

:class:`ProcPlugin` is what the rest of the core sees: an ordinary pluggy plugin. Its
``startup(sdk)`` launches the process (handshake, ``plugin.init``, ``plugin.start``; what the
child registers during start lands in the kernel's tool and channel registries under the
plugin's name); its seven stage hookimpls each do one ``stage.invoke`` round trip when the
child registered that stage and return at once otherwise; ``on_event`` forwards subscribed
events; ``shutdown()`` sends ``plugin.stop`` and kills after a 5 s grace.

A tool or input channel the child registers with ``has_cleaner: true`` gets a
:class:`RemoteCleaner` as its ``cleaner``: memory code awaits ``cleaner.aclean(text)`` (or calls
it synchronously from a worker thread), which asks the child with ``cleaner.invoke`` and falls
back to the raw text — logged once — when the child fails or does not answer within
``cleaner_timeout``.

When the transport reports a crash (exit, closed stdout, missed pings), the plugin's stages are
detached while its tools stay listed and answer with why the plugin is down,
``system``/``plugin_crashed`` is published and the
:class:`~homeagent_core.plugins.supervisor.Supervisor` decides whether and when to restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from homeagent_core.plugins.kernel_link import KernelLink
from homeagent_core.plugins.packages import PROC_ENTRIES, Manifest, PackageError, load_manifest, sha256_file
from homeagent_core.plugins.proc_transport import PROCESS_EXITED, Connection, plugin_environment
from homeagent_core.plugins.protocol import CoreMethods, apply_changes
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk import hookimpl
from homeagent_sdk._version import __version__
from homeagent_sdk.errors import PluginLoadError, ToolError
from homeagent_sdk.proc.wire import DEFAULT_MAX_FRAME, PROTOCOL_VERSION, FrameTooLarge, PeerClosed, RemoteError
from homeagent_sdk.types import Event, StageContext, ToolCall, ToolResult

__all__ = ["PROCESS_EXITED", "ProcPlugin", "RemoteCleaner", "discover_proc_plugins", "plugin_environment", "proc_entry"]

log = logging.getLogger(__name__)

OWN_TOOLS = "own_tools"
#: Registration methods that may declare ``has_cleaner``, and the cleaner scope they create.
_CLEANER_SCOPES = {"tool.register": "tool", "input.register": "input"}
#: Changed StageContext fields written back directly when the value has the field's plain
#: type (the common case: a text field); anything else goes through ``apply_changes``.
_PLAIN_FIELDS: dict[str, type] = {
    name: type(spec.default)
    for name, spec in StageContext.__dataclass_fields__.items()
    if type(spec.default) in (str, bool) and name != "phase"
}
_PLAIN_FIELDS["response"] = str


def proc_entry(plugin_dir: Path) -> Path | None:
    """The entry of a proc plugin directory (``plugin.bin`` or ``plugin.pyz``), else None."""
    for name in PROC_ENTRIES:
        path = plugin_dir / name
        if path.exists():
            return path
    return None


class RemoteCleaner:
    """The ``cleaner`` of a tool or input channel that lives in a plugin process.

    The kernel's cleaners are plain ``Callable[[str], str]``, but this one needs a round trip
    to the child, answered on the daemon's event loop. So it offers both doors:

    * ``await cleaner.aclean(text)`` — what the memory code uses (it runs on the loop);
    * ``cleaner(text)`` — the plain call, for a caller in a worker thread: the request is run
      on the plugin's loop and waited for there. Called on the loop thread itself it cannot
      wait without deadlocking, so it returns ``text`` unchanged (and says so in the log).

    Either way the answer is bounded by ``timeout``; any failure (the child's error, no answer,
    the process gone) yields the raw text, reported once per cleaner at warning level.
    """

    def __init__(self, plugin: ProcPlugin, scope: str, name: str, timeout: float) -> None:
        self.plugin, self.scope, self.name, self.timeout = plugin, scope, name, timeout
        self.failures = 0

    def __repr__(self) -> str:
        return f"RemoteCleaner({self.plugin.name}: {self.scope} {self.name})"

    async def aclean(self, text: str) -> str:
        """The child's cleaned ``text``, or ``text`` itself when that fails."""
        try:
            answer = await self.plugin.call(
                "cleaner.invoke", {"scope": self.scope, "name": self.name, "text": text}, timeout=self.timeout
            )
        except TimeoutError:
            return self._fallback(text, f"no answer within {self.timeout:g} s")
        except Exception as exc:
            return self._fallback(text, str(exc) or type(exc).__name__)
        cleaned = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(cleaned, str):
            return self._fallback(text, f"answered {answer!r:.80} instead of {{text: <string>}}")
        return cleaned

    def __call__(self, text: str) -> str:
        loop = self.plugin.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or loop.is_closed():
            return self._fallback(text, "the plugin is not running")
        if running is loop:
            return self._fallback(
                text, "called synchronously on the event loop, where it cannot wait; await cleaner.aclean(text)"
            )
        future = asyncio.run_coroutine_threadsafe(self.aclean(text), loop)
        try:
            return future.result(self.timeout + 1.0)
        except Exception as exc:  # the loop stopped, or the wait ran out
            future.cancel()
            return self._fallback(text, f"{type(exc).__name__}: {exc}")

    def _fallback(self, text: str, why: str) -> str:
        self.failures += 1
        level = logging.WARNING if self.failures == 1 else logging.DEBUG
        log.log(
            level,
            "plugin %s: the cleaner of %s %s failed (%s); its raw text is used%s",
            self.plugin.name,
            self.scope,
            self.name,
            why,
            "; further failures of this cleaner are logged at debug level" if self.failures == 1 else "",
        )
        return text


class ProcPlugin:
    """The pluggy plugin object wrapping one out-of-process plugin.

    :param plugin_dir: ``<data>/plugins/<name>/`` with ``plugin.json`` and the entry.
    :param supervisor: the app's process ledger and restart policy.
    :param manifest: the parsed manifest (read from ``plugin_dir`` when omitted).
    :param max_frame: frame cap in bytes, both directions.
    :param handshake_timeout: seconds the child has to answer ``handshake``.
    :param start_timeout: seconds for ``plugin.init`` and ``plugin.start`` each.
    :param stop_grace: seconds between ``plugin.stop`` and SIGKILL.
    :param cleaner_timeout: seconds one ``cleaner.invoke`` may take before the raw text is used.
    :param ping_interval: seconds between liveness pings (``plugin.ping``); 0 turns them off.
    :param ping_timeout: seconds a ping may go unanswered before the plugin counts as crashed.
    """

    def __init__(
        self,
        plugin_dir: Path,
        *,
        supervisor: Supervisor,
        manifest: Manifest | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        handshake_timeout: float = 10.0,
        start_timeout: float = 30.0,
        stop_grace: float = 5.0,
        cleaner_timeout: float = 2.0,
        ping_interval: float = 10.0,
        ping_timeout: float = 20.0,
    ) -> None:
        self.dir = Path(plugin_dir)
        self.manifest = manifest or load_manifest(self.dir)
        self.name = self.manifest.name
        self.supervisor = supervisor
        self.max_frame = max_frame
        self.handshake_timeout = handshake_timeout
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.cleaner_timeout = cleaner_timeout
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.since = ""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.capabilities = frozenset(self.manifest.capabilities)
        self.stages: dict[str, str] = {}
        self.event_types: frozenset[str] | None = None
        self.auto_restart = True
        self.stopping = False
        self.status = "loaded"
        self.last_error = ""
        self.sdk: Any = None
        self.link: KernelLink | None = None
        self.conn: Connection | None = None
        self._restart: asyncio.Task[None] | None = None
        self._generation = 0
        self._core = CoreMethods(self)
        supervisor.attach(self)

    # ------------------------------------------------------------------ identity

    @property
    def scope(self) -> str:
        """``own_tools`` when every tool stage the child registered is scoped to its own tools."""
        tool_scopes = {self.stages[s] for s in ("before_toolcall", "after_toolcall") if s in self.stages}
        return OWN_TOOLS if tool_scopes == {OWN_TOOLS} else ""

    def entry_path(self) -> Path | None:
        return proc_entry(self.dir)

    def runtime_info(self) -> dict[str, Any]:
        conn = self.conn
        return {
            "name": self.name,
            "channel": "proc",
            "version": self.manifest.version,
            "status": self.status,
            "loaded": conn is not None and conn.alive,
            "alive": conn is not None and conn.alive,
            "pid": conn.pid if conn is not None and conn.alive else 0,
            "auto_restart": self.auto_restart,
            "crash_count": self.supervisor.crash_count(self.name),
            "gave_up": self.supervisor.gave_up(self.name),
            "tools": self.link.tool_names(self.name) if self.link else [],
            "stages": sorted(self.stages),
            "capabilities": sorted(self.capabilities),
            "error": self.last_error,
            "since": self.since,
            "state": f"{self.status}: {self.last_error}" if self.last_error else self.status,
        }

    def _set_status(self, status: str, error: str = "", *, stamp: bool = False) -> None:
        """Change the status here and in the plugin host's listing (``homeagent status``);
        ``stamp`` appends ``since HH:MM:SS`` to the error."""
        self.since = datetime.now().strftime("%H:%M:%S")
        self.status, self.last_error = status, f"{error} since {self.since}" if stamp else error
        host = getattr(getattr(self.sdk, "services", None), "host", None)
        info = host.info(self.name) if host is not None and hasattr(host, "info") else None
        if info is not None:
            info.status, info.error = status, self.last_error

    # ------------------------------------------------------------------ launch / stop

    def _argv(self) -> list[str]:
        entry = self.entry_path()
        if entry is None:
            legacy = [p.name for p in self.dir.glob("plugin.*") if p.suffix in (".so", ".dll", ".dylib")]
            if legacy:
                raise PluginLoadError(
                    f"plugin {self.name}: found a legacy C-ABI artefact ({', '.join(legacy)}); rebuild it with "
                    "hmapdev to produce plugin.bin or plugin.pyz (the plugin code needs no change)",
                    plugin_name=self.name,
                )
            raise PluginLoadError(
                f"plugin {self.name}: {self.dir} has neither plugin.bin nor plugin.pyz", plugin_name=self.name
            )
        if entry.is_dir():
            raise PluginLoadError(f"plugin {self.name}: {entry} is a directory, not a file", plugin_name=self.name)
        if entry.name == "plugin.pyz":
            return [sys.executable, str(entry)]
        if not os.access(entry, os.X_OK):
            raise PluginLoadError(
                f"plugin {self.name}: {entry} is not executable; run `chmod +x {entry}` "
                "(zip extraction often loses the exec bit)",
                plugin_name=self.name,
            )
        return [str(entry)]

    def _config(self) -> dict[str, Any]:
        path = self.dir / "skill.json"
        if not path.exists():
            return {}
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise PluginLoadError(
                f"plugin {self.name}: {path} is not valid JSON: {exc}", plugin_name=self.name
            ) from None
        return value if isinstance(value, dict) else {}

    async def launch(self) -> None:
        """Spawn, handshake, ``plugin.init``, ``plugin.start``.

        Raises:
            PluginLoadError: any step failed (the process is killed, nothing stays attached).
        """
        argv = self._argv()
        config = self._config()
        self._generation += 1
        self.stopping = False
        self._detach()  # what a crashed process left listed (its tools answered "not running")
        self.loop = asyncio.get_running_loop()
        conn = Connection(self, self.max_frame)
        conn.peer.handlers.update(self._with_cleaners(self._core.handlers()))
        env = plugin_environment(os.environ, reveal_secrets="secrets" in self.capabilities)
        env.update({"HOMEAGENT_PLUGIN_NAME": self.name, "HOMEAGENT_PLUGIN_DIR": str(self.dir)})
        try:
            await conn.spawn(argv, self.dir, env)
        except OSError as exc:
            raise PluginLoadError(f"plugin {self.name}: cannot start {argv[0]}: {exc}", plugin_name=self.name) from None
        self.conn = conn
        step = "handshake"
        try:
            hello = await conn.peer.call(
                "handshake",
                {"protocol": PROTOCOL_VERSION, "core_version": __version__, "plugin_name": self.name},
                timeout=self.handshake_timeout,
            )
            got = int((hello or {}).get("protocol", 0) or 0)
            if got != PROTOCOL_VERSION:
                raise PluginLoadError(
                    f"plugin {self.name}: 协议版本不匹配（插件 {got}，内核 {PROTOCOL_VERSION}）——请用配套 hmapdev 重编 "
                    f"(protocol mismatch: plugin speaks {got}, core {PROTOCOL_VERSION}; rebuild it with the "
                    "matching hmapdev)",
                    plugin_name=self.name,
                )
            entry = self.entry_path()
            digest = await asyncio.to_thread(sha256_file, entry) if entry else ""
            self.supervisor.started(self, conn.pid, digest)
            step = "plugin.init"
            await conn.peer.call("plugin.init", {"name": self.name, "config": config}, timeout=self.start_timeout)
            step = "plugin.start"
            await conn.peer.call("plugin.start", None, timeout=self.start_timeout)
        except BaseException as exc:
            self.stopping = True
            conn.kill()
            try:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(2):
                        await asyncio.shield(conn.exited)
                    await conn.wait_closed()
            finally:
                conn.abandon()  # cancelled again while waiting: reap it and close its pipes now
            self._detach()
            if isinstance(exc, PluginLoadError):
                raise
            if isinstance(exc, asyncio.CancelledError):
                raise
            detail = conn.problem or _describe(exc)
            if step == "handshake" and isinstance(exc, RemoteError):
                detail += (
                    f" (the core speaks protocol {PROTOCOL_VERSION}; rebuild the plugin with the matching hmapdev)"
                )
            if isinstance(exc, PeerClosed) and conn.tail:
                detail += f"; its last log lines: {' | '.join(list(conn.tail)[-3:])}"
            raise PluginLoadError(
                f"plugin {self.name}: {step} 失败 ({step} failed): {detail}", plugin_name=self.name
            ) from None
        self._set_status("started")
        conn.start_pings(self.ping_interval, self.ping_timeout)
        log.info("plugin %s started (pid %d, stages: %s)", self.name, conn.pid, ", ".join(self.stages) or "none")

    def _with_cleaners(self, handlers: dict[str, Any]) -> dict[str, Any]:
        """Wrap the registrations that may say ``has_cleaner``: the stored definition gets a
        :class:`RemoteCleaner` right after it was added (before anything can use it)."""
        for method, scope in _CLEANER_SCOPES.items():
            register = handlers[method]

            async def with_cleaner(params: Any, register: Any = register, scope: str = scope) -> Any:
                result = await register(params)
                if isinstance(params, dict) and params.get("has_cleaner"):
                    self._attach_cleaner(scope, params)
                return result

            handlers[method] = with_cleaner
        return handlers

    def _attach_cleaner(self, scope: str, params: dict[str, Any]) -> None:
        definition = params.get("def")
        raw: dict[str, Any] = definition if isinstance(definition, dict) else {}
        name = str(params.get("name") or raw.get("name") or "")
        link = self.link
        if link is None:
            return
        stored = link.tools.get(name) if scope == "tool" else link.channels.input(name)
        if stored is not None:
            stored.cleaner = RemoteCleaner(self, scope, name, self.cleaner_timeout)

    async def stop(self) -> None:
        """Kernel-initiated stop (never a crash): ``plugin.stop``, grace, then SIGKILL."""
        self.stopping = True
        restart, self._restart = self._restart, None
        if restart is not None and restart is not asyncio.current_task():
            restart.cancel()  # a pending restart (sleeping, or mid-launch) ends here, not as a crash
            with contextlib.suppress(BaseException):
                await restart
        conn = self.conn
        if conn is None or not conn.alive:
            if conn is not None:
                await conn.wait_closed()  # a crashed process: its pipes close on the loop
            self._detach()
            if self.status in ("started", "restarting", "loaded"):
                self._set_status("stopped")
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_grace
        with contextlib.suppress(Exception):
            await conn.peer.call("plugin.stop", None, timeout=self.stop_grace)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, deadline - loop.time())):
                await asyncio.shield(conn.exited)
        if not conn.exited.done():
            log.warning("plugin %s did not exit within %g s of plugin.stop; killing it", self.name, self.stop_grace)
            conn.kill()
            try:
                async with asyncio.timeout(2):
                    await asyncio.shield(conn.exited)
            except TimeoutError:
                log.error("plugin %s: process may be stuck in the kernel; giving up waiting", self.name)
        if conn.exited.done():
            await conn.wait_closed()
        self._detach()
        self._set_status("stopped")

    async def reload(self) -> None:
        """Stop (not a crash) and launch again; the manifest is read again (an upgrade may have
        changed its version or capabilities) and registrations are renewed.

        Raises:
            PluginLoadError: the manifest on disk is now invalid, or the launch failed.
        """
        await self.stop()
        self.supervisor.reset(self.name)
        try:
            manifest = load_manifest(self.dir)
        except PackageError as exc:
            self._set_status("failed", str(exc))
            raise PluginLoadError(f"plugin {self.name}: {exc}", plugin_name=self.name) from None
        self.manifest, self.capabilities = manifest, frozenset(manifest.capabilities)
        await self.launch()

    # ------------------------------------------------------------------ crash handling

    def _detach(self) -> None:
        self.stages = {}
        self.event_types = None
        if self.link is not None:
            self.link.detach(self.name)

    def on_exit(self, conn: Connection, code: int) -> None:
        """Called by the connection once the process is gone (before ``exited`` is set)."""
        self.supervisor.exited(self.name)
        if conn is not self.conn or self.stopping:
            return
        reason = conn.problem or (f"killed by signal {-code}" if code < 0 else f"exited with code {code}")
        if conn.tail and not conn.problem:
            reason += f"; last log lines: {' | '.join(list(conn.tail)[-3:])}"
        self._crashed(reason, code)

    def _crashed(self, reason: str, code: int) -> None:
        """Count, publish ``plugin_crashed`` and schedule the restart (or give up).

        Stages and event subscriptions are detached; tools and channels stay listed and answer
        with why the plugin is down (the next launch replaces them)."""
        self.stages = {}
        self.event_types = None
        delay = self.supervisor.record_crash(self.name) if self.auto_restart else None
        crashes = self.supervisor.crash_count(self.name)
        if not self.auto_restart:
            self._set_status("crashed", reason)
        elif delay is None:
            last = reason.split("; last log lines:")[0]
            self._set_status(
                "stopped", f"crashed {crashes} times in {_span(self.supervisor.window)} (last: {last})", stamp=True
            )
            log.error(
                "plugin %s crashed %d times within %g s; automatic restarts stopped until a manual reload (需人工介入)",
                self.name,
                crashes,
                self.supervisor.window,
            )
        else:
            self._set_status("restarting", reason)
        log.error("plugin %s crashed: %s", self.name, reason)
        self._publish(
            {
                "type": "plugin_crashed",
                "event": "plugin_crashed",
                "plugin": self.name,
                "error": reason,
                "exit_code": code,
                "crash_count": crashes,
                "restart_in": delay,
            }
        )
        if delay is not None:
            self._restart = asyncio.get_running_loop().create_task(self._restart_after(delay, self._generation))

    def _publish(self, data: dict[str, Any]) -> None:
        bus = getattr(getattr(self.sdk, "services", None), "bus", None)
        if bus is not None:
            bus.publish("system", data, source=self.name)

    async def _restart_after(self, delay: float, generation: int) -> None:
        # ``self._restart`` stays set until the launch is over, so a stop meanwhile cancels it.
        try:
            await asyncio.sleep(delay)
            if generation != self._generation or self.stopping or not self.supervisor.may_restart(self.name):
                return
            try:
                await self.launch()
            except PluginLoadError as exc:
                if self._restart is not asyncio.current_task():
                    return  # stopped meanwhile: not a crash
                self._restart = None
                self.stopping = False
                self._crashed(f"restart failed: {exc}", -1)
                return
        finally:
            if self._restart is asyncio.current_task():
                self._restart = None
        self._publish({"type": "plugin_restarted", "event": "plugin_restarted", "plugin": self.name})

    async def wait_restarted(self) -> None:
        """Wait for a scheduled restart (if any) to finish; for tests and tools."""
        task = self._restart
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    # ------------------------------------------------------------------ calls into the child

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """One request to the child.

        Raises:
            ToolError: the plugin is not running, died during the call, answered an error, or
                answered more than the frame cap (``max_frame``).
        """
        conn = self.conn
        if conn is None or not conn.alive:
            if self.supervisor.gave_up(self.name):
                raise ToolError(
                    f"plugin {self.name} crashed and was stopped after {self.supervisor.crash_count(self.name)} "
                    "crashes; use plugin_reload"
                )
            raise ToolError(
                f"plugin {self.name} is not running ({self.status}{': ' + self.last_error if self.last_error else ''})"
            )
        try:
            return await conn.peer.call(method, params, timeout=timeout)
        except (TimeoutError, asyncio.CancelledError):
            conn.probe()  # unanswered (a timeout, often the kernel's tool timeout): is its loop alive?
            raise
        except (RemoteError, FrameTooLarge) as exc:  # an answer over the frame cap is the plugin's error
            raise ToolError(f"plugin {self.name}: {exc}") from None
        except PeerClosed:
            raise ToolError(f"plugin {self.name}: {PROCESS_EXITED}") from None

    # ------------------------------------------------------------------ hookimpls

    @hookimpl
    async def startup(self, sdk: Any) -> None:
        self.sdk = sdk
        self.link = KernelLink.for_sdk(sdk, self.name)
        await self.launch()

    @hookimpl
    async def shutdown(self) -> None:
        await self.stop()

    async def _stage(
        self, stage: str, ctx: StageContext, call: ToolCall | None = None, result: ToolResult | None = None
    ) -> Any:
        scope = self.stages.get(stage)
        if scope is None:
            return None
        if scope == OWN_TOOLS and call is not None and call.plugin != self.name:
            return None
        params: dict[str, Any] = {"stage": stage, "ctx": ctx}
        if call is not None:
            params["call"] = call
        if result is not None:
            params["result"] = result
        answer = await self.call("stage.invoke", params) or {}
        changed = answer.get("changed")
        if changed:
            rest: dict[str, Any] = {}
            for key, value in changed.items():
                if _PLAIN_FIELDS.get(key) is type(value):
                    setattr(ctx, key, value)
                else:
                    rest[key] = value
            if rest:
                apply_changes(ctx, rest)
        if call is not None and isinstance(answer.get("call"), dict):
            arguments = answer["call"].get("arguments")
            if isinstance(arguments, dict):
                call.arguments = arguments
        if result is not None and isinstance(answer.get("result"), dict):
            if "result" in answer["result"]:
                result.result = str(answer["result"]["result"])
            if "success" in answer["result"]:
                result.success = bool(answer["result"]["success"])
        reject = answer.get("reject")
        return reject if isinstance(reject, str) and stage == "before_toolcall" else None

    @hookimpl
    async def on_input(self, ctx: StageContext) -> Any:
        return await self._stage("on_input", ctx) if "on_input" in self.stages else None

    @hookimpl
    async def pre_action(self, ctx: StageContext) -> Any:
        return await self._stage("pre_action", ctx) if "pre_action" in self.stages else None

    @hookimpl
    async def post_action(self, ctx: StageContext) -> Any:
        return await self._stage("post_action", ctx) if "post_action" in self.stages else None

    @hookimpl
    async def before_toolcall(self, ctx: StageContext, call: ToolCall) -> Any:
        return await self._stage("before_toolcall", ctx, call) if "before_toolcall" in self.stages else None

    @hookimpl
    async def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> Any:
        return await self._stage("after_toolcall", ctx, call, result) if "after_toolcall" in self.stages else None

    @hookimpl
    async def before_output(self, ctx: StageContext) -> Any:
        return await self._stage("before_output", ctx) if "before_output" in self.stages else None

    @hookimpl
    async def after_output(self, ctx: StageContext) -> Any:
        return await self._stage("after_output", ctx) if "after_output" in self.stages else None

    @hookimpl
    async def on_event(self, event: Event) -> None:
        types = self.event_types
        conn = self.conn
        if types is None or conn is None or not conn.alive or (types and event.name not in types):
            return
        with contextlib.suppress(Exception):
            conn.peer.notify("event.deliver", {"event": event})


def _span(seconds: float) -> str:
    """``300`` -> ``5 minutes``; ``45`` -> ``45 seconds``."""
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} seconds"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    text = str(exc)
    return (
        f"{type(exc).__name__}: {text}"
        if text and not isinstance(exc, RemoteError | PeerClosed)
        else text or type(exc).__name__
    )


def discover_proc_plugins(
    data_dir: Path,
    *,
    supervisor: Supervisor,
    disabled: set[str] | frozenset[str] = frozenset(),
    errors: dict[str, str] | None = None,
    **options: Any,
) -> list[tuple[str, ProcPlugin]]:
    """Wrappers for every valid ``<data>/plugins/<name>/`` holding a proc entry.

    Directories with ``main.lua`` or ``SKILL.md`` (and no proc entry) belong to other
    loaders and are skipped. A broken directory is reported in ``errors`` (name -> message)
    and logged; it never stops the others. ``options`` go to :class:`ProcPlugin`.
    """
    root = Path(data_dir) / "plugins"
    found: list[tuple[str, ProcPlugin]] = []
    if not root.is_dir():
        return found
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        legacy = [p for p in child.glob("plugin.*") if p.suffix in (".so", ".dll", ".dylib")]
        if proc_entry(child) is None and not legacy:
            continue
        if child.name in disabled:
            continue
        try:
            manifest = load_manifest(child)
            if legacy and proc_entry(child) is None:
                raise PluginLoadError(
                    f"plugin {child.name}: 检测到旧 C ABI 产物 ({', '.join(p.name for p in legacy)})；请用新版 hmapdev "
                    "重编产出 plugin.bin 或 plugin.pyz（业务代码无需修改） "
                    "(legacy C-ABI artefact found; rebuild with hmapdev)",
                    plugin_name=child.name,
                )
            found.append((manifest.name, ProcPlugin(child, supervisor=supervisor, manifest=manifest, **options)))
        except (PackageError, PluginLoadError) as exc:
            log.error("plugin directory %s skipped: %s", child, exc)
            if errors is not None:
                errors[child.name] = str(exc)
    return found
