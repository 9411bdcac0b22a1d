"""A smaller limit is a prefix of a larger one: the best hit does not depend on how many were asked.

``Memory.search(q, limit=k)`` must be the first ``k`` results of
``search(q, limit=10)`` for every ``k`` up to 10: a caller asking for the one
best memory gets the one a caller asking for ten sees first. Corpora are
drawn from a small vocabulary so that tied lexical scores (the case that
broke it: a one-hit pool took the newest of the tied hits, and a lone hit
looked confident enough to skip the semantic channel) are common. Runs with
no embedder (lexical only) and with the hash embedder (both channels).
"""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import FakeClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Memory
from memstore.search import POOL_LIMIT

WORDS = ["deploy", "payment", "cache", "timeout", "friday", "api", "retry", "queue"]

texts = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    min_size=1,
    max_size=25,
)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(notes=texts, query=queries, embedder=st.sampled_from([None, "hash"]))
def test_a_small_limit_is_a_prefix_of_the_default_one(
    notes: list[str], query: str, embedder: str | None
) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add_many(notes)
        ten = [h.item.id for h in mem.search(query, limit=POOL_LIMIT)]
        for k in range(1, POOL_LIMIT):
            assert [h.item.id for h in mem.search(query, limit=k)] == ten[:k]


def test_a_lone_surrogate_in_a_store_query_is_refused() -> None:
    # Memory.search refuses it; the Store's keyword search answered hits as if it were text.
    from memstore import InvalidItemError, Item, Store

    store = Store()
    store.upsert(Item(kind="note", title="payment retries"))
    with pytest.raises(InvalidItemError, match="lone surrogate"):
        store.keyword_search("pay\ud800ment")
    assert [it.title for it in store.keyword_search("payment")] == ["payment retries"]


# A note's title draws from a few words, so lexical scores tie often; half the
# notes were written two days before the search (no recency boost), and some
# are watch items (a boost of their own), so a deeper hit can outscore a
# shallower one once the multipliers apply. Most titles carry a word of their
# own ("n7"); the others are restatements when they share their words, and
# watch items among them collapse into one (which pulls later hits up).
entries = st.lists(
    st.tuples(
        st.lists(st.sampled_from(WORDS[:4]), min_size=1, max_size=3),
        st.booleans(),  # written two days ago
        st.booleans(),  # a watch item
        st.integers(0, 3),  # 0: no word of its own (a restatement, if another shares its words)
    ),
    min_size=20,
    max_size=70,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    notes=entries,
    query=st.lists(st.sampled_from(WORDS[:4]), min_size=1, max_size=3).map(" ".join),
    embedder=st.sampled_from([None, "hash"]),
    limits=st.lists(
        st.sampled_from([1, 3, 9, 10, 11, 20, 50, 100]), min_size=2, max_size=2, unique=True
    ).map(sorted),
)
def test_any_limit_is_a_prefix_of_any_larger_one(
    notes: list[tuple[list[str], bool, bool, int]],
    query: str,
    embedder: str | None,
    limits: list[int],
) -> None:
    # Before, the rerank saw only about as many candidates as the limit asked
    # for (10 for limit=10, with no embedder): limit=50 let a deeper watch item
    # or a recent note overtake, and its first 10 were not limit=10's 10.
    clock = FakeClock(dt.datetime(2025, 1, 10, tzinfo=dt.UTC))
    with Memory(embedder=embedder, config=Config(clock=clock)) as mem:
        for n, (words, old, watch, own) in enumerate(notes):
            at = clock.now - dt.timedelta(days=2) if old else clock.now
            mem.store.put(
                Item(
                    id=f"n{n:03d}",
                    kind="watch_item" if watch else "note",
                    title=" ".join([*words, f"n{n}"] if own else sorted(set(words))),
                    created_at=at,
                    updated_at=at,
                )
            )
        k, n = limits
        small = [(h.item.id, h.score) for h in mem.search(query, limit=k)]
        large = [(h.item.id, h.score) for h in mem.search(query, limit=n)]
        assert small == large[:k]
        # The general path (explain=True takes it) shapes the same way.
        explained = [(h.item.id, h.score) for h in mem.search(query, limit=k, explain=True)]
        assert explained == small


@pytest.mark.parametrize("embedder", [None, "hash"])
@pytest.mark.parametrize("explain", [False, True])
def test_restatements_collapsing_at_the_top_do_not_shorten_or_reorder_a_page(
    embedder: str | None, explain: bool
) -> None:
    # Twelve watch items restate one another and collapse into one result.
    # Before, a search shaped only the first twenty candidates whatever
    # collapsed among them: limit=10 answered 9 results although the store
    # held more, and limit=50's first 10 were other than limit=10's.
    clock = FakeClock(dt.datetime(2025, 1, 10, tzinfo=dt.UTC))
    old = clock.now - dt.timedelta(days=2)
    with Memory(embedder=embedder, config=Config(clock=clock)) as mem:
        for n in range(12):
            at = clock.now - dt.timedelta(minutes=n)
            mem.store.put(
                Item(id=f"w{n:02d}", kind="watch_item", title="alpha", created_at=at, updated_at=at)
            )
        for n in range(30):
            mem.store.put(
                Item(
                    id=f"n{n:02d}", kind="note", title=f"alpha n{n}", created_at=old, updated_at=old
                )
            )
        ten = mem.search("alpha", limit=10, explain=explain)
        fifty = mem.search("alpha", limit=50, explain=explain)
        assert len(ten) == 10
        assert [h.collapsed_count for h in fifty if h.item.kind == "watch_item"] == [11]
        assert [(h.item.id, h.score) for h in ten] == [(h.item.id, h.score) for h in fifty[:10]]
