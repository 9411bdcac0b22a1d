"""What a journal stores: versions of items, and the rows that carry them.

Every change the store makes becomes a :class:`Version` of its item, valid
from its stamp until the next version of the same id (``valid_to``; ``None``
while it is the current one). A delete is a version too (``op="delete"``,
no item): it ends the item's life without erasing its past, so reads "as of"
an earlier position still see it (MVCC soft delete).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, get_args, get_origin

from pydantic import AwareDatetime, TypeAdapter
from typing_extensions import TypedDict

from memstore import _wordbatch
from memstore._updatekey import PARSED_UTC
from memstore.errors import InvalidItemError, JournalCorruptError
from memstore.item import Item, MemoryCellSpec
from memstore.journal.hlc import COUNTER_BITS, LATEST_WALL_MS, Hlc, InvalidLsnError, Lsn
from memstore.journal.importrules import RECORD_RULES, ImportRules
from memstore.tags import SHARED_TAG, partition_from_tags
from memstore.validate import model_error

if TYPE_CHECKING:
    from memstore.config import Change

__all__ = ["TABLE", "Op", "Version", "corrupt_row"]

Op = Literal["upsert", "delete"]

LAST_IMPORTED_WALL_MS: Final = LATEST_WALL_MS
"""An import refuses versions stamped from the year 2200 on (as a writer refuses to stamp).

Stamps only increase, and an import moves this journal's clock past every
stamp it brings (:meth:`HybridClock.observe`), so one far-future stamp would
set every later write's stamp after it; at the top of the range
(``Lsn.of``'s, the year 2248) no later stamp exists and every write would fail.
"""

TABLE = "versions"
"""The table (SQLite) or relation (PostgreSQL, in its schema) holding the versions."""


@dataclass(frozen=True, slots=True)
class Version:
    """One version of one item: its stamp, how long it held, what it was."""

    id: str
    valid_from: Hlc
    """The stamp of the write that made this version."""
    valid_to: Hlc | None
    """The stamp of the next version of the id; ``None`` while current."""
    op: Op
    """``"upsert"`` (``item`` is the stored state) or ``"delete"`` (``item`` is ``None``)."""
    kind: str
    """The item's kind (for a delete: the kind of what was deleted)."""
    item: Item | None

    @property
    def lsn(self) -> Lsn:
        """The log position of this version."""
        return self.valid_from.lsn

    def visible_at(self, lsn: Lsn) -> bool:
        """Whether this version is the item's state as of ``lsn``."""
        return (
            self.op == "upsert"
            and self.valid_from.lsn <= lsn
            and (self.valid_to is None or self.valid_to.lsn > lsn)
        )

    def to_json(self) -> dict[str, Any]:
        """The export shape of this version (``valid_to`` is implied by the next one)."""
        return {
            "valid_from": self.valid_from.to_json(),
            "op": self.op,
            "kind": self.kind,
            "item": None if self.item is None else _item_json(self.item),
        }


@dataclass(slots=True)
class Row:
    """A version as the backends store it: packed stamps, item as JSON text."""

    id: str
    lsn: int
    node: int
    to_lsn: int | None
    to_node: int | None
    op: Op
    kind: str
    partition: str
    shared: bool
    item: str | None

    @classmethod
    def of(cls, id: str, hlc: Hlc, op: Op, kind: str, item: Item | None, where: Item | None) -> Row:
        """A new open row; ``where`` (the item, or its last state for a delete) places it."""
        tags = where.tags if where is not None else ()
        return cls(
            id,
            (hlc.wall_ms << COUNTER_BITS) | hlc.counter,  # hlc.lsn.packed(), without the Lsn
            hlc.node_id,
            None,
            None,
            op,
            kind,
            partition_from_tags(tags),
            SHARED_TAG in tags,
            None if item is None else _item_text(item),
        )

    @property
    def hlc(self) -> Hlc:
        lsn = Lsn.unpack(self.lsn)
        return Hlc(lsn.wall_ms, lsn.counter, self.node)

    def version(self) -> Version:
        to = None
        if self.to_lsn is not None:
            lsn = Lsn.unpack(self.to_lsn)
            to = Hlc(lsn.wall_ms, lsn.counter, self.to_node or 0)
        item = None if self.item is None and self.op == "delete" else self.stored_item()
        return Version(self.id, self.hlc, to, self.op, self.kind, item)

    def stored_item(self) -> Item:
        """The item this row carries, or :class:`JournalCorruptError` naming the row.

        Every read of a stored item goes through here (or :func:`corrupt_row`),
        so a damaged row is reported by table, id and stamp, never as a parse
        error from deep inside the model.
        """
        try:
            return Item.model_validate_json(self.item or "")
        except ValueError as e:  # pydantic's ValidationError: bad JSON or bad fields
            raise corrupt_row(self, e) from None


def corrupt_row(row: Row, cause: Exception) -> JournalCorruptError:
    """The error for a stored version that cannot be read: what, where, and what now."""
    first = str(cause).strip().splitlines()
    reason = " ".join(ln.strip() for ln in first[:3] if not ln.strip().startswith("For further"))
    where = f"{TABLE}(id={row.id!r}, position={row.hlc})"
    return JournalCorruptError(
        f"journal row {where} is unreadable ({reason[:300]}); nothing was dropped or "
        "changed. The other rows still read (history, as_of, export); to salvage "
        "them, export with on_corrupt= and import into a new journal, or restore a "
        "backup (docs/journal.md, 'A damaged row')",
        table=TABLE,
        item_id=row.id,
        position=str(row.hlc),
    )


def group_rows(first: Mapping[str, Change], last: Mapping[str, Change], hlc: Hlc) -> list[Row]:
    """The rows of a write group: one per id of ``last``, all stamped ``hlc``.

    ``first`` and ``last`` map each id the group touched to its first and last
    change. An id whose last change is an upsert gets an open row carrying
    that item; one whose last change is a delete gets a delete row placed by
    what it removed, unless the group also created it (``first``'s change has
    no ``previous``: born and gone within the group, it leaves nothing).

    The same rows as :meth:`Row.of` for each, built a batch at a time: the
    stamp packed once, a plain :class:`Item`'s fields read from its
    ``__dict__``, its placement (partition, ``shared``) worked out once per
    tags list of the group (the store shares equal lists between its
    items, so a tenant's writes share one), and its JSON written here
    without :func:`_item_text`'s frame: by the compiled ``row_json`` where
    the C extension is built (:data:`_ROW_FIELDS`; it answers ``None`` for
    what it does not write, which pydantic-core then writes), else by
    :data:`_FIELDS_TO_JSON`. Anything else (a subclass, a delete) takes
    :meth:`Row.of`.
    """
    fast = _wordbatch.speedups
    row_json = fast.row_json if fast is not None and _ROW_FIELDS is not None else None
    lsn = (hlc.wall_ms << COUNTER_BITS) | hlc.counter  # hlc.lsn.packed(), without the Lsn
    node = hlc.node_id
    rows: list[Row] = []
    append = rows.append
    # id(tags) -> (tags, partition, shared): holding each list keeps its id its own.
    placed: dict[int, tuple[object, str, bool]] = {}
    for key, c in last.items():
        if c.op == "upsert":
            item = c.item
            if type(item) is not Item:
                append(Row.of(key, hlc, "upsert", c.kind, item, item))
                continue
            d = item.__dict__
            tags = d["tags"]
            got = placed.get(id(tags))
            if got is None:
                got = placed[id(tags)] = (tags, partition_from_tags(tags), SHARED_TAG in tags)
            _, partition, shared = got
            at = d["updated_at"]
            # A new item's stamps: one UTC datetime for both, no deadline (plain at once).
            plain = (
                d["created_at"] is at
                and d["stale_after"] is None
                and type(at) is _DATETIME
                and at.tzinfo is _UTC
            ) or _plain_stamps(d)
            if not plain:
                text = _ITEM_TO_JSON(item).decode()
            elif row_json is None or (text := row_json(_ROW_FIELDS, _UTCS, d)) is None:
                text = _FIELDS_TO_JSON(d).decode()
            if d["no_embed"]:
                text = text[:-1] + ',"no_embed":true}'
            append(Row(key, lsn, node, None, None, "upsert", c.kind, partition, shared, text))
        elif first[key].previous is not None:  # else born and gone within the group
            append(Row.of(key, hlc, "delete", c.kind, None, c.previous))
    return rows


def _item_text(item: Item) -> str:
    """The item as the journal stores it: its persisted fields, and ``no_embed``.

    ``no_embed`` is an in-process flag that :meth:`Item.model_dump_json` leaves
    out, but whether an item belongs in the vector index must survive a
    restart; it is added only when set, so the common row stays as pydantic
    wrote it.

    Every journalled version is written here. For a plain :class:`Item` the
    model's serializer is called directly, with the defaults
    ``model_dump_json`` passes it (so the same text, byte for byte): that
    method's Python wrapper forwards sixteen keyword arguments a call, about a
    sixth of the row's JSON. A subclass goes through its own
    ``model_dump_json``.
    """
    if type(item) is not Item:
        text = item.model_dump_json()
    elif _plain_stamps(item.__dict__):
        text = _FIELDS_TO_JSON(item.__dict__).decode()
    else:
        text = _ITEM_TO_JSON(item).decode()
    return text[:-1] + ',"no_embed":true}' if item.no_embed else text


_ITEM_TO_JSON = Item.__pydantic_serializer__.to_json
"""pydantic-core's JSON serializer of :class:`Item` (``model_dump_json`` without its wrapper)."""

_TIMES = ("stale_after", "created_at", "updated_at")
_PLAIN_STAMP: Any = AwareDatetime | None
_Persisted = TypedDict(  # type: ignore[misc]  # fields read from the model
    "_Persisted",
    {
        name: _PLAIN_STAMP if name in _TIMES else field.annotation
        for name, field in MemoryCellSpec.model_fields.items()
    },
)
_FIELDS_TO_JSON = TypeAdapter(_Persisted).serializer.to_json
"""The persisted fields of an item's ``__dict__`` as JSON, in the model's order.

The model writes its datetimes through a Python callback
(``_same_instant_in_json``: an offset with seconds is written in UTC), which
costs half of a row's JSON. A datetime in UTC, or at an offset of whole
minutes, is written as it is by that callback: for an item whose three
datetimes are all such (:func:`_plain_stamps`, nearly every item), this
serializer of the same fields with plain datetimes writes the same text
(extra keys of the ``__dict__``, the in-process flags, are left out as the
model leaves them out).
"""


def _plain_stamps(fields: dict[str, Any]) -> bool:
    """Whether each datetime of an item's ``fields`` is ``None``, or UTC / whole minutes off it."""
    for name in _TIMES:
        value = fields[name]
        if value is not None:
            if type(value) is not _dt.datetime:
                return False
            tz = value.tzinfo
            if tz is not _UTC and tz is not PARSED_UTC:
                offset = value.utcoffset()
                if offset is None or offset.seconds % 60 or offset.microseconds:
                    return False
    return True


_UTC = _dt.UTC
_DATETIME = _dt.datetime
_UTCS: Final = (_UTC, PARSED_UTC)
"""The time zones ``row_json`` writes as UTC (``Z``), as pydantic-core does: the two
:func:`_plain_stamps` takes without asking for the offset."""


def _row_shape(name: str, annotation: object) -> int | None:
    """How the compiled ``row_json`` writes a persisted field (``_itemwrite.c``), or ``None``.

    0 a str (a ``Literal`` of strs too), 1 a list of str, 2 a list of models
    (written there only when empty), 3 a datetime or ``None``, 4 a dict of str to str.
    """
    if name in _TIMES:
        return 3
    if annotation is str or (
        get_origin(annotation) is Literal and all(type(a) is str for a in get_args(annotation))
    ):
        return 0
    if annotation == list[str]:
        return 1
    if get_origin(annotation) is list:
        return 2
    if annotation == dict[str, str]:
        return 4
    return None


def _row_fields() -> tuple[tuple[str, int], ...] | None:
    """Each persisted field's name and shape, in the model's order; ``None`` if one has none."""
    fields = []
    for name, field in MemoryCellSpec.model_fields.items():
        shape = _row_shape(name, field.annotation)
        if shape is None:
            return None
        fields.append((name, shape))
    return tuple(fields)


_ROW_FIELDS: Final = _row_fields()
"""What the compiled ``row_json`` is given to write :data:`_FIELDS_TO_JSON`'s text itself.

pydantic-core's serializer of those fields costs about 24k machine
instructions a row (a tenth of a durable ``add_many``'s item); the compiled
writer, about a twentieth of that. It answers ``None`` for anything it does
not know the shape of (a link, a datetime not in UTC, a str subclass, a lone
surrogate), and the row is then written by pydantic-core as before:
``tests/test_write_compiled.py`` holds the two to the same text.
"""


def _item_json(item: Item) -> dict[str, Any]:
    out = item.model_dump(mode="json")
    if item.no_embed:
        out["no_embed"] = True
    return out


_SURROGATE = "a text holds a lone surrogate (\\ud800-\\udfff alone is no Unicode character)"


def _json_invalid(error: ValueError) -> bool:
    """Whether the model's parser refused the JSON text itself (not a field's value)."""
    errors = getattr(error, "errors", None)
    return callable(errors) and any(e.get("type") == "json_invalid" for e in errors())


def row_from_export(id: str, entry: object, rules: ImportRules = RECORD_RULES) -> Row:
    """Read one exported version back, validating every field.

    ``rules`` are asked about an upsert's item and the kind a delete names
    (:mod:`memstore.journal.importrules`: the record rule, or the write rules
    too). Raises :class:`InvalidItemError` naming what is wrong.
    """
    if not isinstance(entry, dict):
        raise InvalidItemError(f"{id}: a version is an object, got {type(entry).__name__}")
    try:
        hlc = Hlc.from_json(entry.get("valid_from"))
    except InvalidLsnError as e:
        raise InvalidItemError(f"{id}: valid_from: {e}") from None
    if hlc.wall_ms >= LAST_IMPORTED_WALL_MS:
        raise InvalidItemError(
            f"{id}: valid_from {hlc} is in the year {hlc.lsn.to_datetime().year}: a clock "
            "that far ahead is broken, and a journal taking the stamp would stamp every "
            "later write past it (and from the year 2248 on, could stamp none at all)"
        )
    op = entry.get("op")
    if op not in ("upsert", "delete"):
        raise InvalidItemError(f"{id}: op must be 'upsert' or 'delete', got {op!r}")
    raw = entry.get("item")
    item: Item | None = None
    if op == "upsert":
        if not isinstance(raw, dict):
            raise InvalidItemError(f"{id}: an upsert version needs its item")
        try:
            item = Item.model_validate_json(json.dumps(raw))
        except ValueError as e:
            # json.dumps writes a lone surrogate as an escape the model's parser refuses.
            why = _SURROGATE if _json_invalid(e) else model_error(e)
            raise InvalidItemError(f"{id}: item: {why}") from None
        if item.id != id:
            raise InvalidItemError(f"{id}: a version carries item {item.id!r}")
        why = rules.item(item)
        if why:
            raise InvalidItemError(f"{id}: item: {why}")
    elif raw is not None:
        raise InvalidItemError(f"{id}: a delete version carries no item")
    if item is not None:
        kind = item.kind
    else:  # a delete names the kind it ended ("" or absent: the kind of the version before)
        kind = entry.get("kind") or ""
        why = rules.deleted_kind(kind) if kind else ""
        if why:
            raise InvalidItemError(f"{id}: a delete version: {why}")
    return Row.of(id, hlc, op, kind, item, item)
