"""Searcher: lexical fast path, semantic fusion, fallbacks, shaping, links, consolidation.

Every test runs real components: a :class:`~memstore.Store` on a fake clock,
a :class:`~memstore_index.CellStore` over a :class:`HashEmbedder` attached to
it, and a :class:`~memstore.search.Searcher` over both. The embedder is the
real one with its ``embed`` wrapped, so a test can count (or fail) embedding
calls. Where a test needs an exact cosine similarity it *pins* an item's
vector in the index: a unit vector at a chosen angle to the query's own
embedding.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from conftest import FakeClock

from memstore import EXACT_ID_MATCH_SCORE, Config, Item, Store, ThoughtLink, rerank_base_score
from memstore.search import (
    ANCHOR_BOOST,
    FUSION_POOL,
    FUSION_RRF,
    LEXICAL_WEIGHT,
    RECENT_BOOST,
    RECENT_WINDOW,
    RRF_K,
    SPREAD_DECAY,
    STATE_OPEN_BOOST,
    STATE_RESOLVED_PENALTY,
    WATCH_BOOST,
    SearchConfig,
    Searcher,
    SearchResult,
)
from memstore.search._slothits import SlotHits
from memstore.vocabulary import Vocabulary
from memstore_index._vectorfile import StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.embedder import EmbeddingError
from memstore_index.entry import IndexEntry, entry_for
from memstore_index.hash_embedder import HashEmbedder

DIM = 64
DAY = dt.timedelta(days=1)

# Two paraphrases of one fact (they are near-duplicates) and a distinct fact
# about the same subject (it is not).
PARA_A = (
    "payment api timeout",
    "payment api calls to the ledger time out after 30 seconds under load",
)
PARA_B = (
    "payment api timeouts",
    "under heavy load, ledger calls from the payment api time out after 30s",
)
DISTINCT = (
    "payment api retry policy",
    "failed ledger writes from the payment api are retried three times with exponential backoff",
)


class Env:
    """A store on a fake clock with a CellStore attached; the embedder is instrumented."""

    def __init__(
        self, clock: FakeClock, *, vocabulary: Vocabulary | None = None, dim: int = DIM
    ) -> None:
        self.clock = clock
        self.dim = dim
        self.store = Store(Config(clock=clock, vocabulary=vocabulary))
        self.embedder = HashEmbedder(dim=dim)
        self.calls: list[list[str]] = []
        self.broken = False
        self.fail_next = 0
        original = self.embedder.embed

        def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
            self.calls.append(list(texts))
            if self.broken or self.fail_next > 0:
                self.fail_next = max(self.fail_next - 1, 0)
                raise EmbeddingError("embedding provider unavailable")
            return original(texts)

        self.embedder.embed = embed  # type: ignore[method-assign]
        # No query cache: the tests count and break the embedding calls a search makes
        # (pin() embeds a query beforehand; tests/test_query_cache.py tests the cache).
        self.cells = CellStore(self.embedder, query_cache=0)
        self.cells.attach(self.store)
        self._orth: dict[str, npt.NDArray[np.float32]] = {}

    def add(self, id: str, title: str, content: str = "", kind: str = "note", **kw: Any) -> Item:
        return self.store.upsert(
            Item.model_validate({"id": id, "kind": kind, "title": title, "content": content, **kw})
        )

    def searcher(self, **cfg: Any) -> Searcher:
        cells = self.cells
        return Searcher(SearchConfig(store=self.store, cells=lambda: cells, **cfg))

    def pin(self, query: str, sims: dict[str, float]) -> None:
        """Give each item a vector at cosine ``sims[id]`` to ``query``'s own embedding."""
        q = self.cells.embed_query(query)
        rng = np.random.default_rng(7)
        u = rng.standard_normal(self.dim).astype(np.float32)
        u -= float(u @ q) * q
        u /= np.linalg.norm(u)
        rows = []
        for id, s in sims.items():
            item = self.store.get(id)
            assert item is not None, id
            vec = (s * q + np.sqrt(max(1.0 - s * s, 0.0)) * u).astype(np.float32)
            rows.append(StoredVector(entry_for(item), -1, f"pinned:{id}:{s}", "", vec))
        self.cells.apply(rows)
        self.calls.clear()


@pytest.fixture
def env(clock: FakeClock) -> Env:
    return Env(clock)


def ids(results: Sequence[SearchResult]) -> list[str]:
    return [r.item.id for r in results]


def rrf(*ranks: int) -> float:
    return sum(1.0 / (RRF_K + r + 1) for r in ranks)


def fusion_corpus(env: Env) -> None:
    """``lex1`` is lexical only (never embedded), ``sem`` semantic only, ``lex2`` both."""
    env.add("lex1", "ledger pool size", "twenty connections", no_embed=True)
    env.add("lex2", "ledger replica lag", "seconds behind primary")
    env.add("sem", "quarterly tax filing", "deadline in april")
    env.pin("ledger quokka", {"sem": 0.9, "lex2": 0.3})


# ------------------------------------------------------- fast path and fusion


def test_confident_query_is_served_lexically_without_an_embedding_call(env: Env) -> None:
    fusion_corpus(env)
    searcher = env.searcher()
    got = searcher.hybrid_search("ledger pool")
    assert ids(got)[0] == "lex1"
    assert "sem" not in ids(got), "no semantic channel on the fast path"
    assert env.calls == []
    snap = searcher.stats.snapshot()
    assert (snap.kw_voice_hits, snap.kw_voice_misses, snap.semantic_calls) == (1, 0, 0)
    assert (snap.lexical_count, snap.fused_count) == (1, 0)


def test_unconfident_query_embeds_once_and_fuses_by_rrf(env: Env) -> None:
    fusion_corpus(env)
    searcher = env.searcher(fusion=FUSION_RRF)
    got = searcher.hybrid_search("ledger quokka", explain=True)
    assert env.calls == [["ledger quokka"]]
    # lex1 and lex2 tie lexically, so both take lexical rank 0 (a tie's order is
    # no evidence); lex2 adds semantic rank 1. lex1 and sem tie on 1/61 and the
    # tie goes to the smaller id.
    assert ids(got) == ["lex2", "lex1", "sem"]
    by_id = {r.item.id: r for r in got}
    exp = {k: r.explanation for k, r in by_id.items()}
    assert exp["lex2"] is not None and exp["lex1"] is not None and exp["sem"] is not None
    assert exp["lex2"].channels == ["lexical", "semantic"]
    assert (exp["lex2"].lexical_rank, exp["lex2"].semantic_rank) == (0, 1)
    assert exp["lex2"].fused_score == pytest.approx(rrf(0, 1))
    assert exp["lex2"].similarity == pytest.approx(0.3, abs=1e-5)
    assert exp["lex1"].channels == ["lexical"]
    assert (exp["lex1"].lexical_rank, exp["lex1"].semantic_rank) == (0, None)
    assert exp["lex1"].fused_score == pytest.approx(rrf(0))
    assert exp["sem"].channels == ["semantic"]
    assert (exp["sem"].lexical_rank, exp["sem"].semantic_rank) == (None, 0)
    assert exp["sem"].similarity == pytest.approx(0.9, abs=1e-5)
    for rank, r in enumerate(got):
        assert r.score == pytest.approx(rerank_base_score(rank) * RECENT_BOOST)
    snap = searcher.stats.snapshot()
    assert (snap.semantic_calls, snap.kw_voice_misses, snap.kw_voice_hits) == (1, 1, 0)
    assert (snap.lexical_count, snap.fused_count) == (0, 1)


def score_corpus(env: Env) -> None:
    """``top`` leads lexically; ``near`` and ``weak`` tie below it; ``para`` is semantic only.

    Similarities to "ledger quokka": near 0.95, para 0.94 (almost as close),
    top 0.5, weak 0.1 (the least similar of all).
    """
    env.add("top", "ledger quokka sighting")
    env.add("near", "ledger replica")
    env.add("weak", "ledger lag")
    env.add("para", "quarterly tax filing")
    env.pin("ledger quokka", {"near": 0.95, "para": 0.94, "top": 0.5, "weak": 0.1})


def test_fusion_by_default_weighs_normalised_scores_not_ranks(env: Env) -> None:
    score_corpus(env)
    got = env.searcher(always_fuse=True).hybrid_search("ledger quokka", explain=True)
    # Each channel is rescaled over its own pool (best 1, weakest 0) and the two
    # are averaged: para, nearly as similar as the best, beats weak, the least
    # similar item, which only shares a word with the query.
    assert ids(got) == ["top", "near", "para", "weak"]
    exp = {r.item.id: r.explanation for r in got}
    assert all(e is not None for e in exp.values())
    norm = {k: (e.lexical_norm, e.semantic_norm) for k, e in exp.items() if e is not None}
    assert norm["top"] == pytest.approx((1.0, (0.5 - 0.1) / (0.95 - 0.1)), abs=1e-5)
    assert norm["near"] == pytest.approx((0.0, 1.0), abs=1e-5)
    assert norm["para"] == pytest.approx((None, (0.94 - 0.1) / (0.95 - 0.1)), abs=1e-5)
    assert norm["weak"] == pytest.approx((0.0, 0.0), abs=1e-5)
    for e in exp.values():
        assert e is not None and e.fused_score is not None
        lex, sem = e.lexical_norm or 0.0, e.semantic_norm or 0.0
        assert e.fused_score == pytest.approx(LEXICAL_WEIGHT * lex + (1 - LEXICAL_WEIGHT) * sem)
    # A rank fusion sees only the order: weak (tied second lexically, last
    # semantically) outranks para (second semantically, absent lexically).
    by_rank = env.searcher(always_fuse=True, fusion=FUSION_RRF).hybrid_search("ledger quokka")
    assert ids(by_rank) == ["near", "top", "weak", "para"]


def test_lexical_weight_sets_each_channels_share(env: Env) -> None:
    score_corpus(env)
    lexical_only = env.searcher(always_fuse=True, lexical_weight=1.0)
    assert ids(lexical_only.hybrid_search("ledger quokka"))[0] == "top"
    semantic_only = env.searcher(always_fuse=True, lexical_weight=0.0)
    assert ids(semantic_only.hybrid_search("ledger quokka")) == ["near", "para", "top", "weak"]


@pytest.mark.parametrize(
    ("field", "value"), [("fusion", "borda"), ("lexical_weight", 1.5), ("lexical_weight", -0.1)]
)
def test_an_unknown_fusion_or_weight_is_refused(env: Env, field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        env.searcher(**{field: value})
    with pytest.raises(ValueError, match=field):
        env.searcher().with_(lambda c: setattr(c, field, value))


def test_score_fusion_reads_only_the_items_that_can_reach_the_results(clock: FakeClock) -> None:
    reads: list[str] = []
    store = Store(Config(clock=clock, read=lambda items: reads.extend(it.id for it in items)))
    cells = CellStore(HashEmbedder(dim=DIM))
    cells.attach(store)
    for i in range(FUSION_POOL + 50):
        store.upsert(Item(id=f"n{i:03d}", kind="note", title=f"ledger note {i}"))
    reads.clear()
    # (Query signals read a candidate to learn its bonus: off here, see test_search_signals.)
    cfg = SearchConfig(store=store, cells=lambda: cells, always_fuse=True, subject_signal=False)
    got = Searcher(cfg).hybrid_search("ledger quokka", limit=12, explain=True)
    assert len(got) == 12
    # Both channels scored a deep pool, but only the best 2 x limit were read.
    assert len(reads) == 24
    assert all(r.explanation is not None and r.explanation.semantic_norm is not None for r in got)


def test_char_ngrams_carry_a_morphological_variant_through_the_vector_channel(
    clock: FakeClock,
) -> None:
    env = Env(clock, dim=256)
    env.add("dep", "deploy pipeline")
    env.add("tax", "quarterly tax filing")
    env.add("garden", "garden irrigation schedule")
    env.calls.clear()
    got = env.searcher().hybrid_search("deployments", explain=True)
    assert env.calls == [["deployments"]]
    assert ids(got)[0] == "dep"
    first = got[0].explanation
    assert first is not None and first.channels[-1] == "semantic" and first.semantic_rank == 0


def test_without_a_vector_index_search_is_lexical_only(env: Env) -> None:
    fusion_corpus(env)
    searcher = Searcher(SearchConfig(store=env.store))
    assert ids(searcher.hybrid_search("ledger quokka")) == ["lex1", "lex2"]
    assert ids(searcher.hybrid_search_full("quokka")) == []
    assert env.calls == []
    assert searcher.stats.snapshot().semantic_calls == 0


# ------------------------------------------------------------- fallbacks


def test_semantic_failure_falls_back_to_the_lexical_answer(env: Env) -> None:
    fusion_corpus(env)
    env.broken = True
    searcher = env.searcher()
    got = searcher.hybrid_search("ledger quokka", explain=True)
    assert ids(got) == ["lex1", "lex2"]
    assert all(r.explanation is not None and r.explanation.channels == ["lexical"] for r in got)
    snap = searcher.stats.snapshot()
    assert (snap.semantic_calls, snap.semantic_fallbacks, snap.exhaustive_fallbacks) == (1, 1, 0)


def test_semantic_failure_with_no_lexical_hit_returns_nothing_without_raising(env: Env) -> None:
    fusion_corpus(env)
    env.broken = True
    searcher = env.searcher()
    assert searcher.hybrid_search("quokka") == []
    snap = searcher.stats.snapshot()
    assert (snap.semantic_fallbacks, snap.exhaustive_fallbacks) == (1, 0)


def test_exhaustive_scan_rescues_a_zero_result_search(env: Env) -> None:
    # The one way the exhaustive scan finds what the normal path did not over a
    # small index: the semantic call failed (a transient provider error) and
    # nothing matched lexically.
    fusion_corpus(env)
    env.fail_next = 1
    searcher = env.searcher()
    got = searcher.hybrid_search("quokka", explain=True)
    assert ids(got) == ["sem", "lex2"]
    assert got[0].explanation is not None and got[0].explanation.channels == ["exhaustive"]
    assert env.calls == [["quokka"], ["quokka"]]
    snap = searcher.stats.snapshot()
    assert (snap.semantic_fallbacks, snap.exhaustive_fallbacks) == (1, 1)


def test_a_search_nothing_answers_embeds_once_and_is_not_counted_as_rescued(env: Env) -> None:
    env.add("a1", "ledger pool size", tags=["tenant/a"])
    env.calls.clear()
    searcher = env.searcher()
    assert searcher.hybrid_search("quokka", partition="b") == []
    assert searcher.stats.snapshot().exhaustive_fallbacks == 0
    # One embedding call per search: the exhaustive scan re-embeds the same
    # query it already embedded (and, over an index this small, repeats the very
    # same exact scan).
    assert env.calls == [["quokka"]]


def test_a_private_entry_never_takes_a_semantic_slot(env: Env) -> None:
    env.add("mine", "private diary", scope="private", tags=["user:u1"])
    env.add("pub", "quarterly tax filing")
    env.pin("quokka", {"mine": 1.0, "pub": 0.5})
    for partition in ("", "*"):
        assert ids(env.searcher().hybrid_search("quokka", partition=partition, limit=1)) == ["pub"]
        assert ids(env.searcher().hybrid_search_full("quokka", partition=partition)) == ["pub"]


def test_non_searchable_kinds_only_answer_an_explicit_kind_filter(clock: FakeClock) -> None:
    env = Env(clock, vocabulary=Vocabulary(non_searchable=("episodic",)))
    env.add("ep", "ledger failover transcript", kind="episodic")
    env.add("n1", "ledger failover notes")
    env.pin("ledger failover", {"ep": 0.9, "n1": 0.5})
    for search in (env.searcher().hybrid_search, env.searcher().hybrid_search_full):
        assert ids(search("ledger failover")) == ["n1"]
        assert ids(search("quokka")) == ["n1"]
        assert ids(search("ledger failover", "episodic")) == ["ep"]


@pytest.fixture(params=["non_searchable_kind", "expired"])
def unreadable(clock: FakeClock, request: pytest.FixtureRequest) -> Env:
    """An Env holding ``x``, an item a plain search cannot return (its kind is left
    out of search, or it expired)."""
    env = Env(clock, vocabulary=Vocabulary(non_searchable=("episodic",)))
    if request.param == "non_searchable_kind":
        env.add("x", "raw transcript", kind="episodic")
    else:
        env.add("x", "old reminder", stale_after=clock.now + dt.timedelta(hours=1))
        clock.advance(dt.timedelta(hours=2))
    return env


def test_semantic_pool_is_not_starved_by_hits_the_caller_cannot_read(unreadable: Env) -> None:
    env = unreadable
    env.add("n1", "quarterly tax filing")
    env.pin("quokka", {"x": 1.0, "n1": 0.6})
    # The unreadable entry takes the only slot of the semantic pool, the
    # hydrate step drops it, and the readable match below it is never seen.
    assert ids(env.searcher().hybrid_search("quokka", limit=1)) == ["n1"]


def test_semantic_gap_is_measured_against_a_hit_the_caller_can_read(unreadable: Env) -> None:
    env = unreadable
    env.add("n1", "quarterly tax filing")
    env.add("n2", "garden irrigation schedule")
    env.pin("quokka", {"x": 1.0, "n1": 0.6, "n2": 0.55})
    got = env.searcher(semantic_gap=0.2).hybrid_search("quokka")
    assert ids(got) == ["n1", "n2"]


def test_filtered_search_over_a_large_index_returns_every_match(clock: FakeClock) -> None:
    # Past EXACT_THRESHOLD entries the index answers from its HNSW graph; a kind
    # filter then leaves 3 entries among ~2100.
    store = Store(Config(clock=clock))
    for i in range(2100):
        store.upsert(Item(id=f"n{i}", kind="note", title=f"filler {i}", content=f"log line {i}"))
    for i in range(3):
        store.upsert(Item(id=f"w{i}", kind="watch_item", title=f"watch {i}", content="eye on it"))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells))
    got = searcher.hybrid_search("wombat", kind="watch_item")
    assert sorted(ids(got)) == ["w0", "w1", "w2"]


# ------------------------------------------------- gap, cliff, fuse, shaping


def gap_corpus(env: Env) -> None:
    env.add("s1", "alpha note", tags=["tenant/a"])
    env.add("s2", "beta note")
    env.add("s3", "gamma note", tags=["tenant/a"])
    env.add("s4", "delta note")
    env.add("hb", "hidden note", tags=["tenant/b"])
    env.pin("quokka", {"hb": 1.0, "s1": 0.95, "s2": 0.9, "s3": 0.5, "s4": 0.45})


def test_semantic_gap_cuts_after_visibility(env: Env) -> None:
    gap_corpus(env)
    assert ids(env.searcher().hybrid_search("quokka", partition="a")) == ["s1", "s2", "s3", "s4"]
    # Measured against s1 (the best hit partition a can read): s2 stays. Measured
    # against the invisible hb it would not.
    cut = env.searcher(semantic_gap=0.08).hybrid_search("quokka", partition="a")
    assert ids(cut) == ["s1", "s2"]


def test_semantic_cliff_keeps_what_lies_above_the_steepest_drop(env: Env) -> None:
    gap_corpus(env)
    got = env.searcher(semantic_cliff=True).hybrid_search("quokka", partition="a")
    assert ids(got) == ["s1", "s2"]


def test_always_fuse_fuses_a_confident_query(env: Env) -> None:
    fusion_corpus(env)
    plain = env.searcher().hybrid_search("ledger pool")
    assert "sem" not in ids(plain) and env.calls == []
    fused = env.searcher(always_fuse=True)
    got = fused.hybrid_search("ledger pool")
    assert env.calls == [["ledger pool"]]
    assert "sem" in ids(got)
    snap = fused.stats.snapshot()
    assert (snap.kw_voice_hits, snap.kw_voice_misses, snap.semantic_calls) == (0, 1, 1)


def test_no_shaping_returns_fused_order_without_rerank_or_collapse(env: Env) -> None:
    env.add("dupa", *PARA_A, kind="stable_fact", confidence="high")
    env.add("dupb", *PARA_B, kind="stable_fact", confidence="high")
    env.add("book", "payment api runbook", "who to page")
    env.calls.clear()

    def anchor(it: Item) -> bool:
        return it.id == "book"

    shaped = env.searcher(anchor=anchor).hybrid_search("payment api timeout")
    assert ids(shaped) == ["book", "dupa"]
    assert shaped[1].collapsed_count == 1
    raw = env.searcher(anchor=anchor, no_shaping=True, fusion=FUSION_RRF).hybrid_search(
        "payment api timeout"
    )
    assert ids(raw) == ["dupa", "dupb", "book"]
    assert [r.score for r in raw] == pytest.approx([rrf(0), rrf(1), rrf(2)])
    assert all(r.collapsed_count == 0 for r in raw)
    assert env.calls == []


# --------------------------------------------------------------- rerank


def test_rerank_multiplies_the_base_score_by_state_anchor_watch_and_recency(env: Env) -> None:
    env.add("old", "stale note")
    env.clock.advance(2 * DAY)
    for id in ("open", "done", "other", "anchor"):
        env.add(id, f"{id} note")
    env.add("watch", "watch the ledger", kind="watch_item")
    state = {"open": (True, True), "done": (False, True)}
    searcher = env.searcher(
        state=lambda it: state.get(it.id, (False, False)),
        anchor=lambda it: it.id == "anchor",
    )
    order = ["open", "done", "other", "anchor", "watch", "old"]
    items = [env.store.get(id) for id in order]
    assert all(it is not None for it in items)
    got = searcher.rerank([it for it in items if it is not None], 10)
    mult = {
        "open": STATE_OPEN_BOOST * RECENT_BOOST,
        "done": STATE_RESOLVED_PENALTY * RECENT_BOOST,
        "other": RECENT_BOOST,
        "anchor": ANCHOR_BOOST * RECENT_BOOST,
        "watch": WATCH_BOOST * RECENT_BOOST,
        "old": 1.0,
    }
    want = {id: rerank_base_score(rank) * mult[id] for rank, id in enumerate(order)}
    assert {r.item.id: r.score for r in got} == pytest.approx(want)
    assert ids(got) == sorted(want, key=lambda k: (-want[k], k))
    assert ids(got)[0] == "anchor"
    # An inactive watch item earns no watch boost.
    watch = items[4]
    assert watch is not None
    retired = searcher.rerank([watch.clone(status="superseded")], 1)
    assert retired[0].score == pytest.approx(RECENT_BOOST)
    # rerank truncates to the limit.
    assert len(searcher.rerank([it for it in items if it is not None], 2)) == 2


def test_recency_boost_lasts_exactly_one_day(env: Env) -> None:
    item = env.add("n", "ledger note")
    searcher = env.searcher()
    env.clock.advance(RECENT_WINDOW)
    assert searcher.rerank([item], 1)[0].score == pytest.approx(RECENT_BOOST)
    env.clock.advance(dt.timedelta(seconds=1))
    assert searcher.rerank([item], 1)[0].score == pytest.approx(1.0)


def test_explain_reports_every_factor_and_is_off_by_default(env: Env) -> None:
    fusion_corpus(env)
    searcher = env.searcher(
        state=lambda it: (True, it.id == "sem"), anchor=lambda it: it.id == "lex1"
    )
    got = searcher.hybrid_search("ledger quokka", explain=True)
    by_id = {r.item.id: r for r in got}
    sem = by_id["sem"].explanation
    assert sem is not None
    assert sem.channels == ["semantic"] and sem.semantic_rank == 0
    assert sem.semantic_norm == 1.0 and sem.lexical_norm is None
    assert sem.fused_score == pytest.approx(1 - LEXICAL_WEIGHT)
    assert sem.multipliers == {"state": STATE_OPEN_BOOST, "recency": RECENT_BOOST}
    lex1 = by_id["lex1"].explanation
    assert lex1 is not None and lex1.lexical_score is not None and lex1.lexical_score > 0
    assert lex1.multipliers == {"anchor": ANCHOR_BOOST, "recency": RECENT_BOOST}
    for r in got:
        e = r.explanation
        assert e is not None and e.base_score is not None
        assert r.score == pytest.approx(e.base_score * float(np.prod(list(e.multipliers.values()))))
    plain = searcher.hybrid_search("ledger quokka")
    assert ids(plain) == ids(got)
    assert all(r.explanation is None for r in plain)


# ------------------------------------------------------------- collapse


def test_collapse_key_keeps_the_best_of_each_key(env: Env) -> None:
    for i in range(3):
        env.add(f"inc{i}", f"ledger outage report {i}", data={"incident": "INC-7"})
    env.add("other", "ledger outage postmortem")
    searcher = env.searcher(collapse_key=lambda it: it.data.get("incident", ""))
    got = searcher.hybrid_search("ledger outage", explain=True)
    keyed = [r for r in got if r.item.id.startswith("inc")]
    assert len(keyed) == 1
    assert keyed[0].collapsed_count == 2
    assert keyed[0].explanation is not None
    assert sorted(keyed[0].explanation.collapsed) == sorted(
        {"inc0", "inc1", "inc2"} - {keyed[0].item.id}
    )
    assert [r.collapsed_count for r in got if r.item.id == "other"] == [0]
    assert len(env.searcher().hybrid_search("ledger outage")) == 4


def test_collapse_counts_carry_through_both_passes(env: Env) -> None:
    env.add("fa", *PARA_A, kind="stable_fact", confidence="high")
    env.add("fb", *PARA_B, kind="stable_fact", confidence="high", data={"incident": "K"})
    env.add("fk", "payment api notes", data={"incident": "K"})
    searcher = env.searcher(collapse_key=lambda it: it.data.get("incident", ""))
    got = searcher.hybrid_search("payment api timeout", explain=True)
    # fb absorbs fk by key, then fa absorbs fb (and what fb carried) as a paraphrase.
    assert [(r.item.id, r.collapsed_count) for r in got] == [("fa", 2)]
    assert got[0].explanation is not None and got[0].explanation.collapsed == ["fb"]


def test_near_duplicate_knowledge_collapses_into_one_result(env: Env) -> None:
    env.add("fa", *PARA_A, kind="stable_fact", confidence="high", subject="payments")
    env.add("fb", *PARA_B, kind="stable_fact", confidence="high", subject="payments")
    env.add("fc", *DISTINCT, kind="stable_fact", confidence="high", subject="payments")
    env.add("na", *PARA_A, kind="note")
    env.add("nb", *PARA_B, kind="note")
    got = env.searcher().hybrid_search("payment api ledger load", limit=10)
    facts = [r for r in got if r.item.id in ("fa", "fb")]
    assert len(facts) == 1 and facts[0].collapsed_count == 1
    assert [r.collapsed_count for r in got if r.item.id == "fc"] == [0]
    # Only knowledge kinds collapse: the two notes both stay.
    assert {"na", "nb"} <= set(ids(got))


# ---------------------------------------------------------------- links


def test_link_expansion_appends_visible_active_targets_once(env: Env) -> None:
    env.add("tpub", "garden irrigation schedule")
    env.add("tpriv", "private diary entry", scope="private", tags=["user:u1"])
    env.add("told", "retired runbook")
    env.add("tnew", "current runbook")
    assert env.store.mark_superseded("told", "tnew")
    env.add("tb", "other tenant note", tags=["tenant/b"])
    links = [
        ThoughtLink(to_id=t, relation="correlates_with")
        for t in ("tpub", "tpriv", "told", "tb", "missing")
    ]
    env.add("hit", "ledger failover drill", tags=["tenant/a"], links=links)
    env.add("hit2", "ledger failover plan", links=[ThoughtLink(to_id="tpub", relation="explains")])
    on = env.searcher(link_expansion=lambda: True)
    got = on.hybrid_search("ledger failover drill", partition="a", explain=True)
    direct = [r for r in got if not r.via]
    assert {r.item.id for r in direct} == {"hit", "hit2"}
    extra = [r for r in got if r.via]
    assert [(r.item.id, r.via, r.score) for r in extra] == [("tpub", direct[0].item.id, 0.0)]
    assert extra[0].explanation is not None and extra[0].explanation.channels == ["link"]
    assert ids(got)[: len(direct)] == ids(direct), "expanded results come after the hits"
    q = "ledger failover drill"
    off = env.searcher(link_expansion=lambda: False).hybrid_search(q, "", "", "a")
    assert all(not r.via for r in off) and "tpub" not in ids(off)
    assert "tpub" not in ids(env.searcher().hybrid_search(q, partition="a"))


# ------------------------------------------------------ source replacement


def source_corpus(env: Env) -> None:
    env.add("ep", "standup transcript", "long meeting text", kind="episode")
    env.add("epb", "other tenant transcript", kind="episode", tags=["tenant/b"])
    env.add("eppriv", "private transcript", kind="episode", scope="private", tags=["user:u1"])
    explains = "explains"
    env.add("f1", "ledger failover drill", links=[ThoughtLink(to_id="ep", relation=explains)])
    env.add("f2", "ledger failover drills", links=[ThoughtLink(to_id="ep", relation=explains)])
    env.add("f3", "ledger failover dangling", links=[ThoughtLink(to_id="gone", relation=explains)])
    env.add("f4", "ledger failover hidden", links=[ThoughtLink(to_id="epb", relation=explains)])
    env.add("f5", "ledger failover private", links=[ThoughtLink(to_id="eppriv", relation=explains)])
    env.add("f6", "ledger failover other", links=[ThoughtLink(to_id="ep", relation="precedes")])


def test_source_relation_replaces_hits_by_their_source_once(env: Env) -> None:
    source_corpus(env)
    searcher = env.searcher(source_relation="explains")
    got = searcher.hybrid_search("ledger failover drill", partition="a", explain=True)
    by_id = {r.item.id: r for r in got}
    assert ids(got).count("ep") == 1
    assert by_id["ep"].via == "f1", "the best-ranked hit claims the source"
    assert by_id["ep"].explanation is not None
    assert by_id["ep"].explanation.channels[-1] == "source"
    assert "f1" not in by_id and "f2" not in by_id
    # A dangling, hidden (other partition), private or other-relation source keeps the hit.
    assert {"f3", "f4", "f5", "f6"} <= set(by_id)
    assert not {"epb", "eppriv"} & set(by_id)
    assert all(by_id[f].via == "" for f in ("f3", "f4", "f5", "f6"))
    plain = env.searcher().hybrid_search("ledger failover drill", partition="a")
    assert "ep" not in ids(plain) and {"f1", "f2"} <= set(ids(plain))


def test_source_replacement_pulls_a_wider_pool(env: Env) -> None:
    env.add("ep", "standup transcript", kind="episode")
    env.add("f1", "ledger failover drill", links=[ThoughtLink(to_id="ep", relation="explains")])
    env.add("f2", "ledger failover drills", links=[ThoughtLink(to_id="ep", relation="explains")])
    env.add("f3", "ledger failover notes")
    env.calls.clear()
    wide = env.searcher(source_relation="explains").hybrid_search("ledger failover drill", limit=2)
    assert ids(wide) == ["ep", "f3"]
    # fanout=1 taken as given: the pool is the limit, but never under POOL_LIMIT,
    # so the two hits that fold into one source leave room for the third.
    narrow = env.searcher(source_relation="explains", fanout=1, fusion=FUSION_RRF)
    assert ids(narrow.hybrid_search("ledger failover drill", limit=2)) == ["ep", "f3"]


# -------------------------------------------------------- subject routing


def test_subject_routing_passes_the_subject_to_the_vector_index(env: Env) -> None:
    env.add("a", "token refresh fails", subject="auth")
    env.add("b", "token refresh fails again", subject="billing")
    seen: list[str | None] = []
    original = env.cells.search_vector

    def spy(
        vec: npt.ArrayLike,
        k: int,
        *,
        visible: Callable[[IndexEntry], bool] | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> list[tuple[IndexEntry, float]]:
        seen.append(subject)
        return original(
            vec, k, visible=visible, subject=subject, partitions=partitions, exact=exact
        )

    def slot_spy(
        vec: npt.ArrayLike, k: int, slot: Mapping[str, int], **kw: Any
    ) -> SlotHits:  # the lean path's way in (memstore.search._slothits)
        seen.append(kw.get("subject"))
        return original_slots(vec, k, slot, **kw)

    original_slots = env.cells.search_slots
    env.cells.search_vector = spy  # type: ignore[method-assign]
    env.cells.search_slots = slot_spy  # type: ignore[method-assign]
    env.searcher(subject_routing=True).hybrid_search_full("refresh quokka", subject="auth")
    env.searcher(subject_routing=True).hybrid_search_full("refresh quokka")
    env.searcher().hybrid_search_full("refresh quokka", subject="auth")
    assert seen == ["auth", None, None]


def test_a_strict_subject_keeps_every_channel_to_that_subject(env: Env) -> None:
    env.add("alice", "likes hiking in the alps", subject="alice")
    env.add("bob", "goes walking in the mountains", subject="bob")
    env.add("svc", "mountain trail app", tags=["service/alice"])
    env.add(
        "link",
        "mountain photos",
        subject="bob",
        links=[ThoughtLink(to_id="alice", relation="precedes")],
    )
    env.pin("mountain walks", {"alice": 0.5, "bob": 0.9, "svc": 0.6, "link": 0.8})
    loose = env.searcher(spread_relations=("precedes",))
    strict = env.searcher(spread_relations=("precedes",), subject_filter=True)
    # The seed's rule: the subject filters the lexical channel, the semantic one roams.
    assert "bob" in ids(loose.hybrid_search_full("mountain walks", subject="alice"))
    for full in (False, True):
        run = strict.hybrid_search_full if full else strict.hybrid_search
        assert sorted(ids(run("mountain walks", subject="alice"))) == ["alice", "svc"]
        assert sorted(ids(run("mountain walks", subject="bob"))) == ["bob", "link"]


# ------------------------------------------------------------ full search


def test_full_search_always_embeds_and_adds_live_matches(env: Env) -> None:
    fusion_corpus(env)
    asked: list[tuple[str, str, str, set[str]]] = []
    live_item = Item(id="live1", kind="event_live", title="ledger alarm firing now")

    def live(query: str, kind: str, partition: str, exclude: set[str]) -> list[SearchResult]:
        asked.append((query, kind, partition, set(exclude)))
        return [SearchResult(live_item, 0.5), SearchResult(Item(id="lex1", kind="note"), 0.5)]

    searcher = env.searcher(live=live)
    got = searcher.hybrid_search_full("ledger pool", partition="a", explain=True)
    assert env.calls == [["ledger pool"]], "a full search embeds even a confident query"
    assert asked == [("ledger pool", "", "a", {"lex1", "lex2", "sem"})]
    assert ids(got).count("lex1") == 1
    assert ids(got)[-1] == "live1"
    live_exp = got[-1].explanation
    assert live_exp is not None and live_exp.channels == ["live"]
    assert searcher.stats.snapshot().semantic_calls == 1
    env.searcher(live=live).hybrid_search("ledger pool")
    assert len(asked) == 1, "a plain search never asks for live matches"


def test_full_search_puts_an_exact_id_first(env: Env) -> None:
    fusion_corpus(env)
    env.add("runbook-42", "unrelated words", tags=["tenant/a"])
    env.add("secret-1", "private words", scope="private", tags=["user:u1"])
    env.add("other-9", "tenant b words", tags=["tenant/b"])
    searcher = env.searcher()
    got = searcher.hybrid_search_full("runbook-42", partition="a", explain=True)
    assert got[0].item.id == "runbook-42"
    assert got[0].score == EXACT_ID_MATCH_SCORE
    assert got[0].explanation is not None and got[0].explanation.channels == ["exact_id"]
    assert ids(got).count("runbook-42") == 1
    assert all(r.score < EXACT_ID_MATCH_SCORE for r in got[1:])
    assert searcher.hybrid_search_full(" runbook-42 ", partition="a")[0].score == 100.0
    # Never for what the caller may not see, another kind, or a plain search.
    for query, partition, kind in (
        ("secret-1", "*", ""),
        ("other-9", "a", ""),
        ("runbook-42", "b", ""),
        ("runbook-42", "a", "episode"),
    ):
        hits = searcher.hybrid_search_full(query, kind, partition=partition)
        assert query.strip() not in ids(hits)
        assert all(r.score < EXACT_ID_MATCH_SCORE for r in hits)
    plain = searcher.hybrid_search("runbook-42", partition="a")
    assert all(r.score < EXACT_ID_MATCH_SCORE for r in plain)


# ------------------------------------------------------------ consolidate


def consolidation_corpus(env: Env) -> None:
    for tenant in ("a", "b"):
        env.add(
            f"{tenant}1", *PARA_A, kind="stable_fact", confidence="high", tags=[f"tenant/{tenant}"]
        )
        env.add(
            f"{tenant}2", *PARA_B, kind="stable_fact", confidence="high", tags=[f"tenant/{tenant}"]
        )
        env.add(
            f"{tenant}3",
            *DISTINCT,
            kind="stable_fact",
            confidence="high",
            tags=[f"tenant/{tenant}"],
        )
    env.add("u1", *PARA_A, kind="stable_fact", confidence="high")
    env.add("u2", *PARA_B, kind="stable_fact", confidence="high")


def snapshot_items(store: Store) -> list[Item]:
    return sorted(store.all_items(), key=lambda it: it.id)


def test_consolidate_dry_run_reports_and_writes_nothing(env: Env) -> None:
    consolidation_corpus(env)
    before = snapshot_items(env.store)
    report = env.searcher().consolidate("a")
    assert report.error == "" and report.partition == "a" and not report.applied
    assert report.scanned == 3
    assert len(report.groups) == 1
    g = report.groups[0]
    assert g.kind == "stable_fact"
    assert {g.keep, *g.superseded} == {"a1", "a2"}
    assert len(g.scores) == 1 and g.scores[0] >= 0.3
    assert report.superseded == 1
    assert snapshot_items(env.store) == before


def test_consolidate_apply_retires_members_into_the_keeper(env: Env) -> None:
    consolidation_corpus(env)
    searcher = env.searcher()
    dry = searcher.consolidate("a")
    report = searcher.consolidate("a", apply=True)
    assert report.applied and report.superseded == 1
    assert report.groups == dry.groups
    g = report.groups[0]
    member = g.superseded[0]
    keeper = env.store.get(g.keep)
    gone = env.store.get(member)
    assert keeper is not None and gone is not None
    assert keeper.supersedes == [member]
    assert gone.status == "superseded"
    assert member not in env.cells and g.keep in env.cells
    found = ids(searcher.hybrid_search_full("payment api timeout ledger", partition="a"))
    assert g.keep in found and member not in found
    # Other partitions and untagged items are untouched.
    for id in ("b1", "b2", "b3", "u1", "u2", "a3"):
        it = env.store.get(id)
        assert it is not None and it.status == "active" and it.supersedes == []
    assert searcher.consolidate("a", apply=True).groups == ()


def test_consolidate_keeps_the_higher_confidence_cell(env: Env) -> None:
    env.add("p1", *PARA_A, kind="operational_pattern", confidence="medium", tags=["tenant/a"])
    env.add("p2", *PARA_B, kind="operational_pattern", confidence="high", tags=["tenant/a"])
    report = env.searcher().consolidate("a")
    assert [(g.keep, g.superseded) for g in report.groups] == [("p2", ("p1",))]


@pytest.mark.parametrize(("human", "derived"), [("k1", "k2"), ("k2", "k1")])
def test_consolidate_keeps_the_human_cell_whichever_id_sorts_first(
    env: Env, human: str, derived: str
) -> None:
    env.add(
        human, *PARA_A, kind="stable_fact", confidence="high", origin="human", tags=["tenant/a"]
    )
    env.add(
        derived, *PARA_B, kind="stable_fact", confidence="high", origin="derived", tags=["tenant/a"]
    )
    report = env.searcher().consolidate("a")
    assert [(g.keep, g.superseded) for g in report.groups] == [(human, (derived,))]
    assert report.groups[0].scores[0] >= 0.3


@pytest.mark.parametrize("partition", ["", "*", "unknown"])
def test_consolidate_fails_closed(env: Env, partition: str) -> None:
    consolidation_corpus(env)
    before = snapshot_items(env.store)
    searcher = env.searcher(resolve_strict={"a": "a", "alpha": "a", "b": "b"}.get)
    report = searcher.consolidate(partition, apply=True)
    assert report.error
    assert (report.partition, report.scanned, report.groups) == ("", 0, ())
    assert (report.superseded, report.applied) == (0, False)
    assert snapshot_items(env.store) == before
    aliased = searcher.consolidate("alpha")
    assert aliased.error == "" and aliased.partition == "a" and aliased.scanned == 3


def test_consolidate_never_takes_a_shared_fact_from_another_partition(env: Env) -> None:
    env.add("a1", *PARA_A, kind="stable_fact", confidence="high", tags=["tenant/a"])
    env.add("a2", *PARA_B, kind="stable_fact", confidence="high", tags=["tenant/a", "shared"])
    searcher = env.searcher()
    query = "payment api timeout"
    assert ids(searcher.hybrid_search(query, partition="b")) == ["a2"]
    searcher.consolidate("a", apply=True)
    # Partition b could read the shared fact; a sweep of partition a must not
    # leave it with nothing.
    assert ids(searcher.hybrid_search(query, partition="b")) != []


# ------------------------------------------------------------ determinism

CORPUS = [
    ("c1", "ledger pool size", "the ledger db pool allows 20 connections"),
    ("c2", "deploy pipeline", "canary stage then full rollout"),
    ("c3", "payment retries", "ledger writes retried three times"),
    ("c4", "quarterly tax filing", "deadline in april"),
    ("c5", "ledger replica lag", "seconds behind the primary"),
    ("c6", "auth token refresh", "tokens expire after one hour"),
]
QUERIES = ["ledger pool", "ledger retries quokka", "deployments", "wombat", "token ledger lag"]


def build(clock: FakeClock, rows: Sequence[tuple[str, str, str]]) -> Env:
    env = Env(clock)
    for id, title, content in rows:
        env.add(id, title, content)
    return env


def test_the_same_search_twice_gives_the_same_results(clock: FakeClock) -> None:
    searcher = build(clock, CORPUS).searcher()
    for q in QUERIES:
        first = [(r.item.id, r.score) for r in searcher.hybrid_search(q)]
        assert first == [(r.item.id, r.score) for r in searcher.hybrid_search(q)]


def test_insertion_order_does_not_change_results(clock: FakeClock) -> None:
    forward = build(clock, CORPUS).searcher()
    backward = build(clock, CORPUS[::-1]).searcher()
    for q in QUERIES:
        assert ids(forward.hybrid_search(q)) == ids(backward.hybrid_search(q)), q
        assert ids(forward.hybrid_search_full(q)) == ids(backward.hybrid_search_full(q)), q


def test_equal_similarity_ties_break_by_id_not_insertion_order(clock: FakeClock) -> None:
    rows = [("x", "ledger pool", "twin text"), ("y", "ledger pool", "twin text")]
    forward = build(clock, rows).searcher()
    backward = build(clock, rows[::-1]).searcher()
    assert ids(forward.hybrid_search("quokka")) == ids(backward.hybrid_search("quokka"))


# ------------------------------------------------------------------ with_


def test_with_returns_a_copy_that_shares_statistics(env: Env) -> None:
    fusion_corpus(env)
    base = env.searcher()
    fused = base.with_(lambda c: setattr(c, "always_fuse", True))
    assert fused is not base and fused.stats is base.stats
    assert fused.config is not base.config
    assert base.config.always_fuse is False and fused.config.always_fuse is True
    assert fused.store() is base.store() is env.store
    base.hybrid_search("ledger pool")
    assert env.calls == []
    fused.hybrid_search("ledger pool")
    assert env.calls == [["ledger pool"]]
    snap = base.stats.snapshot()
    assert (snap.total, snap.kw_voice_hits, snap.kw_voice_misses) == (2, 1, 1)


def test_searcher_requires_a_store() -> None:
    with pytest.raises(TypeError):
        Searcher(SearchConfig(store=object()))  # type: ignore[arg-type]


def test_keyword_ranked_ranks_like_keyword_hits_without_reading_items(clock: FakeClock) -> None:
    reads: list[str] = []
    store = Store(Config(clock=clock, read=lambda items: reads.extend(it.id for it in items)))
    for i, title in enumerate(["ledger pool", "ledger pool size", "pool party", "tax"]):
        store.upsert(Item(id=f"i{i}", kind="note", title=title, tags=[f"tenant/t{i % 2}"]))
    reads.clear()
    for partition in (None, "t0", "t1"):
        ranked, n = store.keyword_ranked("ledger pool", partition=partition)
        assert ranked and reads == [], "keyword_ranked reads no item"
        hits, m = store.keyword_hits("ledger pool", partition=partition)
        assert n == m == 2
        assert [(h.id, h.score) for h in ranked] == [(h.id, h.score) for _, h in hits]
        reads.clear()
    assert [h.id for h in store.keyword_ranked("ledger pool", limit=1)[0]] == ["i0"]
    assert store.keyword_ranked("?!") == ([], 0)


def test_a_host_predicate_hides_hits_from_every_depth_of_the_score_pool(clock: FakeClock) -> None:
    # The 60 best lexical hits are hidden by the host: the head the searcher
    # reads and filters (4 x limit) holds none it may return; the visible
    # ones come from deeper in the pool, each checked when it is read.
    store = Store(Config(clock=clock))
    cells = CellStore(HashEmbedder(dim=DIM))
    cells.attach(store)
    for i in range(FUSION_POOL):
        title = "ledger pool quokka" if i < 60 else f"ledger note {i}"
        store.upsert(Item(id=f"n{i:03d}", kind="note", title=title))

    def visible(item: Item, partition: str) -> bool:
        return int(item.id[1:]) >= 60

    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, visible=visible))
    for search in (searcher.hybrid_search, searcher.hybrid_search_full):
        got = search("ledger pool quokka", limit=5)
        assert len(got) == 5
        assert all(visible(r.item, "") for r in got), ids(got)


# ------------------------------------------------------------- spreading


def thread(env: Env, weight: float = 1.0, *, on_answer: bool = False, **answer: Any) -> None:
    """A question turn and its answer, linked ``precedes``; the answer shares no word."""
    link = [ThoughtLink(to_id="q", relation="precedes", weight=weight)]
    env.add(
        "q",
        "did you visit the quokka sanctuary",
        links=[] if on_answer else [ThoughtLink(to_id="a", relation="precedes", weight=weight)],
    )
    env.add("a", "yes, last spring with my sister", links=link if on_answer else [], **answer)
    env.add("z", "my sister lives in perth")


@pytest.mark.parametrize("on_answer", [False, True])
def test_a_hit_lends_part_of_its_score_to_the_items_it_is_linked_to(
    env: Env, on_answer: bool
) -> None:
    # Either end may declare the link: an association works both ways.
    thread(env, on_answer=on_answer)
    assert ids(env.searcher().hybrid_search("quokka sanctuary")) == ["q"]
    got = env.searcher(spread_relations=("precedes",)).hybrid_search(
        "quokka sanctuary", explain=True
    )
    assert ids(got) == ["q", "a"]
    q, a = (r.explanation for r in got)
    assert q is not None and a is not None and q.fused_score is not None
    assert a.channels == ["spread"] and a.spread_from == "q"
    assert a.spread_score == pytest.approx(SPREAD_DECAY * q.fused_score)
    assert a.fused_score == pytest.approx(a.spread_score)


def test_the_links_weight_scales_the_loan(env: Env) -> None:
    thread(env, weight=0.5)
    got = env.searcher(spread_relations=("precedes",)).hybrid_search(
        "quokka sanctuary", explain=True
    )
    q, a = (r.explanation for r in got)
    assert q is not None and a is not None and q.fused_score is not None
    assert a.spread_score == pytest.approx(SPREAD_DECAY * 0.5 * q.fused_score)


def test_only_the_named_relations_spread(env: Env) -> None:
    thread(env)
    for relations in [(), ("explains",)]:
        got = env.searcher(spread_relations=relations).hybrid_search("quokka sanctuary")
        assert ids(got) == ["q"], relations


def test_a_loan_adds_to_a_neighbours_own_score(env: Env) -> None:
    # z matches "sister" itself; a matches it too and is the question's answer:
    # the loan puts a above z, which has the same lexical score.
    thread(env)
    searcher = env.searcher(spread_relations=("precedes",), always_fuse=True)
    got = searcher.hybrid_search("quokka sanctuary sister", explain=True)
    by_id = {r.item.id: r.explanation for r in got}
    assert ids(got).index("a") < ids(got).index("z")
    a, z = by_id["a"], by_id["z"]
    assert a is not None and z is not None and a.fused_score is not None
    assert a.lexical_score == z.lexical_score
    assert a.spread_score is not None and z.spread_score is None
    own = LEXICAL_WEIGHT * (a.lexical_norm or 0.0) + (1 - LEXICAL_WEIGHT) * (a.semantic_norm or 0.0)
    assert a.fused_score == pytest.approx(own + a.spread_score)


def test_spreading_never_reaches_an_item_the_caller_cannot_see(env: Env) -> None:
    thread(env, tags=["tenant/b"])
    searcher = env.searcher(spread_relations=("precedes",))
    assert ids(searcher.hybrid_search("quokka sanctuary", partition="c")) == ["q"]
    assert ids(searcher.hybrid_search("quokka sanctuary", partition="b")) == ["q", "a"]
