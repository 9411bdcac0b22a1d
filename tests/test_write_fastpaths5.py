"""The lexical index's apply, a column at a time, held to what the loops it replaces gave.

* :func:`memstore._lexindex._documents` builds a batch's documents from the
  items' ``__dict__`` by C-level maps and ``zip`` (the event dates' words
  looked up for every item, ``None`` included): the same documents, in the
  same order and of the same types, as the per-put loop it replaces, for any
  mix of event dates, ``index_id`` flags and writers' words.
* :meth:`LexicalIndex.flush` takes the puts by ``filter``, the id flags by
  set updates, and the filter columns from the ``__dict__`` s read once (a
  column nobody sets written as one scalar, what a list of tags places an
  item by worked out once per distinct list of a batch): the same index
  (lexicon, texts, id flags, every column, the code tables in the same
  order) as the old apply, for any run of puts, re-puts and removes read now
  and then.
* :func:`memstore.text.event_date_words` reads a bare ASCII day with
  ``date.fromisoformat`` alone (no import, no pattern, no datetime): the
  same words as through :func:`~memstore.eventdate.parse_event_date`, for
  any day, real or not, and any other text.
* The store's ``_set`` reads a new item's fields from its ``__dict__`` once
  (and decides whether it is indexable from them, as ``_indexable`` does):
  the same indexes (items, private owners, backlinks, citations, claims,
  the update order, the lexicon and its id flags) as before, for any run of
  writes and deletes of public, private, stale and data items with links,
  references and supersedes.
* :meth:`WriteQueue.put` answers how many writes wait, which the index's put
  asked of a second call before, and builds its record without the named
  tuple's Python ``__new__``.

The code replaced is kept here, as it was, as the reference.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store, ThoughtLink
from memstore import _lexindex as lx
from memstore._gc import bulk_load
from memstore._lexindex import LexicalIndex
from memstore._lexqueue import Queued, WriteQueue
from memstore._linkers import link as add_linker
from memstore._linkers import unlink
from memstore._shared import share_containers
from memstore._store_base import _cited_id, _discard, _same_exact_keys
from memstore._updatekey import add_by_update
from memstore._wordbatch import TextDoc
from memstore.errors import MemstoreError
from memstore.eventdate import parse_event_date
from memstore.item import SCOPE_PRIVATE
from memstore.tags import SHARED_TAG, partition_from_tags, private_owner, service_tag_value
from memstore.text import _MONTHS, event_date_words, words, words_many
from memstore.vocabulary import Vocabulary
from tests.conftest import FakeClock

_INF = float("inf")


# ---------------------------------------------------------------- the reference


def old_documents(puts: Sequence[Queued]) -> list[TextDoc]:
    id_words = iter(words_many([q.item.id for q in puts if q.index_id]))
    docs: list[TextDoc] = []
    for q in puts:
        item = q.item
        title, content = q.words if q.words is not None else (item.title, item.content)
        when = item.event_date
        extra: Sequence[str] = lx._date_words(when) if when else ()
        if q.index_id:
            extra = [*extra, *next(id_words)]
        docs.append((item.id, title, content, extra))
    return docs


def old_event_date_words(event_date: str) -> list[str]:
    when = parse_event_date(event_date)
    if when is None:
        return []
    return [_MONTHS[when.month - 1], str(when.year)]


class OldApplyIndex(LexicalIndex):
    """A :class:`LexicalIndex` applying its queue as the loops before this change did."""

    def flush(self) -> None:
        if not self._queue:
            return
        with self._lock, bulk_load(collect=False):
            if not self._queue:
                return
            lex = self._lexicon
            text, with_id = self._text, self._with_id
            puts: list[Queued] = []
            for id, queued in self._queue.take().items():
                if queued is not None:
                    puts.append(queued)
                elif text.pop(id, None) is not None:
                    with_id.discard(id)
                    lex.remove(id)
            if not puts:
                return
            fresh = [q for q in puts if q.reindex]
            if fresh:
                lex.index_texts(old_documents(fresh))
            items = [q.item for q in puts]
            ids = [it.id for it in items]
            text.update(zip(ids, items, strict=True))
            for q in puts:
                if q.index_id:
                    with_id.add(q.item.id)
                else:
                    with_id.discard(q.item.id)
            self._old_set_columns(lex.slots_of(ids), items)
            self._writes += len(puts)

    def _old_set_columns(self, slots: list[int], items: list[Item]) -> None:
        self._grow(max(slots) + 1)
        at = np.array(slots, np.intp)
        fields = [it.__dict__ for it in items]
        self._kind[at] = self._kinds.codes([f["kind"] for f in fields])
        self._subject[at] = self._subjects.codes([f["subject"] for f in fields])
        if any(f["tags"] for f in fields):
            code = self._subjects.code
            part = self._partitions.code
            self._service[at] = [
                code(service_tag_value(it) or "") if it.tags else 0 for it in items
            ]
            self._partition[at] = [part(partition_from_tags(it.tags)) for it in items]
            self._shared[at] = [SHARED_TAG in it.tags for it in items]
        else:
            self._service[at] = 0
            self._partition[at] = 0
            self._shared[at] = False
        self._updated[at] = [
            -_INF if f["updated_at"] is None else f["updated_at"].timestamp() for f in fields
        ]
        self._stale[at] = [
            _INF if f["stale_after"] is None else f["stale_after"].timestamp() for f in fields
        ]


# ---------------------------------------------------------------- strategies

T0 = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
_IDS = ["n0", "n1", "n2", "Api-Gateway_7", "deploy.2026"]
_TEXTS = ["payment timeout", "deploy retry queue", "", "Café naïve", "v2.3.1 at 10:30", "api"]
_DATES = ["", "2026-03-01", "2023-06-27T13:56:00Z", "not a date", "May 2024"]
_TAGS = [
    [],
    ["tenant/acme"],
    ["shared"],
    ["service/billing", "tenant/beta"],
    ["x", "tenant/acme", "tenant/beta"],
    ["service/acme", "shared", "service/deploy"],
]
_WHEN = [None, T0, T0 + _dt.timedelta(days=3), _dt.datetime(2025, 5, 5, 12, tzinfo=_dt.UTC)]

items = st.builds(
    lambda id, title, content, date, kind, subject, tags, updated, stale: Item(
        id=id,
        kind=kind,
        title=title,
        content=content,
        event_date=date,
        subject=subject,
        tags=tags,
        updated_at=updated,
        stale_after=stale,
    ),
    st.sampled_from(_IDS),
    st.sampled_from(_TEXTS),
    st.sampled_from(_TEXTS),
    st.sampled_from(_DATES),
    st.sampled_from(["note", "fact"]),
    st.sampled_from(["", "billing", "acme"]),
    st.sampled_from(_TAGS),
    st.sampled_from(_WHEN),
    st.sampled_from(_WHEN),
)


@st.composite
def queued(draw: st.DrawFn) -> Queued:
    item = draw(items)
    split = (words(item.title), words(item.content)) if draw(st.booleans()) else None
    return Queued(item, draw(st.booleans()), draw(st.booleans()), split)


# ---------------------------------------------------------------- the tests


@settings(max_examples=400, deadline=None)
@given(st.lists(queued(), max_size=12))
def test_documents_are_the_ones_the_loop_built(puts: list[Queued]) -> None:
    fields = [q.item.__dict__ for q in puts]
    new = lx._documents(puts, fields)
    old = old_documents(puts)
    assert new == old
    # The same types too (the compiled pass reads a title or content as a text or its words).
    assert [tuple(map(type, d)) for d in new] == [tuple(map(type, d)) for d in old]


_op = st.one_of(
    st.tuples(st.just("put"), items, st.booleans(), st.booleans()),
    st.tuples(st.just("remove"), st.sampled_from(_IDS)),
    st.tuples(st.just("flush")),
)


def _state(index: LexicalIndex) -> dict[str, Any]:
    index.flush()
    lex = index._lexicon
    n = lex.capacity
    out: dict[str, Any] = {
        "ids": list(lex._ids),
        "texts": list(lex._doc_text),
        "ntitle": list(lex._doc_ntitle),
        "df": dict(lex._df),
        "content": {w: a.tolist() for w, a in lex._postings.items() if a.size},
        "title": {w: a.tolist() for w, a in lex._title_postings.items() if a.size},
        "text": {id: it for id, it in index._text.items()},
        "with_id": set(index._with_id),
        "writes": index._writes,
    }
    for name in index._ARRAYS:
        out[name] = getattr(index, name)[:n].tolist()
    for name in lx._CODE_TABLES:
        out[name] = dict(getattr(index, name)._code)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=40))
def test_the_apply_leaves_the_index_the_old_apply_left(ops: list[tuple[Any, ...]]) -> None:
    new, old = LexicalIndex(compact_min=4), OldApplyIndex(compact_min=4)
    for op in ops:
        for index in (new, old):
            if op[0] == "put":
                _, item, index_id, split_first = op
                if split_first:  # the writer's words, as the store's near-duplicate check
                    index.split(item)
                index.put(item, index_id)
            elif op[0] == "remove":
                index.remove(op[1])
            else:
                index.flush()
    assert _state(new) == _state(old)
    for id in _IDS:
        assert (id in new) == (id in old)


def test_the_queue_answers_how_many_writes_wait() -> None:
    q = WriteQueue()
    a, b = Item(id="a", kind="note", title="one"), Item(id="b", kind="note", title="two")
    assert q.put(a, False, indexed=None, indexed_flag=False) == 1
    assert q.put(b, True, indexed=None, indexed_flag=False) == 2
    assert q.put(b, True, indexed=None, indexed_flag=False) == 2  # the same put: no change
    q.remove("a", indexed=False)
    assert q.put(a.clone(title="three"), False, indexed=None, indexed_flag=False) == 2
    taken = q.take()
    assert [type(e) for e in taken.values()] == [Queued, Queued]
    assert taken["b"] == Queued(b, True, True, None)
    assert taken["b"].reindex and taken["b"].item is b


_digit = st.sampled_from("0123456789١३０")  # ASCII, Arabic-Indic, Devanagari, fullwidth
_days = st.builds(
    lambda y, m, d, sep: f"{y}{sep}{m}{sep}{d}",
    st.integers(0, 10000).map(lambda y: f"{y:04d}"),
    st.integers(0, 13).map(lambda m: f"{m:02d}"),
    st.integers(0, 32).map(lambda d: f"{d:02d}"),
    st.sampled_from(["-", "-", "-", "/", "_"]),
)
_near_days = st.lists(_digit, min_size=8, max_size=8).map(
    lambda d: f"{''.join(d[:4])}-{''.join(d[4:6])}-{''.join(d[6:])}"
)
_times = st.builds(
    lambda day, t, z: f"{day}{t}{z}",
    _days,
    st.sampled_from(["T00:00:00", "t23:59:59", " 12:30:00", "T10:30:00.123456789"]),
    st.sampled_from(["Z", "z", "+14:00", "-12:00", "+00:00", ""]),
)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(_days, _near_days, _times, st.text(max_size=12)))
def test_event_date_words_are_the_parsed_date_s(event_date: str) -> None:
    assert event_date_words(event_date) == old_event_date_words(event_date)


class OldSetStore(Store):
    """A :class:`Store` whose ``_set`` is the code before this change."""

    def _set(self, id: str, new: Item | None) -> None:  # the code before, as it was
        """Make ``new`` the stored state of ``id`` (``None`` deletes) in every index."""
        if new is not None:
            share_containers(new)  # first: it never raises, and nothing has changed yet
        old = self._items.get(id)
        if self._tally is not None:
            if old is not None:
                self._tally.remove(old)
            if new is not None:
                self._tally.add(new)
        if self._anchors is not None:
            if old is not None:
                self._anchors.remove(old)
            if new is not None:
                self._anchors.add(new)
        if old is not None:
            self._by_update.remove(old)
            if old.scope == SCOPE_PRIVATE:
                _discard(self._private, private_owner(old), id)
            if old.links:
                for link in old.links:
                    unlink(self._backlinks, self._linker_order, link.to_id, id)
            if old.evidence_refs:
                for ref in old.evidence_refs:
                    _discard(self._citations, _cited_id(ref), id)
            if old.supersedes:
                for ref in old.supersedes:
                    _discard(self._claims, ref, id)
            if id in self._index_id and (new is None or not _same_exact_keys(old, new)):
                self._unexact(id, old)
        if new is None:
            self._dedup_cache.forget(id)
            self._items.pop(id, None)
            self._lex.remove(id)
            self._index_id.pop(id, None)
            return
        self._items[id] = new
        add_by_update(self._by_update, new)
        if new.scope == SCOPE_PRIVATE:
            self._private.setdefault(private_owner(new), set()).add(id)
        for link in new.links:
            add_linker(self._backlinks, self._linker_order, link.to_id, id)
        for ref in new.evidence_refs:
            self._citations.setdefault(_cited_id(ref), set()).add(id)
        for ref in new.supersedes:
            self._claims.setdefault(ref, set()).add(id)
        if self._indexable(new):
            known = self._index_id.get(id)  # a function of the id alone: derived once
            was_indexed = known is not None
            index_id = self._index_id_text(id) if known is None else known
            self._lex.put(new, index_id)
            self._index_id[id] = index_id
            if not was_indexed or old is None or not _same_exact_keys(old, new):
                self._exact_todo.add(id)
        else:
            if id in self._index_id and old is not None and _same_exact_keys(old, new):
                self._unexact(id, old)  # kept above while it stayed indexed
            self._lex.remove(id)
            self._index_id.pop(id, None)


_SET_IDS = ["a", "b", "c"]
_set_op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(_SET_IDS),
        st.sampled_from(["note", "fact", "record"]),
        st.sampled_from(["public", "private"]),
        st.sampled_from(["active", "stale"]),
        st.lists(st.sampled_from(_SET_IDS), max_size=2, unique=True),
        st.lists(st.sampled_from(["a", "b#1", "doc:x"]), max_size=2, unique=True),
        st.sampled_from(["payment timeout", "deploy", ""]),
        st.sampled_from([[], ["service/billing"], ["author/ann"], ["user:ab12"], ["user:cd34"]]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(_SET_IDS)),
)


def _store_state(store: Store) -> dict[str, Any]:
    return {
        "items": {id: it.model_dump() for id, it in store._items.items()},
        "private": {k: set(v) for k, v in store._private.items() if v},
        "backlinks": {k: v for k, v in store._backlinks.items() if v},
        "citations": {k: set(v) for k, v in store._citations.items() if v},
        "claims": {k: set(v) for k, v in store._claims.items() if v},
        "by_update": [it.id for it in store._by_update],
        "index_id": dict(store._index_id),
        "exact_todo": set(store._exact_todo),
        "lex": sorted(store._lex._text),
        "with_id": set(store._lex._with_id),
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(_set_op, max_size=25))
def test_set_leaves_the_indexes_the_old_set_left(ops: list[tuple[Any, ...]]) -> None:
    def make(cls: type[Store]) -> tuple[Store, FakeClock]:
        clock = FakeClock()
        vocab = Vocabulary(data_kinds=lambda kind: kind == "record")
        return cls(Config(clock=clock, vocabulary=vocab, subject="me")), clock

    (new, new_clock), (old, old_clock) = make(Store), make(OldSetStore)
    for op in ops:
        outcomes = []
        for store, clock in ((new, new_clock), (old, old_clock)):
            clock.advance(_dt.timedelta(seconds=1))
            if op[0] == "delete":
                outcomes.append(store.delete(op[1]))
                continue
            _, id, kind, scope, status, links, refs, title, tags = op
            others = [to for to in links if to != id]
            item = Item(
                id=id,
                kind=kind,
                scope=scope,
                status=status,
                title=title or "t",
                content=title,
                links=[ThoughtLink(to_id=to, relation="supports") for to in others],
                evidence_refs=refs,
                supersedes=others[:1],
                tags=tags,
            )
            try:
                store.upsert(item)
                outcomes.append(None)
            except MemstoreError as e:  # a refused write: the same refusal on both sides
                outcomes.append(type(e).__name__)
        assert outcomes[0] == outcomes[1]
    assert _store_state(new) == _store_state(old)
