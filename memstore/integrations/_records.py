"""How one LangGraph item (namespace, key, value) is kept as one memstore item.

- the namespace is the item's partition (:func:`memstore.partitions.encode_labels`);
- the id is derived from partition and key (a put of the same key is an update);
- the value is kept whole as JSON text in ``data``, beside the key, the TTL and
  the field vectors; the searchable text (the indexed fields) is the content;
- the TTL deadline is the item's own ``stale_after``.

Nothing here imports LangGraph.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from memstore.errors import InvalidItemError
from memstore.item import STATUS_ACTIVE, Item
from memstore.partitions import decode_labels
from memstore.tags import partition_from_tags
from memstore.validate import MAX_CONTENT_CHARS

__all__ = [
    "DATA_INDEXED",
    "DATA_KEY",
    "DATA_TTL",
    "DATA_VALUE",
    "DATA_VECTORS",
    "KIND",
    "Record",
    "deadline",
    "decode_value",
    "encode_value",
    "is_record",
    "leaf_text",
    "read",
    "record_id",
    "search_text",
    "ttl_minutes",
]

KIND: Final = "langgraph.item"
"""The kind of every item the LangGraph store writes."""
ID_PREFIX: Final = "lg-"
DATA_KEY: Final = "langgraph.key"
DATA_VALUE: Final = "langgraph.value"
DATA_TTL: Final = "langgraph.ttl"
"""The TTL in minutes (absent: the item never expires)."""
DATA_VECTORS: Final = "langgraph.vectors"
DATA_INDEXED: Final = "langgraph.indexed"
"""``"1"`` when the item has searchable text (``put(..., index=False)`` leaves it out)."""


def record_id(partition: str, key: str) -> str:
    """The item id of ``key`` in a partition: stable, whitespace-free, 160 bits of SHA-256.

    >>> record_id("users.alice", "prefs") == record_id("users.alice", "prefs")
    True
    >>> record_id("a", "b.c") != record_id("a.b", "c")
    True
    """
    digest = hashlib.sha256(f"{partition}\x00{key}".encode("utf-8", "surrogatepass"))
    return ID_PREFIX + digest.hexdigest()[:40]


def encode_value(value: Any) -> str:
    """A value as the JSON text kept in the item (a mapping with string keys).

    Raises :class:`~memstore.errors.InvalidItemError` for anything JSON cannot hold,
    including a value nested deeper than Python's encoder can walk (about a
    thousand levels: its ``RecursionError`` would otherwise escape as is).
    """
    if not isinstance(value, Mapping):
        raise InvalidItemError(f"a LangGraph value is a dict, got {type(value).__name__}")
    try:
        return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidItemError(f"the value is not JSON: {e}") from None
    except RecursionError:
        raise InvalidItemError(
            "the value nests too deep for JSON (lists and objects within each other "
            "about a thousand levels down); flatten it"
        ) from None


def decode_value(text: str) -> dict[str, Any]:
    """A fresh copy of the stored value."""
    value: dict[str, Any] = json.loads(text)
    return value


def is_record(item: Item) -> bool:
    """Whether the LangGraph store wrote this item."""
    return item.kind == KIND and DATA_KEY in item.data and DATA_VALUE in item.data


def ttl_minutes(ttl: Any) -> float | None:
    """A TTL in minutes, checked (``None``: no expiry)."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvalidItemError(f"ttl is a number of minutes, got {ttl!r}")
    if ttl <= 0:
        raise InvalidItemError(f"ttl must be positive (minutes), got {ttl!r}")
    return float(ttl)


def deadline(now: _dt.datetime, minutes: float) -> _dt.datetime:
    """``now`` plus a TTL of ``minutes``; :class:`InvalidItemError` past the calendar's end.

    >>> import datetime as dt
    >>> deadline(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), 90).isoformat()
    '2026-01-01T01:30:00+00:00'
    """
    try:
        return now + _dt.timedelta(minutes=minutes)
    except OverflowError:
        raise InvalidItemError(
            f"ttl {minutes!r} minutes puts the deadline past the year 9999; "
            "give a shorter ttl, or ttl=None for no expiry"
        ) from None


def leaf_text(value: Any) -> list[str]:
    """The scalar leaves of a JSON value as text, in document order (no keys, no nulls).

    >>> leaf_text({"a": "x", "b": [1, {"c": True}], "d": None})
    ['x', '1', 'True']
    """
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, Mapping):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))
        elif v is not None:
            out.append(str(v))
    return out


def search_text(texts: list[str]) -> str:
    """The content the lexical index reads: the indexed texts, one per line, capped."""
    return "\n".join(t for t in texts if t.strip())[:MAX_CONTENT_CHARS]


@dataclass(frozen=True, slots=True)
class Record:
    """What the LangGraph store reads of one of its items, decoded once per version.

    The store keeps these in memory, following every change of the memory, so
    that a search never copies engine items nor parses JSON per candidate.
    ``value`` is shared: hand out :meth:`fresh_value`, never ``value`` itself.
    """

    id: str
    partition: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    value_json: str
    created_at: _dt.datetime
    updated_at: _dt.datetime
    deadline: _dt.datetime | None
    active: bool
    indexed: bool
    vectors: str | None
    ttl: float | None

    @classmethod
    def of(cls, item: Item) -> Record:
        """The record of a stored item (:func:`is_record` must hold)."""
        partition = partition_from_tags(item.tags)
        text = item.data[DATA_VALUE]
        ttl = item.data.get(DATA_TTL)
        assert item.created_at is not None and item.updated_at is not None
        return cls(
            id=item.id,
            partition=partition,
            namespace=decode_labels(partition),
            key=item.data[DATA_KEY],
            value=decode_value(text),
            value_json=text,
            created_at=item.created_at,
            updated_at=item.updated_at,
            deadline=item.stale_after,
            active=item.status == STATUS_ACTIVE,
            indexed=item.data.get(DATA_INDEXED) == "1",
            vectors=item.data.get(DATA_VECTORS),
            ttl=float(ttl) if ttl is not None else None,
        )

    def live(self, now: _dt.datetime) -> bool:
        """Active and not past its TTL deadline."""
        return self.active and (self.deadline is None or now < self.deadline)

    def order(self) -> tuple[float, tuple[str, ...], str]:
        """The order of a search without a query: newest update first, then namespace, key.

        Ties go by the namespace as a tuple of labels, the order of
        ``list_namespaces``, never by the partition name it is kept under: the
        escaped name sorts ``("a b",)`` before ``("a", "b")`` (``"a%20b"`` <
        ``"a.b"``), where the labels sort it after.
        """
        return (-self.updated_at.timestamp(), self.namespace, self.key)

    def fresh_value(self) -> dict[str, Any]:
        """A copy of the value the caller may change."""
        return decode_value(self.value_json)


def read(item: Item) -> Record | None:
    """The record of an item the LangGraph store wrote; ``None`` for any other item.

    An item of this kind whose partition or value cannot be decoded (written by
    hand, not by the store) is not a record either: it is left alone, never raised on.
    """
    if not is_record(item):
        return None
    try:
        return Record.of(item)
    except (ValueError, TypeError, AssertionError):  # PartitionNameError, bad JSON, no stamps
        return None
