"""Graph-memory and social tools the model can call (``memory_*`` and ``person_*``).

:class:`GraphTools` holds them as typed methods: the memory plugin registers them through
``register_tools`` (their JSON schemas come from the signatures, like every tool's), and
:func:`memory_tools` turns them into :class:`~homeagent_sdk.types.ToolDef` objects for a
resident's scratch graph and the MCP server. Handlers take the arguments as keyword arguments,
re-check them (the model may send anything), run store writes off the event loop and return
JSON-able dicts. Every refusal is a :class:`~homeagent_sdk.errors.ToolError` whose message says
what was wrong and what to do instead.

Media: the model passes only digests (full or a unique prefix, e.g. 12 hex characters) in
``media_digests``; ``resolve_digest`` (the media store's resolver, plugged in by the kernel)
turns them into full digests. Digests that resolve to nothing are dropped with a note in the
result, never failing the whole commit.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from homeagent_core.memory.graph.privacy import graph_marks, graph_reader, speaker_name
from homeagent_core.memory.graph.store import PURGE_CRITERIA
from homeagent_sdk.errors import HomeAgentError, MemoryStoreError, ToolError
from homeagent_sdk.schema import tool_from_function
from homeagent_sdk.types import Principal, ToolDef, ToolOptions, Triple
from homeagent_sdk.visibility import Audience

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_core.memory.indexer import MemoryIndexer
    from homeagent_core.memory.social import SocialGraph

__all__ = ["GRAPH_TOOLS", "GraphBinding", "GraphTools", "memory_tools"]

MAX_TRIPLES = 50
_SPLIT = re.compile(r"[,，、;；\n]+")
_HEX = re.compile(r"^[0-9a-f]{4,64}$")

_TRIPLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "subject": {"type": "string", "description": "entity name, 2-50 characters"},
        "relation": {"type": "string", "description": "relation type, e.g. 住在 / likes"},
        "object": {"type": "string", "description": "entity name, 2-50 characters"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "subject_type": {"type": "string", "description": "e.g. person, place"},
        "object_type": {"type": "string"},
    },
    "required": ["subject", "relation", "object"],
}


def _range(lo: int, hi: int) -> dict[str, Any]:
    return {"minimum": lo, "maximum": hi}


_CRITERIA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "all given criteria must match",
    "properties": {
        key: {"type": "number" if key in ("before", "max_confidence") else "string", "description": desc}
        for key, desc in PURGE_CRITERIA.items()
    },
    "additionalProperties": False,
    "minProperties": 1,
}
_SIMPLE_TRIPLE: dict[str, Any] = {
    "type": "object",
    "properties": {k: {"type": "string"} for k in ("subject", "relation", "object")},
    "required": ["subject", "relation", "object"],
}
_TRIPLES = {"items": _TRIPLE_SCHEMA, "minItems": 1, "maxItems": MAX_TRIPLES}
Depth = Annotated[int, _range(1, 4)]


def _text(value: Any, name: str, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string, got {type(value).__name__}")
    text = value.strip()
    if required and not text:
        raise ToolError(f"argument {name!r} is empty; give a non-empty string")
    return text


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ToolError(f"argument {name!r} must be an integer from {lo} to {hi}, got {value!r}")
    return value


def _triple(raw: Any, where: str) -> Triple:
    if not isinstance(raw, dict):
        raise ToolError(f"{where} must be an object with subject, relation and object")
    missing = [k for k in ("subject", "relation", "object") if k not in raw]
    if missing:
        raise ToolError(f"{where} is missing {', '.join(missing)}")
    confidence = raw.get("confidence", 1.0)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise ToolError(f"{where}.confidence must be a number from 0 to 1")
    return Triple(
        subject=_text(raw["subject"], f"{where}.subject"),
        relation=_text(raw["relation"], f"{where}.relation"),
        object=_text(raw["object"], f"{where}.object"),
        confidence=float(confidence),
        subject_type=_text(raw.get("subject_type"), f"{where}.subject_type", required=False),
        object_type=_text(raw.get("object_type"), f"{where}.object_type", required=False),
    )


def _not_applied(action: str, step: str, exc: BaseException) -> str:
    return (
        f"the {action} was not applied (graph memory is unchanged): {step} failed with "
        f"{type(exc).__name__}: {exc}. Fix the cause (e.g. disk space or permissions of the "
        "data directory) and call the tool again"
    )


@dataclass
class GraphBinding:
    """The stores the graph tools work on, and the hooks into the rest of memory.

    ``resolve_digest`` maps a digest or unique prefix to a full digest (None when unknown);
    without it media digests are dropped with a note. ``session`` returns the current session
    id stamped on committed relations. ``text_purge(subject)`` / ``text_replace(old, new)``
    let purges and edits also clean the conversation log; each is a plain (blocking) function
    returning the lines changed.

    ``principal`` returns the principal of the turn a tool runs in (the kernel's
    ``CURRENT_PRINCIPAL``, handed in by the app: memory does not import the kernel) and
    ``owner`` the owner's registry name ("" in library use). Every graph tool reads as that
    principal's audience and writes with its person and visibility.
    """

    graph: GraphStore
    social: SocialGraph
    indexer: MemoryIndexer | None = None
    resolve_digest: Callable[[str], str | None] | None = None
    session: Callable[[], str] | None = None
    text_purge: Callable[[str], int] | None = None
    text_replace: Callable[[str, str], int] | None = None
    principal: Callable[[], Principal | None] | None = None
    owner: Callable[[], str] | None = None

    def _who(self) -> tuple[Principal | None, str]:
        return (
            self.principal() if self.principal is not None else None,
            self.owner() if self.owner is not None else "",
        )

    def reader(self) -> Audience:
        """The audience of the turn running now."""
        return graph_reader(*self._who())

    def marks(self) -> tuple[str, str]:
        """``(person, visibility)`` of what the turn running now writes."""
        return graph_marks(*self._who())

    def speaker(self) -> str:
        """The entity "我" names in the turn running now."""
        return speaker_name(*self._who())


#: The graph tools in the order the model sees them, with their ``registry.add`` options.
GRAPH_TOOLS: tuple[tuple[str, ToolOptions], ...] = (
    ("memory_recall", {"parallel_safe": True}),
    ("memory_commit", {}),
    ("memory_merge", {}),
    ("memory_purge", {}),
    ("memory_edit", {}),
    ("memory_delete_entity", {}),
    ("memory_introspect", {"parallel_safe": True}),
    ("memory_block_merge", {}),
    ("person_query", {"parallel_safe": True}),
    ("person_set_trait", {}),
    ("person_relate", {}),
    ("person_network", {"parallel_safe": True}),
    ("memory_path", {"parallel_safe": True}),
)


class GraphTools:
    """The ``memory_*`` and ``person_*`` tools as typed methods over one :class:`GraphBinding`.

    ``binding`` is the binding itself or a function returning it when a tool runs (the memory
    plugin registers its tools before memory is handed to it). A purge or edit is
    all-or-nothing: arguments are checked first, and the log step runs inside the graph's
    transaction, so when it fails the graph is left unchanged and the tool reports why.
    """

    def __init__(self, binding: GraphBinding | Callable[[], GraphBinding]) -> None:
        self._binding = binding

    @property
    def bound(self) -> GraphBinding:
        return self._binding if isinstance(self._binding, GraphBinding) else self._binding()

    def _session(self) -> str:
        session = self.bound.session
        return session() if session is not None else ""

    def tool_defs(self) -> list[ToolDef]:
        """The tools as :class:`ToolDef` objects (schemas from the signatures)."""
        return [tool_from_function(getattr(self, name), **options) for name, options in GRAPH_TOOLS]

    async def memory_recall(self, query_intent: str, depth: Depth = 2) -> dict[str, Any]:
        """检索图记忆 / recall from graph memory: keywords (comma-separated) → related entities and relations with their source sentences and media digests.

        Args:
            query_intent: keywords, comma-separated
        """  # noqa: E501
        b = self.bound
        query = _text(query_intent, "query_intent")
        depth = _int(depth, "depth", 1, 4)
        keywords = [k.strip() for k in _SPLIT.split(query) if k.strip()]
        result = await b.graph.arecall(keywords, query_text=query, depth=depth, audience=b.reader())
        if b.indexer is not None:
            b.indexer.mark_recalled(e.name for e in result.entities)
        out = result.to_dict()
        if not result.entities:
            out["note"] = f"nothing in graph memory matches {query!r}; try other keywords or synonyms"
        return out

    async def memory_commit(
        self,
        triples: Annotated[list[dict[str, Any]], _TRIPLES],
        sentence_text: str | None = None,
        media_digests: list[str] | None = None,
    ) -> dict[str, Any]:
        """写入图记忆 / store facts as triples. Optional sentence_text is the sentence they come from; media_digests (full or 12-hex prefixes) attach media to it."""  # noqa: E501
        b = self.bound
        if not isinstance(triples, list) or not triples:
            raise ToolError("argument 'triples' must be a non-empty array of triples")
        if len(triples) > MAX_TRIPLES:
            raise ToolError(f"at most {MAX_TRIPLES} triples per call; split the commit")
        parsed = [_triple(t, f"triples[{i}]") for i, t in enumerate(triples)]
        sentence = _text(sentence_text, "sentence_text", required=False)
        notes: list[str] = []
        digests: list[str] = []
        for raw in media_digests or []:
            if not isinstance(raw, str) or not _HEX.match(raw.strip().lower()):
                notes.append(f"dropped media digest {raw!r}: not a hex digest")
                continue
            full = b.resolve_digest(raw.strip().lower()) if b.resolve_digest is not None else None
            if full is None:
                why = "not in the media store" if b.resolve_digest else "the media store is off"
                notes.append(f"dropped media digest {raw!r}: {why}")
            elif full not in digests:
                digests.append(full)
        for t in parsed:
            t.sentence_text = sentence
            t.media_digests = list(digests)
        person, visibility = b.marks()
        try:
            result = await b.graph.acommit(parsed, self._session(), person=person, visibility=visibility)
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        if result.added + result.refreshed == 0:
            raise ToolError(
                "nothing was committed: "
                + "; ".join(result.skipped)
                + ". Entity names need 2-50 characters with a letter or CJK character."
            )
        out = result.to_dict()
        if notes:
            out["notes"] = notes
        return out

    async def memory_merge(self, keep: str, drop: str) -> dict[str, Any]:
        """合并实体 / merge entity `drop` into `keep` (relations move, mentions add)."""
        keep, drop = _text(keep, "keep"), _text(drop, "drop")
        try:
            counts = await self.bound.graph.amerge(keep, drop)
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        return {"merged": f"{drop} → {keep}", **counts}

    async def memory_purge(
        self, criteria: Annotated[dict[str, Any], _CRITERIA_SCHEMA], mode: Literal["soft", "hard"] = "soft"
    ) -> dict[str, Any]:
        """删除匹配的关系 / purge relations matching criteria; mode soft (hidden, kept on disk) or hard (deleted)."""
        b = self.bound
        if not isinstance(criteria, dict):
            raise ToolError("argument 'criteria' must be an object, e.g. {\"subject_contains\": …}")
        if mode not in ("soft", "hard"):
            raise ToolError(f"argument 'mode' must be 'soft' or 'hard', got {mode!r}")
        text_purge = b.text_purge
        subject = criteria.get("subject_contains")
        text = subject.strip() if text_purge is not None and isinstance(subject, str) else ""
        lines: list[int] = []

        def purge_text(count: int) -> None:  # inside the graph transaction: raising undoes the purge
            if count and text_purge is not None and text:
                lines.append(text_purge(text))

        try:
            count = await b.graph.apurge(criteria, mode, before_commit=purge_text, audience=b.reader())
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        except (OSError, HomeAgentError) as exc:
            raise ToolError(_not_applied("purge", "removing the lines from the conversation log", exc)) from exc
        if count == 0:
            raise ToolError(
                f"no relation matched {criteria}; nothing was purged. Use memory_recall to see "
                "the stored names and relation types"
            )
        out: dict[str, Any] = {"purged": count, "mode": mode}
        if lines:
            out["text_lines_removed"] = lines[0]
        return out

    async def memory_edit(
        self, old: Annotated[dict[str, Any], _SIMPLE_TRIPLE], new: Annotated[dict[str, Any], _TRIPLE_SCHEMA]
    ) -> dict[str, Any]:
        """修改一条关系 / replace the relation `old` with `new`."""
        b = self.bound
        old_t, new_t = _triple(old, "old"), _triple(new, "new")
        text_replace = b.text_replace
        lines: list[int] = []

        def edit_text(_result: object) -> None:  # inside the graph transaction: raising undoes the edit
            if text_replace is not None and old_t.object != new_t.object:
                lines.append(text_replace(old_t.object, new_t.object))

        try:
            result = await b.graph.aedit(
                old_t.subject, old_t.relation, old_t.object, new_t, self._session(), before_commit=edit_text,
                audience=b.reader(),
            )
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        except (OSError, HomeAgentError) as exc:
            raise ToolError(_not_applied("edit", "rewriting the conversation log", exc)) from exc
        out: dict[str, Any] = {"edited": True, **result.to_dict()}
        if lines:
            out["text_lines_changed"] = lines[0]
        return out

    async def memory_delete_entity(self, name: str) -> dict[str, Any]:
        """删除实体及其所有关系 / delete an entity with all its relations."""
        name = _text(name, "name")
        try:
            removed = await self.bound.graph.adelete_entity(name)
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        return {"deleted": name, "relations_removed": removed}

    async def memory_introspect(self) -> dict[str, Any]:
        """查看记忆统计 / graph memory statistics."""
        return await self.bound.graph.aintrospect(self.bound.reader())

    def _block_digest(self, value: Any, name: str) -> str:
        prefix = _text(value, name).lower()
        if not _HEX.match(prefix):
            raise ToolError(f"argument {name!r} must be a hex digest or a prefix of one")
        graph = self.bound.graph
        with graph.cache.lock:
            found = sorted({b.digest for b in graph.cache.blocks.values() if b.digest.startswith(prefix)})
        if not found:
            raise ToolError(f"no media block with digest {prefix!r} in graph memory")
        if len(found) > 1:
            raise ToolError(f"digest prefix {prefix!r} is ambiguous; give more characters")
        return found[0]

    async def memory_block_merge(self, keep_digest: str, drop_digest: str) -> dict[str, Any]:
        """合并重复的媒体块 / merge media block `drop_digest` into `keep_digest`."""
        keep = self._block_digest(keep_digest, "keep_digest")
        drop = self._block_digest(drop_digest, "drop_digest")
        try:
            moved = await self.bound.graph.amerge_blocks(keep, drop)
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        return {"kept": keep, "removed": drop, "edges_moved": moved}

    async def person_query(self, name: str) -> dict[str, Any]:
        """查询一个人的特征和关系 / a person's traits and relations."""
        social = self.bound.social
        name = _text(name, "name")
        audience = self.bound.reader()
        profile = await social.aget_person(name, audience)
        if profile is None:
            known = social.list_persons(audience)[:20]
            raise ToolError(f"no person named {name!r} in memory; known people: {', '.join(known) or 'none'}")
        return profile

    async def person_set_trait(self, name: str, trait: str, value: str) -> dict[str, Any]:
        """设置一个人的特征 / set one trait of a person (age, birthday, likes…)."""
        name, trait, value = _text(name, "name"), _text(trait, "trait"), _text(value, "value")
        try:
            await self.bound.social.aset_trait(name, trait, value)
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        return {"person": name, "trait": trait, "value": value}

    async def person_relate(self, person: str, relation: str, other: str) -> dict[str, Any]:
        """记录两人之间的关系 / record `person -relation-> other`."""
        person, relation = _text(person, "person"), _text(relation, "relation")
        other = _text(other, "other")
        try:
            by, visibility = self.bound.marks()
            await self.bound.social.arelate(person, relation, other, self._session(), by=by, visibility=visibility)
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        return {"related": f"{person} -{relation}-> {other}"}

    async def person_network(self, name: str, depth: Depth = 2) -> dict[str, Any]:
        """某人的社交网络 / people around a person within `depth` hops."""
        b = self.bound
        name, depth = _text(name, "name"), _int(depth, "depth", 1, 4)
        try:
            out = b.social.network(name, depth, b.reader())
        except MemoryStoreError as exc:
            raise ToolError(str(exc)) from None
        try:  # "how do I know them?": the chain from the speaker to this person
            steps = b.graph.analytics.path(b.speaker(), name, audience=b.reader())
        except KeyError:
            steps = None
        if steps:
            out["how_connected"] = [s.to_dict() for s in steps]
        return out

    async def memory_path(
        self, source: str, target: str, max_hops: Annotated[int, _range(1, 10)] = 6
    ) -> dict[str, Any]:
        """两个实体如何关联 / how two things in memory are connected: the shortest chain of relations between them (either direction), each with its source sentence.

        Args:
            source: an entity name
            target: another entity name
        """  # noqa: E501
        source, target = _text(source, "source"), _text(target, "target")
        max_hops = _int(max_hops, "max_hops", 1, 10)
        analytics = self.bound.graph.analytics
        try:
            steps = await asyncio.to_thread(
                functools.partial(analytics.path, source, target, max_hops=max_hops, audience=self.bound.reader())
            )
        except KeyError as exc:
            raise ToolError(str(exc.args[0])) from None
        if steps is None:
            return {"source": source, "target": target, "path": [],
                    "note": f"no chain of at most {max_hops} relations connects {source!r} and {target!r}"}
        return {"source": source, "target": target, "hops": len(steps), "path": [s.to_dict() for s in steps]}


def memory_tools(
    graph: GraphStore,
    social: SocialGraph,
    indexer: MemoryIndexer | None = None,
    *,
    resolve_digest: Callable[[str], str | None] | None = None,
    session: Callable[[], str] | None = None,
    text_purge: Callable[[str], int] | None = None,
    text_replace: Callable[[str, str], int] | None = None,
) -> list[ToolDef]:
    """The ``memory_*`` and ``person_*`` tools bound to these stores (see :class:`GraphBinding`)."""
    binding = GraphBinding(graph, social, indexer, resolve_digest, session, text_purge, text_replace)
    return GraphTools(binding).tool_defs()
