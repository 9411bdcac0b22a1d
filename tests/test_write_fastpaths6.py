"""The journal's rows built a group at a time, held to what the per-row builder gave.

:func:`memstore.journal.version.group_rows` builds a write group's rows in one
loop (the stamp packed once, a plain item's fields read from its ``__dict__``,
its partition and ``shared`` flag worked out once for a run of items sharing
one tags list, its JSON written without ``_item_text``'s frame). For any group
of upserts and deletes (items of any text, tags, datetimes at any offset,
``no_embed``, subclasses; tags lists shared between items or not; ids created
and removed within the group) it gives the same rows, field by field and of
the same types, as the loop of :meth:`Row.of` it replaces, kept here as the
reference. Through a real store and SQLite journal, the rows on disk are the
ones the reference builds from the stored items.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Store
from memstore._lexindex import LexicalIndex
from memstore._lexqueue import QUEUE_MAX
from memstore.config import Change
from memstore.journal import base
from memstore.journal.base import JournalBase
from memstore.journal.hlc import Hlc, Lsn
from memstore.journal.sqlite import SqliteJournal
from memstore.journal.version import Row, group_rows
from tests.test_write_fastpaths2 import items


def _group_rows_before(first: dict[str, Change], last: dict[str, Change], hlc: Hlc) -> list[Row]:
    """The rows of a group as ``JournalBase._rows_for`` built them: ``Row.of`` per id."""
    rows: list[Row] = []
    for id, c in last.items():
        if c.op == "upsert":
            rows.append(Row.of(id, hlc, "upsert", c.kind, c.item, c.item))
        elif first[id].previous is not None:  # else born and gone within the group
            rows.append(Row.of(id, hlc, "delete", c.kind, None, c.previous))
    return rows


def _typed(rows: list[Row]) -> list[tuple[tuple[type, object], ...]]:
    """Each row's fields with their exact types (``True`` and ``1`` told apart)."""
    fields = ("id", "lsn", "node", "to_lsn", "to_node", "op", "kind", "partition", "shared", "item")
    return [tuple((type(getattr(r, f)), getattr(r, f)) for f in fields) for r in rows]


class Loud(Item):
    """A subclass with its own JSON: it must keep going through ``Row.of``."""

    def model_dump_json(self, **_: Any) -> str:
        return '{"loud":true}'


_TAGS = st.lists(st.sampled_from(["tenant/a", "tenant/b", "shared", "user:x", "t", ""]), max_size=4)
_IDS = st.sampled_from(["a", "b", "c", "d", "e"])


@st.composite
def groups(draw: st.DrawFn) -> list[Change]:
    """A group of changes: upserts and deletes of a few ids, tags lists often shared."""
    pool = draw(st.lists(_TAGS, min_size=1, max_size=3))  # the lists items share
    out: list[Change] = []
    for _ in range(draw(st.integers(0, 12))):
        id = draw(_IDS)
        item = draw(items)
        if draw(st.booleans()):
            item = Loud.model_validate(item.model_dump() | {"no_embed": item.no_embed})
        item.__dict__["tags"] = draw(st.sampled_from(pool)) if draw(st.booleans()) else draw(_TAGS)
        previous = draw(st.none() | items)
        if draw(st.integers(0, 3)) == 0:
            out.append(Change("delete", None, id, item.kind, previous=previous))
        else:
            out.append(Change("upsert", item, id, item.kind, previous=previous))
    return out


@settings(max_examples=400, deadline=None)
@given(groups(), st.integers(0, 2**40), st.integers(0, 2**16 - 1), st.integers(0, 1023))
def test_a_group_s_rows_are_the_rows_row_of_built(
    changes: list[Change], wall: int, counter: int, node: int
) -> None:
    first: dict[str, Change] = {}
    last: dict[str, Change] = {}
    for c in changes:
        first.setdefault(c.id, c)
        last[c.id] = c
    hlc = Hlc(wall, counter, node)
    assert _typed(group_rows(first, last, hlc)) == _typed(_group_rows_before(first, last, hlc))


def test_the_rows_on_disk_are_the_reference_s(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    store = Store()
    journal = SqliteJournal(db)
    journal.attach(store)
    with store.batch():  # one group: created, replaced, created and deleted, tenants mixed
        for i in range(30):
            tags = ["tenant/a"] if i % 3 == 0 else ["tenant/b", "shared"] if i % 3 == 1 else []
            store.upsert(Item(id=f"n{i}", kind="note", title=f"t {i}", tags=tags))
        store.upsert(Item(id="n1", kind="note", title="again", tags=["tenant/b"], no_embed=True))
        store.upsert(Item(id="gone", kind="note", title="brief"))
        store.delete("gone")
    store.delete("n2")  # a group of its own: a delete row placed by what it removed
    journal.close()
    with sqlite3.connect(db) as conn:
        got = conn.execute(
            "SELECT id, lsn, node, to_lsn, to_node, op, kind, partition, shared, item"
            " FROM versions WHERE op = 'upsert' ORDER BY id"
        ).fetchall()
        dead = conn.execute("SELECT partition FROM versions WHERE op = 'delete'").fetchall()
    assert [r[0] for r in got] == sorted(f"n{i}" for i in range(30))
    for id, lsn, node, to_lsn, to_node, _, kind, partition, shared, text in got:
        stored = store.get(id) if id != "n2" else None
        if stored is None:
            assert to_lsn is not None  # n2's version, closed by its delete
            continue
        at = Lsn.unpack(lsn)
        hlc = Hlc(at.wall_ms, at.counter, node)
        want = Row.of(id, hlc, "upsert", kind, stored, stored)
        assert (to_lsn, to_node, partition, bool(shared), text) == (
            None,
            None,
            want.partition,
            want.shared,
            want.item,
        )
    assert dead == [("",)]  # n2 (i % 3 == 2) was untagged


def _remember_before(recent: OrderedDict[int, Any], recorded: list[tuple[Change, Lsn]]) -> None:
    """``JournalBase._remember`` as it was (its lock aside): a pair made per change."""
    for c, lsn in recorded:
        recent[id(c)] = (c, lsn)
    while len(recent) > base._RECENT:
        recent.popitem(last=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 50)), max_size=8), max_size=8))
def test_the_recent_changes_are_remembered_as_before(groups: list[list[tuple[int, int]]]) -> None:
    changes = [Change("upsert", None, f"c{i}", "note") for i in range(10)]
    old: OrderedDict[int, Any] = OrderedDict()
    new = SimpleNamespace(_recent=OrderedDict(), _recent_lock=threading.Lock())
    saved = base._RECENT
    base._RECENT = 6  # overflow often: the oldest entries dropped, as before
    try:
        for group in groups:
            recorded = [(changes[i], Lsn(wall, 0)) for i, wall in group]
            _remember_before(old, recorded)
            JournalBase._remember(new, recorded)  # type: ignore[arg-type]
    finally:
        base._RECENT = saved
    assert [(k, v[0], v[1]) for k, v in new._recent.items()] == [
        (k, v[0], v[1]) for k, v in old.items()
    ]
    assert all(v[0] is changes[int(v[0].id[1:])] for v in new._recent.values())


def test_a_commit_remembers_each_change_s_position(tmp_path: Path) -> None:
    store = Store()
    journal = SqliteJournal(tmp_path / "j.db")
    journal.attach(store)
    with store.batch():
        for i in range(5):
            store.upsert(Item(id=f"n{i}", kind="note", title=f"t {i}"))
    kept = list(journal._recent.values())
    assert [c.id for c, _ in kept] == [f"n{i}" for i in range(5)]
    assert all(journal.lsn_of(c) == at == journal.head() for c, at in kept)
    assert list(journal._recent) == [id(c) for c, _ in kept]
    journal.close()


def _lex_put_before(index: LexicalIndex, item: Item, index_id: bool) -> None:
    """``LexicalIndex.put`` as it was: every write through the queue's ``put``."""
    id = item.id
    kept, index._split = index._split, None
    split = None
    if kept is not None and kept[0] is item.title and kept[1] is item.content:
        split = kept[2]
    with index._lock:
        waiting = index._queue.put(
            item,
            index_id,
            indexed=index._text.get(id),
            indexed_flag=id in index._with_id,
            words=split,
        )
        if waiting >= QUEUE_MAX:
            index.flush()


_lex_steps = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["alpha beta", "beta gamma", "delta"]),
        st.booleans(),
        st.booleans(),  # the same item object put again
    ),
    st.tuples(st.just("remove"), st.sampled_from(["a", "b", "c", "d"])),
    st.tuples(st.just("flush")),
)


def _queue_state(index: LexicalIndex) -> list[tuple[object, ...]]:
    return [
        (key, None if q is None else (id(q.item), q.index_id, q.reindex, q.words))
        for key, q in index._queue.pending.items()
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(_lex_steps, max_size=40))
def test_the_index_queues_what_the_queue_s_put_queued(steps: list[tuple[Any, ...]]) -> None:
    new, old = LexicalIndex(), LexicalIndex()
    last: dict[str, Item] = {}
    for step in steps:
        if step[0] == "put":
            _, id, text, index_id, again = step
            item = last[id] if again and id in last else Item(id=id, kind="note", title=text)
            last[id] = item
            new.put(item, index_id)
            _lex_put_before(old, item, index_id)
        elif step[0] == "remove":
            new.remove(step[1])
            old.remove(step[1])
        else:
            new.flush()
            old.flush()
        assert _queue_state(new) == _queue_state(old)
    new.flush()
    old.flush()
    assert new._text == old._text and new._with_id == old._with_id
    for word in ("alpha", "beta", "gamma", "delta", "a", "b"):
        assert new.ids_with_words([word], "note") == old.ids_with_words([word], "note")
