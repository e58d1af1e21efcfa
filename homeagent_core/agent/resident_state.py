"""One resident sub-agent's record, and the ``state.json`` that lets it survive a restart.

:class:`Resident` holds a resident's definition, queue, working context and usage; its
:meth:`~Resident.state` is what is persisted. :class:`StateFile` writes that state atomically
(tmp file, fsync, rename) from worker threads, in the order the states were made, and never
after the resident's folder was removed; :func:`read_states` reads them back at start.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from homeagent_core.agent.resident_scope import ScopedTools
from homeagent_core.agent.scheduler import InputItem, Scheduler
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.types import Principal, ToolDef, Triple

__all__ = ["HOUR", "STATE_FILE", "STATE_VERSION", "Resident", "ScratchLike", "StateFile", "read_states"]

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
STATE_VERSION = 1
#: The window of the per-hour limits, in seconds.
HOUR = 3600.0


class ScratchLike(Protocol):
    """What a resident needs of its temporary memory (see ``homeagent_core.memory.scratch``)."""

    def tools(self) -> list[ToolDef]: ...

    async def alearned(self) -> list[Triple]: ...

    def close(self) -> None: ...


@dataclass
class Resident:
    """One resident sub-agent: definition, queue, working context, usage."""

    name: str
    role: str
    tools: list[str] | None = None
    created: float = field(default_factory=time.time)
    context: list[dict[str, str]] = field(default_factory=list)
    last_output: str = ""
    last_task: str = ""
    done: int = 0
    failed: int = 0
    usage: collections.deque[tuple[float, int]] = field(default_factory=collections.deque)
    scheduler: Scheduler = field(default_factory=Scheduler)
    current: InputItem | None = None
    activity: str = "idle"
    waiting_until: float | None = None
    scratch: ScratchLike | None = None
    worker: asyncio.Task[None] | None = None
    registry: ScopedTools | None = None
    registry_version: int = -1
    registry_scratch: ScratchLike | None = None
    stopped: bool = False
    disk: StateFile | None = None
    creator: Principal | None = None  #: the principal of the turn that created it (its reports are theirs)

    @property
    def status(self) -> str:
        if self.stopped:
            return "stopped"
        if self.waiting_until is not None:
            return "over budget"
        return "working" if self.current is not None else "idle"

    def queued(self) -> list[str]:
        return [item.text for item in self.scheduler.waiting()]

    def used(self, now: float) -> tuple[int, int]:
        """Messages and tokens in the last hour."""
        while self.usage and self.usage[0][0] <= now - HOUR:
            self.usage.popleft()
        return len(self.usage), sum(tokens for _, tokens in self.usage)

    def summary(self) -> dict[str, Any]:
        turns, tokens = self.used(time.time())
        return {
            "name": self.name,
            "role": self.role,
            "tools": self.tools,
            "status": self.status,
            "activity": self.activity,
            "current": self.current.text if self.current is not None else None,
            "queued": self.queued(),
            "context_messages": len(self.context),
            "last_task": self.last_task,
            "last_output": self.last_output,
            "done": self.done,
            "failed": self.failed,
            "turns_last_hour": turns,
            "tokens_last_hour": tokens,
            "waiting_until": self.waiting_until,
            "created": self.created,
        }

    def state(self) -> dict[str, Any]:
        """What is persisted: definition, queue (the message in progress first), context, usage."""
        queue = [item.text for item in ([self.current] if self.current is not None else [])]
        queue += self.queued()
        return {
            "version": STATE_VERSION,
            "name": self.name,
            "role": self.role,
            "tools": self.tools,
            "created": self.created,
            "queue": queue,
            "context": self.context,
            "last_output": self.last_output,
            "last_task": self.last_task,
            "done": self.done,
            "failed": self.failed,
            "usage": [list(u) for u in self.usage],
            **({"creator": self.creator.to_dict()} if self.creator is not None else {}),
        }


class StateFile:
    """One resident's ``state.json``: writes land in order and never after the folder was removed.

    Called from worker threads; a lock makes each write and the removal atomic with respect to
    each other.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._numbers = 0
        self._written = 0
        self.removed = False

    def number(self) -> int:
        """The number of the next write (taken on the event loop, in the order states were made)."""
        self._numbers += 1
        return self._numbers

    def write(self, number: int, state: dict[str, Any]) -> bool:
        """Write ``state`` unless a newer one was written or the folder was removed; True if written."""
        with self._lock:
            if self.removed or number <= self._written:
                return False
            write_state(self.folder / STATE_FILE, state)
            self._written = number
            return True

    def remove(self) -> None:
        """Remove the folder; later writes do nothing."""
        with self._lock:
            self.removed = True
            shutil.rmtree(self.folder, ignore_errors=True)


def write_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(state, ensure_ascii=False))


def read_states(root: Path) -> list[dict[str, Any]]:
    states: list[dict[str, Any]] = []
    if not root.is_dir():
        return states
    for path in sorted(root.glob(f"*/{STATE_FILE}")):
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.error("resident state %s is unreadable (%s); that resident was not restored", path, exc)
            continue
        if isinstance(state, dict) and state.get("version") == STATE_VERSION:
            states.append(state)
        else:
            log.error("resident state %s has an unknown format; that resident was not restored", path)
    return states
