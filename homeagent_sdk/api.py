"""What a plugin is handed: the scoped SDK facade and the registries of the ``register_*`` hooks.

These are Protocols: the host implements them, plugins only call them. Every method that
talks to the kernel is ``async``; settings accessors are sync (they read an in-memory cache).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Unpack, runtime_checkable

if TYPE_CHECKING:
    from homeagent_sdk.embeddings import EmbeddingProvider
    from homeagent_sdk.types import (
        ChannelDef,
        ConfigDef,
        Doc,
        Entity,
        Event,
        InjectOptions,
        MediaAttachment,
        Relation,
        TextEvent,
        ToolDef,
        ToolOptions,
        Triple,
    )

__all__ = [
    "IOAPI",
    "LLMAPI",
    "AdapterRegistry",
    "ChannelRegistry",
    "ChatProvider",
    "CommandApp",
    "DocAPI",
    "EmbeddingRegistry",
    "EventsAPI",
    "KnowledgeAPI",
    "MediaAPI",
    "MemoryAPI",
    "PluginSDK",
    "RouteRegistry",
    "SettingsAPI",
    "SettingsRegistry",
    "SocialAPI",
    "ToolRegistryProtocol",
]


@runtime_checkable
class ChatProvider(Protocol):
    """A language model reached through the unified request/response shapes.

    ``request`` is the unified request (``model``, ``messages``, ``tools``, ``temperature``,
    ``max_tokens``, ``stream``...); ``chat`` returns the unified response (``content``,
    ``reasoning_content``, ``finish_reason``, ``token_usage``, ``tool_calls`` with decoded
    ``arguments``); ``chat_stream`` yields unified chunks (``content``, ``reasoning_content``,
    ``tool_calls`` fragments with ``stream_index`` and ``raw_arguments``, ``usage``, ``done``,
    and ``reset`` when earlier partial text must be discarded).
    """

    name: str

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]: ...

    def chat_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]: ...


# --------------------------------------------------------------------------- registries


class ToolRegistryProtocol(Protocol):
    """Handed to ``register_tools``."""

    def add(self, tool: ToolDef | Callable[..., Any], **options: Unpack[ToolOptions]) -> ToolDef: ...


class ChannelRegistry(Protocol):
    """Handed to ``register_input_channels`` and ``register_output_channels``."""

    def add(self, channel: ChannelDef) -> None: ...


class EmbeddingRegistry(Protocol):
    """Handed to ``register_embedding_providers``."""

    def add(self, name: str, factory: Callable[[dict[str, Any]], EmbeddingProvider]) -> None: ...


class SettingsRegistry(Protocol):
    """Handed to ``register_settings``; keys are relative to ``plugin.<name>.``."""

    def add(self, definition: ConfigDef) -> None: ...


class RouteRegistry(Protocol):
    """Handed to ``register_routes``."""

    def add(self, path: str, endpoint: Callable[..., Any], *, methods: list[str] | None = None) -> None: ...


class CommandApp(Protocol):
    """Handed to ``register_commands``: the root typer application."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[..., Any]: ...

    def add_typer(self, *args: Any, **kwargs: Any) -> None: ...


class AdapterRegistry(Protocol):
    """Handed to ``register_adapters``."""

    def add(self, folder: Path | str) -> None: ...


# --------------------------------------------------------------------------- the SDK facade


class SettingsAPI(Protocol):
    """The plugin's own settings table (``plugin.<name>.*``)."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def all(self) -> dict[str, Any]: ...


class IOAPI(Protocol):
    """Inject inputs into the agent."""

    async def inject_text(self, text: str, channel: str, options: InjectOptions | None = None) -> None: ...

    async def inject_media(
        self,
        text: str,
        attachments: list[MediaAttachment],
        channel: str,
        options: InjectOptions | None = None,
    ) -> None: ...

    async def inject_interrupt(self, text: str, channel: str, options: InjectOptions | None = None) -> None: ...

    async def inject_input_sync(
        self, text: str, channel: str, options: InjectOptions | None = None, *, timeout: float = 300
    ) -> str: ...


class MemoryAPI(Protocol):
    """The memory graph."""

    async def recall(self, keywords: list[str], depth: int = 2) -> dict[str, Any]: ...

    async def commit(self, triples: list[Triple]) -> dict[str, Any]: ...

    async def entities(self, query: str = "", limit: int = 50) -> list[Entity]: ...

    async def relations(self, entity: str) -> list[Relation]: ...

    async def introspect(self) -> dict[str, Any]: ...

    async def merge(self, source: str, target: str) -> dict[str, int]:
        """Fold entity ``source`` into ``target``; ``{merged, ...}``."""
        ...

    async def purge(self, criteria: dict[str, Any], mode: str = "soft") -> int:
        """Soft- or hard-delete relations matching ``criteria``; returns how many."""
        ...

    async def append_text(self, event: TextEvent, *, source: str = "") -> str:
        """Append a record to the conversation log (durable on return); returns its id."""
        ...


class DocAPI(Protocol):
    """The document store."""

    async def query(self, text: str, top_k: int = 5) -> list[Doc]: ...

    async def commit(self, title: str, content: str) -> str: ...

    async def remove(self, doc_id: str) -> bool: ...

    async def stats(self) -> dict[str, Any]: ...


class KnowledgeAPI(Protocol):
    """The knowledge base."""

    async def search(self, query: str, limit: int = 5) -> list[Doc]: ...

    async def create(self, name: str, content: str) -> str: ...

    async def list(self, category: str = "") -> list[str]: ...


class SocialAPI(Protocol):
    """People and their relations (read only for out-of-process plugins).

    ``link_account`` / ``person_for_account`` tie chat-app accounts to people (trait
    ``account:<platform>``), so memory knows that QQ 12345 is 小王.
    """

    async def person(self, name: str) -> dict[str, Any]: ...

    async def persons(self) -> list[str]: ...

    async def trait(self, name: str, trait: str) -> str | None: ...

    async def relations(self, name: str) -> list[dict[str, str]]: ...

    async def network(self, name: str, depth: int = 2) -> dict[str, Any]: ...

    async def link_account(self, person: str, platform: str, account: str) -> None: ...

    async def person_for_account(self, platform: str, account: str) -> str | None: ...


class MediaAPI(Protocol):
    """The content-addressed media store: what chat bridges receive and send."""

    async def put(self, data: bytes, mime: str, *, name: str = "") -> MediaAttachment: ...

    async def get(self, ref: str) -> MediaAttachment: ...


class LLMAPI(Protocol):
    """Direct model access outside a turn."""

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]: ...

    async def quick_chat(self, prompt: str) -> str: ...

    async def list_sources(self) -> list[dict[str, Any]]: ...

    async def current_source(self) -> str: ...

    async def set_source(self, name: str) -> None: ...


#: The bus event that sends a notification to people's phones (the web UI's Web Push). Data:
#: ``person`` (a person's name; ``""`` the owner; ``"*"`` the whole household, guests excepted),
#: ``title``, ``body`` and optionally ``tag`` (a later notification with the same tag replaces it).
#: It reaches people even when no model answers, so use it for what must not wait on a turn (a
#: water leak); an in-process plugin publishes it with ``sdk.events.publish(NOTIFY_EVENT, {...})``.
NOTIFY_EVENT = "notify"


class EventsAPI(Protocol):
    """The event bus."""

    def publish(self, name: str, data: dict[str, Any]) -> None: ...

    def subscribe(self, callback: Callable[[Event], Awaitable[None] | None], *names: str) -> Callable[[], None]: ...


class PluginSDK(Protocol):
    """Everything a started plugin may use, scoped to that plugin."""

    name: str
    data_dir: Path
    log: logging.Logger
    settings: SettingsAPI
    io: IOAPI
    events: EventsAPI
    memory: MemoryAPI
    doc: DocAPI
    knowledge: KnowledgeAPI
    social: SocialAPI
    media: MediaAPI
    llm: LLMAPI
