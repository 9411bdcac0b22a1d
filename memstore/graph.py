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

from collections.abc import Callable, Iterable, Sequence

__all__ = ["DEFAULT_CONTEXT_DECAY", "DEFAULT_CONTEXT_DEPTH", "MAX_DEPTH", "spread"]

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
    then id. Cost: O(edges visited x depth).
    """
    if not 1 <= max_depth <= MAX_DEPTH:
        max_depth = MAX_DEPTH
    best: dict[str, float] = dict.fromkeys(anchors, 1.0)
    frontier = sorted(best)
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
                    best[other] = score
                    improved.add(other)
        if not improved:
            break
        frontier = sorted(improved)
    anchor_set = set(anchors)
    return sorted(
        ((n, s) for n, s in best.items() if n not in anchor_set), key=lambda p: (-p[1], p[0])
    )
