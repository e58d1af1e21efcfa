"""The configuration registry: typed settings in ``<data>/config.db``.

Keys live in two namespaces: ``core.*`` (the kernel's, declared in :data:`CORE_DEFS`) and
``plugin.<name>.*`` (declared by each plugin through ``register_settings``). Values are stored
as strings in SQLite (WAL): ``core.*`` in the ``config`` table, each plugin's keys in its own
``config_<name>`` table. Defaults are never written, so upgrading changes them; only what a
user set is stored.

Every write is validated against its :class:`~homeagent_sdk.types.ConfigDef`; a wrong type,
an out-of-range number or an unknown option raises :class:`ConfigValueError` naming the key
and what was expected. A key nobody declared raises :class:`UnknownConfigKey`, except inside
the free-form namespace ``core.llm.sources.<source>.<field>``.

Reads come from an in-memory cache, so they are cheap on the event loop; writes are rare and
go straight to SQLite.

On a shared PostgreSQL memory store the household's memory settings (:func:`is_shared_key`: the
media settings and the embedding space, so that every daemon of the tenant stores media the same
way and embeds in one vector space) live in the database as well: :meth:`ConfigStore.attach_shared`
reads them from a :class:`SharedSettings` backend, writes go to both, and a change made on one
daemon reaches the others. Everything else (the listen addresses, API keys of this daemon,
plugins, local model paths, the store URL itself) stays in ``config.db``.
"""

from __future__ import annotations

import builtins
import difflib
import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from homeagent_core.durations import format_duration, parse_duration
from homeagent_sdk._schema import StoreSchema, open_schema, sql_step, version_one_if
from homeagent_sdk.errors import ConfigValueError, DataFormatError, UnknownConfigKey
from homeagent_sdk.types import ConfigDef

__all__ = [
    "CONFIG_SCHEMA",
    "CONFIG_TYPES",
    "CORE_DEFS",
    "LLM_API_KEY_ENV",
    "SHARED_KEYS",
    "ConfigStore",
    "SharedSettings",
    "is_shared_key",
]

log = logging.getLogger(__name__)

CONFIG_TYPES = frozenset({"string", "int", "float", "bool", "duration", "password", "select", "text", "json"})

#: Environment variables consulted, in order, when ``core.llm.api_key`` is empty.
LLM_API_KEY_ENV = ("HOMEAGENT_LLM_API_KEY", "LLM_API_KEY", "DEEPSEEK_API_KEY")

_SOURCE_KEY = re.compile(r"^core\.llm\.sources\.([A-Za-z0-9_-]{1,64})\.([a-z_]+)$")
_SOURCE_FIELDS: dict[str, str] = {
    "base_url": "string",
    "model": "string",
    "api_key": "password",
    "adapter": "string",
    "adapter_path": "string",
    "context_window": "int",
    "max_concurrent": "int",
    "priority": "int",
    "thinking_enabled": "bool",
    "vision": "bool",
    "audio": "bool",
    "temperature": "float",
    "max_tokens": "int",
}
_PLUGIN_KEY = re.compile(r"^plugin\.([A-Za-z0-9_-]+)\.(.+)$")

DEFAULT_SYSTEM_PROMPT = (
    "你是「小宅」，一个住在这个家里的私人助理。你记得和主人相处的点滴，"
    "回答简洁、真诚、有温度；需要时主动使用工具和记忆，不编造事实。"
    "表情只用颜文字，不用 emoji。输出给同步通道（网页、终端）时直接回答文字；"
    "需要发到异步通道时，调用对应的 output_send__<通道> 工具。"
)


def _d(key: str, type_: str, default: Any, description: str, **kw: Any) -> ConfigDef:
    return ConfigDef(key=key, type=type_, default=default, description=description, **kw)


CORE_DEFS: tuple[ConfigDef, ...] = (
    _d("core.daemon.log_level", "select", "info", "Log level of the daemon.",
       options=["debug", "info", "warn", "error"], category="daemon"),
    _d("core.llm.provider", "string", "deepseek", "Name of the default LLM source.", category="llm"),
    _d("core.llm.api_key", "password", "",
       "Shared API key for every source without its own core.llm.sources.<name>.api_key; "
       "empty = env HOMEAGENT_LLM_API_KEY, LLM_API_KEY or DEEPSEEK_API_KEY.",
       secret=True, category="llm"),
    _d("core.llm.temperature", "float", 0.7, "Sampling temperature.", min=0.0, max=2.0, category="llm"),
    _d("core.llm.max_tokens", "int", 4096, "Maximum tokens per reply.", min=1, max=1_000_000, category="llm"),
    _d("core.agent.max_tool_turns", "int", 10, "Maximum model rounds with tool calls per turn.",
       min=1, max=100, category="agent"),
    _d("core.agent.tool_timeout", "duration", "60s", "Hard timeout of one tool call.", category="agent"),
    _d("core.agent.stage_timeout", "duration", "30s", "Timeout of one stage handler.", category="agent"),
    _d("core.people.approval_timeout", "duration", "10m",
       "How long a call that asks the owner (an adult's admin tool) waits for a decision before it "
       "fails with 'no answer' (docs/PEOPLE.md).", min=1, max=7 * 86400, category="people"),
    _d("core.agent.max_context_size", "int", 30, "Events kept in the context window (L0).",
       min=11, max=10_000, category="agent"),
    _d("core.agent.child_max_depth", "int", 1,
       "How deep sub-agents may nest: 1 = only the agent's own turns spawn children (spawn_child); "
       "2 = children may spawn children of their own, and so on. Calls beyond it are refused.",
       min=1, max=5, restart_required=True, category="agent"),
    _d("core.agent.child_max_per_turn", "int", 16,
       "Most sub-agents one turn may spawn in all, its children's children included. "
       "Calls beyond it are refused with a message telling the model to collect results instead.",
       min=1, max=1000, restart_required=True, category="agent"),
    _d("core.agent.residents.max", "int", 8,
       "Most resident sub-agents (resident_agents create) at once; creating more is refused.",
       min=1, max=1000, restart_required=True, category="agent"),
    _d("core.agent.residents.turns_per_hour", "int", 60,
       "Messages one resident may work on in any hour; beyond it its messages wait.",
       min=1, max=100_000, restart_required=True, category="agent"),
    _d("core.agent.residents.tokens_per_hour", "int", 200_000,
       "Model tokens one resident may use in any hour; beyond it its messages wait.",
       min=1, max=1_000_000_000, restart_required=True, category="agent"),
    _d("core.agent.residents.max_tool_turns", "int", 10,
       "Model rounds with tool calls a resident may take per message.",
       min=1, max=100, restart_required=True, category="agent"),
    _d("core.agent.residents.context_size", "int", 20,
       "Messages of its own conversation a resident keeps as working context (compress shortens it).",
       min=2, max=1000, restart_required=True, category="agent"),
    _d("core.agent.residents.report", "bool", True,
       "Residents report each result to the main agent as an input on the _resident_ channel.",
       restart_required=True, category="agent"),
    _d("core.agent.offload_after", "duration", "5m",
       "Backlog triage: once the agent has been busy with one turn this long and inputs wait, a "
       "temporary triage assistant answers what it can from memory and tells the others it is busy "
       "(0 = never).", restart_required=True, category="agent"),
    _d("core.agent.offload_max_inputs", "int", 8,
       "Waiting inputs backlog triage looks at at once (older first); the next gets its look when one is done.",
       min=1, max=256, restart_required=True, category="agent"),
    _d("core.agent.distill_interval", "duration", "30m", "Context prune into documents.", category="memory"),
    _d("core.agent.archive_interval", "duration", "60m", "Cold documents into graph triples.", category="memory"),
    _d("core.agent.merge_interval", "duration", "120m", "Similar-entity merge review.", category="memory"),
    _d("core.agent.review_interval", "duration", "120m", "Relation review.", category="memory"),
    _d("core.agent.workdir", "string", "", "Default working directory of command tools.", category="agent"),
    _d("core.agent.embedding_model_path", "string", "",
       "Comma-separated word-vector files or model2vec folders.", restart_required=True, category="memory"),
    _d("core.agent.system_prompt", "text", DEFAULT_SYSTEM_PROMPT, "The agent's system prompt.",
       restart_required=True, category="agent"),
    _d("core.agent.personal_prompt", "text", "",
       "Persona text; the file <data>/personal/personal.md overrides it.", category="agent"),
    _d("core.embeddings.provider", "select", "chineseclip", "Dense embedding provider (tier 1).",
       options=["chineseclip", "openclip", "sentence-transformers", "http", "none"], category="memory",
       restart_required=True),
    _d("core.embeddings.model", "string", "", "Model id or local path of the dense provider.",
       category="memory", restart_required=True),
    _d("core.embeddings.base_url", "string", "",
       "Base URL of an OpenAI-compatible /v1/embeddings service (provider http).", category="memory",
       restart_required=True),
    _d("core.embeddings.api_key", "password", "", "API key of that service.", secret=True, category="memory",
       restart_required=True),
    _d("core.embeddings.dimension", "int", 0, "Vector size of that service (0 = ask it once at start).",
       min=0, max=65536, category="memory", restart_required=True),
    _d("core.embeddings.languages", "string", "",
       "Languages the dense model understands, comma-separated ISO codes (zh, en; * = any). Empty: "
       "the model card's, else the provider's default. Queries in other languages skip the dense path.",
       category="memory", restart_required=True),
    _d("core.embeddings.allow_download", "bool", False,
       "Allow fetching model weights from the Hugging Face hub.", category="memory"),
    _d("core.memory.store", "string", "sqlite",
       "Where memory lives: sqlite (files under <data>/memory) or a postgresql://user:password@host/db "
       "URL shared by several daemons and agents: documents, graph, conversation log, media, knowledge "
       "and the shared memory and embedding settings (docs/SCALE_OUT.md).",
       secret=True, category="memory", restart_required=True),
    _d("core.memory.tenant", "string", "default",
       "This agent's id on a shared PostgreSQL store (rows of other tenants stay invisible).", category="memory",
       restart_required=True),
    _d("core.memory.media.enabled", "bool", True, "Store media attachments (false = text only).",
       category="memory"),
    _d("core.memory.media.max_blob_bytes", "int", 50 * 1024 * 1024, "Largest media blob accepted.",
       min=1, category="memory"),
    _d("core.input_processing.image.fallback_provider", "string", "",
       "Source (a core.llm.sources name with vision) that describes images when the active source has no "
       "vision; empty = images reach only a model that can see them.", category="input"),
    _d("core.input_processing.image.fallback_model", "string", "",
       "Model of that source (empty = the source's own model).", category="input"),
    _d("core.input_processing.image.describe_prompt", "text", "请详细描述这张图片的内容。",
       "Prompt used to describe images.", category="input"),
    _d("core.input_processing.image.ocr_enabled", "bool", True,
       "Enable the ocr_image tool and transcribe the text in attached images along with their description.",
       category="input"),
    _d("core.input_processing.image.ocr_prompt", "text",
       "请识别这张图片中的所有文字内容，按原有的排版逐行输出；没有文字时回答「无文字」。",
       "Prompt used to read the text in images.", category="input"),
    _d("core.input_processing.image.max_bytes", "int", 20 * 1024 * 1024,
       "Largest image sent to a vision source.", min=1, category="input"),
    _d("core.input_processing.image.generate_provider", "string", "",
       "Source with an OpenAI-compatible /images/generations endpoint for generate_image; empty = off.",
       category="input"),
    _d("core.input_processing.image.generate_model", "string", "",
       "Image model of that source (empty = the source's own model).", category="input"),
    _d("core.input_processing.audio.fallback_provider", "string", "",
       "Source with an OpenAI-compatible /audio/transcriptions endpoint (OpenAI, Groq, a local whisper "
       "server) that transcribes voice inputs when the active source takes no audio.", category="input"),
    _d("core.input_processing.audio.fallback_model", "string", "",
       "Transcription model of that source, e.g. whisper-1 (empty = the source's own model).", category="input"),
    _d("core.input_processing.audio.describe_prompt", "text", "请转写这段音频的内容。",
       "Hint sent with each transcription (language, names, punctuation style).", category="input"),
    _d("core.input_processing.audio.whisper_model_path", "string", "",
       "Folder of a faster-whisper (CTranslate2) model for local transcription when no audio source is set; "
       "needs pip install 'homeagent[whisper]'.", category="input"),
    _d("core.input_processing.audio.max_bytes", "int", 25 * 1024 * 1024,
       "Largest audio transcribed; bigger files are refused before they are read.", min=1, category="input"),
    _d("core.llm.sources.deepseek.base_url", "string", "https://api.deepseek.com", "", category="llm"),
    _d("core.llm.sources.deepseek.model", "string", "deepseek-v4-flash", "", category="llm"),
    _d("core.llm.sources.deepseek.adapter", "string", "deepseek", "", category="llm"),
)


#: Settings shared by every daemon of a tenant on a PostgreSQL memory store: how media are stored,
#: and the embedding space (daemons embedding in different spaces would keep re-embedding each
#: other's rows). The store URL, the tenant and machine-bound settings (local model paths,
#: downloads) stay in each daemon's config.db.
SHARED_KEYS = frozenset({
    "core.memory.media.enabled",
    "core.memory.media.max_blob_bytes",
    "core.embeddings.provider",
    "core.embeddings.model",
    "core.embeddings.base_url",
    "core.embeddings.api_key",
    "core.embeddings.dimension",
    "core.embeddings.languages",
})


def is_shared_key(key: str) -> bool:
    """Whether ``key`` is one of the household's settings kept in a shared memory store."""
    return key in SHARED_KEYS


class SharedSettings(Protocol):
    """Where a tenant's shared settings live (the PostgreSQL memory store), as text values."""

    def load(self) -> dict[str, str]:
        """Every stored shared setting."""
        ...

    def put(self, key: str, value: str | None) -> None:
        """Store ``value`` for ``key`` (``None`` = forget it), telling the other daemons."""
        ...

    def follow(self, callback: Callable[[str, str | None], None]) -> None:
        """Call ``callback(key, value)`` after another daemon changed a setting."""
        ...

    def close(self) -> None: ...


def _table_for(plugin: str) -> str:
    return "config_" + re.sub(r"[^a-z0-9_]", "_", plugin.lower())


CONFIG_SCHEMA = StoreSchema(
    "config.db",
    [
        sql_step(
            "CREATE TABLE IF NOT EXISTS config (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE IF NOT EXISTS disabled_plugins "
            "(name TEXT PRIMARY KEY, disabled_at REAL NOT NULL, disabled_by TEXT NOT NULL)",
        ),
    ],
    legacy=version_one_if("config"),
)
"""The schema of ``config.db`` (the plugins' ``config_<name>`` tables are made as they are declared)."""


class ConfigStore:
    """Typed, validated settings backed by SQLite; see the module docstring."""

    def __init__(self, path: Path | str, defs: Iterable[ConfigDef] = CORE_DEFS) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            open_schema(self._db, self.path, CONFIG_SCHEMA)
        except DataFormatError:
            self._db.close()
            raise
        self._defs: dict[str, ConfigDef] = {}
        self._values: dict[str, str] = {}
        self._listeners: list[Callable[[str], None]] = []
        self._shared: SharedSettings | None = None
        for definition in defs:
            self.define(definition)
        for key, value in self._db.execute("SELECT key, value FROM config"):
            self._values[key] = value
        for (table,) in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'config\\_%' ESCAPE '\\'"
        ):
            for key, value in self._db.execute(f'SELECT key, value FROM "{table}"'):
                self._values[key] = value

    # ------------------------------------------------------------------ definitions

    def define(self, definition: ConfigDef) -> None:
        """Declare a setting (idempotent; a later definition of the same key replaces it).

        Raises:
            ConfigValueError: the definition itself is invalid (unknown type, bad default).
        """
        if definition.type not in CONFIG_TYPES:
            raise ConfigValueError(
                f"setting {definition.key}: unknown type {definition.type!r}; "
                f"use one of {', '.join(sorted(CONFIG_TYPES))}",
                key=definition.key,
            )
        if definition.default is not None:
            self._convert(definition, definition.default)
        self._defs[definition.key] = definition
        match = _PLUGIN_KEY.match(definition.key)
        if match:
            with self._lock:
                self._db.execute(
                    f'CREATE TABLE IF NOT EXISTS "{_table_for(match.group(1))}" '
                    "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )

    def define_plugin(self, plugin: str, definition: ConfigDef) -> ConfigDef:
        """Declare a plugin setting given relative to ``plugin.<plugin>.``; returns the full def."""
        key = definition.key
        prefix = f"plugin.{plugin}."
        if not key.startswith(prefix):
            key = prefix + key
        full = ConfigDef.from_dict({**definition.to_dict(), "key": key, "plugin": plugin})
        self.define(full)
        return full

    def definition(self, key: str) -> ConfigDef | None:
        """The ConfigDef of ``key``, including the implicit ones of LLM source fields."""
        found = self._defs.get(key)
        if found is not None:
            return found
        match = _SOURCE_KEY.match(key)
        if match and match.group(2) in _SOURCE_FIELDS:
            type_ = _SOURCE_FIELDS[match.group(2)]
            return ConfigDef(key=key, type=type_, default=None, secret=type_ == "password", category="llm")
        return None

    def definitions(self, prefix: str = "") -> list[ConfigDef]:
        return [d for k, d in sorted(self._defs.items()) if k.startswith(prefix)]

    def is_known(self, key: str) -> bool:
        return self.definition(key) is not None

    # ------------------------------------------------------------------ values

    def _convert(self, definition: ConfigDef, value: Any) -> Any:
        """Validate ``value`` (a typed value or its string form) and return the typed value."""
        key, type_ = definition.key, definition.type

        def bad(expected: str) -> ConfigValueError:
            return ConfigValueError(f"{key}: expected {expected}, got {value!r}", key=key)

        if type_ in ("string", "password", "text"):
            if not isinstance(value, str):
                raise bad("a string")
            typed: Any = value
        elif type_ == "select":
            if not isinstance(value, str) or (definition.options and value not in definition.options):
                raise bad(f"one of {', '.join(definition.options)}")
            typed = value
        elif type_ == "bool":
            if isinstance(value, bool):
                typed = value
            elif isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
                typed = True
            elif isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off", ""):
                typed = False
            else:
                raise bad("a boolean (true/false)")
        elif type_ == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise bad("an integer")
            try:
                typed = int(value)
            except (TypeError, ValueError):
                raise bad("an integer") from None
        elif type_ == "float":
            if isinstance(value, bool):
                raise bad("a number")
            try:
                typed = float(value)
            except (TypeError, ValueError):
                raise bad("a number") from None
        elif type_ == "duration":
            try:
                typed = float(value) if isinstance(value, int | float) else parse_duration(str(value))
            except ValueError:
                raise bad("a duration such as 30s, 5m, 2h or 1h30m") from None
        elif type_ == "json":
            if isinstance(value, str):
                try:
                    typed = json.loads(value) if value.strip() else None
                except json.JSONDecodeError as exc:
                    raise ConfigValueError(f"{key}: expected JSON, {exc}", key=key) from None
            else:
                typed = value
        else:  # pragma: no cover - define() rejects unknown types
            raise bad(type_)
        if type_ in ("int", "float", "duration"):
            if definition.min is not None and typed < definition.min:
                raise ConfigValueError(f"{key}: {typed} is below the minimum {definition.min:g}", key=key)
            if definition.max is not None and typed > definition.max:
                raise ConfigValueError(f"{key}: {typed} is above the maximum {definition.max:g}", key=key)
        return typed

    def validate(self, key: str, value: Any) -> Any:
        """Check ``value`` for ``key`` without storing it; returns the typed value.

        Raises:
            UnknownConfigKey: nobody declared ``key``.
            ConfigValueError: the value has the wrong type, range or option.
        """
        return self._convert(self._require(key), value)

    @staticmethod
    def _to_text(definition: ConfigDef, typed: Any) -> str:
        if definition.type == "bool":
            return "true" if typed else "false"
        if definition.type == "duration":
            return format_duration(typed)
        if definition.type == "json":
            return json.dumps(typed, ensure_ascii=False)
        return str(typed)

    def _require(self, key: str) -> ConfigDef:
        definition = self.definition(key)
        if definition is not None:
            return definition
        hint = ""
        similar = difflib.get_close_matches(key, list(self._defs), n=3, cutoff=0.8)
        if similar:
            hint = f"; did you mean {', '.join(similar)}?"
        elif key.startswith("plugin."):
            hint = "; is the plugin installed and enabled? `homeagent plugins list` shows its settings"
        raise UnknownConfigKey(f"unknown config key {key!r}{hint} (`homeagent config list` shows all keys)", key=key)

    def get(self, key: str, default: Any = None) -> Any:
        """The typed value of ``key``: what was set, else the declared default, else ``default``.

        An empty ``core.llm.api_key`` falls back to the environment (:data:`LLM_API_KEY_ENV`).
        """
        definition = self.definition(key)
        raw = self._values.get(key)
        if raw is None:
            value = definition.default if definition is not None and definition.default is not None else default
        elif definition is None:
            value = raw
        else:
            try:
                value = self._convert(definition, raw)
            except ConfigValueError:
                log.warning("stored value of %s is invalid; using the default", key)
                value = definition.default if definition.default is not None else default
        if key == "core.llm.api_key" and not value:
            value = next((os.environ[e] for e in LLM_API_KEY_ENV if os.environ.get(e)), value)
        if definition is not None and definition.type == "duration" and isinstance(value, str):
            value = parse_duration(value)
        return value

    def source(self, key: str) -> str:
        """Where the value comes from: ``shared`` (the household's, on a shared store), ``set``, ``env``
        or ``default``."""
        if key in self._values:
            return "shared" if self._shared is not None and is_shared_key(key) else "set"
        if key == "core.llm.api_key" and any(os.environ.get(e) for e in LLM_API_KEY_ENV):
            return "env"
        return "default"

    def set(self, key: str, value: Any) -> Any:
        """Validate and store ``value``; returns the typed value. Listeners are notified.

        Raises:
            UnknownConfigKey: nobody declared ``key``.
            ConfigValueError: the value has the wrong type, range or option.
        """
        definition = self._require(key)
        typed = self._convert(definition, value)
        text = self._to_text(definition, typed)
        match = _PLUGIN_KEY.match(key)
        table = _table_for(match.group(1)) if match else "config"
        with self._lock:
            if self._shared is not None and is_shared_key(key):
                self._shared.put(key, text)  # first, so a database error leaves nothing half-set
            self._db.execute(f'CREATE TABLE IF NOT EXISTS "{table}" (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
            self._db.execute(f'INSERT OR REPLACE INTO "{table}" (key, value) VALUES (?, ?)', (key, text))
            self._values[key] = text
        self._notify(key)
        return typed

    def unset(self, key: str) -> bool:
        """Forget a stored value (the default applies again); returns whether one was stored.

        Raises:
            UnknownConfigKey: the key is neither declared nor stored.
        """
        if key not in self._values:
            self._require(key)
            return False
        match = _PLUGIN_KEY.match(key)
        table = _table_for(match.group(1)) if match else "config"
        with self._lock:
            if self._shared is not None and is_shared_key(key):
                self._shared.put(key, None)
            self._db.execute(f'DELETE FROM "{table}" WHERE key = ?', (key,))
            self._values.pop(key, None)
        self._notify(key)
        return True

    # ------------------------------------------------------------------ shared settings

    @property
    def shared(self) -> SharedSettings | None:
        """The attached shared settings, or None (every setting is local)."""
        return self._shared

    def attach_shared(self, shared: SharedSettings) -> None:
        """Read the shared settings (:func:`is_shared_key`) from ``shared`` from now on.

        The database's values win; a shared setting this daemon has set but the database lacks
        is written there (so the first daemon on a new tenant brings its settings along).
        ``config.db`` keeps a copy of every value, which applies again without the shared store.
        The store takes ``shared`` over and closes it with itself.
        """
        with self._lock:
            if self._shared is not None:
                self._shared.close()
            remote = shared.load()
            for key in sorted(k for k in self._values if is_shared_key(k) and k not in remote):
                shared.put(key, self._values[key])
                remote[key] = self._values[key]
            changed = [k for k in remote if self._values.get(k) != remote[k]]
            for key in changed:
                self._store_local(key, remote[key])
            self._shared = shared
        shared.follow(self._on_shared)
        for key in changed:
            self._notify(key)

    def _store_local(self, key: str, text: str | None) -> None:
        """Mirror a shared value into config.db and the cache (``_lock`` held)."""
        if text is None:
            self._db.execute("DELETE FROM config WHERE key = ?", (key,))
            self._values.pop(key, None)
        else:
            self._db.execute("INSERT OR REPLACE INTO config (key, value) VALUES (?, ?)", (key, text))
            self._values[key] = text

    def _on_shared(self, key: str, text: str | None) -> None:
        """Another daemon changed a shared setting."""
        if not is_shared_key(key):
            return
        with self._lock:
            if self._values.get(key) == text:
                return
            self._store_local(key, text)
        self._notify(key)

    def stored(self) -> dict[str, str]:
        """The values that were set, in their stored text form (no defaults)."""
        with self._lock:
            return dict(self._values)

    def items(self, prefix: str = "") -> dict[str, Any]:
        """Typed values of every declared or stored key starting with ``prefix``."""
        keys = {k for k in self._defs if k.startswith(prefix)} | {k for k in self._values if k.startswith(prefix)}
        return {k: self.get(k) for k in sorted(keys)}

    def describe(self, prefix: str = "") -> list[dict[str, Any]]:
        """Rows for listings: key, value (secrets masked), default, type, source, description."""
        rows = []
        for key, value in self.items(prefix).items():
            definition = self.definition(key)
            secret = definition is not None and (definition.secret or definition.type == "password")
            shown = ("****" if value else "") if secret else value
            rows.append({
                "key": key,
                "value": shown,
                "default": None if definition is None or secret else definition.default,
                "type": definition.type if definition else "string",
                "source": self.source(key),
                "description": definition.description if definition else "",
                "restart_required": bool(definition and definition.restart_required),
            })
        return rows

    # ------------------------------------------------------------------ listeners & plugins

    def on_change(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(key)`` after every set/unset; returns an unsubscribe function."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def _notify(self, key: str) -> None:
        for callback in list(self._listeners):
            try:
                callback(key)
            except Exception:
                log.exception("config listener failed for %s", key)

    def disabled_plugins(self) -> builtins.set[str]:
        return {row[0] for row in self._db.execute("SELECT name FROM disabled_plugins")}

    def set_plugin_disabled(self, name: str, disabled: bool, *, by: str = "user") -> None:
        import time

        with self._lock:
            if disabled:
                self._db.execute(
                    "INSERT OR REPLACE INTO disabled_plugins (name, disabled_at, disabled_by) VALUES (?, ?, ?)",
                    (name, time.time(), by),
                )
            else:
                self._db.execute("DELETE FROM disabled_plugins WHERE name = ?", (name,))

    def close(self) -> None:
        with self._lock:
            if self._shared is not None:
                self._shared.close()
                self._shared = None
            self._db.close()
