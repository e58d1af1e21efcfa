"""What the document store holds and returns: :class:`Document`, :class:`DocHit`, the prompt block.

Shared by the store facade (:mod:`homeagent_core.memory.documents.store`), its SQL persistence
(:mod:`homeagent_core.memory.documents.sql`) and any other backend written against the same API.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from homeagent_sdk.types import Doc
from homeagent_sdk.visibility import PRIVATE

__all__ = ["DOCUMENT_COLUMNS", "DocHit", "Document", "document_from_row", "format_related", "new_doc_id"]


DOCUMENT_COLUMNS = (
    "id, title, content, source, created_at, last_access, access_count, media_digests, meta, person, visibility"
)
"""The columns a stored document is read from, in the order :func:`document_from_row` takes them
(the same names in every backend's table)."""


def new_doc_id() -> str:
    """A fresh document id (``doc_`` + 16 hex digits)."""
    return "doc_" + uuid.uuid4().hex[:16]


@dataclass(slots=True)
class Document:
    """One stored document. ``created_at`` is the original time of what it records.

    ``person`` is whom it came from ("" = the store's owner, filled in when it is stored) and
    ``visibility`` who may see it (:mod:`homeagent_sdk.visibility`).
    """

    content: str
    title: str = ""
    source: str = ""
    created_at: float = field(default_factory=time.time)
    id: str = field(default_factory=new_doc_id)
    last_access: float = 0.0
    access_count: int = 0
    media_digests: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    person: str = ""
    visibility: str = PRIVATE

    @property
    def text(self) -> str:
        """What is indexed and embedded: the title and the content."""
        return f"{self.title}\n{self.content}" if self.title else self.content

    def to_doc(self, score: float | None = None) -> Doc:
        """The SDK wire shape of this document."""
        return Doc(
            id=self.id,
            title=self.title,
            content=self.content,
            score=score,
            media_digests=list(self.media_digests),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "content": self.content,
            "source": self.source,
            "created_at": self.created_at,
            "last_access": self.last_access,
            "access_count": self.access_count,
            "media_digests": list(self.media_digests),
            "meta": dict(self.meta),
            "person": self.person,
            "visibility": self.visibility,
        }


def document_from_row(row: Sequence[Any]) -> Document:
    """The document of a row of :data:`DOCUMENT_COLUMNS` (``media_digests`` as JSON text, ``meta``
    as JSON text or, from a ``jsonb`` column, already a dict)."""
    meta = row[8]
    return Document(
        id=row[0],
        title=row[1],
        content=row[2],
        source=row[3],
        created_at=row[4],
        last_access=row[5],
        access_count=row[6],
        media_digests=json.loads(row[7]),
        meta=meta if isinstance(meta, dict) else json.loads(meta),
        person=row[9],
        visibility=row[10],
    )


@dataclass(slots=True, frozen=True)
class DocHit:
    """A search result: the document and its fused score (0..1 + neighbour share).

    ``duplicates``: ids of other documents with the same index terms (the same text up to
    case, full-width forms and which punctuation marks end its clauses) that the ranking
    collapsed into this place, oldest first: the copies among the documents the query ranked
    (``4·top_k + 16`` or more), not necessarily every copy in the store. The PostgreSQL store
    collapses copies alike but does not list them yet (its hits carry ``()``).
    """

    document: Document
    score: float
    duplicates: tuple[str, ...] = ()


def format_related(hits: Sequence[DocHit], *, max_chars: int = 300) -> str:
    """The read-only prompt block of automatically recalled documents ("" when none)."""
    if not hits:
        return ""
    lines = ["[Related Memory Docs]"]
    for hit in hits:
        doc = hit.document
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(doc.created_at))
        body = doc.content if len(doc.content) <= max_chars else doc.content[:max_chars] + "…"
        title = f"{doc.title}: " if doc.title else ""
        lines.append(f"- ({when}) {title}{body}")
    lines.append("(use doc_query to bring a document back into the conversation)")
    return "\n".join(lines)
