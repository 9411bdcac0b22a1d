"""Consolidation: retire restatements of one fact, keeping the most trusted cell.

A sweep over one partition's knowledge cells groups near-duplicates (the
rules of :mod:`memstore.neardup`), picks each group's keeper by
:func:`~memstore.neardup.better_routing_fact`, and, when applied, marks every
other member superseded by the keeper (whose ``supersedes`` then lists them).
A member is only ever retired into a keeper the dedup rules let it fold into
(``dedup_comparable(member, keeper)``); one the most trusted cell may not
take stays, or keeps a group of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from memstore.arguments import describe
from memstore.errors import InvalidItemError
from memstore.item import (
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_WATCH_ITEM,
    Item,
)
from memstore.neardup import (
    Incoming,
    better_routing_fact,
    cluster_near_duplicates,
    near_duplicate_tokens,
)
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
    marked superseded by the keeper, if ``dedup_comparable(member, keeper)``:
    a member the keeper may not take (another ``service/`` or ``author/``, a
    human note under a model-written keeper) is kept, or keeps its own group
    of the members it may take; a cluster can so report several groups.
    ``partition`` is required and resolved strictly: an empty, ``*`` or
    unknown name fails closed with ``error`` set.
    ``shared`` cells belong to every partition and are never swept.
    With ``apply`` the clustering and the retirements are one write group
    under the store's lock (one journal transaction): all of it, or, when a
    write is refused, nothing.
    """
    if type(apply) is not bool:  # "false" is truthy: it must not retire anything
        raise InvalidItemError(f"apply must be True or False, got {describe(apply)}")
    if not isinstance(partition, str) or not partition or partition == PARTITION_ALL:
        got = repr(partition) if isinstance(partition, str) else describe(partition)
        return ConsolidationReport(error=f"consolidate needs a partition, got {got}")
    resolved = resolve_strict(partition) if resolve_strict is not None else partition
    if not resolved:
        return ConsolidationReport(error=f"unknown partition {partition!r}")
    if not apply:
        groups, scanned = _groups(store, resolved, visible)
        superseded = sum(len(g.superseded) for g in groups)
        return ConsolidationReport(resolved, scanned, groups, superseded, apply)
    # One write group, judged and applied under the lock: no write lands between
    # the clustering and the retirements, and a retirement the journal refuses
    # undoes the others (one transaction: all of it, or nothing).
    with store.batch():
        groups, scanned = _groups(store, resolved, visible)
        superseded = sum(
            store.mark_superseded(member, g.keep) for g in groups for member in g.superseded
        )
    return ConsolidationReport(resolved, scanned, groups, superseded, apply)


def _groups(
    store: Store, resolved: str, visible: Callable[[Item, str], bool] | None
) -> tuple[tuple[ConsolidationGroup, ...], int]:
    """The near-duplicate groups among ``resolved``'s knowledge cells; how many were scanned."""
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
            for keep, members in _keepers(cluster):
                keep_tokens = dedup_tokens(keep)
                scores = tuple(
                    near_duplicate_tokens(keep_tokens, dedup_tokens(it))[0] for it in members
                )
                groups.append(
                    ConsolidationGroup(
                        kind, keep.id, keep.title, tuple(it.id for it in members), scores
                    )
                )
    return tuple(groups), len(cells)


def _keepers(cluster: list[Item]) -> list[tuple[Item, list[Item]]]:
    """Split a cluster (least trusted first) into keepers and the members each may absorb.

    Members are compared with the cluster's head only, and comparability is
    not transitive (an unscoped head takes ``service/auth`` and
    ``service/billing`` restatements alike), so the keeper is checked against
    each member again. The most trusted cell keeps every member ``m`` with
    ``dedup_comparable(m, keeper)``: ``m`` is the side whose text is retired,
    so a model-written keeper never absorbs a human note, and a member with
    ``author/`` tags goes only to a keeper with the same ones. A member no
    keeper may take becomes a keeper itself (of nothing, if nothing is left
    for it). Keepers come most trusted first; only those that absorb a member
    are returned, each with its members least trusted first (cluster order).
    ``O(members x keepers)``; keepers are few.
    """
    keepers: list[tuple[Item, Incoming, list[Item]]] = []
    for it in reversed(cluster):
        for _keep, side, members in keepers:
            if side.comparable(it):
                members.append(it)
                break
        else:
            keepers.append((it, Incoming(it), []))
    return [(keep, members[::-1]) for keep, _side, members in keepers if members]


def _trust_order(a: Item, b: Item) -> int:
    """Sort key: the less trusted first (the reverse of ``better_routing_fact``)."""
    if a.id == b.id:
        return 0
    return 1 if better_routing_fact(a, b) else -1
