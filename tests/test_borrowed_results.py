"""The server's recall reads the stored items themselves; every public search still gets copies.

:func:`memstore.search._lean.borrowed_results` lets a caller that renders its
hits at once (``memstore.protocol.verbs.Verbs``) skip :meth:`Item.clone` of
each: inside it the lean path returns the stored objects, outside it the
copies :meth:`~memstore.store.Store.search_read` makes, with the same hits
either way. An item past its deadline reads as stale (a copy), and a store
with a ``read`` hook copies as before (the hook may amend what it gets).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from memstore import Item, Store
from memstore.config import Config
from memstore.search import SearchConfig, Searcher, SearchResult
from memstore.search._lean import borrowed_results

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _store(read: Callable[[list[Item]], None] | None = None) -> Store:
    store = Store(Config(clock=lambda: NOW, read=read))
    for i in range(6):
        store.upsert(
            Item(id=f"n{i}", kind="note", title=f"deploy {i}", content=f"the deploy failed {i}")
        )
    return store


def _rows(results: list[SearchResult]) -> list[tuple[str, float, int, float]]:
    return [(r.item.id, r.score, r.collapsed_count, r.relevance) for r in results]


def test_inside_the_stored_items_outside_copies_the_same_hits() -> None:
    store = _store()
    searcher = Searcher(SearchConfig(store=store))
    copied = searcher.hybrid_search("deploy failed", limit=4)
    assert store.search_snapshot() is not None  # the lean path
    with borrowed_results():
        borrowed = searcher.hybrid_search_staged("deploy failed", limit=4).finish()
    again = searcher.hybrid_search("deploy failed", limit=4)
    assert len(copied) == 4 and _rows(borrowed) == _rows(copied) == _rows(again)
    stored = store._items
    assert all(r.item is stored[r.item.id] for r in borrowed)
    assert not any(r.item is stored[r.item.id] for r in copied + again)
    assert all(r.item == stored[r.item.id] for r in copied)


def test_an_item_past_its_deadline_is_still_a_stale_copy() -> None:
    store = _store()
    store.upsert(Item(id="old", kind="note", title="t", content="c", stale_after=NOW))
    got = store._search_borrow(["old", "n0", "missing"])
    assert [it.id for it in got] == ["old", "n0"]
    assert got[0].status == "stale" and store._items["old"].status == "active"
    assert got[1] is store._items["n0"]


def test_a_read_hook_gets_copies_inside_too() -> None:
    seen: list[Item] = []
    store = _store(read=seen.extend)
    searcher = Searcher(SearchConfig(store=store))
    with borrowed_results():
        results = searcher.hybrid_search_staged("deploy failed", limit=3).finish()
    assert len(results) == 3 and seen
    assert not any(r.item is store._items[r.item.id] for r in results)
