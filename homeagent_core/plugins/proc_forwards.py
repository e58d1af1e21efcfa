"""The ``core.*`` methods that forward to one of the plugin's SDK services (memory, doc, knowledge, llm, social).

Each entry of :data:`FORWARDS` names the service and member it calls, how the params become
its arguments and how its answer is shaped for the wire; :class:`~homeagent_core.plugins.protocol.CoreMethods`
turns each into a gated handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from homeagent_core.plugins.proc_params import plain
from homeagent_sdk.types import Triple

__all__ = ["FORWARDS", "Arguments"]

#: Builds a service member's positional and keyword arguments from a request's params.
Arguments = Callable[[dict[str, Any]], tuple[tuple[Any, ...], dict[str, Any]]]


def _args(*names: str, **defaults: Any) -> Arguments:
    """Positional arguments from params: ``names`` are required, then each of ``defaults`` in
    order (a missing or null one takes its default)."""

    def build(params: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        values = []
        for name in names:
            if params.get(name) is None:
                raise KeyError(f"missing {name!r}")
            values.append(params[name])
        for name, default in defaults.items():
            value = params.get(name)
            values.append(default if value is None else value)
        return tuple(values), {}

    return build


def _doc_insert(params: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    doc = params.get("doc")
    if not isinstance(doc, dict):
        raise ValueError("doc.insert: 缺少 doc 字段 (the doc field is missing)")
    return (str(doc.get("title", "")), str(doc.get("content", ""))), {}


def _triples(params: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return ([Triple.from_dict(t) for t in params.get("triples") or []],), {}


def _recall_shape(value: Any) -> dict[str, Any]:
    value = plain(value) or {}
    return {
        "entities": value.get("entities") or [],
        "relations": value.get("relations") or [],
        **{k: v for k, v in value.items() if k not in ("entities", "relations")},
    }


def _key(name: str) -> Callable[[Any], dict[str, Any]]:
    return lambda value: {name: value}


FORWARDS: dict[str, tuple[str, str, Arguments, Callable[[Any], Any]]] = {
    "memory.recall": ("memory", "recall", _args("query", depth=2), _recall_shape),
    "memory.commit": ("memory", "commit", _triples, lambda v: v),
    "memory.introspect": ("memory", "introspect", _args(), lambda v: v),
    "memory.merge": ("memory", "merge", _args("source", "target"), lambda v: v),
    "memory.purge": ("memory", "purge", _args("criteria", mode="soft"), _key("purged")),
    "memory.entities": ("memory", "entities", _args(query="", limit=50), _key("entities")),
    "memory.relations": ("memory", "relations", _args("name"), _key("relations")),
    "doc.query": ("doc", "query", _args("text", top_k=5), _key("docs")),
    "doc.insert": ("doc", "commit", _doc_insert, _key("id")),
    "doc.remove": ("doc", "remove", _args("id"), lambda v: None),
    "doc.stats": ("doc", "stats", _args(), lambda v: v),
    "knowledge.search": ("knowledge", "search", _args("query", top_k=5), _key("results")),
    "knowledge.add": ("knowledge", "create", _args("name", "content"), _key("name")),
    "knowledge.list": ("knowledge", "list", _args(), _key("names")),
    "llm.chat": ("llm", "chat", lambda p: ((p.get("messages") or [],), dict(p.get("options") or {})), lambda v: v),
    "llm.listSources": ("llm", "list_sources", _args(), _key("sources")),
    "llm.currentSource": ("llm", "current_source", _args(), _key("source")),
    "llm.setSource": ("llm", "set_source", _args("name"), lambda v: None),
    "social.getPerson": ("social", "person", _args("name"), _key("person")),
    "social.getNetwork": ("social", "network", _args("name", depth=1), _key("network")),
    "social.getTrait": ("social", "trait", _args("name", "trait"), lambda v: {"value": v, "found": v is not None}),
    "social.getRelations": ("social", "relations", _args("name"), _key("relations")),
    "social.listPersons": ("social", "persons", _args(), _key("persons")),
}
