"""The Searcher refuses arguments of the wrong type with InvalidItemError.

Before, ``hybrid_search(q, limit=None)`` raised ``TypeError: '>' not
supported``, ``limit=2.5`` was taken, and ``rerank(None, 5)``,
``rerank(["id"], 5)`` or ``rerank(items, None)`` failed with a TypeError or
AttributeError from inside.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from memstore import InvalidItemError, Item, SearchConfig, Searcher, Store


@pytest.fixture
def searcher() -> Searcher:
    store = Store()
    store.upsert(Item(id="t", kind="note", title="payment api timeout"))
    return Searcher(SearchConfig(store=store))


CALLS: list[tuple[str, Callable[[Searcher], object], str]] = [
    ("limit None", lambda s: s.hybrid_search("payment", limit=None), "limit must be"),
    ("limit float", lambda s: s.hybrid_search("payment", limit=2.5), "limit must be"),
    ("limit bool", lambda s: s.hybrid_search("payment", limit=True), "limit must be"),
    ("full limit", lambda s: s.hybrid_search_full("payment", limit="5"), "limit must be"),
    ("staged limit", lambda s: s.hybrid_search_staged("payment", limit=None), "limit must be"),
    ("rerank None", lambda s: s.rerank(None, 5), "items must be a list of Items"),
    ("rerank ids", lambda s: s.rerank(["t"], 5), "items must be a list of Items"),
    ("rerank Item", lambda s: s.rerank(Item(kind="note", title="x"), 5), "items must be"),
    ("rerank limit", lambda s: s.rerank([], None), "limit must be"),
]


@pytest.mark.parametrize(("call", "words"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_wrong_argument_is_refused(
    searcher: Searcher, call: Callable[[Searcher], object], words: str
) -> None:
    with pytest.raises(InvalidItemError, match=words):
        call(searcher)


def test_whole_numbers_of_any_kind_still_serve(searcher: Searcher) -> None:
    assert [r.item.id for r in searcher.hybrid_search("payment", limit=np.int64(3))] == ["t"]
    assert [r.item.id for r in searcher.hybrid_search("payment", limit=0)] == ["t"]  # 0: 10
    item = Item(id="x", kind="note", title="x")
    assert [r.item.id for r in searcher.rerank((item,), np.int32(1))] == ["x"]


FACT = "The staging database is restored from the production snapshot every Sunday night"


def test_consolidate_takes_apply_as_a_bool_only_and_fails_closed_on_a_bad_partition() -> None:
    # Before, apply="false" (truthy) retired every restatement, and a partition
    # of 5 was searched for and reported as a clean sweep of nothing.
    store = Store()
    for n, end in enumerate((".", "!")):
        store.upsert(
            Item(
                id=f"f{n}",
                kind="stable_fact",
                title=FACT + end,
                confidence="high",
                tags=["tenant/acme"],
            )
        )
    searcher = Searcher(SearchConfig(store=store))
    with pytest.raises(InvalidItemError, match="apply must be True or False"):
        searcher.consolidate("acme", apply="false")  # type: ignore[arg-type]
    assert [it.status for it in store.items()] == ["active", "active"]
    assert searcher.consolidate(5).error == "consolidate needs a partition, got int 5"  # type: ignore[arg-type]
    assert searcher.consolidate("").error == "consolidate needs a partition, got ''"
    report = searcher.consolidate("acme", apply=True)
    assert (report.superseded, report.applied) == (1, True)
