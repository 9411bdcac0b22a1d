"""The lexical index's write queue, seen from the store.

The store's lexical index queues writes and applies them at its next read
(``memstore/_lexqueue.py``). A search must answer exactly as if every write
had been indexed as it came: same hits, same order, same scores; a rolled-back
group must leave nothing of itself in the index; and the queue stays bounded
however long a run of writes goes unread.
"""

from __future__ import annotations

import datetime as _dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item, Store
from memstore._lexqueue import QUEUE_MAX
from memstore.config import Config
from memstore.errors import InvalidItemError
from tests.conftest import FakeClock

WORDS = ["payment", "payments", "timeout", "retry", "deploy", "paymnet", "api", "queue"]
IDS = ["n0", "n1", "n2"]


text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
# Few texts, so that an id is often written again with the words it has.
title = st.sampled_from(["payment timeout", "deploy retry queue", "api paymnet"])
content = st.sampled_from(["payment timeout", "retry", ""])
op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(IDS),
        title,
        content,
        st.sampled_from(["note", "fact"]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(IDS)),
    st.tuples(st.just("search"), text),
)


def answer(store: Store, query: str) -> list[list[tuple[str, float, int, bool]]]:
    """The hits for ``query`` under each kind filter (the index's own columns filter them)."""
    return [
        [
            (it.id, h.score, h.covered, h.fuzzy)
            for it, h in store.keyword_hits(query, kind, "", 10)[0]
        ]
        for kind in ("", "note", "fact")
    ]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=40))
def test_searches_answer_as_if_every_write_were_indexed_at_once(ops: list[tuple]) -> None:
    clock = FakeClock()  # one clock, moved a second a step: update times differ, ties happen
    queued = Store(Config(clock=clock))
    eager = Store(Config(clock=clock))  # its lexicon applied after every write
    for step in ops:
        clock.advance(_dt.timedelta(seconds=1))
        if step[0] == "put":
            _, id, title, content, kind = step
            for store in (queued, eager):
                store.upsert(Item(id=id, kind=kind, title=title, content=content))
        elif step[0] == "delete":
            for store in (queued, eager):
                store.delete(step[1])
        else:
            assert answer(queued, step[1]) == answer(eager, step[1])
            continue
        eager._lex.flush()
    for query in WORDS:
        assert answer(queued, query) == answer(eager, query)


def test_a_rolled_back_group_leaves_nothing_in_the_index() -> None:
    store = Store()
    store.upsert(Item(id="a", kind="note", title="payment timeout"))
    with pytest.raises(RuntimeError), store.batch():
        store.upsert(Item(id="a", kind="note", title="deploy queue"))
        store.upsert(Item(id="b", kind="note", title="deploy retry"))
        store.delete("a")
        raise RuntimeError("abort")
    assert [it.id for it in store.keyword_search("payment timeout")] == ["a"]
    assert store.keyword_search("deploy") == []


def test_a_rejected_write_queues_nothing() -> None:
    store = Store()
    store.upsert(Item(id="a", kind="note", title="payment timeout"))
    store.keyword_search("payment")
    with pytest.raises(InvalidItemError):
        store.upsert(Item(id="a", kind="note", title="", content=""))
    assert store._lex.queued == 0
    assert [it.title for it in store.keyword_search("payment")] == ["payment timeout"]


def test_the_queue_is_applied_before_it_outgrows_its_bound() -> None:
    store = Store()
    for i in range(QUEUE_MAX + 10):
        store.upsert(Item(kind="note", title=f"note {i} payment"))
        assert store._lex.queued < QUEUE_MAX
    assert len(store.keyword_search("payment", limit=QUEUE_MAX + 10)) == QUEUE_MAX + 10
    assert store._lex.queued == 0
