"""Shaping a fused list into results: rerank multipliers, collapse, sources, link expansion.

After fusion a search has candidates in fused order. Shaping turns them into
results: each gets :func:`~memstore.rerank.rerank_base_score` of its rank
times the multipliers below (the host's lifecycle state, anchors, watch items,
recency); near-duplicates collapse into their best-ranked member; and, when
configured, a hit is replaced by the source it links to, or results gain the
items they link to. Both search paths share these rules; the lean path
(:mod:`memstore.search._lean`) computes the multipliers over arrays instead.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstore.consolidate import CONSOLIDATION_KINDS
from memstore.item import EXACT_ID_MATCH_SCORE, KIND_WATCH_ITEM, STATUS_ACTIVE, Item
from memstore.rerank import RERANK_RANK_DECAY, rerank_base_score
from memstore.search._collapse import Collapse
from memstore.search._fusion import Candidate
from memstore.search._types import Explanation, SearchConfig, SearchResult

if TYPE_CHECKING:
    from memstore.search._searcher import Searcher

__all__ = [
    "ANCHOR_BOOST",
    "RECENT_BOOST",
    "RECENT_WINDOW",
    "STATE_OPEN_BOOST",
    "STATE_RESOLVED_PENALTY",
    "WATCH_BOOST",
    "absorb",
    "collapse",
    "expand",
    "multipliers",
    "replace_sources",
    "rerank",
    "settled",
    "settled_depth",
]

STATE_OPEN_BOOST = 1.3
"""Multiplier for an item the host knows is still open."""
STATE_RESOLVED_PENALTY = 0.7
"""Multiplier for an item the host knows is resolved."""
ANCHOR_BOOST = 1.7
"""Multiplier for a summary the host keeps refreshed (the largest one)."""
WATCH_BOOST = 1.2
"""Multiplier for an active watch item."""
RECENT_BOOST = 1.1
"""Multiplier for an item updated within :data:`RECENT_WINDOW`."""
RECENT_WINDOW = _dt.timedelta(days=1)
"""How recent an update earns :data:`RECENT_BOOST`."""


def multipliers(cfg: SearchConfig, item: Item, now: _dt.datetime) -> dict[str, float]:
    """The rerank multipliers that apply to ``item``, in the order they multiply."""
    out: dict[str, float] = {}
    if cfg.state is not None:
        is_open, known = cfg.state(item)
        if known:
            out["state"] = STATE_OPEN_BOOST if is_open else STATE_RESOLVED_PENALTY
    if cfg.anchor is not None and cfg.anchor(item):
        out["anchor"] = ANCHOR_BOOST
    if item.kind == KIND_WATCH_ITEM and item.status == STATUS_ACTIVE:
        out["watch"] = WATCH_BOOST
    if item.updated_at is not None and now - item.updated_at <= RECENT_WINDOW:
        out["recency"] = RECENT_BOOST
    return out


def settled_depth(cfg: SearchConfig, limit: int) -> int:
    """How many fused candidates the rerank must see for its first ``limit`` to be final.

    The rerank scores a candidate of fused rank ``r`` by ``rerank_base_score(r)``
    times its multipliers, so a candidate ranked deep with large multipliers
    can overtake one ranked higher with none: a search that shaped only as
    many candidates as its limit could answer a larger limit with another
    order in its first places. A candidate ranked ``r`` scores at most
    ``boost * base(r)`` (every boost the configuration can give) and the
    ``limit``-th of the first ``limit`` at least ``floor * base(limit - 1)``
    (the smallest multiplier), so from the depth returned on no candidate can
    reach the first ``limit``: ``search(q, limit=k)`` is then the first ``k``
    of any larger limit's results. A near-duplicate collapse can leave the
    ``limit``-th result further down: :func:`settled` tells the searcher to
    look deeper then.
    """
    boost, floor = _bounds(cfg)
    # boost / (1 + d r) < floor / (1 + d (limit - 1))  <=>  r > the bound below.
    bound = (boost / floor * (1.0 + RERANK_RANK_DECAY * (limit - 1)) - 1.0) / RERANK_RANK_DECAY
    return max(limit, math.floor(bound) + 2)  # + 1 for the strict "<", + 1 against rounding


def settled(cfg: SearchConfig, results: Sequence[SearchResult], limit: int, depth: int) -> bool:
    """Whether ``results``, shaped from the first ``depth`` fused candidates, are final.

    They are when no candidate from rank ``depth`` on could score above the
    ``limit``-th result (:func:`settled_depth` assumes that result is among
    the first ``limit`` candidates; a near-duplicate collapse can make it a
    later one, with a lower score), or when fewer than ``depth`` candidates
    were found (there is nothing further down).
    """
    if len(results) < limit:
        return False
    boost, _ = _bounds(cfg)
    return results[limit - 1].score > boost * rerank_base_score(depth) * (1.0 + 1e-9)


def _bounds(cfg: SearchConfig) -> tuple[float, float]:
    """The largest product of multipliers a candidate can get, and the smallest one."""
    boost, floor = WATCH_BOOST * RECENT_BOOST, 1.0
    if cfg.anchor is not None:
        boost *= ANCHOR_BOOST
    if cfg.state is not None:
        boost *= STATE_OPEN_BOOST
        floor = STATE_RESOLVED_PENALTY
    return boost, floor


def rerank(
    cfg: SearchConfig, ordered: Sequence[Candidate], limit: int, explain: bool
) -> list[SearchResult]:
    """Score candidates by rank and multipliers, sort (ties by id), collapse, truncate."""
    now = cfg.store.config.clock()
    scored: list[SearchResult] = []
    for rank, c in enumerate(ordered):
        if c.fused >= EXACT_ID_MATCH_SCORE:
            scored.append(SearchResult(c.item, EXACT_ID_MATCH_SCORE, 0, c.via, c.explanation))
            continue
        base = rerank_base_score(rank)
        mult = multipliers(cfg, c.item, now)
        score = base
        for m in mult.values():
            score *= m
        if c.explanation is not None:
            c.explanation.fused_score = c.fused
            c.explanation.base_score = base
            c.explanation.multipliers = mult
        scored.append(SearchResult(c.item, score, 0, c.via, c.explanation))
    scored.sort(key=lambda r: (-r.score, r.item.id))
    return collapse(cfg, scored)[: max(limit, 0)]


def collapse(cfg: SearchConfig, results: list[SearchResult]) -> list[SearchResult]:
    """Two passes: the host's ``collapse_key``, then near-duplicate knowledge cells."""
    key_fn = cfg.collapse_key
    if key_fn is not None:
        kept: list[SearchResult] = []
        by_key: dict[str, SearchResult] = {}
        for r in results:
            key = key_fn(r.item)
            if key and key in by_key:
                absorb(by_key[key], r)
                continue
            if key:
                by_key[key] = r
            kept.append(r)
        results = kept
    survivors: list[SearchResult] = []
    restated = Collapse()
    knowledge: list[SearchResult] = []  # the knowledge survivors, as Collapse numbers them
    for r in results:
        if r.item.kind in CONSOLIDATION_KINDS:
            into = restated.into(r.item)
            if into is not None:
                absorb(knowledge[into], r)
                continue
            knowledge.append(r)
        survivors.append(r)
    return survivors


def absorb(survivor: SearchResult, other: SearchResult) -> None:
    """``other`` collapses into ``survivor``: it counts there (with what it had absorbed)."""
    survivor.collapsed_count += 1 + other.collapsed_count
    if survivor.explanation is not None:
        survivor.explanation.collapsed.append(other.item.id)


def replace_sources(
    searcher: Searcher, ordered: list[Candidate], partition: str, explain: bool
) -> list[Candidate]:
    """Replace each candidate that links by ``source_relation`` with its (visible) source."""
    relation = searcher.config.source_relation
    out: list[Candidate] = []
    claimed: set[str] = set()
    for c in ordered:
        source_id = next((lk.to_id for lk in c.item.links if lk.relation == relation), "")
        source = searcher._hydrate(source_id, "", partition) if source_id else None
        if source is None:
            if c.item.id not in claimed:
                claimed.add(c.item.id)
                out.append(c)
            continue
        if source.id in claimed:
            continue  # a better-ranked hit already brought this source
        claimed.add(source.id)
        exp = None
        if explain:
            exp = Explanation(["source"])
            if c.explanation is not None:
                exp = dataclasses.replace(
                    c.explanation, channels=[*c.explanation.channels, "source"]
                )
        out.append(Candidate(source, c.fused, exp, via=c.item.id))
    return out


def expand(
    searcher: Searcher, results: list[SearchResult], partition: str, limit: int, explain: bool
) -> list[SearchResult]:
    """Append up to ``limit`` visible items the results link to (score 0, ``via`` set)."""
    seen = {r.item.id for r in results}
    extra: list[SearchResult] = []
    for r in results:
        for link in r.item.links:
            if len(extra) >= limit:
                break
            if link.to_id in seen:
                continue
            target = searcher._hydrate(link.to_id, "", partition)
            if target is None:
                continue
            seen.add(target.id)
            exp = Explanation(["link"]) if explain else None
            extra.append(SearchResult(target, 0.0, 0, r.item.id, exp))
    return results + extra
