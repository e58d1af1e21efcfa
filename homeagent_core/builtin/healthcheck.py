"""Built-in ``healthcheck``: the agent checks itself and keeps the results.

A check looks at what is really there: the plugin host (which plugins started or failed),
the kernel (turns, queue, tools, channels), the memory stores (each SQLite file under
``<data>/memory`` passes ``PRAGMA quick_check`` and its folder is writable), disk space of the
data directory, the process (resident memory, threads, tasks) and, through
``sdk.llm.quick_chat``, whether the model answers and how fast. Nothing is estimated: a part
that cannot be checked is reported as ``unavailable`` with the reason.

Checks run every ``auto_interval`` (30 min) and on demand (``healthcheck``); the last
``perf_history`` (100) points are kept in ``<data>/plugin_data/healthcheck/history.json``
(written atomically), which ``homeagent doctor`` and the web UI can read with
:func:`read_history`. The model can record its own tool probes with ``healthcheck_report``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from homeagent_sdk import ConfigDef, HomeAgentError, SettingsRegistry, ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk._atomic import atomic_write

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import KernelAccess, PluginHostAccess
    from homeagent_core.plugins.sdk import ScopedSDK

PLUGIN_NAME = "healthcheck"
HISTORY_FILE = "history.json"
#: Free disk space below which the data directory is reported as failing.
MIN_FREE_BYTES = 200 * 1024 * 1024

__all__ = ["HealthCheck", "make_plugin", "read_history"]

log = logging.getLogger(__name__)


def read_history(data_dir: Path) -> dict[str, Any]:
    """The stored check points and tool reports of a data directory (empty when none yet)."""
    path = Path(data_dir) / "plugin_data" / PLUGIN_NAME / HISTORY_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"points": [], "reports": {}}
    except (OSError, ValueError) as exc:
        raise HomeAgentError(f"health history {path} is unreadable ({exc}); delete it to start afresh") from None
    return {"points": list(value.get("points", [])), "reports": dict(value.get("reports", {}))}


def _quick_check(path: Path) -> dict[str, Any]:
    """``PRAGMA quick_check`` on one SQLite file, opened read-only."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
        finally:
            db.close()
    except sqlite3.Error as exc:
        return {"file": path.name, "ok": False, "error": str(exc)}
    ok = rows == ["ok"]
    return {"file": path.name, "ok": ok, "bytes": path.stat().st_size, **({} if ok else {"error": "; ".join(rows[:5])})}


def _writable(folder: Path) -> str:
    """'' when a file can be created (and removed) in ``folder``, else the reason."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".health-", delete=True) as fh:
            fh.write(b"ok")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class HealthCheck:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._sdk: ScopedSDK | None = None
        self.points: deque[dict[str, Any]] = deque(maxlen=100)
        self.reports: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        registry.add(ConfigDef(
            key="auto_interval", type="duration", default="30m", min=0, max=7 * 86400,
            description="How often the agent checks itself; 0 = only on demand.",
        ))
        registry.add(ConfigDef(
            key="llm_timeout", type="duration", default="120s", min=1, max=600,
            description="How long the model may take to answer the health probe.",
        ))
        registry.add(ConfigDef(
            key="perf_history", type="int", default=100, min=1, max=10_000, restart_required=True,
            description="How many check points are kept.",
        ))

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.healthcheck)
        registry.add(self.healthcheck_plugins, parallel_safe=True)
        registry.add(self.healthcheck_tools, parallel_safe=True)
        registry.add(self.healthcheck_memory, parallel_safe=True)
        registry.add(self.healthcheck_kernel, parallel_safe=True)
        registry.add(self.healthcheck_report)
        registry.add(self.healthcheck_perf, parallel_safe=True)

    @hookimpl
    def startup(self, sdk: ScopedSDK) -> None:
        self._sdk = sdk
        self.points = deque(maxlen=int(sdk.settings.get("perf_history") or 100))
        stored = read_history(self._data_dir())
        self.points.extend(stored["points"])
        self.reports.update(stored["reports"])
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="healthcheck")

    @hookimpl
    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            interval = float(self.sdk.settings.get("auto_interval") or 0)
            if interval <= 0:
                await asyncio.sleep(60)  # look again later: the setting may change
                continue
            await asyncio.sleep(interval)
            try:
                await self.run_check()
            except Exception:
                log.exception("periodic health check failed")

    # ------------------------------------------------------------------ helpers

    @property
    def sdk(self) -> ScopedSDK:
        if self._sdk is None:
            raise ToolError("healthcheck has not started yet")
        return self._sdk

    def _data_dir(self) -> Path:
        services = self.sdk.services
        return Path(services.data_dir) if services is not None else self.sdk.data_dir.parent.parent

    def _host(self) -> PluginHostAccess | None:
        services = self.sdk.services
        return services.host if services is not None else None

    def _kernel(self) -> KernelAccess | None:
        services = self.sdk.services
        return services.kernel if services is not None else None

    def _save(self) -> None:
        path = self.sdk.data_dir / HISTORY_FILE
        data = json.dumps({"points": list(self.points), "reports": self.reports}, ensure_ascii=False)
        atomic_write(path, data)

    # ------------------------------------------------------------------ the checks

    def plugins_state(self) -> dict[str, Any]:
        host = self._host()
        if host is None:
            return {"ok": None, "unavailable": "the plugin host is not reachable from this plugin"}
        infos = [p.to_dict() for p in host.plugins()]
        failed = [{"name": p["name"], "error": p["error"]} for p in infos if p["status"] == "failed"]
        return {
            "ok": not failed,
            "started": sorted(p["name"] for p in infos if p["status"] == "started"),
            "failed": failed,
            "blocked": sorted(p["name"] for p in infos if p["status"] == "blocked"),
        }

    def tools_state(self) -> dict[str, Any]:
        kernel = self._kernel()
        if kernel is None:
            return {"ok": None, "unavailable": "the kernel is not running"}
        groups = kernel.tools.by_plugin()
        failing = {name: r for name, r in self.reports.items() if r.get("status") == "fail"}
        return {
            "ok": not failing,
            "count": len(kernel.tools),
            "by_plugin": {plugin: len(tools) for plugin, tools in groups.items()},
            "reported_failing": failing,
        }

    def kernel_state(self) -> dict[str, Any]:
        kernel = self._kernel()
        process = {
            "pid": os.getpid(),
            "rss_mb": _rss_mb(),
            "threads": threading.active_count(),
            "tasks": len(asyncio.all_tasks()),
        }
        if kernel is None:
            return {"ok": None, "unavailable": "the kernel is not running", "process": process}
        status = kernel.status()
        return {"ok": bool(status.get("running")), **status, "process": process}

    async def memory_state(self) -> dict[str, Any]:
        data = self._data_dir()
        memory = data / "memory"

        def check() -> dict[str, Any]:
            stores = [_quick_check(p) for p in sorted(memory.glob("*.db"))]
            problem = _writable(memory)
            usage = shutil.disk_usage(data)
            out: dict[str, Any] = {
                "stores": stores,
                "writable": not problem,
                "disk_free_mb": round(usage.free / 1024 / 1024, 1),
                "disk_total_mb": round(usage.total / 1024 / 1024, 1),
            }
            if problem:
                out["error"] = f"{memory} is not writable: {problem}"
            out["ok"] = not problem and all(s["ok"] for s in stores) and usage.free >= MIN_FREE_BYTES
            return out

        return await asyncio.to_thread(check)

    async def llm_state(self) -> dict[str, Any]:
        timeout = float(self.sdk.settings.get("llm_timeout") or 120)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                answer = await self.sdk.llm.quick_chat("健康检查：请只回复 OK。(health check: reply OK)")
        except TimeoutError:
            return {"ok": False, "error": f"no answer within {timeout:g}s"}
        except HomeAgentError as exc:
            if "not available here" in str(exc):
                return {"ok": None, "unavailable": str(exc)}
            return {"ok": False, "error": str(exc)}
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {
            "ok": bool(answer.strip()),
            "latency_ms": round((time.perf_counter() - started) * 1000, 1),
            "answer": answer.strip()[:80],
        }

    async def run_check(self, *, llm: bool = True) -> dict[str, Any]:
        """Run every check, keep the point, persist the history; returns the point."""
        async with self._lock:
            started = time.perf_counter()
            point: dict[str, Any] = {
                "time": round(time.time(), 3),
                "plugins": self.plugins_state(),
                "tools": self.tools_state(),
                "kernel": self.kernel_state(),
                "memory": await self.memory_state(),
                "llm": await self.llm_state() if llm else {"ok": None, "unavailable": "skipped"},
            }
            parts = ("plugins", "tools", "kernel", "memory", "llm")
            point["ok"] = all(point[p].get("ok") is not False for p in parts)
            point["failing"] = [p for p in parts if point[p].get("ok") is False]
            point["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
            self.points.append(point)
            await asyncio.to_thread(self._save)
            return point

    # ------------------------------------------------------------------ tools

    async def healthcheck(self, plugin: str = "") -> dict[str, Any]:
        """Check the agent now (plugins, tools, kernel, memory stores, disk, model) and keep the result.

        Args:
            plugin: only report on this plugin (its state and tools); empty = everything.
        """
        if plugin:
            host = self._host()
            info = host.info(plugin) if host is not None else None
            if info is None:
                raise ToolError(f"unknown plugin {plugin!r}; healthcheck_plugins lists them")
            kernel = self._kernel()
            tools = [t.name for t in kernel.tools.by_plugin().get(plugin, [])] if kernel is not None else []
            reports = {n: r for n, r in self.reports.items() if n in tools}
            return {"plugin": info.to_dict(), "tools": tools, "reports": reports}
        return await self.run_check()

    def healthcheck_plugins(self) -> dict[str, Any]:
        """Which plugins started, failed (with the error) or are disabled."""
        return self.plugins_state()

    def healthcheck_tools(self) -> dict[str, Any]:
        """How many tools each plugin registered, and tools reported failing by healthcheck_report."""
        return self.tools_state()

    async def healthcheck_memory(self) -> dict[str, Any]:
        """Integrity of each memory database, whether the memory folder is writable, and free disk space."""
        return await self.memory_state()

    def healthcheck_kernel(self) -> dict[str, Any]:
        """Kernel state (running, busy, queue, turns, failures, channels) and process figures."""
        return self.kernel_state()

    async def healthcheck_report(
        self, tool_name: str, status: Literal["ok", "fail", "skip"], detail: str = ""
    ) -> str:
        """Record the outcome of probing one tool, so failures show up in later checks.

        Args:
            tool_name: the tool that was probed.
            status: ok, fail or skip.
            detail: what happened (an error message, why it was skipped).
        """
        kernel = self._kernel()
        if kernel is not None and tool_name not in kernel.tools:
            raise ToolError(f"unknown tool {tool_name!r}; healthcheck_tools lists the registered ones")
        self.reports[tool_name] = {"status": status, "detail": detail[:500], "time": round(time.time(), 3)}
        await asyncio.to_thread(self._save)
        return f"recorded {tool_name}: {status}"

    def healthcheck_perf(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent check points, newest first (model latency, failing parts, duration).

        Args:
            limit: how many points (the last 100 are kept).
        """
        if limit < 1:
            raise ToolError("limit must be at least 1")
        rows = []
        for point in list(self.points)[::-1][:limit]:
            rows.append({
                "time": point["time"],
                "ok": point["ok"],
                "failing": point.get("failing", []),
                "llm_latency_ms": point.get("llm", {}).get("latency_ms"),
                "rss_mb": point.get("kernel", {}).get("process", {}).get("rss_mb"),
                "disk_free_mb": point.get("memory", {}).get("disk_free_mb"),
                "duration_ms": point.get("duration_ms"),
            })
        return rows


def make_plugin() -> HealthCheck:
    return HealthCheck()
