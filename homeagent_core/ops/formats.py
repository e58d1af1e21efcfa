"""The data format of a data directory: every store's version, and the format history.

Each store records its own version (SQLite files in ``PRAGMA user_version``, the conversation
log in its folder's ``FORMAT`` file, the knowledge index and a resident's state in their JSON;
see :mod:`homeagent_sdk._schema`). The *data format* of a whole directory is one number for
the set of those versions: :data:`HISTORY` lists every format this project has written, with
the commit that introduced it and what changed, and :data:`DATA_FORMAT` is the one this
HomeAgent writes. ``homeagent --version`` prints it; ``homeagent doctor`` reads every store of
a directory without changing it (:func:`inspect_data_dir`) and says which stores an upgrade will
migrate (automatically, at the next open, after a copy in ``<data>/backups/pre-migration/``)
and which are from a newer HomeAgent.

Adding a migration step to a store: append the step to that store's schema, add a
:data:`HISTORY` entry with the new version, and add an old-format fixture
(``tests/fixtures/old_formats/``) written by the last commit before the change.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_FORMAT",
    "HISTORY",
    "DataFormatReport",
    "FormatChange",
    "StoreVersion",
    "current_versions",
    "inspect_data_dir",
]


@dataclass(frozen=True)
class FormatChange:
    """One data format: the commit that introduced it and every store's version in it."""

    format: int
    commit: str
    date: str
    change: str
    stores: dict[str, int]


def _after(previous: dict[str, int], **changed: int) -> dict[str, int]:
    return {**previous, **{name.replace("_", "."): v for name, v in changed.items()}}


_F1 = {"config.db": 1, "documents.db": 1, "graph.db": 1, "media.db": 1, "conversation log": 1,
       "knowledge index": 1, "timers.db": 1}
_F2 = _after(_F1, graph_db=2)
_F3 = _after(_F2, pairing_db=1)
_F4 = _after(_F3, graph_db=3)
_F5 = _after(_F4, timers_db=2)
_F6 = _after(_F5, documents_db=2)
_F7 = _after(_F6, **{"residents state": 1})
_F8 = _after(_F7, people_db=1)
_F9 = _after(_F8, timers_db=3)
_F10 = _after(_F9, reminders_db=1)
_F11 = _after(_F10, **{"conversation log": 2})
_F12 = _after(_F11, logins_db=1)
_F14 = _after(_F12, graph_db=4)
_F15 = _after(_F14, people_db=2, push_db=1, calendar_db=1)
_F16 = _after(_F15, documents_db=3)
_F17 = _after(_F16, nodes_db=1)

#: Every data format this project has written, oldest first.
HISTORY: tuple[FormatChange, ...] = (
    FormatChange(1, "5dd0828", "2026-12-02", "first release: config, documents, graph (v1), media, conversation "
                 "log, knowledge, timers", _F1),
    FormatChange(2, "18918bb", "2026-12-02", "graph.db 2: stored keyword terms, graph_meta, applied_batches", _F2),
    FormatChange(3, "f838dfa", "2026-12-03", "pairing.db (chat bridges' pairing requests) added", _F3),
    FormatChange(4, "349d84b", "2026-12-03", "graph.db 3: relations count review attempts", _F4),
    FormatChange(5, "4d49f69", "2026-12-03", "timers.db 2: a timer remembers its conversation channel", _F5),
    FormatChange(6, "5c7955a", "2026-12-03", "documents.db 2: a covering index read at open", _F6),
    FormatChange(7, "7ce77a9", "2026-12-03", "resident sub-agents' state (residents/<name>/state.json) added", _F7),
    FormatChange(8, "56b238b", "2026-12-06", "people.db (persons, roles, identities, API keys, audit) added", _F8),
    FormatChange(9, "5450631", "2026-12-06", "timers.db 3: a timer remembers the person who set it", _F9),
    FormatChange(10, "8036dd4", "2026-12-06", "reminders.db added", _F10),
    FormatChange(11, "a76d644", "2026-12-06", "conversation log 2: records carry person and thread", _F11),
    FormatChange(12, "1b139c4", "2026-12-06", "logins.db (web UI passwords and invites) added", _F12),
    FormatChange(13, "fe2f74a", "2026-12-06", "every store records its version (SQLite PRAGMA user_version, the "
                 "log folder's FORMAT file); graph.db's schema_version table is no longer written", _F12),
    FormatChange(14, "9a3fe67", "2026-12-06", "graph.db 4: relations, sentences, media blocks and block edges "
                 "record person and visibility; a relation is unique per person and visibility", _F14),
    FormatChange(15, "6de3939", "2026-12-06", "people.db 2: approvals kept across restarts; push.db (Web Push "
                 "subscriptions) and calendar.db (reminders set before events) added", _F15),
    FormatChange(16, "75db909", "2026-12-06", "documents.db 3: documents record person and visibility; knowledge "
                 "entries' marks in knowledge/.marks.json; log records may carry a visibility", _F16),
    FormatChange(17, "f552158", "2026-12-06", "nodes.db (paired remote devices, their hashed tokens and codes) "
                 "added", _F17),
)

#: The data format this HomeAgent writes (and the newest it reads).
DATA_FORMAT = HISTORY[-1].format
_RECORDED_SINCE = 13  # formats before this one left versions unrecorded (read from the stores' shapes)


@dataclass(frozen=True)
class StoreVersion:
    """One store file or folder of a data directory, as read without changing it."""

    store: str
    path: Path
    version: int | None  # None: unreadable
    current: int
    recorded: bool  # the version was recorded in the store (not told from its shape)
    detail: str = ""

    @property
    def state(self) -> str:
        """``current``, ``older`` (migrated at the next open), ``newer`` (refused) or ``unreadable``."""
        if self.version is None:
            return "unreadable"
        if self.version > self.current:
            return "newer"
        return "current" if self.version == self.current else "older"

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "path": str(self.path), "version": self.version, "current": self.current,
                "recorded": self.recorded, "state": self.state, "detail": self.detail}


@dataclass(frozen=True)
class DataFormatReport:
    """The stores of a data directory and the data format they add up to."""

    data_dir: Path
    stores: list[StoreVersion]

    @property
    def format(self) -> int | None:
        """The oldest format whose store versions this directory's stores have (None: newer than known).

        Formats that differ only in stores this directory does not hold (a store added later and
        never used here) cannot be told apart; the oldest of them is named.
        """
        if any(s.state == "newer" for s in self.stores):
            return None
        versions = {s.store: s.version or 0 for s in self.stores if s.version is not None}
        recorded = all(s.recorded for s in self.stores)
        reached = 0
        for i, entry in enumerate(HISTORY):
            if entry.format >= _RECORDED_SINCE and not recorded:
                break
            if not all(versions[name] >= v for name, v in entry.stores.items() if name in versions):
                break
            reached = i
        while reached > 0 and HISTORY[reached].format != _RECORDED_SINCE and all(
            HISTORY[reached - 1].stores.get(name, 0) == HISTORY[reached].stores.get(name, 0) for name in versions
        ):
            reached -= 1
        return HISTORY[reached].format

    def to_dict(self) -> dict[str, Any]:
        return {"data_dir": str(self.data_dir), "format": self.format, "current": DATA_FORMAT,
                "stores": [s.to_dict() for s in self.stores]}


# -------------------------------------------------------------------------------- reading


def _schemas() -> dict[str, Any]:
    """Every SQLite store's schema by store name (imported here: the stores' modules are not light)."""
    from homeagent_core.agent.people import PEOPLE_SCHEMA
    from homeagent_core.builtin.calendar import CALENDAR_SCHEMA
    from homeagent_core.builtin.nodes_store import NODES_SCHEMA
    from homeagent_core.builtin.reminders import REMINDERS_SCHEMA
    from homeagent_core.builtin.timer import TIMERS_SCHEMA
    from homeagent_core.builtin.webui.auth import LOGINS_SCHEMA
    from homeagent_core.builtin.webui.push import PUSH_SCHEMA
    from homeagent_core.config import CONFIG_SCHEMA
    from homeagent_core.memory.documents.sql import DOCUMENTS_SCHEMA
    from homeagent_core.memory.graph.schema import GRAPH_SCHEMA
    from homeagent_core.memory.media import MEDIA_SCHEMA
    from homeagent_sdk.pairing import PAIRING_SCHEMA

    return {s.name: s for s in (CONFIG_SCHEMA, PEOPLE_SCHEMA, DOCUMENTS_SCHEMA, GRAPH_SCHEMA, MEDIA_SCHEMA,
                                TIMERS_SCHEMA, REMINDERS_SCHEMA, LOGINS_SCHEMA, PAIRING_SCHEMA, PUSH_SCHEMA,
                                CALENDAR_SCHEMA, NODES_SCHEMA)}


def current_versions() -> dict[str, int]:
    """Every store's version as this HomeAgent writes it (what :data:`HISTORY`'s last entry must say)."""
    from homeagent_core.agent.resident_state import STATE_VERSION
    from homeagent_core.memory.knowledge.base import INDEX_VERSION
    from homeagent_core.memory.textlog import LOG_FORMAT

    out = {name: schema.version for name, schema in _schemas().items()}
    out.update({"conversation log": LOG_FORMAT, "knowledge index": INDEX_VERSION, "residents state": STATE_VERSION})
    return out


#: Where each SQLite store lives, relative to the data directory (globs).
_SQLITE_PLACES = {
    "config.db": ["config.db"],
    "people.db": ["people.db"],
    "documents.db": ["memory/documents.db"],
    "graph.db": ["memory/graph.db"],
    "media.db": ["memory/media/media.db"],
    "timers.db": ["plugin_data/timer/timers.db"],
    "reminders.db": ["plugin_data/reminders/reminders.db"],
    "logins.db": ["plugin_data/webui/logins.db"],
    "pairing.db": ["plugin_data/*/pairing.db"],
    "push.db": ["plugin_data/webui/push.db"],
    "calendar.db": ["plugin_data/calendar/calendar.db"],
    "nodes.db": ["plugin_data/nodes/nodes.db"],
}


def _sqlite_version(path: Path, name: str, schema: Any, current: int) -> StoreVersion:
    from homeagent_sdk._schema import read_version

    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            recorded = int(conn.execute("PRAGMA user_version").fetchone()[0])
            version = read_version(conn, schema)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return StoreVersion(name, path, None, current, False, f"cannot be read: {exc}")
    return StoreVersion(name, path, version, current, recorded != 0 or version == 0)


def _json_version(path: Path, name: str, current: int, key: str) -> StoreVersion:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        version = record.get(key) if isinstance(record, dict) else None
    except (OSError, ValueError) as exc:
        return StoreVersion(name, path, None, current, False, f"cannot be read: {exc}")
    if not isinstance(version, int) or isinstance(version, bool):
        return StoreVersion(name, path, None, current, False, f"holds no {key!r} number")
    return StoreVersion(name, path, version, current, True)


def _log_version(folder: Path, current: int) -> StoreVersion:
    from homeagent_core.memory.textlog import log_folder_shape
    from homeagent_sdk._schema import read_folder_format
    from homeagent_sdk.errors import DataFormatError

    try:
        recorded = read_folder_format(folder)
    except DataFormatError as exc:
        return StoreVersion("conversation log", folder, None, current, False, str(exc))
    if recorded is not None:
        return StoreVersion("conversation log", folder, recorded, current, True)
    return StoreVersion("conversation log", folder, log_folder_shape(folder), current, False)


def inspect_data_dir(data: Path) -> DataFormatReport:
    """Read the version of every store in ``data`` without opening any for writing."""
    schemas = _schemas()
    currents = current_versions()
    found: list[StoreVersion] = []
    for name, patterns in _SQLITE_PLACES.items():
        for pattern in patterns:
            for path in sorted(data.glob(pattern)):
                if path.is_file():
                    found.append(_sqlite_version(path, name, schemas[name], currents[name]))
    log_dir = data / "memory" / "text"
    if log_dir.is_dir():
        found.append(_log_version(log_dir, currents["conversation log"]))
    index = data / "knowledge" / ".index.json"
    if index.is_file():
        found.append(_json_version(index, "knowledge index", currents["knowledge index"], "version"))
    for state in sorted((data / "residents").glob("*/state.json")):
        found.append(_json_version(state, "residents state", currents["residents state"], "version"))
    return DataFormatReport(data, found)
