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

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Memory
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
