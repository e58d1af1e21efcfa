"""``RemoteSDK``: the ``PluginSDK`` an out-of-process plugin's ``startup(sdk)`` receives.

Same attribute names as in-process (``settings``, ``io``, ``events``, ``memory``, ``doc``,
``knowledge``, ``social``, ``llm``, ``data_dir``, ``log``); every data call is one ``core.*``
request to the host, gated there by the ``capabilities`` of ``plugin.json``. A denied or
unavailable call raises :class:`~homeagent_sdk.errors.PluginError` with the host's message; an
input refused because the agent's queue is full raises
:class:`~homeagent_sdk.errors.InputQueueFull` (with ``retry_after``), as in process.
Settings are read from a cache filled at start (sync, as in-process); writes go to the host.
Event publishing is not available out of process (a deliberate restriction of the original).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from homeagent_sdk.errors import HomeAgentError, InputQueueFull, PluginError
from homeagent_sdk.proc.wire import Peer, RemoteError
from homeagent_sdk.types import Doc, Entity, Event, InjectOptions, MediaAttachment, Relation, TextEvent, Triple

__all__ = ["RemoteSDK"]


class _Part:
    def __init__(self, sdk: RemoteSDK) -> None:
        self._sdk = sdk

    async def _call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self._sdk.call(method, params)


class _Settings:
    def __init__(self, sdk: RemoteSDK, values: dict[str, Any]) -> None:
        self._sdk, self._values = sdk, dict(values)

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        """Store a value; the host validates it (an invalid value is logged by the host)."""
        self._values[key] = value
        self._sdk.fire("settings.set", {"key": key, "value": value})

    def all(self) -> dict[str, Any]:
        return dict(self._values)


def _inject_params(source: str, text: str, channel: str, options: InjectOptions | None) -> dict[str, Any]:
    params: dict[str, Any] = {"source": source, "channel": channel, "text": text}
    if options is not None:
        params.update(options.to_dict())
    return params


class _IO(_Part):
    """``sdk.io``: a full input queue raises :class:`InputQueueFull`, as in process."""

    async def _call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        try:
            return await self._sdk.call(method, params)
        except PluginError as exc:
            busy = InputQueueFull.from_message(str(exc))
            if busy is not None:
                raise busy from None
            raise

    async def inject_text(self, text: str, channel: str, options: InjectOptions | None = None) -> None:
        await self._call("io.injectText", _inject_params(self._sdk.name, text, channel, options))

    async def inject_interrupt(self, text: str, channel: str, options: InjectOptions | None = None) -> None:
        await self._call("io.injectInterrupt", _inject_params(self._sdk.name, text, channel, options))

    async def inject_media(
        self, text: str, attachments: list[MediaAttachment], channel: str, options: InjectOptions | None = None
    ) -> None:
        params = _inject_params(self._sdk.name, text, channel, options)
        params["attachments"] = [a.to_dict() for a in attachments]
        await self._call("io.injectMedia", params)

    async def inject_input_sync(
        self, text: str, channel: str, options: InjectOptions | None = None, *, timeout: float = 300
    ) -> str:
        params = _inject_params(self._sdk.name, text, channel, options)
        params["timeout"] = timeout
        result = await self._call("io.injectInputSync", params)
        return str((result or {}).get("reply", ""))


class _Events(_Part):
    def __init__(self, sdk: RemoteSDK) -> None:
        super().__init__(sdk)
        self.callbacks: list[tuple[frozenset[str], Callable[[Event], Awaitable[None] | None]]] = []

    def publish(self, name: str, data: dict[str, Any]) -> None:
        raise PluginError(
            "event publishing is not available to out-of-process plugins; inject an input "
            "(sdk.io.inject_text) or register an output channel instead",
            plugin_name=self._sdk.name,
        )

    def subscribe(self, callback: Callable[[Event], Awaitable[None] | None], *names: str) -> Callable[[], None]:
        entry = (frozenset(names), callback)
        self.callbacks.append(entry)
        self._sdk.fire("events.subscribe", {"types": list(names)})
        return lambda: self.callbacks.remove(entry) if entry in self.callbacks else None


class _Memory(_Part):
    async def recall(self, keywords: list[str], depth: int = 2) -> dict[str, Any]:
        return dict(await self._call("memory.recall", {"query": list(keywords), "depth": depth}) or {})

    async def commit(self, triples: list[Triple]) -> dict[str, Any]:
        return dict(await self._call("memory.commit", {"triples": [t.to_dict() for t in triples]}) or {})

    async def entities(self, query: str = "", limit: int = 50) -> list[Entity]:
        result = await self._call("memory.entities", {"query": query, "limit": limit}) or {}
        return [Entity.from_dict(e) for e in result.get("entities", [])]

    async def relations(self, entity: str) -> list[Relation]:
        result = await self._call("memory.relations", {"name": entity}) or {}
        return [Relation.from_dict(r) for r in result.get("relations", [])]

    async def introspect(self) -> dict[str, Any]:
        return dict(await self._call("memory.introspect") or {})

    async def merge(self, source: str, target: str) -> dict[str, int]:
        """Fold entity ``source`` into ``target``; ``{merged, moved, deduplicated, removed_self_loops}``."""
        return dict(await self._call("memory.merge", {"source": source, "target": target}) or {})

    async def purge(self, criteria: dict[str, Any], mode: str = "soft") -> int:
        """Soft- or hard-delete the relations matching ``criteria``
        (``subject_contains``, ``relation_type``, ``target_contains``); returns how many."""
        result = await self._call("memory.purge", {"criteria": dict(criteria), "mode": mode}) or {}
        return int(result.get("purged", 0))

    async def append_text(self, event: TextEvent | dict[str, Any], *, source: str = "") -> str:
        """Append one record to the conversation log; returns its id.

        The host always records the plugin itself as the source (``source`` is accepted for
        the in-process signature and ignored).
        """
        data = event.to_dict() if isinstance(event, TextEvent) else dict(event)
        result = await self._call("textmemory.append", {"event": data}) or {}
        return str(result.get("id", ""))


class _Doc(_Part):
    async def query(self, text: str, top_k: int = 5) -> list[Doc]:
        result = await self._call("doc.query", {"text": text, "top_k": top_k}) or {}
        return [Doc.from_dict(d) for d in result.get("docs", [])]

    async def commit(self, title: str, content: str) -> str:
        result = await self._call("doc.insert", {"doc": {"id": "", "title": title, "content": content}}) or {}
        return str(result.get("id", ""))

    async def remove(self, doc_id: str) -> None:
        await self._call("doc.remove", {"id": doc_id})

    async def stats(self) -> dict[str, Any]:
        """Counts of the document store (documents, dense rows, stale vectors, space)."""
        return dict(await self._call("doc.stats") or {})


class _Knowledge(_Part):
    async def search(self, query: str, limit: int = 5) -> list[Doc]:
        result = await self._call("knowledge.search", {"query": query, "top_k": limit}) or {}
        return [Doc.from_dict(d) for d in result.get("results", [])]

    async def create(self, name: str, content: str) -> str:
        result = await self._call("knowledge.add", {"name": name, "content": content}) or {}
        return str(result.get("name", name))

    async def list(self) -> list[str]:
        result = await self._call("knowledge.list") or {}
        return list(result.get("names", []))


class _Social(_Part):
    async def person(self, name: str) -> dict[str, Any]:
        result = await self._call("social.getPerson", {"name": name}) or {}
        return dict(result.get("person") or {})

    async def persons(self) -> list[str]:
        result = await self._call("social.listPersons") or {}
        return list(result.get("persons", []))

    async def trait(self, name: str, trait: str) -> str | None:
        """One trait's value, or None when the person or the trait is unknown."""
        result = await self._call("social.getTrait", {"name": name, "trait": trait}) or {}
        return result.get("value") if result.get("found") else None

    async def relations(self, name: str) -> list[dict[str, str]]:
        """The person's relations (``person``, ``relation``, ``direction``); ``[]`` if unknown."""
        result = await self._call("social.getRelations", {"name": name}) or {}
        return list(result.get("relations") or [])

    async def network(self, name: str, depth: int = 2) -> dict[str, Any]:
        """People within ``depth`` hops: ``{center, people[{name, distance}], relations}``."""
        result = await self._call("social.getNetwork", {"name": name, "depth": depth}) or {}
        return dict(result.get("network") or {})

    async def link_account(self, person: str, platform: str, account: str) -> None:
        """Refused: out-of-process plugins see people read only."""
        raise HomeAgentError("sdk.social.link_account: people are read only for out-of-process plugins")

    async def person_for_account(self, platform: str, account: str) -> str | None:
        """The person whose ``account:<platform>`` trait is ``account`` (searched over ``persons``)."""
        for name in await self.persons():
            if await self.trait(name, f"account:{platform}") == str(account):
                return name
        return None


class _LLM(_Part):
    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        return dict(await self._call("llm.chat", {"messages": messages, "options": options}) or {})

    async def quick_chat(self, prompt: str) -> str:
        reply = await self.chat([{"role": "user", "content": prompt}])
        return str(reply.get("content", ""))

    async def list_sources(self) -> list[dict[str, Any]]:
        return list((await self._call("llm.listSources") or {}).get("sources", []))

    async def current_source(self) -> str:
        return str((await self._call("llm.currentSource") or {}).get("source", ""))

    async def set_source(self, name: str) -> None:
        """Make ``name`` the default model source (an unknown name raises PluginError)."""
        await self._call("llm.setSource", {"name": name})


class _TextMemory(_Part):
    async def append(self, event: TextEvent) -> str:
        """Append one record to the conversation log; returns its id."""
        result = await self._call("textmemory.append", {"event": event.to_dict()}) or {}
        return str(result.get("id", ""))


class _Media:
    """The media store is not reachable over the protocol yet; every use says so."""

    async def put(self, data: bytes, mime: str, *, name: str = "") -> MediaAttachment:
        raise HomeAgentError("sdk.media.put: the media store is only available to in-process plugins")

    async def get(self, ref: str) -> MediaAttachment:
        raise HomeAgentError("sdk.media.get: the media store is only available to in-process plugins")


class RemoteSDK:
    """The plugin's view of the host, over the protocol connection."""

    def __init__(self, peer: Peer, name: str, data_dir: Path, settings: dict[str, Any]) -> None:
        self._peer = peer
        self._loop = asyncio.get_running_loop()
        self._background: set[asyncio.Task[Any]] = set()
        self.name = name
        self.data_dir = data_dir
        self.log = logging.getLogger(f"homeagent.plugin.{name}")
        self.plugin_config: dict[str, Any] = {}
        self.settings = _Settings(self, settings)
        self.io = _IO(self)
        self.events = _Events(self)
        self.memory = _Memory(self)
        self.doc = _Doc(self)
        self.knowledge = _Knowledge(self)
        self.social = _Social(self)
        self.media = _Media()
        self.llm = _LLM(self)
        self.text_memory = _TextMemory(self)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One ``core.*`` request; host errors become :class:`PluginError`.

        Safe to await from the plugin's event loop; from a worker thread (sync handlers) use
        :meth:`call_sync`.
        """
        try:
            return await self._peer.call(method, params)
        except RemoteError as exc:
            raise PluginError(str(exc), plugin_name=self.name) from None

    def call_sync(self, method: str, params: dict[str, Any] | None = None, *, timeout: float = 300) -> Any:
        """:meth:`call` from a sync handler running in a worker thread."""
        future = asyncio.run_coroutine_threadsafe(self.call(method, params), self._loop)
        return future.result(timeout)

    def fire(self, method: str, params: dict[str, Any]) -> None:
        """Send a request without waiting; a failure is logged. Callable from any thread."""

        def start() -> None:
            task = self._loop.create_task(self._quiet(method, params))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            start()
        else:
            self._loop.call_soon_threadsafe(start)

    async def _quiet(self, method: str, params: dict[str, Any]) -> None:
        try:
            await self.call(method, params)
        except Exception as exc:
            self.log.warning("%s failed: %s", method, exc)
