"""Typed results of the MemoryProtocol 0.1 verbs, read from the server's JSON.

The wire shapes are the seed's (docs/protocol.md, "Endpoints"); these classes
give them Python names and types. Chunk ids arrive as the 16 bytes of a ULID
and are handed out as the 26-character ULID text that ``/v1/episode/{id}`` and
a forget by ``Id`` take. Fields the server adds later are kept in ``raw``.

>>> hit = Hit.from_json({"id": [1] * 16, "score": 0.5, "text": "t", "source": "s",
...                      "heading_path": [], "valid_from": None, "valid_to": None,
...                      "degraded": False, "rerank_applied": True, "source_op": "Reranked"})
>>> hit.id, hit.valid_from
('01040G2081040G2081040G2081', None)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ulid import ULID

from memstore.journal import Lsn

__all__ = [
    "ChangeEvent",
    "Episode",
    "ForgetReceipt",
    "Hit",
    "Hlc",
    "IngestResult",
    "SnapshotEntry",
    "lsn_from_json",
]


def lsn_from_json(value: Mapping[str, Any]) -> Lsn:
    """``{"wall_ms": w, "counter": c}`` as an :class:`~memstore.journal.Lsn`."""
    return Lsn(int(value["wall_ms"]), int(value["counter"]))


@dataclass(frozen=True, slots=True)
class Hlc:
    """A version stamp: the log position and the node that wrote it."""

    wall_ms: int
    counter: int
    node_id: int

    @property
    def lsn(self) -> Lsn:
        """The stamp's log position."""
        return Lsn(self.wall_ms, self.counter)

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> Hlc | None:
        if value is None:
            return None
        return cls(int(value["wall_ms"]), int(value["counter"]), int(value["node_id"]))


@dataclass(frozen=True, slots=True)
class IngestResult:
    """POST /v1/ingest's answer: where the episode was recorded."""

    lsn: Lsn
    queue_lag_warn: bool

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> IngestResult:
        return cls(lsn_from_json(body["lsn"]), bool(body.get("queue_lag_warn", False)))


@dataclass(frozen=True, slots=True)
class Hit:
    """One recall hit.

    ``id`` is the chunk's ULID; ``episode`` the ULID of the episode it was cut
    from when the server says so (``None`` from servers that do not).
    ``source_op`` is ``Reranked`` (semantic), ``Graph`` (reached by links) or
    ``AsOf`` (answered from the past). ``relevance`` (0-1, comparable across
    calls) is a memstore server's addition: ``None`` for a hit reached by
    links, or from a server that does not send it. ``graph_complete`` (an
    addition too) is, in mode ``graph``, ``False`` when the server's walk over
    the links stopped at its bound (a chunk it did not reach may be missing);
    ``None`` in mode ``semantic`` or from a server that does not send it.
    """

    id: str
    score: float
    text: str
    source: str
    heading_path: tuple[str, ...]
    valid_from: Hlc | None
    valid_to: Hlc | None
    degraded: bool
    rerank_applied: bool
    source_op: str
    episode: str | None = None
    relevance: float | None = None
    graph_complete: bool | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Hit:
        episode = body.get("episode")
        rel = body.get("relevance")
        complete = body.get("graph_complete")
        return cls(
            id=str(ULID.from_bytes(bytes(body["id"]))),
            score=float(body["score"]),
            text=str(body["text"]),
            source=str(body["source"]),
            heading_path=tuple(body.get("heading_path") or ()),
            valid_from=Hlc.from_json(body.get("valid_from")),
            valid_to=Hlc.from_json(body.get("valid_to")),
            degraded=bool(body.get("degraded", False)),
            rerank_applied=bool(body.get("rerank_applied", False)),
            source_op=str(body.get("source_op", "")),
            episode=str(episode) if isinstance(episode, str) else None,
            relevance=float(rel)
            if isinstance(rel, int | float) and not isinstance(rel, bool)
            else None,
            graph_complete=complete if isinstance(complete, bool) else None,
            raw=dict(body),
        )


@dataclass(frozen=True, slots=True)
class ForgetReceipt:
    """POST /v1/forget's answer.

    A dry run's receipt (``preview`` true) carries the server's seal in
    ``confirmation``; :meth:`MemoryClient.confirm_forget` sends it back, whole,
    to perform the hard delete it previewed.
    """

    target: Mapping[str, Any]
    indices_affected: tuple[str, ...]
    rows_written: int
    rows_deleted: int
    audit_lsn: Lsn
    preview: bool
    confirmation: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ForgetReceipt:
        confirmation = body.get("confirmation")
        return cls(
            target=dict(body["target"]),
            indices_affected=tuple(body.get("indices_affected") or ()),
            rows_written=int(body["rows_written"]),
            rows_deleted=int(body["rows_deleted"]),
            audit_lsn=lsn_from_json(body["audit_lsn"]),
            preview=bool(body["preview"]),
            confirmation=str(confirmation) if confirmation is not None else None,
            raw=dict(body),
        )

    def token(self) -> str:
        """The receipt as the ``confirmation_token`` a hard forget sends (every field kept)."""
        return json.dumps(dict(self.raw), separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Episode:
    """An episode as ingested (GET /v1/episode/{id})."""

    id: str
    source: str
    content: str
    t_ref: str | None
    metadata: Mapping[str, Any]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Episode:
        return cls(
            id=str(body["id"]),
            source=str(body["source"]),
            content=str(body["content"]),
            t_ref=body.get("t_ref"),
            metadata=dict(body.get("metadata") or {}),
        )


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One line of GET /v1/snapshot/{lsn}: ``key`` is ``chunk:<ULID>`` or ``episode:<ULID>``."""

    key: str
    value: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """``chunk`` or ``episode``."""
        return self.key.partition(":")[0]


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One event of GET /v1/events.

    ``event`` is ``change`` (``data`` holds ``op``, ``id``, ``kind``, ``lsn``
    and ``item``; a ``delete`` with ``"withdrawn": true`` is an item that still
    exists but left the tenant, to drop as for a delete) or ``reset`` (changes
    were missed: the server could not replay them since ``Last-Event-ID``, or
    dropped them because the stream was read too slowly; ``data["reason"]``
    says which: re-read what you need).
    ``id`` is the position to resume from.
    """

    id: str | None
    event: str
    data: Mapping[str, Any]
