"""Fewer instructions a write, each shortcut held to exactly what the code it replaces gives.

* ``well_typed`` is unrolled and walks a container's elements only when it
  has any: the same verdict as the loop it replaces, for any field values
  (odd types, wrong choices, naive and aware datetimes, links and data).
* ``validate_base`` reads the fields from the item's ``__dict__`` once: the
  same reason (or the same exception type) as before for any item, new or
  replacing a stored one.
* The SQLite journal binds an open row's parameters as exact ints and
  strings (``NULL`` written in the statement for the open row's ``to_lsn``
  and ``to_node``): the same values, of the same SQLite types, land in the
  table as through the statement that binds every column.
* The update-time list takes a write's item, the newest, at its end without
  a search (``add_by_update``): the same list, layout and positional index
  included, as ``SortedKeyList.add`` builds, for any run of stamps (older,
  equal, newer, other zones, none) and positional reads between them.
* A write clocks a stable fact's or a pattern's retention only when the host
  gave one, and stamps an untagged item's origin without looking for an
  author tag: the same items stored.

The code replaced is kept here, as it was, as the reference.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedKeyList
from test_validate_fast import _ODD, _maybe_odd
from test_validate_fast import items as odd_items

from memstore import Config, Item, Store, ThoughtLink
from memstore import validate as v
from memstore._updatekey import add_by_update, update_key
from memstore.item import (
    CONFIDENCE_RANK,
    ORIGIN_DERIVED,
    ORIGIN_HUMAN,
    ORIGIN_OBSERVED,
    ORIGIN_VERIFIED,
    SCOPE_PRIVATE,
    SCOPE_PUBLIC,
    STATUS_ACTIVE,
    STATUS_STALE,
    STATUS_SUPERSEDED,
    well_typed,
)
from memstore.journal import sqlite as sq
from memstore.journal.version import Row
from memstore.tags import restored_origin
from memstore.vocabulary import Vocabulary

_LIST_FIELDS = ("tags", "supersedes", "evidence_refs")
_CHOICES = (
    ("scope", frozenset({SCOPE_PUBLIC, SCOPE_PRIVATE})),
    ("status", frozenset({STATUS_ACTIVE, STATUS_STALE, STATUS_SUPERSEDED})),
    ("confidence", frozenset(CONFIDENCE_RANK)),
    ("origin", frozenset({ORIGIN_OBSERVED, ORIGIN_DERIVED, ORIGIN_HUMAN, ORIGIN_VERIFIED, ""})),
)
_TIMES = ("stale_after", "created_at", "updated_at")


def _well_typed_before(item: Item) -> bool:
    """``well_typed`` as it was."""
    d = item.__dict__
    if not (
        type(d["id"]) is str
        and type(d["kind"]) is str
        and type(d["title"]) is str
        and type(d["content"]) is str
        and type(d["subject"]) is str
        and type(d["event_date"]) is str
    ):
        return False
    for name, allowed in _CHOICES:
        value = d[name]
        if type(value) is not str or value not in allowed:
            return False
    for name in _LIST_FIELDS:
        values = d[name]
        if type(values) is not list:
            return False
        for value in values:
            if type(value) is not str:
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
    for key, value in data.items():
        if type(key) is not str or type(value) is not str:
            return False
    for name in _TIMES:
        value = d[name]
        if value is not None and (type(value) is not _dt.datetime or value.utcoffset() is None):
            return False
    return type(d["no_embed"]) is bool and type(d["links_set"]) is bool


def _validate_base_before(vocabulary: Vocabulary, item: Item, previous: Item | None = None) -> str:
    """``validate_base`` as it was (attributes read one by one)."""
    id, kind, title, content = item.id, item.kind, item.title, item.content
    if id and (len(id) > v.MAX_ID_CHARS or v._bad_id(id)):
        return v._id_shape_rejection(id)
    if id and previous is None and not id.isascii():
        why = v.new_id_rejection(id)
        if why:
            return why
    if not kind:
        return "kind is required"
    if not v._valid_kind(kind):
        return v._KIND_RULE.format(kind=kind[:80])
    if (not title or title.isspace()) and (not content or content.isspace()):
        return "title and content are both empty"
    if len(item.title) > v.MAX_TITLE_CHARS:
        return f"title is {len(item.title)} characters; at most {v.MAX_TITLE_CHARS}"
    if len(item.content) > v.MAX_CONTENT_CHARS:
        return f"content is {len(item.content)} characters; at most {v.MAX_CONTENT_CHARS}"
    why = v._size_rejection(item)
    if why:
        return why
    if kind in v._KINDS_WITH_RULES:
        if (
            kind == v.KIND_STABLE_FACT
            and item.confidence != "high"
            and not vocabulary.fact_confidence_optional
        ):
            return f"kind {kind!r} needs confidence 'high', got {item.confidence!r}"
        if kind in (v.KIND_HYPOTHESIS, v.KIND_UNKNOWN) and item.stale_after is None:
            return f"kind {kind!r} needs a deadline (stale_after)"
        if kind == v.KIND_EVENT and not item.event_date:
            return "kind 'event' needs an event_date (YYYY-MM-DD or RFC 3339)"
    if item.stale_after is not None or item.created_at is not None or item.updated_at is not None:
        why = v.naive_datetime_rejection(item)
        if why:
            return why
    if item.event_date and not v._valid_event_date(item.event_date):
        return (
            f"event_date {item.event_date[:80]!r} is neither YYYY-MM-DD nor RFC 3339 "
            "(in UTC, within the years 1-9999)"
        )
    if item.scope == v.SCOPE_PRIVATE and not v.private_owner(item):
        return "a private item needs its owner's tag (user:<hash>)"
    if len(item.tags) > v.MAX_TAGS:
        return f"{len(item.tags)} tags; at most {v.MAX_TAGS}"
    partitions = 0
    for tag in item.tags:
        if tag.startswith(v.PARTITION_TAG_PREFIX):  # first: a padded name is said as a partition
            why = v._padded_partition(tag, previous)
            if why:
                return why
        if not tag or tag != tag.strip() or "," in tag or "\n" in tag or "\r" in tag:
            return f"tag {tag[:80]!r} is empty, padded, or holds a comma or newline"
        if "\x00" in tag:  # a partition column cannot hold it (PostgreSQL text refuses NUL)
            return f"tag {tag[:80]!r} holds a NUL character"
        if not tag.isascii() and (previous is None or tag not in previous.tags):
            found = v.format_character(tag)
            if found:
                return f"tag {tag[:80]!r} holds {v.format_named(found)}: {v.FORMAT_RULE} in a tag"
        if tag.startswith(v.PARTITION_TAG_PREFIX):
            partitions += 1
            if tag in v._NO_PARTITION_TAGS:
                return (
                    f"tag {tag!r} names no partition ('{v.PARTITION_ALL}' means every "
                    "partition, on reads only; '' is none)"
                )
            if len(tag) - len(v.PARTITION_TAG_PREFIX) > v.MAX_NAME_CHARS:  # no read could name it
                return (
                    f"partition tag {tag[:40]!r}... names a partition of "
                    f"{len(tag) - len(v.PARTITION_TAG_PREFIX)} characters; "
                    f"at most {v.MAX_NAME_CHARS}"
                )
    if partitions > 1:
        return f"at most one partition tag ({v.PARTITION_TAG_PREFIX}...), got {partitions}"
    for link in item.links:
        why = v.thought_link_rejection(item.id, link)
        if why:
            return why
    for key in item.data:
        if not key:
            return "data keys must be non-empty"
    return ""


_EAST = _dt.timezone(_dt.timedelta(hours=5, minutes=30))
_stamps = st.one_of(
    st.none(),
    st.sampled_from(
        [
            _dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_dt.UTC),
            _dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_EAST),
            _dt.datetime(1, 1, 1, tzinfo=_EAST),  # before year 1 in UTC
            _dt.datetime(2026, 1, 2),  # naive: assigned, never validated
        ]
    ),
    _ODD,
)


# Built once, not on every draw (Hypothesis validates each new strategy, which
# costs more than the draw): the same strategies draw the same items.
_ODD_ITEMS = odd_items()
_KEEP = object()
"""Drawn where the item keeps the value test_validate_fast drew."""
_KINDS = st.one_of(
    st.just(_KEEP),
    st.sampled_from(["stable_fact", "hypothesis", "unknown", "event", "bad kind", ""]),
)
_CHOSEN = [
    (name, _maybe_odd(st.sampled_from([*sorted(allowed), "other"]))) for name, allowed in _CHOICES
]
_EVENT_DATES = st.one_of(st.just(_KEEP), st.sampled_from(["2024-02-29", "2023-02-29", "x"]))
_EXTRA_TAGS = st.lists(
    st.sampled_from(["tenant/ops", "tenant/ x", "tenant/*", "user:abc", "author/ann", "a,b", " t"]),
    max_size=3,
)
_WEIGHTS = st.sampled_from([0.5, 1.0, 0.0, 2.0, float("nan"), 1])
_RELATIONS = st.sampled_from(["explains", "nope", 3])
_NO_EMBED = st.sampled_from([False, True, 0])
_LINKS_SET = st.sampled_from([False, True, None])


@st.composite
def items(draw: st.DrawFn) -> Item:
    """Any item: test_validate_fast's (odd texts and containers), with every other field varied."""
    it = draw(_ODD_ITEMS)
    d = it.__dict__
    kind = draw(_KINDS)
    if kind is not _KEEP:
        d["kind"] = kind
    for name, chosen in _CHOSEN:
        d[name] = draw(chosen)
    for name in _TIMES:
        d[name] = draw(_stamps)
    event_date = draw(_EVENT_DATES)
    if event_date is not _KEEP:
        d["event_date"] = event_date
    if draw(st.booleans()) and type(d["tags"]) is list:
        d["tags"] = [*d["tags"], *draw(_EXTRA_TAGS)]
    links = d["links"]
    if draw(st.booleans()) and type(links) is list and links and type(links[0]) is ThoughtLink:
        link = links[0]
        link.__dict__["weight"] = draw(_WEIGHTS)
        link.__dict__["relation"] = draw(_RELATIONS)
    d["no_embed"] = draw(_NO_EMBED)
    d["links_set"] = draw(_LINKS_SET)
    return it


def _outcome(fn: Any, *args: Any) -> object:
    try:
        return fn(*args)
    except Exception as e:  # the same failure, by type
        return type(e)


@settings(max_examples=1500, deadline=None)
@given(items())
def test_well_typed_gives_the_verdict_it_gave(item: Item) -> None:
    assert _outcome(well_typed, item) == _outcome(_well_typed_before, item)


@settings(max_examples=1500, deadline=None)
@given(items(), st.booleans(), st.booleans())
def test_validate_base_gives_the_reason_it_gave(
    item: Item, replaces: bool, optional_confidence: bool
) -> None:
    vocab = Vocabulary(fact_confidence_optional=optional_confidence)
    previous = None
    if replaces:  # a stored item with this id: its id and tags keep their place
        previous = Item(kind="note", title="p", tags=["tenant/ x", "a\u200bb"])
    assert _outcome(v.validate_base, vocab, item, previous) == _outcome(
        _validate_base_before, vocab, item, previous
    )


def test_validate_base_still_names_what_is_wrong() -> None:
    vocab = Vocabulary()
    cases = {
        "kind 'stable_fact' needs confidence 'high', got 'low'": Item(
            kind="stable_fact", title="x", confidence="low"
        ),
        "kind 'event' needs an event_date (YYYY-MM-DD or RFC 3339)": Item(kind="event", title="x"),
        "a private item needs its owner's tag (user:<hash>)": Item(
            kind="note", title="x", scope="private"
        ),
        "": Item(kind="note", title="x", tags=["tenant/ops"]),
    }
    for why, item in cases.items():
        assert v.validate_base(vocab, item) == why == _validate_base_before(vocab, item)


_SCHEMA = sq._MIGRATIONS[0]
_ids = st.sampled_from(["a", "b", "note-1", "x" * 40])
rows = st.builds(
    Row,
    id=_ids,
    lsn=st.integers(0, 2**62),
    node=st.integers(0, 65535),
    to_lsn=st.one_of(st.none(), st.none(), st.integers(0, 2**62)),
    to_node=st.one_of(st.none(), st.none(), st.integers(0, 65535)),
    op=st.sampled_from(["upsert", "delete"]),
    kind=st.sampled_from(["note", "event"]),
    partition=st.sampled_from(["", "ops"]),
    shared=st.one_of(st.booleans(), st.booleans(), st.sampled_from([0, 1])),
    item=st.one_of(st.none(), st.text(st.characters(exclude_categories=("Cs",)), max_size=5)),
)


def _table(insert: Any, batch: list[Row]) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for statement in _SCHEMA:
        conn.execute(statement)
    insert(conn, batch)
    columns = sq._COLUMNS.split(", ")
    typed = ", ".join(f"{c}, typeof({c})" for c in columns)
    return conn.execute(f"SELECT {typed} FROM versions ORDER BY id, lsn, node").fetchall()


def _insert_before(conn: sqlite3.Connection, batch: list[Row]) -> None:
    """The ``INSERT`` as it was: every column a parameter."""
    conn.executemany(
        f"INSERT INTO versions ({sq._COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [sq._values(r) for r in batch],
    )


def _distinct(batch: list[Row]) -> list[Row]:
    seen: dict[tuple[str, int, int], Row] = {}
    for r in batch:
        seen.setdefault((r.id, r.lsn, r.node), r)
    return list(seen.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(rows, min_size=1, max_size=8).map(_distinct))
def test_the_journal_stores_the_rows_it_stored(batch: list[Row]) -> None:
    assert _table(sq._insert_rows, batch) == _table(_insert_before, batch)


def test_a_write_s_rows_take_the_exact_binding() -> None:
    """What the journal inserts for a write is what the open-row statement takes."""
    seen: list[str] = []
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.set_trace_callback(seen.append)
    for statement in _SCHEMA:
        conn.execute(statement)
    open_row = Row("a", 5, 1, None, None, "upsert", "note", "ops", True, "{}")
    sq._insert_rows(conn, [open_row])
    assert any("NULL,NULL" in s for s in seen)
    assert conn.execute("SELECT shared, typeof(shared), to_lsn FROM versions").fetchall() == [
        (1, "integer", None)
    ]


class _Clock:
    """A clock that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> _dt.datetime:
        self.calls += 1
        return _dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_dt.UTC)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["stable_fact", "operational_pattern", "hypothesis", "unknown", "note"]),
    st.one_of(st.none(), st.sampled_from([0, 3])),
    st.lists(st.sampled_from(["author/ann", "tenant/ops", "t"]), max_size=2, unique=True),
    st.sampled_from(["", "observed"]),
)
def test_a_write_stamps_what_it_stamped(
    kind: str, days: int | None, tags: list[str], origin: str
) -> None:
    clock = _Clock()
    retention = None if days is None else (lambda partition: days)
    store = Store(Config(clock=clock, retention=retention))
    item = Item(kind=kind, title="x", confidence="high", tags=tags, origin=origin)
    stored = store.upsert(item)
    # The deadline as stamp_knowledge_retention gives it from the write's clock.
    expected = item.clone()
    v.stamp_knowledge_retention(expected, retention, clock())
    assert stored.stale_after == expected.stale_after
    assert stored.origin == (origin or restored_origin(item))
    # The clock was read for the stamp, and for the deadline only when one can come of it.
    deadline = kind in ("hypothesis", "unknown") or (days is not None and kind in v.RETAINED_KINDS)
    assert clock.calls == 1 + deadline + 1  # the write's stamp, the deadline, this test's own


_T0 = _dt.datetime(2026, 1, 2, tzinfo=_dt.UTC)
_steps = st.tuples(
    st.integers(-3, 40),  # seconds after the last stamp (now and then before it)
    st.sampled_from(["utc", "utc", "utc", "east", "none"]),
    st.booleans(),  # a positional read after it (builds the list's index)
)


def _layout(order: SortedKeyList[Item, tuple[float, str]]) -> tuple[object, ...]:
    parts = ("_lists", "_keys", "_maxes", "_index", "_len", "_offset")
    return tuple(repr(getattr(order, name)) for name in parts)


@settings(max_examples=200, deadline=None)
@given(st.lists(_steps, max_size=120), st.sampled_from([4, 1000]))
def test_the_update_order_takes_the_newest_as_add_does(
    steps: list[tuple[int, str, bool]], load: int
) -> None:
    fast: SortedKeyList[Item, tuple[float, str]] = SortedKeyList(key=update_key)
    slow: SortedKeyList[Item, tuple[float, str]] = SortedKeyList(key=update_key)
    fast._reset(load)  # type: ignore[attr-defined]  # small sublists: splits happen
    slow._reset(load)  # type: ignore[attr-defined]
    at = _T0
    for n, (seconds, zone, read) in enumerate(steps):
        at = at + _dt.timedelta(seconds=seconds)
        stamp = {"utc": at, "east": at.astimezone(_EAST), "none": None}[zone]
        item = Item(id=f"i{n % 7}{n}", kind="note", title="t", updated_at=stamp)
        add_by_update(fast, item)
        slow.add(item)
        if read:
            assert fast[len(fast) // 2] is slow[len(slow) // 2]
        assert _layout(fast) == _layout(slow)
    fast._check()  # type: ignore[attr-defined]
