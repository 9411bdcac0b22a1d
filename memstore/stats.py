"""Search statistics: counters and phase timings, in process and to a host sink.

Every hybrid search is counted (``search.total``, ``search.keyword_hits``...)
and timed by path (lexical fast path or fused), by phase (lexical, embed,
index, hydrate, rerank) and by caller. Durations are summed in nanoseconds
beside a count, so a mean is read as a quotient and never stored.

>>> stats = SearchStats()
>>> stats.add(STAT_TOTAL)
>>> stats.observe("search.phase.lexical", 0.002)
>>> snap = stats.snapshot()
>>> snap.total, snap.phases.lexical.count, snap.phases.lexical.avg_ms
(1, 1, 2.0)
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "PHASES",
    "STAT_EXHAUSTIVE_FALLBACKS",
    "STAT_KEYWORD_HITS",
    "STAT_KW_TRIGRAM_HITS",
    "STAT_KW_VOICE_HITS",
    "STAT_KW_VOICE_MISSES",
    "STAT_SEMANTIC_CALLS",
    "STAT_SEMANTIC_FALLBACKS",
    "STAT_TOTAL",
    "CallerStat",
    "PhaseStat",
    "PhaseStats",
    "SearchStats",
    "SearchStatsSnapshot",
    "StatsSink",
    "snapshot_from_ops",
]

STAT_TOTAL = "search.total"
"""Every hybrid search call."""
STAT_KEYWORD_HITS = "search.keyword_hits"
"""Calls where the lexical pass ran (always, on every call)."""
STAT_SEMANTIC_CALLS = "search.semantic_calls"
"""Calls where semantic search ran (lexical was not confident, or a full search)."""
STAT_SEMANTIC_FALLBACKS = "search.semantic_fallbacks"
"""Semantic searches that failed and fell back to lexical only."""
STAT_EXHAUSTIVE_FALLBACKS = "search.exhaustive_fallbacks"
"""Calls rescued from zero results by the exhaustive exact-cosine scan."""
STAT_KW_TRIGRAM_HITS = "search.kw_trigram_hits"
"""Keyword searches where the fuzzy trigram channel supplied a final hit."""
STAT_KW_VOICE_HITS = "search.kw_voice_hits"
"""Calls served by the confident lexical fast path (no embedding call)."""
STAT_KW_VOICE_MISSES = "search.kw_voice_misses"
"""Calls that fell through to semantic fusion."""

LEXICAL_PATH = "search.path.lexical"
FUSED_PATH = "search.path.fused"
PHASES = ("lexical", "embed", "index", "hydrate", "rerank")
"""The phases a search is timed by, each under ``search.phase.<name>``."""
CALLER_PREFIX = "search.caller."
HEADROOM_PREFIX = "search.headroom."

_COUNTERS = (
    STAT_TOTAL,
    STAT_KEYWORD_HITS,
    STAT_SEMANTIC_CALLS,
    STAT_SEMANTIC_FALLBACKS,
    STAT_EXHAUSTIVE_FALLBACKS,
    STAT_KW_TRIGRAM_HITS,
    STAT_KW_VOICE_HITS,
    STAT_KW_VOICE_MISSES,
)


class StatsSink(Protocol):
    """Where a host keeps its counters: ``add`` a count, ``observe`` a duration.

    A host typically keeps ``<name>.count`` and ``<name>.ns`` beside each
    observed name. Both may be called from several threads.
    """

    def add(self, name: str, n: int) -> None: ...

    def observe(self, name: str, seconds: float) -> None: ...


@dataclass(frozen=True, slots=True)
class PhaseStat:
    """One phase's mean latency and how many calls ran it."""

    avg_ms: float = 0.0
    count: int = 0


@dataclass(frozen=True, slots=True)
class PhaseStats:
    """Per-phase latency; counts differ by design (a fast path never embeds)."""

    lexical: PhaseStat = PhaseStat()
    embed: PhaseStat = PhaseStat()
    index: PhaseStat = PhaseStat()
    hydrate: PhaseStat = PhaseStat()
    rerank: PhaseStat = PhaseStat()


@dataclass(frozen=True, slots=True)
class CallerStat:
    """One caller's search count and mean duration."""

    caller: str
    count: int
    avg_ms: float


@dataclass(frozen=True, slots=True)
class SearchStatsSnapshot:
    """A point-in-time copy of the search counters."""

    total: int = 0
    keyword_hits: int = 0
    semantic_calls: int = 0
    semantic_fallbacks: int = 0
    exhaustive_fallbacks: int = 0
    kw_trigram_hits: int = 0
    kw_voice_hits: int = 0
    kw_voice_misses: int = 0
    avg_lexical_ms: float = 0.0
    """Mean in-process duration of a call served by the lexical fast path."""
    avg_fused_ms: float = 0.0
    """Mean in-process duration of a fused (lexical + semantic) call."""
    lexical_count: int = 0
    fused_count: int = 0
    phases: PhaseStats = PhaseStats()
    by_caller: tuple[CallerStat, ...] = ()
    headroom_rows: int = 0
    headroom_truncated: int = 0
    headroom_chars_in: int = 0
    headroom_chars_out: int = 0


def _avg_ms(ops: Mapping[str, int], name: str) -> tuple[float, int]:
    count = ops.get(f"{name}.count", 0)
    ns = ops.get(f"{name}.ns", 0)
    return (ns / count / 1e6 if count else 0.0), count


def snapshot_from_ops(ops: Mapping[str, int]) -> SearchStatsSnapshot:
    """Build a snapshot from counters a host keeps itself (e.g. summed across replicas).

    ``ops`` is keyed by this module's names: plain counter names, and
    ``<name>.count`` / ``<name>.ns`` for durations.
    """
    lexical_ms, lexical_count = _avg_ms(ops, LEXICAL_PATH)
    fused_ms, fused_count = _avg_ms(ops, FUSED_PATH)
    phases = {}
    for phase in PHASES:
        ms, count = _avg_ms(ops, f"search.phase.{phase}")
        phases[phase] = PhaseStat(ms, count)
    callers = sorted(
        k[len(CALLER_PREFIX) : -len(".count")]
        for k in ops
        if k.startswith(CALLER_PREFIX) and k.endswith(".count")
    )
    by_caller = []
    for caller in callers:
        ms, count = _avg_ms(ops, CALLER_PREFIX + caller)
        by_caller.append(CallerStat(caller, count, ms))
    return SearchStatsSnapshot(
        total=ops.get(STAT_TOTAL, 0),
        keyword_hits=ops.get(STAT_KEYWORD_HITS, 0),
        semantic_calls=ops.get(STAT_SEMANTIC_CALLS, 0),
        semantic_fallbacks=ops.get(STAT_SEMANTIC_FALLBACKS, 0),
        exhaustive_fallbacks=ops.get(STAT_EXHAUSTIVE_FALLBACKS, 0),
        kw_trigram_hits=ops.get(STAT_KW_TRIGRAM_HITS, 0),
        kw_voice_hits=ops.get(STAT_KW_VOICE_HITS, 0),
        kw_voice_misses=ops.get(STAT_KW_VOICE_MISSES, 0),
        avg_lexical_ms=lexical_ms,
        avg_fused_ms=fused_ms,
        lexical_count=lexical_count,
        fused_count=fused_count,
        phases=PhaseStats(**phases),
        by_caller=tuple(by_caller),
        headroom_rows=ops.get(HEADROOM_PREFIX + "rows", 0),
        headroom_truncated=ops.get(HEADROOM_PREFIX + "truncated", 0),
        headroom_chars_in=ops.get(HEADROOM_PREFIX + "chars_in", 0),
        headroom_chars_out=ops.get(HEADROOM_PREFIX + "chars_out", 0),
    )


@dataclass
class SearchStats:
    """Counts hybrid search in process and forwards every event to ``sink`` (if any)."""

    sink: StatsSink | None = None
    _ops: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to a counter."""
        with self._lock:
            self._ops[name] = self._ops.get(name, 0) + n
        if self.sink is not None:
            self.sink.add(name, n)

    def observe(self, name: str, seconds: float) -> None:
        """Record one duration under ``name`` (as ``.count`` and ``.ns``)."""
        ns = int(seconds * 1e9)
        with self._lock:
            self._ops[f"{name}.count"] = self._ops.get(f"{name}.count", 0) + 1
            self._ops[f"{name}.ns"] = self._ops.get(f"{name}.ns", 0) + ns
        if self.sink is not None:
            self.sink.observe(name, seconds)

    def record_headroom(self, rows: int, truncated: int, chars_in: int, chars_out: int) -> None:
        """Fold in one result-compression call's row and character counts."""
        for name, n in (
            ("rows", rows),
            ("truncated", truncated),
            ("chars_in", chars_in),
            ("chars_out", chars_out),
        ):
            self.add(HEADROOM_PREFIX + name, n)

    def ops(self) -> dict[str, int]:
        """A copy of the raw counters (the form :func:`snapshot_from_ops` reads)."""
        with self._lock:
            return dict(self._ops)

    def snapshot(self) -> SearchStatsSnapshot:
        """A point-in-time snapshot: fast-path hits versus fused searches, and where time went."""
        return snapshot_from_ops(self.ops())
