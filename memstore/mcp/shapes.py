"""The result shapes of the native tools, and how an item becomes one.

Every shape is a pydantic model: its JSON schema is the tool's
``outputSchema`` and its dump is the structured content. An optional field
left unset (``why`` without ``explain``) is left out of the result. A memory's
placement tags (its partition's, its owner's, ``shared``) are not shown: they
are the server's business, and a model that sends back the tags it was shown
must not be refused for them.
"""

from __future__ import annotations

import datetime as _dt

from pydantic import BaseModel, Field

from memstore.item import Item
from memstore.journal import Version

from .arguments import free_tags

__all__ = [
    "Forgotten",
    "History",
    "Hit",
    "Items",
    "LinkOut",
    "Linked",
    "MemoryOut",
    "Recall",
    "Related",
    "RelatedOut",
    "Remembered",
    "VersionOut",
    "hit_of",
    "memory_of",
    "version_of",
]


class LinkOut(BaseModel):
    """One outbound link of a memory."""

    to_id: str
    relation: str
    weight: float


class Hit(BaseModel):
    """One memory found by ``recall``."""

    id: str
    title: str
    content: str = Field(description="The memory's text (cut to fit the call's max_chars).")
    kind: str
    subject: str
    event_date: str
    score: float
    relevance: float = Field(
        default=0.0,
        description=(
            "0-1, comparable across calls: the estimated chance this memory is evidence "
            "for the query (score only orders one call's hits)."
        ),
    )
    why: str | None = Field(
        default=None, description="How it was found and scored (only with explain)."
    )


class MemoryOut(BaseModel):
    """One memory in full."""

    id: str
    title: str
    content: str
    kind: str
    subject: str
    event_date: str
    confidence: str
    tags: list[str]
    status: str
    created_at: str | None
    updated_at: str | None
    links: list[LinkOut]


class RelatedOut(MemoryOut):
    """A memory reached by spreading activation, with how strongly."""

    activation: float


class Remembered(BaseModel):
    """What ``remember`` stored."""

    id: str = Field(description="The id of the stored memory.")
    merged_into: str | None = Field(
        description="The id of an existing memory this restatement updated, or null."
    )


class Recall(BaseModel):
    """What ``recall`` found, best first."""

    hits: list[Hit]
    truncated: bool = Field(description="Whether content was cut or hits dropped for max_chars.")


class Items(BaseModel):
    """Memories (``get_memory``, ``recent``, ``update_memory``)."""

    items: list[MemoryOut]
    missing: list[str] = Field(default_factory=list, description="Ids asked for and not found.")


class Related(BaseModel):
    """What ``related`` reached from its anchors, strongest first."""

    anchors: list[str] = Field(description="The ids the activation started from.")
    items: list[RelatedOut]
    complete: bool = Field(
        description="False when the walk stopped at CONTEXT_REACH (10,000) linked memories, "
        "so a memory it did not reach may be missing; true when it reached them all."
    )


class Forgotten(BaseModel):
    """What ``forget`` deleted (soft: the history keeps every version)."""

    forgotten: list[str]
    missing: list[str]


class Linked(BaseModel):
    """What ``link`` did."""

    from_id: str
    to_id: str
    relation: str
    linked: bool = Field(description="False when the memory's link cap kept the new link out.")


class VersionOut(BaseModel):
    """One version of a memory."""

    lsn: str = Field(description="The log position of the write (wall_ms.counter).")
    at: str = Field(description="When it was written (RFC 3339).")
    op: str = Field(description="'upsert' (item is the state) or 'delete' (item is null).")
    item: MemoryOut | None


class History(BaseModel):
    """Every version of a memory, oldest first."""

    versions: list[VersionOut]


def _time(t: _dt.datetime | None) -> str | None:
    return t.isoformat().replace("+00:00", "Z") if t is not None else None


def memory_of(item: Item) -> MemoryOut:
    """The full shape of an item (its free tags only)."""
    return MemoryOut(
        id=item.id,
        title=item.title,
        content=item.content,
        kind=item.kind,
        subject=item.subject,
        event_date=item.event_date,
        confidence=item.confidence,
        tags=free_tags(item.tags),
        status=item.status,
        created_at=_time(item.created_at),
        updated_at=_time(item.updated_at),
        links=[LinkOut(to_id=k.to_id, relation=k.relation, weight=k.weight) for k in item.links],
    )


def hit_of(item: Item, content: str, score: float, why: str | None, relevance: float = 0.0) -> Hit:
    """The ``recall`` shape of a found item (``why`` set only when explained)."""
    hit = Hit(
        id=item.id,
        title=item.title,
        content=content,
        kind=item.kind,
        subject=item.subject,
        event_date=item.event_date,
        score=round(score, 6),
        relevance=round(relevance, 6),
    )
    if why is not None:
        hit.why = why
    return hit


def version_of(v: Version) -> VersionOut:
    """The ``history`` shape of one journal version."""
    lsn = v.valid_from.lsn
    at = _dt.datetime.fromtimestamp(lsn.wall_ms / 1000, _dt.UTC)
    return VersionOut(
        lsn=str(lsn),
        at=_time(at) or "",
        op=v.op,
        item=memory_of(v.item) if v.item is not None else None,
    )
