"""Consolidation: retire restatements of one fact, keeping the most trusted cell.

A sweep over one partition's knowledge cells groups near-duplicates (the
rules of :mod:`memstore.neardup`), picks each group's keeper by
:func:`~memstore.neardup.better_routing_fact`, and, when applied, marks every
other member superseded by the keeper (whose ``supersedes`` then lists them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from memstore.item import (
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_WATCH_ITEM,
    Item,
)
from memstore.neardup import better_routing_fact, cluster_near_duplicates, near_duplicate_tokens
from memstore.store import Store
from memstore.tags import PARTITION_ALL, SHARED_TAG, partition_from_tags
from memstore.text import dedup_tokens

__all__ = ["CONSOLIDATION_KINDS", "ConsolidationGroup", "ConsolidationReport", "consolidate"]

CONSOLIDATION_KINDS = (KIND_STABLE_FACT, KIND_OPERATIONAL_PATTERN, KIND_WATCH_ITEM, KIND_HYPOTHESIS)
"""Kinds a consolidation sweeps."""


@dataclass(frozen=True)
class ConsolidationGroup:
    """One near-duplicate cluster: the keeper and the members it absorbs."""

    kind: str
    keep: str
    keep_title: str
    superseded: tuple[str, ...]
    scores: tuple[float, ...]


@dataclass(frozen=True)
class ConsolidationReport:
    """The outcome of a consolidation sweep; ``error`` set (all else zero) when it could not run."""

    partition: str = ""
    scanned: int = 0
    groups: tuple[ConsolidationGroup, ...] = ()
    superseded: int = 0
    applied: bool = False
    error: str = ""


def consolidate(
    store: Store,
    partition: str,
    apply: bool = False,
    visible: Callable[[Item, str], bool] | None = None,
    resolve_strict: Callable[[str], str | None] | None = None,
) -> ConsolidationReport:
    """Group a partition's knowledge cells into near-duplicate clusters; optionally retire.

    Active stable facts, operational patterns, watch items and hypotheses
    visible to ``partition`` (by default: tagged for it) are clustered; each
    cluster's keeper is the most trusted. With ``apply`` every other member is
    marked superseded by the keeper. ``partition`` is required and resolved
    strictly: an empty, ``*`` or unknown name fails closed with ``error`` set.
    ``shared`` cells belong to every partition and are never swept.
    """
    if not partition or partition == PARTITION_ALL:
        return ConsolidationReport(error=f"consolidate needs a partition, got {partition!r}")
    resolved = resolve_strict(partition) if resolve_strict is not None else partition
    if not resolved:
        return ConsolidationReport(error=f"unknown partition {partition!r}")
    now = store.config.clock()
    see = visible or (lambda it, p: partition_from_tags(it.tags) == p)
    cells = [
        it
        for it in store.items()
        if it.kind in CONSOLIDATION_KINDS
        and it.is_active(now)
        and SHARED_TAG not in it.tags
        and see(it, resolved)
    ]
    # Least trusted first: each cluster's head is then the safest merge
    # target (a derived head may take a human restatement, never the
    # reverse), so clusters do not depend on how ids happen to sort.
    cells.sort(key=functools.cmp_to_key(_trust_order))
    groups: list[ConsolidationGroup] = []
    for kind in CONSOLIDATION_KINDS:
        for cluster in cluster_near_duplicates([it for it in cells if it.kind == kind]):
            if len(cluster) < 2:
                continue
            keep = cluster[0]
            for it in cluster[1:]:
                if better_routing_fact(it, keep):
                    keep = it
            members = [it for it in cluster if it.id != keep.id]
            keep_tokens = dedup_tokens(keep)
            scores = tuple(
                near_duplicate_tokens(keep_tokens, dedup_tokens(it))[0] for it in members
            )
            groups.append(
                ConsolidationGroup(
                    kind, keep.id, keep.title, tuple(it.id for it in members), scores
                )
            )
    if apply:
        superseded = sum(
            store.mark_superseded(member, g.keep) for g in groups for member in g.superseded
        )
    else:
        superseded = sum(len(g.superseded) for g in groups)
    return ConsolidationReport(resolved, len(cells), tuple(groups), superseded, apply)


def _trust_order(a: Item, b: Item) -> int:
    """Sort key: the less trusted first (the reverse of ``better_routing_fact``)."""
    if a.id == b.id:
        return 0
    return 1 if better_routing_fact(a, b) else -1
