"""The CellStore's query cache: a query asked again is not embedded again, and nothing changes.

The cache is only worth having if it is invisible: every vector it hands out
must be the one the embedder gives for that text, whatever was asked before,
in whatever batches, on however many threads, and no caller may change what
it holds. The embedder here is the real hash embedder, wrapped to count the
texts it is asked to embed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Store
from memstore.search import SearchConfig, Searcher
from memstore_index import CellStore
from memstore_index._querycache import DEFAULT_QUERY_CACHE, QueryCache
from memstore_index.entry import entry_for
from memstore_index.hash_embedder import HashEmbedder


class Counting:
    """The hash embedder, counting the texts it embeds (and the calls)."""

    def __init__(self, dim: int = 64) -> None:
        self._inner = HashEmbedder(dim=dim)
        self.model_id = self._inner.model_id
        self.dim = self._inner.dim
        self.texts: list[str] = []
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts.extend(texts)
        return self._inner.embed(texts)


def exact(texts: Sequence[str], dim: int = 64) -> npt.NDArray[np.float32]:
    """What an uncached CellStore gives for ``texts``."""
    return CellStore(HashEmbedder(dim=dim), query_cache=0).embed_queries(list(texts))


def test_a_query_asked_again_is_not_embedded_again() -> None:
    emb = Counting()
    cells = CellStore(emb)
    first = cells.embed_query("when are deploys frozen?")
    again = cells.embed_query("when are deploys frozen?")
    assert emb.texts == ["when are deploys frozen?"]
    assert np.array_equal(first, again)
    assert np.array_equal(again, exact(["when are deploys frozen?"])[0])


def test_a_batch_embeds_only_its_new_distinct_texts_and_keeps_its_order() -> None:
    emb = Counting()
    cells = CellStore(emb)
    cells.embed_queries(["b", "a"])
    emb.texts.clear()
    asked = ["a", "c", "b", "c", "d", "a"]
    rows = cells.embed_queries(asked)
    assert emb.texts == ["c", "d"] and emb.calls == 2  # one call for the batch's new texts
    assert np.array_equal(rows, exact(asked))
    emb.texts.clear()
    assert np.array_equal(cells.embed_queries(asked), exact(asked))
    assert emb.texts == []  # all cached: no call at all


def test_search_and_search_timed_use_the_cache() -> None:
    emb = Counting()
    cells = CellStore(emb)
    cells.upsert_many(
        [(entry_for(Item(id=f"n{i}", kind="note")), f"note number {i}") for i in range(5)]
    )
    emb.texts.clear()
    first = cells.search("note number 3", 2)
    hits, timing = cells.search_timed("note number 3", 2)
    assert emb.texts == ["note number 3"]
    assert [(e.id, s) for e, s in hits] == [(e.id, s) for e, s in first]
    assert timing.embed_s >= 0.0


def test_a_vector_handed_out_is_a_copy() -> None:
    cells = CellStore(HashEmbedder(dim=64))
    vec = cells.embed_query("payment api timeout")
    vec[:] = 0.0
    rows = cells.embed_queries(["payment api timeout"])
    rows[:] = 1.0
    assert np.array_equal(
        cells.embed_query("payment api timeout"), exact(["payment api timeout"])[0]
    )


def test_the_least_recently_used_query_goes_first() -> None:
    emb = Counting()
    cells = CellStore(emb, query_cache=2)
    cells.embed_query("a")
    cells.embed_query("b")
    cells.embed_query("a")  # "b" is now the least recently used
    cells.embed_query("c")
    emb.texts.clear()
    cells.embed_query("a")
    cells.embed_query("c")
    assert emb.texts == []
    cells.embed_query("b")
    assert emb.texts == ["b"]


def test_query_cache_zero_embeds_every_time() -> None:
    emb = Counting()
    cells = CellStore(emb, query_cache=0)
    for _ in range(3):
        cells.embed_query("same question")
    assert emb.texts == ["same question"] * 3


def test_remembered_queries_never_run_the_model() -> None:
    """The vectors of the queries asked lately, None for the others, without an
    embedding call: what a server batching queries answers at once."""
    emb = Counting()
    cells = CellStore(emb)
    asked = cells.embed_query("deploy freeze")
    emb.texts.clear()
    got = cells.remembered_queries(["deploy freeze", "never asked", 7])  # type: ignore[list-item]
    assert emb.texts == [] and got[1] is None and got[2] is None
    assert got[0] is not None and np.array_equal(got[0], asked)
    got[0][:] = 0  # a copy: the cache keeps its own row
    assert np.array_equal(cells.remembered_queries(["deploy freeze"])[0], asked)
    assert CellStore(Counting(), query_cache=0).remembered_queries(["deploy freeze"]) == [None]


def test_peek_counts_its_hits_and_leaves_the_misses_to_the_embedding() -> None:
    cache = QueryCache(4)
    cache.put(["a"], np.ones((1, 2), np.float32))
    assert [v is None for v in cache.peek(["a", "b"])] == [False, True]
    assert (cache.hits, cache.misses) == (1, 0)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None])
def test_a_bad_query_cache_size_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="query_cache must be a whole number >= 0"):
        CellStore(HashEmbedder(dim=8), query_cache=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one vector"):
        QueryCache(0)


def test_the_default_is_documented_and_used() -> None:
    cells = CellStore(HashEmbedder(dim=8))
    assert cells._query_cache is not None and cells._query_cache.capacity == DEFAULT_QUERY_CACHE


def test_a_failed_embedding_caches_nothing() -> None:
    class Failing(Counting):
        fail = True

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            if self.fail:
                raise RuntimeError("the model is down")
            return super().embed(texts)

    emb = Failing()
    cells = CellStore(emb)
    with pytest.raises(RuntimeError, match="model is down"):
        cells.embed_queries(["x", "y"])
    emb.fail = False
    assert np.array_equal(cells.embed_queries(["x", "y"]), exact(["x", "y"]))
    assert emb.texts == ["x", "y"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "née", ""]), max_size=6),
        max_size=12,
    ),
    st.integers(1, 4),
)
def test_any_sequence_of_batches_gets_the_embedders_vectors(
    batches: list[list[str]], capacity: int
) -> None:
    emb = Counting()
    cells = CellStore(emb, query_cache=capacity)
    for batch in batches:
        before = len(emb.texts)
        assert np.array_equal(cells.embed_queries(batch), exact(batch))
        fresh = emb.texts[before:]
        assert len(fresh) == len(set(fresh)) <= len(set(batch))  # each new text once
    assert cells._query_cache is not None and len(cells._query_cache) <= capacity


def test_concurrent_queries_all_get_their_own_vectors() -> None:
    cells = CellStore(HashEmbedder(dim=64), query_cache=8)
    texts = [f"question {i % 20}" for i in range(400)]
    want = {t: exact([t])[0] for t in set(texts)}
    wrong: list[str] = []

    def ask(offset: int) -> None:
        for t in texts[offset:] + texts[:offset]:
            if not np.array_equal(cells.embed_query(t), want[t]):
                wrong.append(t)

    threads = [threading.Thread(target=ask, args=(k * 50,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_a_searcher_asking_again_embeds_once_and_answers_the_same() -> None:
    emb = Counting()
    store = Store()
    cells = CellStore(emb)
    cells.attach(store)
    for text in ("deploys are frozen on fridays", "the ledger pool has 20 connections"):
        store.upsert(Item(kind="note", content=text))
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells))
    emb.texts.clear()
    q = "something about the weekly release freeze"
    first = [(r.item.id, r.score) for r in searcher.hybrid_search_full(q)]
    second = [(r.item.id, r.score) for r in searcher.hybrid_search_full(q)]
    assert first == second and emb.texts.count(q) == 1
