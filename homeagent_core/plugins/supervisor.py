"""The ledger of out-of-process plugins and their restart policy.

Every live plugin process is recorded here (name, pid, entry checksum, the wrapper that owns
it). Crashes are counted per plugin within a sliding window: the n-th crash is restarted after
``backoff[n-1]`` seconds (1 s, 2 s, 3 s), and the crash after the last backoff step within the
window (the 4th in 5 minutes) stops restarts until a manual reload clears the count. Stops,
reloads and uninstalls are not crashes. :meth:`Supervisor.reload_changed` reloads every plugin
whose entry file changed (sha256), which is how a replaced ``plugin.bin`` goes live.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from homeagent_core.plugins.proc import ProcPlugin

__all__ = ["ProcRecord", "Supervisor"]

log = logging.getLogger(__name__)


@dataclass
class ProcRecord:
    """What the ledger knows about one plugin."""

    name: str
    plugin: ProcPlugin
    pid: int = 0
    entry_sha256: str = ""
    started_at: float = 0.0
    crashes: list[float] = field(default_factory=list)
    gave_up: bool = False


class Supervisor:
    """Process ledger and crash policy shared by every :class:`ProcPlugin` of one app.

    :param backoff: delays (seconds) before the 1st, 2nd, 3rd... restart; one crash more
        than there are steps within ``window`` gives up.
    :param window: seconds after which old crashes are forgotten.
    :param is_disabled: returns True for plugins the operator disabled (no restart).
    :param clock: monotonic clock (tests may pass their own).
    """

    def __init__(
        self,
        *,
        backoff: Sequence[float] = (1.0, 2.0, 3.0),
        window: float = 300.0,
        is_disabled: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = tuple(backoff)
        self.window = window
        self.is_disabled = is_disabled or (lambda name: False)
        self.clock = clock
        self.shutting_down = False
        self._records: dict[str, ProcRecord] = {}

    # ------------------------------------------------------------------ ledger

    def attach(self, plugin: ProcPlugin) -> ProcRecord:
        """Make ``plugin`` known (idempotent)."""
        record = self._records.get(plugin.name)
        if record is None or record.plugin is not plugin:
            record = self._records[plugin.name] = ProcRecord(plugin.name, plugin)
        return record

    def detach(self, name: str) -> None:
        self._records.pop(name, None)

    def started(self, plugin: ProcPlugin, pid: int, entry_sha256: str) -> None:
        record = self.attach(plugin)
        record.pid, record.entry_sha256, record.started_at = pid, entry_sha256, self.clock()

    def exited(self, name: str) -> None:
        record = self._records.get(name)
        if record is not None:
            record.pid = 0

    def get(self, name: str) -> ProcPlugin | None:
        record = self._records.get(name)
        return record.plugin if record else None

    def names(self) -> list[str]:
        return list(self._records)

    def live(self) -> dict[str, int]:
        """name -> pid of every running plugin process."""
        return {n: r.pid for n, r in self._records.items() if r.pid}

    # ------------------------------------------------------------------ crash policy

    def crash_count(self, name: str) -> int:
        """Crashes within the window."""
        record = self._records.get(name)
        if record is None:
            return 0
        cutoff = self.clock() - self.window
        record.crashes = [t for t in record.crashes if t >= cutoff]
        return len(record.crashes)

    def record_crash(self, name: str) -> float | None:
        """Count a crash; returns the restart delay, or None when restarts must stop."""
        record = self._records.get(name)
        if record is None:
            return None
        record.pid = 0
        count = self.crash_count(name) + 1
        record.crashes.append(self.clock())
        if count > len(self.backoff):
            record.gave_up = True
            return None
        return self.backoff[count - 1]

    def may_restart(self, name: str) -> bool:
        """Re-checked after the backoff: not shutting down, not disabled, not given up."""
        record = self._records.get(name)
        return record is not None and not self.shutting_down and not record.gave_up and not self.is_disabled(name)

    def reset(self, name: str) -> None:
        """Forget crashes (manual reload / re-enable)."""
        record = self._records.get(name)
        if record is not None:
            record.crashes.clear()
            record.gave_up = False

    def gave_up(self, name: str) -> bool:
        record = self._records.get(name)
        return bool(record and record.gave_up)

    # ------------------------------------------------------------------ operations

    async def reload(self, name: str) -> None:
        """Manually reload one plugin (clears its crash count).

        Raises:
            KeyError: no such plugin.
        """
        plugin = self.get(name)
        if plugin is None:
            raise KeyError(name)
        self.reset(name)
        await plugin.reload()

    async def reload_changed(self) -> list[str]:
        """Reload every plugin whose entry file's sha256 differs from the running one."""
        from homeagent_core.plugins.packages import sha256_file

        changed: list[str] = []
        for name, record in list(self._records.items()):
            entry = record.plugin.entry_path()
            if entry is None or not entry.exists():
                continue
            digest = await asyncio.to_thread(sha256_file, entry)
            if digest != record.entry_sha256:
                changed.append(name)
        for name in changed:
            try:
                await self.reload(name)
            except Exception:
                log.exception("reload of %s failed", name)
        return changed

    async def stop_all(self) -> None:
        """Freeze restarts, then stop every plugin (kernel shutdown order)."""
        self.shutting_down = True
        await asyncio.gather(*(r.plugin.stop() for r in list(self._records.values())), return_exceptions=True)

    def status(self) -> list[dict[str, Any]]:
        """Runtime info per plugin (name, pid, alive, crash_count, auto_restart, tools...)."""
        return [r.plugin.runtime_info() for r in self._records.values()]
