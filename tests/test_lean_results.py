"""The lean fusion's results when the store moved on after its snapshot.

:meth:`LeanFusion.results` reads its items after ordering them over a
snapshot; an item deleted in between is left out, the others keep their
scores and order, and :meth:`LeanFusion.lexical_scores` (which reuses the
slots the read resolved) still gives each survivor its own score. The
differential tests (``tests/test_search_differential.py``) hold the rest of
the lean path to the general one.
"""

from __future__ import annotations

from memstore import Config, Item, Store
from memstore._search_snapshot import micros
from memstore.search import SearchConfig, Searcher
from memstore.search._lean import LeanFusion
from tests.conftest import FakeClock


def test_an_item_deleted_after_the_snapshot_is_left_out(clock: FakeClock) -> None:
    store = Store(Config(clock=clock))
    for i in range(8):
        words = " ".join(["ledger"] * (i % 3 + 1) + ["pool"] * (i % 2) + [f"w{i}"])
        store.upsert(Item(id=f"i{i}", kind="note", content=words))
    searcher = Searcher(SearchConfig(store=store))
    snap = store.search_snapshot()
    assert snap is not None
    hits, _ = store.keyword_ranked("ledger pool", limit=50)
    fusion = LeanFusion(searcher, snap, micros(clock()), "", "", True)
    fusion.add_lexical(hits, None)
    ordered = fusion.ordered(10)
    before = fusion.results(ordered, "ledger pool", 10, full=False, shaped=True)
    scores_before = fusion.lexical_scores(before)
    assert len(before) == 8 and len(scores_before) == 8
    gone = {before[1].item.id, before[5].item.id}
    for id in gone:
        assert store.delete(id)
    after = fusion.results(ordered, "ledger pool", 10, full=False, shaped=True)
    assert [(r.item.id, r.score, r.collapsed_count) for r in after] == [
        (r.item.id, r.score, r.collapsed_count) for r in before if r.item.id not in gone
    ]
    assert fusion.lexical_scores(after) == {
        id: s for id, s in scores_before.items() if id not in gone
    }
    # A list the fusion did not build is looked up by id, with the same answer.
    assert fusion.lexical_scores(list(after)) == fusion.lexical_scores(after)
