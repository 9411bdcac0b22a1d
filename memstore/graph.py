"""Spreading activation over ThoughtLinks.

Activation starts at 1.0 on each anchor and flows along links in both
directions (a link is an association: recalling the effect recalls the cause
and the cause the effect). Each hop multiplies it by ``decay`` and the link's
weight; an item keeps the best activation any path of at most ``max_depth``
hops gave it. With every factor at most 1, one relaxation round per hop finds
exactly that best value, so the result is deterministic: ties order by id.

>>> edges = {"a": [("b", 1.0)], "b": [("a", 1.0), ("c", 0.5)], "c": [("b", 0.5)]}
>>> spread(["a"], lambda n: edges.get(n, ()), 3, 0.5)
[('b', 0.5), ('c', 0.125)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstore.item import Item, ScoredItem

__all__ = [
    "DEFAULT_CONTEXT_DECAY",
    "DEFAULT_CONTEXT_DEPTH",
    "MAX_DEPTH",
    "Context",
    "Spread",
    "spread",
    "spread_within",
]

MAX_DEPTH = 8
"""Deepest traversal; a depth outside ``1..MAX_DEPTH`` means ``MAX_DEPTH``."""
DEFAULT_CONTEXT_DEPTH = 3
"""Hops :meth:`Store.context` follows by default."""
DEFAULT_CONTEXT_DECAY = 0.6
"""Per-hop decay :meth:`Store.context` uses."""


def spread(
    anchors: Sequence[str],
    neighbours: Callable[[str], Iterable[tuple[str, float]]],
    max_depth: int,
    decay: float,
) -> list[tuple[str, float]]:
    """Best activation of every node reachable from ``anchors``, anchors excluded.

    ``neighbours(node)`` yields ``(other, weight)`` for the nodes one hop away
    that may take part. Returns ``(node, activation)`` by activation descending,
    then id. Cost: O(edges visited x depth): every node the anchors reach, so
    a hub's whole neighbourhood; :func:`spread_within` bounds it.
    """
    return spread_within(anchors, neighbours, max_depth, decay, 0).ranked


@dataclasses.dataclass(frozen=True, slots=True)
class Spread:
    """What a walk bounded by :func:`spread_within` found, and whether it is the whole walk."""

    ranked: list[tuple[str, float]]
    """``(node, activation)``, by activation descending, then id (anchors excluded)."""
    complete: bool
    """``True``: :attr:`ranked` is exactly :func:`spread`'s answer. ``False``: the walk
    reached more than its bound of nodes and stopped; :attr:`ranked` holds the
    bound's worth of them, each scored by the best path found before the stop
    (a real path's activation, at most the node's own in the whole walk)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """What an anchor activates: the answer of ``Memory.context_within``."""

    anchors: list[Item]
    """The items the anchor names (by id, subject or title), by id."""
    related: list[ScoredItem]
    """What spreads from them over the links, best activation first, then id."""
    complete: bool
    """``True``: :attr:`anchors` and :attr:`related` are the whole answer, as an
    unbounded walk gives it. ``False``: more than the bound's worth of items
    were named or reached and the read stopped there; :attr:`related` holds
    the bound's worth it reached, each scored by the best path found before
    the stop (a real path's activation, at most the item's own)."""


def spread_within(
    anchors: Sequence[str],
    neighbours: Callable[[str], Iterable[tuple[str, float]]],
    max_depth: int,
    decay: float,
    reach: int,
) -> Spread:
    """:func:`spread`, stopping once it would reach more than ``reach`` nodes (``0``: never).

    The nodes counted are the distinct ones the walk activates, anchors
    excluded; when there are at most ``reach`` of them the answer is the whole
    walk's, and ``complete`` is ``True``. One more and the walk stops there:
    ``complete`` is ``False`` exactly when the whole walk would find more than
    ``reach`` nodes. ``neighbours`` is read lazily, so a hub's own neighbours
    are read only until the bound is met: the cost is the links of at most
    ``reach`` nodes (and of the anchors), ``max_depth`` times, never the
    graph's.

    >>> hub = {"h": [(f"s{n}", 1.0) for n in range(5)]}
    >>> spread_within(["h"], lambda n: hub.get(n, ()), 3, 0.5, 3)
    Spread(ranked=[('s0', 0.5), ('s1', 0.5), ('s2', 0.5)], complete=False)
    >>> spread_within(["h"], lambda n: hub.get(n, ()), 3, 0.5, 5).complete
    True
    """
    if not 1 <= max_depth <= MAX_DEPTH:
        max_depth = MAX_DEPTH
    best: dict[str, float] = dict.fromkeys(anchors, 1.0)
    bound = len(best) + reach if reach > 0 else 0
    frontier = sorted(best)
    complete = True
    for _ in range(max_depth):
        # Each round extends the previous round's paths by one hop: read the
        # scores as they stood before it, so no path grows two hops in a round.
        before = dict(best)
        improved: set[str] = set()
        for node in frontier:
            base = before[node] * decay
            for other, weight in neighbours(node):
                score = base * weight
                if score > best.get(other, 0.0):
                    if bound and other not in best and len(best) >= bound:
                        complete = False
                        break
                    best[other] = score
                    improved.add(other)
            if not complete:
                break
        if not improved or not complete:
            break
        frontier = sorted(improved)
    anchor_set = set(anchors)
    ranked = sorted(
        ((n, s) for n, s in best.items() if n not in anchor_set), key=lambda p: (-p[1], p[0])
    )
    return Spread(ranked, complete)
