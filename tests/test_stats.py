"""Search statistics: every counter reaches a host sink, and snapshots read back right."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from conftest import FakeClock

from memstore import Config, Item, Store
from memstore.search import SearchConfig, Searcher
from memstore.stats import (
    FUSED_PATH,
    LEXICAL_PATH,
    PHASES,
    STAT_EXHAUSTIVE_FALLBACKS,
    STAT_KEYWORD_HITS,
    STAT_KW_TRIGRAM_HITS,
    STAT_KW_VOICE_HITS,
    STAT_KW_VOICE_MISSES,
    STAT_SEMANTIC_CALLS,
    STAT_SEMANTIC_FALLBACKS,
    STAT_TOTAL,
    CallerStat,
    PhaseStat,
    SearchStats,
    SearchStatsSnapshot,
    snapshot_from_ops,
)
from memstore_index.cellstore import CellStore
from memstore_index.embedder import EmbeddingError
from memstore_index.hash_embedder import HashEmbedder

COUNTERS = (
    STAT_TOTAL,
    STAT_KEYWORD_HITS,
    STAT_SEMANTIC_CALLS,
    STAT_SEMANTIC_FALLBACKS,
    STAT_EXHAUSTIVE_FALLBACKS,
    STAT_KW_TRIGRAM_HITS,
    STAT_KW_VOICE_HITS,
    STAT_KW_VOICE_MISSES,
)


class RecordingSink:
    """A host's counter ledger: ``<name>`` for counts, ``<name>.count`` / ``.ns`` for durations."""

    def __init__(self) -> None:
        self.added: dict[str, int] = {}
        self.observed: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def add(self, name: str, n: int) -> None:
        with self._lock:
            self.added[name] = self.added.get(name, 0) + n

    def observe(self, name: str, seconds: float) -> None:
        with self._lock:
            self.observed.append((name, seconds))

    def ops(self) -> dict[str, int]:
        out = dict(self.added)
        for name, seconds in self.observed:
            out[f"{name}.count"] = out.get(f"{name}.count", 0) + 1
            out[f"{name}.ns"] = out.get(f"{name}.ns", 0) + int(seconds * 1e9)
        return out

    def names_observed(self) -> set[str]:
        return {name for name, _ in self.observed}


class Env:
    """A store with a CellStore attached whose (real) embedder can be made to fail."""

    def __init__(self) -> None:
        self.store = Store(Config(clock=FakeClock()))
        self.embedder = HashEmbedder(dim=64)
        self.fail_next = 0
        self.calls = 0
        original = self.embedder.embed

        def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
            self.calls += 1
            if self.fail_next > 0:
                self.fail_next -= 1
                raise EmbeddingError("provider down")
            return original(texts)

        self.embedder.embed = embed  # type: ignore[method-assign]
        self.cells = CellStore(self.embedder)
        self.cells.attach(self.store)
        for id, title, content in (
            ("pool", "ledger pool size", "the ledger db pool allows 20 connections"),
            ("dep", "deploy pipeline", "canary stage then full rollout"),
            ("tax", "quarterly tax filing", "deadline in april"),
        ):
            self.store.upsert(Item(id=id, kind="note", title=title, content=content))
        self.calls = 0

    def searcher(self, sink: RecordingSink | None = None) -> Searcher:
        cells = self.cells
        return Searcher(SearchConfig(store=self.store, cells=lambda: cells, stats=sink))


def run_every_path(env: Env, searcher: Searcher) -> None:
    """One search down each path, so every counter moves."""
    searcher.hybrid_search("ledger pool", caller="voice")  # confident: fast path
    searcher.hybrid_search("deployments quokka")  # fuzzy lexical hit, fused
    env.fail_next = 1
    searcher.hybrid_search("ledger quokka", caller="voice")  # semantic fails
    env.fail_next = 1
    searcher.hybrid_search("wombat")  # semantic fails, exhaustive rescues
    searcher.hybrid_search_full("ledger pool")  # full: fused despite confidence


EXPECTED = {
    STAT_TOTAL: 5,
    STAT_KEYWORD_HITS: 5,
    STAT_SEMANTIC_CALLS: 4,
    STAT_SEMANTIC_FALLBACKS: 2,
    STAT_EXHAUSTIVE_FALLBACKS: 1,
    STAT_KW_TRIGRAM_HITS: 1,
    STAT_KW_VOICE_HITS: 1,
    STAT_KW_VOICE_MISSES: 4,
}


def test_every_counter_reaches_the_sink_with_the_right_count() -> None:
    env = Env()
    sink = RecordingSink()
    searcher = env.searcher(sink)
    run_every_path(env, searcher)
    assert {k: v for k, v in sink.added.items() if k in COUNTERS} == EXPECTED
    assert set(sink.added) == set(COUNTERS)
    ops = searcher.stats.ops()
    assert {k: ops.get(k, 0) for k in COUNTERS} == EXPECTED
    snap = searcher.stats.snapshot()
    assert (snap.total, snap.keyword_hits, snap.semantic_calls) == (5, 5, 4)
    assert (snap.semantic_fallbacks, snap.exhaustive_fallbacks, snap.kw_trigram_hits) == (2, 1, 1)
    assert (snap.kw_voice_hits, snap.kw_voice_misses) == (1, 4)
    assert (snap.lexical_count, snap.fused_count) == (1, 4)


def test_durations_reach_the_sink_and_rebuild_the_same_snapshot() -> None:
    env = Env()
    sink = RecordingSink()
    searcher = env.searcher(sink)
    run_every_path(env, searcher)
    assert {LEXICAL_PATH, FUSED_PATH} <= sink.names_observed()
    assert {f"search.phase.{p}" for p in PHASES} <= sink.names_observed()
    assert {"search.caller.voice", "search.caller.internal"} <= sink.names_observed()
    assert all(seconds >= 0 for _, seconds in sink.observed)
    snap = searcher.stats.snapshot()
    assert snapshot_from_ops(sink.ops()) == snap
    assert snapshot_from_ops(searcher.stats.ops()) == snap
    ops = searcher.stats.ops()
    assert snap.avg_fused_ms == pytest.approx(ops[f"{FUSED_PATH}.ns"] / 4 / 1e6)
    assert snap.avg_lexical_ms == pytest.approx(ops[f"{LEXICAL_PATH}.ns"] / 1e6)
    assert snap.avg_fused_ms > 0 and snap.avg_lexical_ms > 0


def test_phase_counts_differ_by_path() -> None:
    env = Env()
    searcher = env.searcher()
    searcher.hybrid_search("ledger pool")
    fast = searcher.stats.snapshot().phases
    assert (fast.lexical.count, fast.rerank.count) == (1, 1)
    assert (fast.embed, fast.index, fast.hydrate) == (PhaseStat(), PhaseStat(), PhaseStat())
    assert env.calls == 0
    searcher.hybrid_search("ledger quokka")
    fused = searcher.stats.snapshot().phases
    assert (fused.lexical.count, fused.rerank.count) == (2, 2)
    assert (fused.embed.count, fused.index.count, fused.hydrate.count) == (1, 1, 1)
    assert fused.embed.avg_ms > 0 and fused.lexical.avg_ms > 0
    assert env.calls == 1


def test_per_caller_counts_and_means() -> None:
    env = Env()
    searcher = env.searcher()
    searcher.hybrid_search("ledger pool", caller="voice")
    searcher.hybrid_search("ledger quokka", caller="voice")
    searcher.hybrid_search("ledger pool")
    ops = searcher.stats.ops()
    snap = searcher.stats.snapshot()
    assert snap.by_caller == (
        CallerStat("internal", 1, ops["search.caller.internal.ns"] / 1e6),
        CallerStat("voice", 2, ops["search.caller.voice.ns"] / 2 / 1e6),
    )


def test_snapshot_lists_exactly_the_callers_observed() -> None:
    stats = SearchStats()
    stats.observe("search.caller.voice", 0.002)
    stats.observe("search.caller.voice", 0.004)
    stats.observe("search.caller.internal", 0.001)
    assert stats.snapshot().by_caller == (
        CallerStat("internal", 1, 1.0),
        CallerStat("voice", 2, 3.0),
    )


def test_snapshot_from_ops_reads_a_hosts_ledger() -> None:
    ops = {
        STAT_TOTAL: 7,
        STAT_KW_VOICE_HITS: 3,
        f"{LEXICAL_PATH}.count": 3,
        f"{LEXICAL_PATH}.ns": 6_000_000,
        f"{FUSED_PATH}.count": 4,
        f"{FUSED_PATH}.ns": 40_000_000,
        "search.phase.embed.count": 4,
        "search.phase.embed.ns": 20_000_000,
        "search.headroom.rows": 9,
    }
    snap = snapshot_from_ops(ops)
    assert (snap.total, snap.kw_voice_hits) == (7, 3)
    assert (snap.avg_lexical_ms, snap.lexical_count) == (2.0, 3)
    assert (snap.avg_fused_ms, snap.fused_count) == (10.0, 4)
    assert snap.phases.embed == PhaseStat(5.0, 4)
    assert snap.phases.lexical == PhaseStat()
    assert snap.headroom_rows == 9
    assert snapshot_from_ops({}) == SearchStatsSnapshot()


def test_headroom_is_summed_and_forwarded() -> None:
    sink = RecordingSink()
    stats = SearchStats(sink)
    stats.record_headroom(3, 1, 100, 40)
    stats.record_headroom(2, 0, 50, 50)
    snap = stats.snapshot()
    assert (snap.headroom_rows, snap.headroom_truncated) == (5, 1)
    assert (snap.headroom_chars_in, snap.headroom_chars_out) == (150, 90)
    assert sink.added == {
        "search.headroom.rows": 5,
        "search.headroom.truncated": 1,
        "search.headroom.chars_in": 150,
        "search.headroom.chars_out": 90,
    }


def test_counting_is_exact_across_threads() -> None:
    sink = RecordingSink()
    stats = SearchStats(sink)

    def work() -> None:
        for _ in range(500):
            stats.add(STAT_TOTAL)
            stats.observe(LEXICAL_PATH, 0.001)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = stats.snapshot()
    assert (snap.total, snap.lexical_count) == (4000, 4000)
    assert sink.added[STAT_TOTAL] == 4000 and len(sink.observed) == 4000


def test_copies_made_by_with_count_into_the_same_stats() -> None:
    env = Env()
    sink = RecordingSink()
    base = env.searcher(sink)
    copy = base.with_(lambda c: setattr(c, "always_fuse", True))
    base.hybrid_search("ledger pool")
    copy.hybrid_search("ledger pool")
    snap = base.stats.snapshot()
    assert (snap.total, snap.kw_voice_hits, snap.kw_voice_misses) == (2, 1, 1)
    assert sink.added[STAT_TOTAL] == 2


def test_dirty_fires_after_every_search() -> None:
    env = Env()
    fired: list[int] = []
    cells = env.cells
    searcher = Searcher(
        SearchConfig(store=env.store, cells=lambda: cells, dirty=lambda: fired.append(1))
    )
    searcher.hybrid_search("ledger pool")
    searcher.hybrid_search("wombat")
    searcher.hybrid_search_full("tax")
    assert len(fired) == 3
