"""What a search reads: each channel's hits, under the caller's visibility.

The :class:`~memstore.search._searcher.Searcher` decides which channels run
and fuses what they find; the functions here go to the store and the vector
index for it. Each keeps to one rule: an entry or item the caller may not
read never takes a slot a visible one would have had. Under the default
visibility rule that is the indexes' own work (partitions as label sets and
masks, :class:`~memstore._entry_rule.ReadableAt`); a host's ``visible`` or
``doc_visible`` predicate is called per hit instead.

- :func:`lexical_hits`: the keyword channel (the store's lexical index);
- :func:`semantic_hits`: the vector channel (the index's graph or exact scan);
- :func:`bm25_hits`: the query's words scored by BM25, a third channel;
- :func:`embed_query`: the query's vector, timed;
- :func:`doc_visible` and :func:`item_visible`: what an index entry, or an
  item, must pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstore._entry_rule import ReadableAt
from memstore._lexhits import LexicalColumns
from memstore._lexindex import LexicalHit, LexicalHits
from memstore.item import SCOPE_PRIVATE, Item
from memstore.search._fusion_rules import cut
from memstore.search._prior import INFO_PRIOR_SEMANTIC
from memstore.search._slothits import SlotHits
from memstore.search._types import SearchConfig, VectorIndex
from memstore.search._visibility import default_visible
from memstore.stats import SearchStats
from memstore.tags import PARTITION_ALL, service_from_tags

__all__ = [
    "bm25_hits",
    "doc_visible",
    "embed_query",
    "item_visible",
    "lexical_hits",
    "semantic_hits",
]


def item_visible(cfg: SearchConfig, item: Item, partition: str) -> bool:
    """Whether the caller may read ``item`` in ``partition``: the host's ``visible``
    predicate, or the default rule."""
    fn = cfg.visible
    return fn(item, partition) if fn is not None else default_visible(item, partition)


def doc_visible(cfg: SearchConfig, partition: str, kind: str) -> Callable[[Any], bool]:
    """What an index entry must pass, checked inside the vector search.

    The engine's own rules first (no private entry, the kind filter or no
    non-searchable kind, not past its deadline), so an entry the caller
    cannot read never takes a slot of the pool nor sets the gap baseline;
    then the host's ``doc_visible`` (without one, partitions are
    restricted by the index's label sets, see :func:`semantic_hits`).
    """
    host_fn = cfg.doc_visible
    hidden = () if kind else cfg.store.vocabulary().non_searchable
    now = cfg.store.config.clock()
    if host_fn is None and not hidden:  # the common case, with fewer tests
        return ReadableAt(now, kind)  # an index may apply it as a mask

    def visible(e: Any) -> bool:
        if e.scope == SCOPE_PRIVATE or (kind and e.kind != kind) or e.kind in hidden:
            return False
        deadline = getattr(e, "stale_after", None)
        if deadline is not None and now >= deadline:
            return False
        return host_fn is None or host_fn(e, partition)

    return visible


def semantic_hits(
    cfg: SearchConfig,
    stats: SearchStats,
    cells: VectorIndex,
    vec: npt.NDArray[np.float32],
    kind: str,
    subject: str,
    partition: str,
    pool: int,
    exact: bool,
    slot: dict[str, int] | None = None,
) -> Sequence[tuple[Any, float]]:
    """The index's hits after the cut-offs; as :class:`SlotHits` over ``slot`` (the lean
    fusion's) when the index can and no cut-off or prior reads them one by one."""
    partitions = None
    if cfg.doc_visible is None and partition != PARTITION_ALL:
        partitions = (partition, "") if partition else ("",)
    visible = doc_visible(cfg, partition, kind)
    strict = bool(subject) and cfg.subject_filter
    if strict:
        visible = _about(subject, visible)

    # A strict subject also routes: its own entries are scanned, so
    # the filter never starves the walk of the few entries it keeps.
    route = subject if (cfg.subject_routing or strict) and subject else None
    t0 = time.perf_counter()
    by_slot = getattr(cells, "search_slots", None) if slot is not None else None
    plain = cfg.semantic_gap <= 0 and not cfg.semantic_cliff
    if by_slot is not None and plain and cfg.info_prior != INFO_PRIOR_SEMANTIC:
        got: SlotHits = by_slot(
            vec, pool, slot, visible=visible, subject=route, partitions=partitions, exact=exact
        )
        stats.observe("search.phase.index", time.perf_counter() - t0)
        return got
    hits = cells.search_vector(
        vec, pool, visible=visible, subject=route, partitions=partitions, exact=exact
    )
    stats.observe("search.phase.index", time.perf_counter() - t0)
    return cut(hits, cfg.semantic_gap, cfg.semantic_cliff)


def bm25_hits(
    cfg: SearchConfig, query: str, kind: str, subject: str, partition: str, depth: int
) -> LexicalHits | LexicalColumns:
    """The BM25 channel's best ``depth`` hits (:meth:`~memstore.store.Store.keyword_bm25`).

    Partitioned by the index under the default visibility rule, as the
    lexical channel is; a host ``visible`` predicate is applied when a
    hit's item is read (only those that reach the results are).
    """
    store = cfg.store
    index_partition = None if partition == PARTITION_ALL else partition
    if cfg.visible is not None:
        index_partition = None
    return store._bm25_ranked(query, kind, subject, depth, index_partition, columns=True)


def embed_query(stats: SearchStats, cells: VectorIndex, query: str) -> npt.NDArray[np.float32]:
    """``query``'s vector from ``cells``' embedder, its time observed as the embed phase."""
    t0 = time.perf_counter()
    vec = cells.embed_query(query)
    stats.observe("search.phase.embed", time.perf_counter() - t0)
    return vec


def lexical_hits(
    cfg: SearchConfig, query: str, kind: str, subject: str, partition: str, pool: int, depth: int
) -> tuple[Sequence[LexicalHit], list[Item | None] | None, int]:
    """The lexical channel's best hits the caller may see, their items when read, and
    the number of query tokens.

    Under the default partition rule the index filters partitions itself,
    so ``depth`` hits come back as scores alone (no items: ``None``), and
    their items are read only if they reach the results. A host ``visible``
    predicate needs the items: the best ``4 x pool`` hits are read and
    filtered here (the head the results come from); a deeper pool adds the
    rest as scores alone (item ``None``), to normalise over, and each of
    those is checked when it is read.
    """
    store = cfg.store
    if cfg.visible is None:
        index_partition = None if partition == PARTITION_ALL else partition
        # As columns where the compiled rank makes them: the lean path reads no tuple.
        hits, n = store._keyword_columns(query, kind, subject, depth, index_partition)
        return hits, None, n
    head = 4 * pool
    wide, n = store.keyword_ranked(query, kind, subject, max(head, depth))
    out: list[LexicalHit] = []
    read: list[Item | None] = []
    for h in wide[:head]:
        item = store.get(h.id)
        if item is not None and item_visible(cfg, item, partition):
            out.append(h)
            read.append(item)
    if depth <= pool:
        out, read = out[:pool], read[:pool]
    rest = wide[head:depth]
    out.extend(rest)
    read.extend([None] * len(rest))
    return out, read, n


def _about(subject: str, visible: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """``visible`` narrowed to index entries about ``subject`` (its subject, or its service tag)."""

    def keep(e: Any) -> bool:
        return (e.subject == subject or service_from_tags(e.tags) == subject) and visible(e)

    return keep
