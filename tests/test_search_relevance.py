"""Relevance: every hit's ``relevance`` is in [0, 1], the same on both search paths, sane, and
``min_relevance`` filters by it and refuses what is not a number in [0, 1].

The lean path and the general path (``explain=True`` always takes the general
one) must give each result the same relevance; it must equal the documented
model applied to signals recomputed independently (the lexical score from
``Store.keyword_ranked``, the cosine from the stored vector, the subjects the
query names).
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Memory, Store
from memstore.errors import InvalidItemError
from memstore.item import EXACT_ID_MATCH_SCORE
from memstore.search import SearchConfig, Searcher, SearchResult
from memstore.search._relevance import (
    RELEVANCE_MODEL,
    _cosines,
    assign_relevance,
    relevance,
    signals,
)
from memstore_index._vectorfile import StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import FakeClock
from tests.mcp_harness import http_client, http_server, in_process

WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "pottery", "bowl", "api", "retry"]
SUBJECTS = ["", "alice", "bob", "payment-api"]
CONFIGS: list[dict[str, Any]] = [
    {},
    {"spread_relations": ("precedes",)},
    {"fusion": "rrf"},
    {"always_fuse": True},
    {"no_shaping": True},
    {"link_expansion": lambda: True},
]


@st.composite
def stores(draw: st.DrawFn) -> tuple[Store, CellStore]:
    store = Store(Config(clock=FakeClock()))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    n = draw(st.integers(1, 12))
    for i in range(n):
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)))
        links = [{"to_id": f"i{i + 1:02d}", "relation": "precedes"}] if i + 1 < n else []
        store.upsert(
            Item.model_validate(
                {
                    "id": f"i{i:02d}",
                    "kind": "note",
                    "title": draw(st.sampled_from(["", text[:12]])),
                    "content": text,
                    "subject": draw(st.sampled_from(SUBJECTS)),
                    "links": links,
                }
            )
        )
    return store, cells


def _expected(store: Store, cells: CellStore, query: str, r: SearchResult, fused: bool) -> float:
    """The model on signals recomputed without the searcher."""
    lexical, _ = store.keyword_ranked(query, "", "", 1000)
    lex = {h.id: h.score for h in lexical}.get(r.item.id, 0.0)
    cos = None
    if fused:
        v = cells.vector(r.item.id)
        if v is not None:
            q = cells.embed_query(query)
            cos = float(v @ q) / float(np.linalg.norm(v)) if np.linalg.norm(v) > 0 else 0.0
    named = store.named_subjects(query)
    other = bool(named) and bool(r.item.subject) and r.item.subject not in named
    return relevance(lex, cos, other)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=stores(),
    config=st.sampled_from(CONFIGS),
    query=st.lists(
        st.sampled_from([*WORDS, "alice", "bob", "payment", "zebra"]), min_size=1, max_size=4
    ),
    limit=st.integers(1, 6),
    full=st.booleans(),
)
def test_relevance_is_in_the_unit_interval_and_the_same_on_both_paths(
    env: tuple[Store, CellStore], config: dict[str, Any], query: list[str], limit: int, full: bool
) -> None:
    store, cells = env
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, **config))
    q = " ".join(query)
    call = searcher.hybrid_search_full if full else searcher.hybrid_search
    before = searcher.stats.snapshot().kw_voice_hits
    lean = call(q, limit=limit)
    fused = full or searcher.stats.snapshot().kw_voice_hits == before
    general = call(q, limit=limit, explain=True)
    assert [r.item.id for r in lean] == [r.item.id for r in general]
    for a, b in zip(lean, general, strict=True):
        assert 0.0 <= a.relevance <= 1.0 and math.isfinite(a.relevance)
        assert a.relevance == b.relevance
        want = _expected(store, cells, q, a, fused)
        if config.get("fusion") == "rrf":  # a pool of `limit` hits: beyond it, an upper bound
            assert a.relevance >= want - 1e-6
        else:  # a pool deeper than these stores: every lexical score is exact
            assert a.relevance == pytest.approx(want, abs=1e-6)
    # The threshold keeps exactly the results at or above it, in order.
    t = sorted(r.relevance for r in lean)[len(lean) // 2] if lean else 0.5
    kept = call(q, limit=limit, min_relevance=t)
    assert [r.item.id for r in kept] == [r.item.id for r in lean if r.relevance >= t]


def _memory() -> Memory:
    mem = Memory(embedder="hash")
    mem.add(
        Item(kind="note", title="Ledger pool", content="the ledger db pool allows 20 connections")
    )
    mem.add(Item(kind="note", title="Tax", content="quarterly tax filing is due in april"))
    mem.add(Item(kind="note", title="Pottery", content="alice glazed a blue bowl", subject="alice"))
    mem.add(Item(kind="note", title="Kiln", content="bob fired the kiln on friday", subject="bob"))
    return mem


def test_an_exact_match_outscores_an_unrelated_item() -> None:
    with _memory() as mem:
        hits = mem.search_full("ledger db pool connections")
        by_title = {r.item.title: r.relevance for r in hits}
        assert hits[0].item.title == "Ledger pool"
        assert all(by_title["Ledger pool"] > v for t, v in by_title.items() if t != "Ledger pool")


def test_an_unrelated_query_gets_low_relevance_and_a_threshold_abstains() -> None:
    with _memory() as mem:
        # The hash embedder's exhaustive fallback still returns something...
        hits = mem.search("zebra migration patterns")
        assert hits, "the exhaustive semantic fallback answers anyway"
        assert max(r.relevance for r in hits) < 0.05
        # ...and a threshold drops it, while a real match survives the same threshold.
        assert mem.search("zebra migration patterns", min_relevance=0.1) == []
        assert [r.item.title for r in mem.search("ledger pool", min_relevance=0.1)] == [
            "Ledger pool"
        ]


def test_a_hit_about_another_subject_than_the_one_named_scores_lower() -> None:
    with _memory() as mem:
        hits = {r.item.title: r.relevance for r in mem.search_full("what did alice glaze", limit=5)}
        assert hits["Pottery"] > 0.1
        about_bob = relevance(0.3, 0.3, True)
        assert about_bob < relevance(0.3, 0.3, False)
        assert mem.store.named_subjects("what did alice glaze") == frozenset({"alice"})
        assert mem.store.named_subjects("payment api errors") == frozenset()


def test_an_exact_id_match_has_relevance_one() -> None:
    with _memory() as mem:
        target = mem.search("ledger pool")[0].item.id
        assert mem.search_full(target)[0].relevance == 1.0


def test_the_users_own_notes_carry_relevance_and_are_filtered_too() -> None:
    with _memory() as mem:
        mem.add("my ledger password hint", private_to="u1")
        hits = mem.search("ledger", user="u1", limit=5)
        assert all(0.0 < r.relevance <= 1.0 for r in hits)
        assert mem.search("zebra quagga", user="u1", min_relevance=0.5) == []


@pytest.mark.parametrize("subject", ["", "alice", "bob"])
def test_a_users_own_note_about_another_subject_scores_lower(subject: str) -> None:
    """The query names alice: the user's own note about bob is counted as about someone else."""
    with _memory() as mem:
        mem.add(
            Item(kind="note", content="glazed mugs for the fair", subject=subject), private_to="u1"
        )
        query = "what did alice glaze"
        own = mem.store.keyword_hits(query, user_hash="u1", own_only=True)[0]
        assert len(own) == 1
        (item, hit), *_ = own
        hits = {r.item.id: r.relevance for r in mem.search(query, user="u1", limit=10)}
        assert hits[item.id] == relevance(hit.score, None, subject == "bob")


@pytest.mark.parametrize("bad", [True, False, float("nan"), -0.01, 1.01, "0.5", None, float("inf")])
def test_min_relevance_refuses_what_is_not_a_number_in_the_unit_interval(bad: object) -> None:
    with _memory() as mem:
        with pytest.raises(InvalidItemError, match="min_relevance"):
            mem.search("ledger", min_relevance=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidItemError, match="min_relevance"):
            mem.search_full("ledger", min_relevance=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidItemError, match="min_relevance"):
            mem.searcher.hybrid_search("ledger", min_relevance=bad)  # type: ignore[arg-type]


def test_the_model_weights_have_the_documented_signs() -> None:
    m = RELEVANCE_MODEL
    assert m.lexical > 0 and m.cosine > 0 and m.lexical_only > 0
    assert m.other_subject < 0 and m.lexical_only_other_subject < 0
    assert relevance(0.0, 0.0, False) < 0.05  # nothing in common: unlikely evidence


def test_async_memory_passes_min_relevance_through() -> None:
    from memstore.async_memory import AsyncMemory

    async def main() -> None:
        async with AsyncMemory(memory=_memory()) as mem:
            hits = await mem.search("ledger pool", min_relevance=0.1)
            assert [r.item.title for r in hits] == ["Ledger pool"]
            with pytest.raises(InvalidItemError):
                await mem.search("ledger pool", min_relevance=2)

    anyio.run(main)


def test_mcp_recall_passes_min_relevance_and_returns_relevance() -> None:
    async def main() -> None:
        with _memory() as mem:
            async with in_process(mem) as c:
                hits = (await c.ok("recall", {"query": "ledger pool"}))["hits"]
                assert hits and all(0.0 <= h["relevance"] <= 1.0 for h in hits)
                none = await c.ok("recall", {"query": "zebra migration", "min_relevance": 0.1})
                assert none["hits"] == []
                assert "min_relevance" in await c.fails(
                    "recall", {"query": "ledger", "min_relevance": True}
                )

    anyio.run(main)


def test_mcp_recall_over_loopback_http(tmp_path: Any) -> None:
    with http_server(tmp_path) as url:

        async def main() -> None:
            async with http_client(url) as c:
                await c.ok("remember", {"content": "The VPN gateway is vpn-2."})
                hits = (await c.ok("recall", {"q": "vpn gateway"}))["hits"]
                assert hits[0]["relevance"] > 0.1
                kept = await c.ok("recall", {"q": "vpn gateway", "min_relevance": 0.99})
                assert kept["hits"] == []

        anyio.run(main)


def _cosines_reference(
    results: list[SearchResult], q: np.ndarray, vectors: dict[str, np.ndarray | None]
) -> list[float | None]:
    """The cosines as :func:`_cosines` computed them before its fast path (``np.stack``,
    every norm guarded), the query scaled first by a power of two to a largest value in
    [0.5, 1), as it must be so that its norm neither overflows nor underflows."""
    q = np.asarray(q, np.float32).ravel()
    q = np.ldexp(q, -np.frexp(np.abs(q).max(initial=0.0))[1])
    qn = float(q @ q) ** 0.5
    vecs = [vectors.get(r.item.id) for r in results]
    at = [i for i, v in enumerate(vecs) if v is not None and v.shape == q.shape]
    out: list[float | None] = [None] * len(results)
    if not at or qn == 0.0:
        return out
    rows = np.stack([vecs[i] for i in at])  # type: ignore[misc]
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows)) * qn
    cos = np.where(norms > 0, (rows @ q) / np.maximum(norms, 1e-30), 0.0).tolist()
    for i, c in zip(at, cos, strict=True):
        out[i] = float(c)
    return out


_COMPONENT = st.sampled_from([0.0, 1e-20, -1e-20, 1.0, -0.5, 3.0, 1e-3]) | st.floats(
    -2.0, 2.0, width=32
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.lists(_COMPONENT, min_size=3, max_size=3)), max_size=8),
    st.lists(_COMPONENT, min_size=3, max_size=3),
)
def test_cosines_are_the_guarded_computation(
    stored: list[list[float] | None], query: list[float]
) -> None:
    """The fast path (no norm below the guard) gives the very floats the guarded formula does,
    and a zero or tiny vector still gets the guarded answer."""
    results = [
        SearchResult(Item(id=f"r{i}", kind="note", content="x"), 1.0) for i in range(len(stored))
    ]
    vectors = {
        f"r{i}": None if v is None else np.array(v, np.float32) for i, v in enumerate(stored)
    }
    q = np.array(query, np.float32)
    got = _cosines(results, q, vectors.get)
    want = _cosines_reference(results, q, vectors)
    assert got == want


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(_COMPONENT, min_size=3, max_size=3), max_size=8),
    st.lists(st.integers(0, 9), max_size=10),
    st.sets(st.integers(0, 9)),
    st.lists(_COMPONENT, min_size=3, max_size=3),
)
def test_cosines_from_the_index_rows_are_those_from_its_vectors(
    stored: list[list[float]], asked: list[int], removed: set[int], query: list[float]
) -> None:
    """A real index's ``vector_rows`` (one gather) gives ``_cosines`` the very floats its
    ``vector`` (one read a result) does: ids held, repeated, removed, never indexed."""
    cells = CellStore(HashEmbedder(dim=3), target_recall=None)
    cells.apply(
        [
            StoredVector(IndexEntry(f"r{i}"), -1, f"h{i}", "", np.array(v, np.float32))
            for i, v in enumerate(stored)
        ]
    )
    for i in removed & set(range(len(stored))):
        cells.remove(f"r{i}")
    results = [SearchResult(Item(id=f"r{i}", kind="note", content="x"), 1.0) for i in asked]
    q = np.array(query, np.float32)
    one_by_one = _cosines(results, q, cells.vector)
    gathered = _cosines(results, q, None, cells.vector_rows)
    assert gathered == one_by_one
    rows, at = cells.vector_rows([r.item.id for r in results])
    assert at == [i for i, r in enumerate(results) if cells.vector(r.item.id) is not None]
    for j, i in enumerate(at):
        assert rows[j].tobytes() == cells.vector(results[i].item.id).tobytes()  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "ann", "bob", "cy"]),  # subject
            st.one_of(st.none(), st.floats(0.0, 1.0)),  # lexical score (None: not found)
            st.one_of(st.none(), st.lists(_COMPONENT, min_size=3, max_size=3)),  # vector
            st.sampled_from([0.0, 0.5, 0.99, 1.0]),  # relevance already given (a live match)
            st.booleans(),  # an exact id match
        ),
        max_size=8,
    ),
    st.lists(_COMPONENT, min_size=3, max_size=3) | st.none(),
    st.floats(0.0, 1.0),
    st.sets(st.sampled_from(["ann", "bob", "zed"])),
)
def test_relevance_inlined_is_signals_then_relevance(
    hits: list[tuple[str, float | None, list[float] | None, float, bool]],
    query: list[float] | None,
    beyond: float,
    named: set[str],
) -> None:
    """``assign_relevance`` (the model inlined, one loop) sets the very floats that
    ``signals`` then ``relevance`` per hit, kept at least as high as the given one, do."""
    results = [
        SearchResult(
            Item(id=f"r{i}", kind="note", content="x", subject=subject),
            EXACT_ID_MATCH_SCORE if exact else 1.0 / (i + 1),
            relevance=given_rel,
        )
        for i, (subject, _, _, given_rel, exact) in enumerate(hits)
    ]
    lexical = {f"r{i}": lex for i, (_, lex, _, _, _) in enumerate(hits) if lex is not None}
    vectors = {
        f"r{i}": None if v is None else np.array(v, np.float32)
        for i, (*_, v, _, _) in enumerate(hits)
    }
    q = None if query is None else np.array(query, np.float32)
    names = frozenset(named)
    want = [
        1.0
        if r.score >= EXACT_ID_MATCH_SCORE
        else max(r.relevance, relevance(s.lexical, s.cosine, s.other_subject))
        for r, s in zip(
            results, signals(results, lexical, beyond, q, vectors.get, names), strict=True
        )
    ]
    assign_relevance(results, lexical, beyond, q, vectors.get, names)
    assert [r.relevance for r in results] == want
