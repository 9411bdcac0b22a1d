"""Memory items: the persisted cell spec, its links, and the engine's constants.

An :class:`Item` is a :class:`MemoryCellSpec` (everything that is persisted)
plus three in-process flags that never serialise. Models validate at the
boundary (construction, ``model_validate``); the store's hot paths copy items
without re-validating them.

>>> it = Item(kind="stable_fact", title="payments use idempotency keys",
...           content="every POST to payment-api carries an Idempotency-Key",
...           confidence="high")
>>> it.kind, it.scope, it.status
('stable_fact', 'public', 'active')
>>> "no_embed" in it.model_dump()
False
"""

from __future__ import annotations

import datetime as _dt
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    WrapSerializer,
)

__all__ = [
    "CONFIDENCE_RANK",
    "DEFAULT_HYPOTHESIS_STALE_AFTER",
    "DEFAULT_UNKNOWN_STALE_AFTER",
    "EXACT_ID_MATCH_SCORE",
    "KIND_EVENT",
    "KIND_HYPOTHESIS",
    "KIND_OPERATIONAL_PATTERN",
    "KIND_STABLE_FACT",
    "KIND_UNKNOWN",
    "KIND_WATCH_ITEM",
    "MAX_MODEL_LINKS",
    "ORIGIN_DERIVED",
    "ORIGIN_HUMAN",
    "ORIGIN_OBSERVED",
    "ORIGIN_VERIFIED",
    "REFUTED_DATA_KEY",
    "SCOPE_PRIVATE",
    "SCOPE_PUBLIC",
    "STATUS_ACTIVE",
    "STATUS_STALE",
    "STATUS_SUPERSEDED",
    "VALID_THOUGHT_LINK_RELATIONS",
    "Item",
    "MemoryCellSpec",
    "RefutedRecord",
    "Removed",
    "ScoredItem",
    "ThoughtLink",
    "utc_now",
    "well_typed",
]

# Kinds the engine itself knows by name; every other kind belongs to the host.
KIND_STABLE_FACT: Final = "stable_fact"
"""Established truth about a subject, e.g. a verified root cause. Needs high confidence."""
KIND_OPERATIONAL_PATTERN: Final = "operational_pattern"
"""A recurring behaviour worth remembering."""
KIND_WATCH_ITEM: Final = "watch_item"
"""Something being watched; it ranks higher while active."""
KIND_HYPOTHESIS: Final = "hypothesis"
"""A claim not yet confirmed; it decays quickly."""
KIND_UNKNOWN: Final = "unknown"
"""An open question; it decays."""
KIND_EVENT: Final = "event"
"""Something that happened at a time of its own (``event_date``)."""

ORIGIN_OBSERVED: Final = "observed"
"""Written by code from facts it measured."""
ORIGIN_DERIVED: Final = "derived"
"""Written by a model: a prior claim, never evidence. A cell with no origin is derived."""
ORIGIN_HUMAN: Final = "human"
"""Written by an identified person. Outranks derived."""
ORIGIN_VERIFIED: Final = "verified"
"""Derived, then passed a check."""

SCOPE_PUBLIC: Final = "public"
"""Shared: visible on the graph and in search."""
SCOPE_PRIVATE: Final = "private"
"""Isolated to its owner (the ``user:`` tag): not in shared search, not on the change stream."""

STATUS_ACTIVE: Final = "active"
STATUS_STALE: Final = "stale"
STATUS_SUPERSEDED: Final = "superseded"

REFUTED_DATA_KEY = "refuted"
"""The ``data`` entry :meth:`Store.refute` writes (a :class:`RefutedRecord` as base64 JSON)."""

MAX_MODEL_LINKS = 12
"""Cap on the links one cell accumulates through :meth:`Store.add_link`."""

EXACT_ID_MATCH_SCORE = 100.0
"""Score of an exact id hit: outside the rerank scale, never mistaken for relevance."""

DEFAULT_HYPOTHESIS_STALE_AFTER = _dt.timedelta(hours=24)
"""Deadline stamped onto a hypothesis written without one."""
DEFAULT_UNKNOWN_STALE_AFTER = _dt.timedelta(days=7)
"""Deadline stamped onto an unknown written without one."""

VALID_THOUGHT_LINK_RELATIONS: tuple[str, ...] = (
    "triggers",
    "caused_by",
    "correlates_with",
    "precedes",
    "explains",
    "contradicts",
)
"""The link relations, in the fixed order rejection messages list them."""

CONFIDENCE_RANK = {"high": 3, "medium": 2, "low": 1, "": 0}
"""How much each confidence value is trusted (higher wins)."""

Scope = Literal["public", "private"]
Status = Literal["active", "stale", "superseded"]
Confidence = Literal["high", "medium", "low", ""]
Origin = Literal["observed", "derived", "human", "verified", ""]


def utc_now() -> _dt.datetime:
    """The current time as an aware UTC datetime (the default clock)."""
    return _dt.datetime.now(_dt.UTC)


STORED_REFUSAL: Final = "a stored item is never changed in place: change a clone of it"
"""The :class:`TypeError` a change to a stored item (or one of its links) raises."""


def _refuse_if_stored(model: BaseModel) -> None:
    """Raise before a stored item or link is changed: its fields set is the store's frozen one.

    pydantic sets a field first and records it in the fields set after, so the
    frozen set alone would refuse a change that had already landed.
    """
    if getattr(model.__pydantic_fields_set__, "refuses_changes", False):
        raise TypeError(STORED_REFUSAL)


class ThoughtLink(BaseModel):
    """A directed, weighted association from one cell to another.

    ``relation`` is one of :data:`VALID_THOUGHT_LINK_RELATIONS`; ``weight`` in
    ``(0, 1]`` scales the activation that flows along the link.
    """

    model_config = ConfigDict(extra="forbid")

    def __setattr__(self, name: str, value: Any) -> None:
        _refuse_if_stored(self)
        super().__setattr__(name, value)

    to_id: str
    """The id of the cell linked to."""
    relation: str
    """How the two cells relate, e.g. ``"caused_by"``."""
    weight: float = Field(default=1.0, gt=0.0, le=1.0)
    """Strength of the association; the lowest-weight link is evicted first."""


def _same_instant_in_json(value: _dt.datetime, handler: SerializerFunctionWrapHandler) -> Any:
    """A datetime as JSON that reads back as the same instant, whatever its offset.

    JSON (RFC 3339) writes an offset in whole minutes, so a zone's offset
    with seconds (local mean time before the zones were standardised:
    Paris was +00:09:21 until 1911) would come back some seconds off. Such
    a datetime is written in UTC instead: the same instant, which compares
    equal. Every other datetime is written as it is.
    """
    offset = value.utcoffset()
    if offset is not None and (offset.seconds % 60 or offset.microseconds):
        value = value.astimezone(_dt.UTC)
    return handler(value)


_Stamp = Annotated[AwareDatetime, WrapSerializer(_same_instant_in_json, when_used="json")]
"""A timezone-aware datetime field whose JSON round trip keeps the instant exactly."""


class MemoryCellSpec(BaseModel):
    """The persisted part of a memory item: exactly what reaches storage.

    JSON round trips are exact (``MemoryCellSpec.model_validate_json(
    spec.model_dump_json())`` equals ``spec``). Datetimes must carry a timezone;
    one whose offset has seconds is written in UTC, the same instant.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    """Unique id; the store mints ``id_prefix`` + a ULID when empty."""
    kind: str = ""
    """The category: a ``KIND_*`` constant or a kind of the host's vocabulary."""
    title: str = ""
    """A one-line summary; searched with extra weight."""
    content: str = ""
    """The body of the note."""
    subject: str = ""
    """What or whom the item is about (for a private item: the instance holding it)."""
    scope: Scope = SCOPE_PUBLIC
    """``public`` (shared) or ``private`` (its ``user:`` owner alone)."""
    status: Status = STATUS_ACTIVE
    """``active``, ``stale`` (expired or refuted) or ``superseded``."""
    confidence: Confidence = ""
    """How sure the writer is: ``high``, ``medium``, ``low`` or unset."""
    origin: Origin = ""
    """Who wrote it: ``observed``, ``derived``, ``human`` or ``verified``; unset is derived."""
    tags: list[str] = Field(default_factory=list)
    """Free tags plus reserved prefixes (``tenant/``, ``author/``, ``user:``, ``service/``...)."""
    links: list[ThoughtLink] = Field(default_factory=list)
    """Outbound associations to other cells."""
    supersedes: list[str] = Field(default_factory=list)
    """Ids of cells this one replaced."""
    evidence_refs: list[str] = Field(default_factory=list)
    """What supports the claim: cell ids (optionally ``cell:``-prefixed), URLs, log refs."""
    stale_after: _Stamp | None = None
    """Deadline after which the item reads as stale."""
    event_date: str = ""
    """When the event happened: ``YYYY-MM-DD`` or RFC 3339."""
    data: dict[str, str] = Field(default_factory=dict)
    """Host-owned string attributes (``refuted`` is reserved)."""
    created_at: _Stamp | None = None
    """First write time, stamped by the store."""
    updated_at: _Stamp | None = None
    """Last write time, stamped by the store."""


class Item(MemoryCellSpec):
    """One memory note: the cell spec plus in-process flags that never serialise.

    >>> Item(kind="event", title="deploy", event_date="2024-03-01").title_with_event_time()
    'deploy (2024-03-01)'
    """

    no_embed: bool = Field(default=False, exclude=True)
    """Keep this item out of the vector index (records read by id, never by meaning)."""
    cell_originated: bool = Field(default=False, exclude=True)
    """Loaded from an existing cell (restart or rebuild seed) rather than authored here."""
    links_set: bool = Field(default=False, exclude=True)
    """``links`` is the writer's whole set, even when empty (else upsert keeps old links)."""

    def __setattr__(self, name: str, value: Any) -> None:
        _refuse_if_stored(self)  # a stored item: TypeError(STORED_REFUSAL), nothing changed
        super().__setattr__(name, value)

    def clone(self, **update: Any) -> Item:
        """A copy that shares no list or dict with this item (no re-validation).

        The store's hot path: every write copies its item at least once, so
        this builds the copy directly (no pydantic machinery) and copies a
        link only when there is one.
        """
        d = self.__dict__.copy()
        # The fields read from the copy: the same objects as the attributes
        # (a model keeps every field in its __dict__), without the attribute lookup.
        d["tags"] = list(d["tags"])
        links = d["links"]
        d["links"] = [_copy_link(link) for link in links] if links else []
        d["supersedes"] = list(d["supersedes"])
        d["evidence_refs"] = list(d["evidence_refs"])
        d["data"] = dict(d["data"])
        if update:
            d.update(update)
        new = _new_item(Item)
        _set_dict(new, d)
        _set_fields_set(new, set(self.__pydantic_fields_set__))
        _set_extra(new, None)
        _set_private(new, None)
        return new

    def spec(self) -> MemoryCellSpec:
        """The persisted part alone, as a :class:`MemoryCellSpec`."""
        return MemoryCellSpec.model_validate(self.model_dump())

    def is_expired(self, now: _dt.datetime | None = None) -> bool:
        """Whether the item has a ``stale_after`` deadline that has passed."""
        if self.stale_after is None:
            return False
        return (now or utc_now()) >= self.stale_after

    def is_active(self, now: _dt.datetime | None = None) -> bool:
        """Whether the item is ``active`` and not yet past its deadline."""
        return self.status == STATUS_ACTIVE and not self.is_expired(now)

    def title_with_event_time(self) -> str:
        """The title with :func:`event_time_annotation` of ``event_date`` appended."""
        from memstore.eventdate import event_time_annotation

        return self.title + event_time_annotation(self.event_date)


_SCOPES = frozenset({SCOPE_PUBLIC, SCOPE_PRIVATE})
_STATUSES = frozenset({STATUS_ACTIVE, STATUS_STALE, STATUS_SUPERSEDED})
_CONFIDENCES = frozenset(CONFIDENCE_RANK)
_ORIGINS = frozenset({ORIGIN_OBSERVED, ORIGIN_DERIVED, ORIGIN_HUMAN, ORIGIN_VERIFIED, ""})


def well_typed(item: Item) -> bool:
    """Whether every field of ``item`` holds exactly what the model declares.

    Construction validates, but a field assigned afterwards is not checked
    (pydantic does not validate assignment): ``it.tags = "a,b"`` sticks. A
    writer that must not trust its input re-validates a dump of the item; when
    this returns ``True`` (exact ``str``, ``list``, ``dict``, ``bool``,
    ``float`` and aware ``datetime`` values, choices among the allowed ones,
    link weights in range), that re-validation would return an equal copy, so
    a plain :meth:`Item.clone` does. ``False`` says only "check the slow way".

    >>> it = Item(kind="note", title="x")
    >>> well_typed(it)
    True
    >>> it.tags = ("a",)  # a tuple: validation would make it a list
    >>> well_typed(it)
    False
    """
    d = item.__dict__
    # Unrolled, and the containers' elements only walked when there are any:
    # every write of an item asks this, and the common one holds empty lists.
    if not (
        type(d["id"]) is str
        and type(d["kind"]) is str
        and type(d["title"]) is str
        and type(d["content"]) is str
        and type(d["subject"]) is str
        and type(d["event_date"]) is str
    ):
        return False
    scope, status, confidence, origin = d["scope"], d["status"], d["confidence"], d["origin"]
    if not (
        type(scope) is str
        and scope in _SCOPES
        and type(status) is str
        and status in _STATUSES
        and type(confidence) is str
        and confidence in _CONFIDENCES
        and type(origin) is str
        and origin in _ORIGINS
    ):
        return False
    tags, supersedes, refs = d["tags"], d["supersedes"], d["evidence_refs"]
    if not (type(tags) is list and type(supersedes) is list and type(refs) is list):
        return False
    if tags or supersedes or refs:
        for values in (tags, supersedes, refs):
            for v in values:
                if type(v) is not str:
                    return False
    links = d["links"]
    if type(links) is not list:
        return False
    for link in links:
        if type(link) is not ThoughtLink:
            return False
        ld = link.__dict__
        weight = ld["weight"]
        if type(ld["to_id"]) is not str or type(ld["relation"]) is not str:
            return False
        if type(weight) is not float or not 0.0 < weight <= 1.0:
            return False
    data = d["data"]
    if type(data) is not dict:
        return False
    if data:
        for k, v in data.items():
            if type(k) is not str or type(v) is not str:
                return False
    stale_after, created_at, updated_at = d["stale_after"], d["created_at"], d["updated_at"]
    if not (stale_after is None and created_at is None and updated_at is None):
        for value in (stale_after, created_at, updated_at):
            if value is not None and (type(value) is not _dt.datetime or value.utcoffset() is None):
                return False
    return type(d["no_embed"]) is bool and type(d["links_set"]) is bool


_new_item = Item.__new__
_set_attr = object.__setattr__  # pydantic's own __setattr__ would validate and track
# BaseModel's slots, set through their descriptors: what object.__setattr__ does
# for them, without its lookup of the name on the class.
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_dict = BaseModel.__dict__["__dict__"].__set__
"""A model's ``__dict__`` set through its descriptor: ``object.__setattr__(m, "__dict__", d)``
without the name's lookup on the class and the check of the class's own ``__setattr__``."""
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _copy_link(link: ThoughtLink) -> ThoughtLink:
    """``link.model_copy()`` (a shallow copy) without pydantic's generic copy machinery.

    Its fields are immutable scalars, so the copy shares nothing with the link.
    """
    cls = type(link)
    new = cls.__new__(cls)
    _set_attr(new, "__dict__", link.__dict__.copy())
    _set_attr(new, "__pydantic_fields_set__", set(link.__pydantic_fields_set__))
    extra, private = link.__pydantic_extra__, link.__pydantic_private__
    _set_attr(new, "__pydantic_extra__", None if extra is None else dict(extra))
    _set_attr(new, "__pydantic_private__", None if private is None else dict(private))
    return new


class RefutedRecord(BaseModel):
    """What :meth:`Store.refute` records under ``data["refuted"]``."""

    reason: str
    evidence: list[str] = Field(default_factory=list)
    at: str
    """RFC 3339 UTC time of the refutation."""


class Removed(BaseModel):
    """An item taken out of the store: its id and kind."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: str
    scope: str = SCOPE_PUBLIC
    """The removed item's scope: a private removal is never published to the change hook."""


class ScoredItem(BaseModel):
    """An item with the activation a traversal gave it."""

    item: Item
    score: float
