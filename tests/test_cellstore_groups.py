"""A CellStore attached to a store applies each published run of changes at once.

The index follows the store through a grouped listener (``Store.add_change_listener(fn,
grouped=True)``): a write group reaches it as one sequence, which it reduces to
the state each id ends in and applies with one graph insert and one vector
file transaction. What must not change is what a search sees: the same ids,
entries and vectors as a reference index told of every change one at a time
(exact scans then score alike to the last bit), every live item findable in
the graph, and nothing deleted or replaced ever answering again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memstore import Item, Store
from memstore.config import Change
from memstore_index import CellStore, EmbeddingError, HashEmbedder
from memstore_index._tuning import EXACT_THRESHOLD
from memstore_index.entry import embed_text, embeddable, entry_for

DIM = 32


class CountingEmbedder(HashEmbedder):
    """A hash embedder that counts its calls and refuses any text containing ``poison``."""

    def __init__(self) -> None:
        super().__init__(dim=DIM)
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if any("poison" in t for t in texts):
            raise EmbeddingError("this text cannot be embedded")
        return super().embed(texts)


def follow_one_by_one(store: Store, ref: CellStore) -> None:
    """Keep ``ref`` in step with ``store`` change by change (the per-change reference)."""

    def listener(op: str, item: Item | None, id: str, kind: str) -> None:
        if op == "delete" or item is None or not embeddable(item):
            ref.remove(id)
        else:
            ref.upsert(entry_for(item), embed_text(item))

    store.add_change_listener(listener)


def note(id: str, text: str, **fields: object) -> Item:
    return Item(id=id, kind="note", title=id, content=text, **fields)


def assert_same_index(cells: CellStore, ref: CellStore, queries: list[str]) -> None:
    assert cells.ids() == ref.ids()
    for id in cells.ids():
        assert cells.entry(id) == ref.entry(id), id
        got, want = cells.vector(id), ref.vector(id)
        assert got is not None and want is not None and np.array_equal(got, want), id
    for q in queries:
        vec = cells.embed_query(q)
        got_hits = [(e.id, s) for e, s in cells.exact_search(vec, 10)]
        want_hits = [(e.id, s) for e, s in ref.exact_search(vec, 10)]
        assert [i for i, _ in got_hits] == [i for i, _ in want_hits], q
        assert np.allclose([s for _, s in got_hits], [s for _, s in want_hits], atol=1e-9), q


def test_a_group_ends_each_id_in_its_last_state_as_one_change_at_a_time_would() -> None:
    store = Store()
    cells = CellStore(HashEmbedder(dim=DIM))
    ref = CellStore(HashEmbedder(dim=DIM))
    cells.attach(store)
    follow_one_by_one(store, ref)
    store.upsert_many([note(f"n{i}", f"ledger pool note {i}") for i in range(20)])
    with store.batch():
        store.upsert(note("twice", "first text of twice"))
        store.upsert(note("twice", "second text of twice"))  # ends with this vector
        store.upsert(note("gone", "added then deleted"))
        store.delete("gone")  # ends absent
        store.upsert(note("n1", "n1 moved away"))
        store.upsert(note("n1", "ledger pool note 1"))  # back to the indexed text
        store.upsert(note("n2", "n2 new words"))
        store.upsert(note("n2", "n2 new words", tags=["tenant/b"]))  # same text, new entry
        store.delete("n3")
        store.upsert(note("n3", "n3 comes back"))  # deleted, then back
        store.upsert(note("n4", "ledger pool note 4", no_embed=True))  # not embeddable
        store.upsert(note("n4", "ledger pool note 4"))  # embeddable again
        store.delete("n5")
    assert "gone" not in cells and "n5" not in cells
    assert cells.entry("n2") is not None and cells.entry("n2").partition == "b"  # type: ignore[union-attr]
    assert_same_index(cells, ref, ["twice", "ledger pool", "new words", "comes back"])
    cells._check(store, vectors=True)


def test_a_group_is_one_embedding_call_one_graph_insert_and_one_file_write(
    tmp_path: Path,
) -> None:
    store = Store()
    embedder = CountingEmbedder()
    cells = CellStore(embedder, path=tmp_path)
    cells.attach(store)
    store.upsert_many([note(f"n{i}", f"ledger pool note {i}") for i in range(EXACT_THRESHOLD + 10)])
    assert cells._hnsw is not None  # the graph is built: its inserts are what is counted
    calls, generation = embedder.calls, cells._generation
    graph_before = cells._hnsw.get_current_count()
    with store.batch():
        for i in range(200):
            store.upsert(note(f"new{i}", f"fresh words {i}"))
        store.delete("n0")
    assert embedder.calls == calls + 1
    assert cells._generation == generation + 1  # one transaction of the vector file
    assert cells._hnsw.get_current_count() == graph_before + 200
    cells._check(store)


def test_one_text_that_fails_after_commit_leaves_only_its_own_item_pending() -> None:
    store = Store()
    cells = CellStore(CountingEmbedder())
    cells.attach(store, fail_writes=False)
    store.upsert(note("bad", "an old fine text"))
    with store.batch():
        store.upsert(note("a", "apples"))
        store.upsert(note("bad", "poison pill"))
        store.upsert(note("b", "bananas"))
        store.delete("nothing-here")
    assert cells.ids() == ["a", "b"] and cells.pending == 1  # the old vector never answers
    cells._check(store)


def test_the_grouped_listener_gets_each_run_in_commit_order_before_the_ordinary_ones() -> None:
    store = Store()
    heard: list[tuple[str, ...]] = []

    def grouped(changes: Sequence[Change]) -> None:
        heard.append(tuple(f"{c.op} {c.id}" for c in changes))

    def ordinary(op: str, item: Item | None, id: str, kind: str) -> None:
        heard.append((f"one {op} {id}",))

    store.add_change_listener(ordinary)
    store.add_change_listener(grouped, grouped=True)
    with store.batch():
        store.upsert(note("a", "x"))
        store.delete("a")
    store.upsert(note("b", "y"))
    assert heard == [
        ("upsert a", "delete a"),
        ("one upsert a",),
        ("one delete a",),
        ("upsert b",),
        ("one upsert b",),
    ]
    store.remove_change_listener(grouped)
    store.upsert(note("c", "z"))
    assert heard[-1] == ("one upsert c",)
    with pytest.raises(ValueError, match="not both"):
        store.add_change_listener(grouped, before_commit=True, grouped=True)


def test_random_groups_in_the_graph_keep_every_live_item_findable_and_no_dead_one() -> None:
    """Random groups of adds, updates and deletes on a graph-sized index.

    Against the per-change reference: the same ids, entries and vectors.
    Against brute force: recall@10 of the graph search as the vector tests
    require, each live item its own nearest hit, and no deleted id or
    replaced vector ever answering.
    """
    rng = random.Random(13)
    store = Store()
    cells = CellStore(HashEmbedder(dim=DIM))
    ref = CellStore(HashEmbedder(dim=DIM))
    cells.attach(store)
    follow_one_by_one(store, ref)
    live: dict[str, str] = {}
    dead: set[str] = set()
    n = 0
    for _ in range(16):
        with store.batch():
            for _ in range(400):
                roll = rng.random()
                if live and roll < 0.1:
                    id = rng.choice(sorted(live))
                    store.delete(id)
                    del live[id]
                    dead.add(id)
                elif live and roll < 0.3:
                    id = rng.choice(sorted(live))
                    live[id] = f"revised {n} {id} word{rng.randrange(10**6)}"
                    store.upsert(note(id, live[id]))
                else:
                    id = f"i{n}"
                    live[id] = f"item {n} word{rng.randrange(10**6)} zeta{n % 97}"
                    store.upsert(note(id, live[id]))
                    dead.discard(id)
                n += 1
    assert len(cells) > EXACT_THRESHOLD and cells._hnsw is not None
    assert_same_index(cells, ref, ["item word", "revised", "zeta5"])
    cells._check(store, vectors=True)
    ids = cells.ids()
    assert set(ids) == set(live) and not dead & set(ids)
    vecs = np.stack([cells.vector(i) for i in ids])  # type: ignore[misc]
    recalls = []
    for id in rng.sample(ids, 200):
        q = cells.embed_query(live[id])
        hits = [e.id for e, _ in cells.search_vector(q, 10)]
        assert id in hits and not dead & set(hits)
        truth = {ids[j] for j in np.argsort(-(vecs @ q), kind="stable")[:10]}
        recalls.append(len(truth & set(hits)) / 10)
    assert float(np.mean(recalls)) >= 0.97
