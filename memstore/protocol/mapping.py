"""How MemoryProtocol's episodes and chunks live in a memstore :class:`~memstore.store.Store`.

The adapter adds no storage rules: an episode and its chunks are plain
:class:`~memstore.item.Item`\\ s of the tenant's partition (the ``tenant/<t>``
tag), written in one batch (one journal transaction, one embedding pass).

* An **episode** is an item of kind :data:`KIND_EPISODE`, id
  ``ep:<tenant>:<ULID>``, kept out of the vector index (``no_embed``) and out of
  recall (recall searches chunks only). Its ``content`` is the episode's
  content, its ``title`` the source (cut to the engine's title limit);
  ``data`` holds ``source``, ``metadata`` (JSON text), ``t_ref`` (RFC 3339)
  and ``chunks`` (the JSON list of its chunk ids, so a re-ingest of the same
  episode id replaces them).
* A **chunk** is an item of kind :data:`KIND_CHUNK`, id ``ch:<tenant>:<ULID>``
  with a fresh ULID, whose ``content`` is the chunk text. ``data`` holds
  ``source``, ``episode`` (the episode ULID), ``heading_path`` (JSON),
  ``index`` and the episode's ``metadata``; ``evidence_refs`` cites the episode
  item; each chunk links to the next one with relation ``precedes``.
* A forget writes one **audit** item (kind :data:`KIND_AUDIT`, not embedded,
  never recalled), so every forget is in the journal and on the change hub.

Ids carry the tenant, so two tenants may use the same episode ULID without
ever touching each other's items.

>>> items = episode_items("acme", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "notes.md", "# A\\nhello\\n",
...                       t_ref="2026-04-21T10:30:00+00:00", metadata={"k": 1})
>>> [(it.kind, it.id.split(":")[0]) for it in items]
[('episode', 'ep'), ('chunk', 'ch')]
>>> json.loads(items[1].data["heading_path"])
['A']
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ulid import ULID

from memstore.item import SCOPE_PRIVATE, Item, ThoughtLink
from memstore.journal import Hlc, Version
from memstore.protocol.chunk import chunk_markdown
from memstore.protocol.filter import FilterRecord
from memstore.protocol.limits import MAX_CHUNK_CHARS
from memstore.search._types import SearchResult
from memstore.tags import PARTITION_TAG_PREFIX, partition_from_tags
from memstore.validate import MAX_TITLE_CHARS

__all__ = [
    "KIND_AUDIT",
    "KIND_CHUNK",
    "KIND_EPISODE",
    "LINK_RELATION",
    "ULID_PATTERN",
    "audit_item",
    "chunk_id",
    "episode_body",
    "episode_id",
    "episode_items",
    "filter_record",
    "hit_body",
    "owned_by",
    "parse_ulid",
    "recall_hits",
    "snapshot_record",
    "ulid_bytes",
]

KIND_EPISODE: Final = "episode"
"""The kind of an episode item (stored, fetched by id, never recalled)."""
KIND_CHUNK: Final = "chunk"
"""The kind of a chunk item (embedded, indexed, what recall returns)."""
KIND_AUDIT: Final = "audit"
"""The kind of the item every forget writes (journal and hub only)."""
LINK_RELATION: Final = "precedes"
"""The relation linking each chunk of an episode to the next one."""
ULID_PATTERN: Final = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
"""A 26-character Crockford base-32 ULID, upper case (the first character caps it at 2^128)."""


def parse_ulid(raw: str) -> str | None:
    """``raw`` as a canonical (upper-case) ULID, or None when it is not one.

    ASCII only: :meth:`str.upper` maps a few other letters onto Crockford's
    (``"ſ"``, the long s, becomes ``"S"``), which would accept a 26-character
    id that is not base 32 and answer for another one.

    >>> parse_ulid("01hzzzzzzzzzzzzzzzzzzzzzzz"), parse_ulid("not-a-ulid")
    ('01HZZZZZZZZZZZZZZZZZZZZZZZ', None)
    >>> parse_ulid("01HZZZZZZZZZZZZZZZZZZZZZZ\u017f") is None
    True
    """
    if not raw.isascii():
        return None
    text = raw.upper()
    return text if ULID_PATTERN.fullmatch(text) else None


def episode_id(tenant: str, ulid: str) -> str:
    """The item id of episode ``ulid`` in ``tenant``."""
    return f"ep:{tenant}:{ulid}"


def chunk_id(tenant: str, ulid: str) -> str:
    """The item id of chunk ``ulid`` in ``tenant``."""
    return f"ch:{tenant}:{ulid}"


def ulid_of(item_id: str) -> str:
    """The ULID an episode or chunk item id ends with."""
    return item_id.rsplit(":", 1)[-1]


_CROCKFORD: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_AS_BASE32_DIGITS: Final = str.maketrans(_CROCKFORD, "0123456789abcdefghijklmnopqrstuv")
_CANONICAL_ULID: Final = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
"""A ULID as this server writes it: upper-case Crockford base32 within 128 bits."""


def ulid_bytes(ulid: str) -> list[int]:
    """The 16 bytes of a ULID as the JSON int array the seed's hits carry.

    A canonical ULID is read as one base-32 number (Crockford's letters mapped
    onto Python's digits), a few times cheaper than :meth:`ULID.from_str`, which
    reads (or refuses) every other spelling.

    >>> u = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    >>> ulid_bytes(u) == list(ULID.from_str(u).bytes), ulid_bytes(u)[:4]
    (True, [1, 86, 62, 58])
    """
    if _CANONICAL_ULID.fullmatch(ulid):
        return list(int(ulid.translate(_AS_BASE32_DIGITS), 32).to_bytes(16, "big"))
    return list(ULID.from_str(ulid).bytes)


_READ_CACHE_SIZE: Final = 65_536
"""How many ULIDs and heading paths :func:`hit_body` keeps read (then it starts afresh)."""
_ulid_lists: dict[str, tuple[int, ...]] = {}
_heading_paths: dict[str, tuple[str, ...]] = {}


def _hit_id(ulid: str) -> list[int]:
    """:func:`ulid_bytes` of ``ulid``, remembered: a server answers the same chunks again
    and again, and reading a ULID costs more than a look-up. A new list each call."""
    got = _ulid_lists.get(ulid)
    if got is None:
        if len(_ulid_lists) >= _READ_CACHE_SIZE:
            _ulid_lists.clear()
        got = _ulid_lists[ulid] = tuple(ulid_bytes(ulid))
    return list(got)


def _headings(raw: str) -> tuple[str, ...] | None:
    """A chunk's stored ``heading_path`` (JSON text) read, remembered: its headings, or
    ``None`` when it is not a JSON list of strings (a folder another program wrote; such
    text is read again for each hit, as it was)."""
    got = _heading_paths.get(raw)
    if got is not None:
        return got
    value = json.loads(raw)
    if type(value) is not list or not all(type(h) is str for h in value):
        return None
    if len(_heading_paths) >= _READ_CACHE_SIZE:
        _heading_paths.clear()
    got = _heading_paths[raw] = tuple(value)
    return got


_Parts = tuple[Item, tuple[int, ...], str, str, str | None, str | None, tuple[str, ...] | None]
_parts: dict[str, _Parts] = {}


def _chunk_parts(item: Item) -> _Parts:
    """What :func:`hit_body` reads of ``item`` that only a new version changes, remembered
    by id while the store holds that very object (``item``, its ULID's bytes, ``source``,
    the raw ``heading_path``, ``episode``, the tenant owning it (``None`` for a private
    item: :func:`owned_by`), and the headings read, ``None`` when the raw text is not a
    JSON list of strings): a recall's hits are the store's own items
    (:func:`~memstore.search._lean.borrowed_results`), so a hit answered before costs one
    look-up of an id whose hash is kept, not a split, two look-ups and three reads."""
    got = _parts.get(item.id)
    if got is not None and got[0] is item:
        return got
    if len(_parts) >= _READ_CACHE_SIZE:
        _parts.clear()
    data = item.data
    heading = data.get("heading_path", "[]")
    got = _parts[item.id] = (
        item,
        tuple(_hit_id(ulid_of(item.id))),
        data.get("source", ""),
        heading,
        data.get("episode") or None,
        partition_from_tags(item.tags) if item.scope != SCOPE_PRIVATE else None,
        _headings(heading),
    )
    return got


def owned_by(item: Item, tenant: str) -> bool:
    """Whether ``item`` belongs to ``tenant``: its partition tag, never a shared or private one."""
    return item.scope != SCOPE_PRIVATE and partition_from_tags(item.tags) == tenant


def _tags(tenant: str) -> list[str]:
    return [f"{PARTITION_TAG_PREFIX}{tenant}"]


def episode_items(
    tenant: str,
    ulid: str,
    source: str,
    content: str,
    *,
    t_ref: str,
    metadata: Mapping[str, Any],
    max_chars: int = MAX_CHUNK_CHARS,
) -> list[Item]:
    """The episode item followed by its chunk items, ready for one batch of upserts.

    Blank chunks (an all-white-space content) are not stored: they could never
    be recalled. A ``NaN`` or infinity in ``metadata`` raises ValueError
    (the request models refuse them first).
    """
    meta = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    ep = episode_id(tenant, ulid)
    chunks = [c for c in chunk_markdown(content, max_chars=max_chars) if c.text.strip()]
    ids = [chunk_id(tenant, str(ULID())) for _ in chunks]
    items = [
        Item(
            id=ep,
            kind=KIND_EPISODE,
            title=source[:MAX_TITLE_CHARS],
            content=content,
            tags=_tags(tenant),
            data={
                "source": source,
                "metadata": meta,
                "t_ref": t_ref,
                "chunks": json.dumps(ids),
            },
            no_embed=True,
        )
    ]
    for n, (c, cid) in enumerate(zip(chunks, ids, strict=True)):
        links = [ThoughtLink(to_id=ids[n + 1], relation=LINK_RELATION)] if n + 1 < len(ids) else []
        items.append(
            Item(
                id=cid,
                kind=KIND_CHUNK,
                content=c.text,
                tags=_tags(tenant),
                links=links,
                evidence_refs=[ep],
                data={
                    "source": source,
                    "episode": ulid,
                    "heading_path": json.dumps(list(c.heading_path), ensure_ascii=False),
                    "index": str(n),
                    "metadata": meta,
                },
            )
        )
    return items


def episode_chunk_ids(item: Item) -> list[str]:
    """The chunk ids an episode item lists."""
    raw = item.data.get("chunks", "[]")
    ids = json.loads(raw)
    return [str(i) for i in ids] if isinstance(ids, list) else []


def episode_body(item: Item) -> dict[str, Any]:
    """The episode as GET /v1/episode/{id} returns it: what POST /v1/ingest stored."""
    return {
        "id": ulid_of(item.id),
        "source": item.data.get("source", ""),
        "content": item.content,
        "t_ref": item.data.get("t_ref"),
        "metadata": json.loads(item.data.get("metadata", "{}")),
    }


def filter_record(item: Item) -> FilterRecord:
    """What the recall filter DSL reads of a chunk (the tenant tag is not a tag here)."""
    return {
        "source": item.data.get("source"),
        "kind": item.kind,
        "subject": item.subject or None,
        "tags": [t for t in item.tags if not t.startswith(PARTITION_TAG_PREFIX)],
        "metadata": json.loads(item.data.get("metadata", "{}")),
    }


def hit_body(
    item: Item,
    score: float,
    *,
    valid_from: Hlc | None,
    valid_to: Hlc | None = None,
    rerank_applied: bool,
    source_op: str,
    relevance: float | None = None,
) -> dict[str, Any]:
    """One recall hit in the seed's shape, plus ``episode``, ``relevance`` and ``graph_complete``.

    ``episode`` (an addition; clients that do not know it ignore it) is what
    ``GET /v1/episode/{id}`` takes; ``None`` for a chunk with no episode.
    ``relevance`` (an addition too) is the search hit's relevance in [0, 1],
    comparable across calls (``score`` is not); ``None`` for a hit reached by
    links rather than found by the search. ``graph_complete`` (an addition)
    is ``None`` here: a recall in mode ``graph`` sets it on each of its hits
    to whether its walk over the links reached everything within reach.
    """
    _, ulid, source, heading, episode, _, headings = _chunk_parts(item)
    return {
        "id": list(ulid),
        "score": score,
        "text": item.content,
        "source": source,
        "heading_path": list(headings) if headings is not None else json.loads(heading),
        "valid_from": valid_from.to_json() if valid_from is not None else None,
        "valid_to": valid_to.to_json() if valid_to is not None else None,
        "degraded": False,
        "rerank_applied": rerank_applied,
        "source_op": source_op,
        "episode": episode,
        "relevance": relevance,
        "graph_complete": None,
    }


def recall_hits(
    results: Sequence[SearchResult],
    tenant: str,
    stamps: Callable[[list[Item]], Sequence[Hlc | None]],
    *,
    owned_only: bool,
    rerank_applied: bool,
    source_op: str,
) -> tuple[list[SearchResult], list[dict[str, Any]]]:
    """A search's results as recall hits: :func:`hit_body` of each, in one loop.

    ``owned_only``: results not :func:`owned_by` ``tenant`` are left out first.
    ``stamps``: each kept result's ``valid_from``, given their items (one call).
    Returns the results kept and their hits, each hit what :func:`hit_body`
    gives (``valid_to`` ``None``); an item seen before costs one look-up
    (:func:`_chunk_parts`), and its owner is read from there too.
    """
    parts = _parts
    kept: list[SearchResult] = []
    read: list[_Parts] = []
    for r in results:
        item = r.item
        got = parts.get(item.id)
        if got is None or got[0] is not item:
            if owned_only and not owned_by(item, tenant):
                continue
            got = _chunk_parts(item)
        elif owned_only and got[5] != tenant:
            continue
        kept.append(r)
        read.append(got)
    hits = [
        {
            "id": list(got[1]),
            "score": r.score,
            "text": got[0].content,
            "source": got[2],
            "heading_path": list(got[6]) if got[6] is not None else json.loads(got[3]),
            "valid_from": at.to_json() if at is not None else None,
            "valid_to": None,
            "degraded": False,
            "rerank_applied": rerank_applied,
            "source_op": source_op,
            "episode": got[4],
            "relevance": r.relevance,
            "graph_complete": None,
        }
        for r, got, at in zip(kept, read, stamps([r.item for r in kept]), strict=True)
    ]
    return kept, hits


def _bt(version: Version) -> dict[str, Any]:
    """The span of a version visible at the snapshot's position: still open then.

    The journal knows when the version ended (a later write or forget), but
    at the snapshot's position that had not happened yet, so ``to`` is null:
    a snapshot never shows the future.
    """
    span = [version.valid_from.to_json(), None]
    return {"valid": span, "sys": span}


def snapshot_record(version: Version) -> dict[str, Any] | None:
    """One NDJSON line of GET /v1/snapshot/{lsn} for a version visible at that position.

    ``None`` for what is not a primitive. Every field is as it stood at the
    position (see :func:`_bt`).
    """
    item = version.item
    if item is None or item.kind not in (KIND_CHUNK, KIND_EPISODE):
        return None
    ulid = ulid_of(item.id)
    if item.kind == KIND_CHUNK:
        value: dict[str, Any] = {
            "id": ulid_bytes(ulid),
            "text": item.content,
            "source": item.data.get("source", ""),
            "heading_path": json.loads(item.data.get("heading_path", "[]")),
            "episode": item.data.get("episode"),
        }
        key = f"chunk:{ulid}"
    else:
        value = episode_body(item)
        key = f"episode:{ulid}"
    value["bt"] = _bt(version)
    return {"key": key, "value": value}


def audit_item(tenant: str, target: Mapping[str, Any], ids: Sequence[str], hard: bool) -> Item:
    """The audit record of one forget: what was asked and which items it removed."""
    return Item(
        id=f"audit:{tenant}:{ULID()}",
        kind=KIND_AUDIT,
        title="forget",
        content=json.dumps(dict(target), sort_keys=True),
        tags=_tags(tenant),
        data={
            "target": json.dumps(dict(target), sort_keys=True),
            "mode": "hard" if hard else "soft",
            "count": str(len(ids)),
        },
        no_embed=True,
    )
