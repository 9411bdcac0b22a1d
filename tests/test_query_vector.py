"""Searching with a precomputed query vector: ``query_vector=`` and ``embed_queries``.

A server embeds the queries of concurrent searches in one call
(``Memory.embed_queries``) and hands each row back as ``query_vector``; the
results must be exactly those of the search that embeds its own query, and a
bad vector must be refused before anything runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import AsyncMemory, Memory
from memstore.errors import InvalidItemError
from memstore.limits import MAX_EMBED_QUERIES
from memstore.search import SearchConfig, Searcher
from memstore_index import CellStore
from memstore_index.hash_embedder import HashEmbedder

NOTES = [
    ("ops", "The payment api times out after 30 seconds under load."),
    ("ops", "Deploys are frozen on Fridays; the release train leaves on Tuesday."),
    ("ops", "The ledger database pool allows 20 connections."),
    ("ops", "Rollback the orders service with the blue-green switch."),
    ("dev", "The staging cluster is rebuilt every night at 02:00 UTC."),
    ("dev", "Payment retries back off exponentially up to five attempts."),
]
QUERIES = [
    "payment api timeout",  # lexical and confident
    "when are deploys frozen?",
    "how many connections may the ledger use",
    "something about rebuilding staging at night",
    "completely unrelated words zebra",
]


@pytest.fixture
def mem() -> Iterator[Memory]:
    with Memory(embedder="hash") as m:
        for part, text in NOTES:
            m.add(text, partition=part)
        yield m


def shape(results: list[Any]) -> list[tuple[str, float, int, str, float]]:
    return [(r.item.id, r.score, r.collapsed_count, r.via, r.relevance) for r in results]


def test_embed_queries_rows_are_embed_query_vectors(mem: Memory) -> None:
    rows = mem.embed_queries(QUERIES)
    assert mem.cells is not None
    assert rows.shape == (len(QUERIES), mem.cells.dim) and rows.dtype == np.float32
    for q, row in zip(QUERIES, rows, strict=True):
        assert np.array_equal(row, mem.cells.embed_query(q))
    assert mem.embed_queries([]).shape == (0, mem.cells.dim)


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("partition", [None, "ops", "*"])
def test_a_given_vector_gives_the_same_results(mem: Memory, full: bool, partition: Any) -> None:
    search = mem.search_full if full else mem.search
    for q, row in zip(QUERIES, mem.embed_queries(QUERIES), strict=True):
        own = search(q, partition=partition, explain=True)
        given = search(q, partition=partition, explain=True, query_vector=row)
        assert shape(given) == shape(own), q
        assert [r.explanation for r in given] == [r.explanation for r in own], q


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(exponent=st.integers(-90, 90), which=st.integers(0, len(QUERIES) - 1))
def test_only_the_direction_of_a_given_vector_counts(
    mem: Memory, exponent: int, which: int
) -> None:
    """``row * 2**k`` is ``row`` scaled exactly, so the results are the very same, even where
    its float32 norm overflows (k >= 64) or underflows (k <= -64) when computed plainly."""
    q = QUERIES[which]
    row = mem.embed_queries([q])[0]
    own = mem.search_full(q, partition="ops", explain=True)
    given_ = mem.search_full(q, partition="ops", explain=True, query_vector=row * 2.0**exponent)
    assert shape(given_) == shape(own)
    assert [r.explanation for r in given_] == [r.explanation for r in own]


@pytest.mark.parametrize("scale", [1e20, 1e-25, 1e30, 1e-30])
def test_a_given_vector_far_from_unit_length_searches_as_its_direction(
    mem: Memory, scale: float
) -> None:
    for q, row in zip(QUERIES, mem.embed_queries(QUERIES), strict=True):
        own = mem.search(q, partition="ops", explain=True)
        given_ = mem.search(q, partition="ops", explain=True, query_vector=row * scale)
        assert [r.item.id for r in given_] == [r.item.id for r in own], q
        for a, b in zip(given_, own, strict=True):
            assert a.relevance == pytest.approx(b.relevance, abs=1e-5), q
            assert a.explanation is not None and b.explanation is not None
            if b.explanation.similarity is None:
                assert a.explanation.similarity is None
            else:
                assert a.explanation.similarity == pytest.approx(b.explanation.similarity, abs=1e-5)


def test_the_given_vector_is_the_one_searched(mem: Memory) -> None:
    # A query with no word in common with any note: only the semantic channel
    # finds anything, so a vector of another text moves the results.
    q = "zebra quokka"
    assert mem.cells is not None
    ledger = mem.cells.embed_query("ledger database pool connections")
    hits = mem.search_full(q, partition="ops", query_vector=ledger)
    assert hits and "ledger" in hits[0].item.content
    own = mem.search_full(q, partition="ops")
    assert shape(own) != shape(hits)


def test_a_list_of_floats_is_a_vector(mem: Memory) -> None:
    row = mem.embed_queries([QUERIES[1]])[0]
    as_list = [float(x) for x in row]
    assert shape(mem.search(QUERIES[1], query_vector=as_list)) == shape(
        mem.search(QUERIES[1], query_vector=row)
    )


def test_the_callers_array_is_copied(mem: Memory) -> None:
    row = mem.embed_queries([QUERIES[3]])[0]
    before = row.copy()
    mem.search(QUERIES[3], query_vector=row)
    assert np.array_equal(row, before)


def bad_vectors(dim: int) -> list[tuple[object, str]]:
    ok = np.ones(dim, np.float32)
    nan, inf = ok.copy(), ok.copy()
    nan[3], inf[0] = np.nan, np.inf
    return [
        (np.ones(dim - 1), f"has {dim - 1} values; this index's vectors have {dim}"),
        (np.ones(dim + 1), f"has {dim + 1} values"),
        ([], "has 0 values"),
        (ok.reshape(1, dim), r"must be one vector \(1-D\)"),
        (nan, "NaN or an infinite value"),
        (inf, "NaN or an infinite value"),
        (np.full(dim, 1e39), "NaN or an infinite value"),  # past float32
        (np.zeros(dim), "zero vector"),
        ("0.1 0.2", "sequence of numbers"),
        ({"x": 1.0}, "sequence of numbers"),
        ([True] * dim, "real numbers, got boolean"),
        (np.ones(dim, np.complex64), "real numbers, got complex"),
        (["0.5"] * dim, "real numbers, got text"),
        ([[1.0], [1.0, 2.0]], "sequence of numbers"),
    ]


def test_bad_vectors_are_refused_with_a_clear_error(mem: Memory) -> None:
    assert mem.cells is not None
    for bad, message in bad_vectors(mem.cells.dim):
        for search in (mem.search, mem.search_full):
            # "payment api timeout" is answered lexically: the vector is checked anyway.
            with pytest.raises(InvalidItemError, match=message):
                search("payment api timeout", query_vector=bad)


def test_a_vector_without_an_embedder_is_refused() -> None:
    with Memory(embedder=None) as m:
        m.add("The payment api times out after 30 seconds.")
        with pytest.raises(InvalidItemError, match="no vector index"):
            m.search("payment", query_vector=[1.0, 0.0])
        with pytest.raises(InvalidItemError, match="needs an embedder"):
            m.embed_queries(["payment"])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("one query", "must be a list of text"),
        ([1, 2], r"queries\[0\] must be text"),
        (["x" * 10_001], "at most 10000"),
        (["q"] * (MAX_EMBED_QUERIES + 1), f"at most {MAX_EMBED_QUERIES}"),
    ],
)
def test_embed_queries_refuses_what_is_not_a_list_of_queries(
    mem: Memory, bad: object, message: str
) -> None:
    with pytest.raises(InvalidItemError, match=message):
        mem.embed_queries(bad)  # type: ignore[arg-type]


def test_searcher_takes_and_checks_a_query_vector() -> None:
    cells = CellStore(HashEmbedder(dim=32))
    with Memory(embedder=None) as m:
        cells.attach(m.store)
        m.add("The ledger database pool allows 20 connections.")
        searcher = Searcher(SearchConfig(store=m.store, cells=lambda: cells))
        vec = cells.embed_queries(["ledger pool"])[0]
        assert shape(searcher.hybrid_search_full("ledger pool", query_vector=vec)) == shape(
            searcher.hybrid_search_full("ledger pool")
        )
        with pytest.raises(InvalidItemError, match="have 32"):
            searcher.hybrid_search("ledger pool", query_vector=np.ones(31))
        bare = Searcher(SearchConfig(store=m.store))
        with pytest.raises(InvalidItemError, match="no vector index"):
            bare.hybrid_search("ledger pool", query_vector=vec)


def test_async_memory_embeds_and_searches_with_vectors() -> None:
    async def main() -> bool:
        async with AsyncMemory(embedder="hash") as am:
            for part, text in NOTES:
                await am.add(text, partition=part)
            rows = await am.embed_queries(QUERIES)
            for q, row in zip(QUERIES, rows, strict=True):
                own = await am.search(q, partition="ops")
                given = await am.search(q, partition="ops", query_vector=row)
                if shape(own) != shape(given):
                    return False
            return True

    assert asyncio.run(main())


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds (a real embedder, no mock)."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return super().embed(texts)


def test_a_staged_search_finishes_as_the_search_itself() -> None:
    """hybrid_search_staged: wants a vector exactly when the search would embed its
    query; finished with the vector, with None, or after other searches started, it
    returns what hybrid_search returns; a confident lexical answer embeds nothing."""
    emb = CountingEmbedder(32)
    cells = CellStore(emb, query_cache=0)  # every embedding the searches ask for is counted
    with Memory(embedder=None) as m:
        cells.attach(m.store)
        for part, text in NOTES:
            m.add(text, partition=part)
        searcher = Searcher(SearchConfig(store=m.store, cells=lambda: cells))
        for partition in ("", "ops"):
            started = [(q, searcher.hybrid_search_staged(q, partition=partition)) for q in QUERIES]
            for q, staged in started:
                emb.texts.clear()
                own = searcher.hybrid_search(q, partition=partition)
                assert staged.wants_vector == (emb.texts == [q]), q
                vec = cells.embed_queries([q])[0]
                emb.texts.clear()
                assert shape(staged.finish(vec)) == shape(own), q
                assert emb.texts == []  # the vector given is the one used
                again = searcher.hybrid_search_staged(q, partition=partition)
                assert shape(again.finish()) == shape(own), q
                assert emb.texts == ([q] if staged.wants_vector else [])
                with pytest.raises(RuntimeError, match="finished already"):
                    again.finish()
        assert any(not s.wants_vector for _, s in started)  # "payment api timeout"
        assert any(s.wants_vector for _, s in started)
        with pytest.raises(InvalidItemError, match="have 32"):
            searcher.hybrid_search_staged("payment api timeout").finish(np.ones(31))
        with pytest.raises(InvalidItemError, match="min_relevance"):
            searcher.hybrid_search_staged("payment", min_relevance=2.0)
