"""The read-side near-duplicate collapse, in time that follows the overlap, not the square.

Results are walked in rank order; a knowledge cell that restates an earlier
survivor of its kind collapses into it (the first such survivor, in rank
order), everything else survives. Asked naively, each result is compared
with every survivor, and each comparison splits both texts into tokens
again: a ``limit=1000`` search over a thousand facts sharing one word made
half a million comparisons and a million tokenisations (15 s with short
facts, two minutes with long ones).

:class:`Collapse` gives the same answer with each item's tokens and
comparison keys derived once, and the survivors indexed by token: two items
sharing no token are never near-duplicates (their Jaccard score is 0 and
nothing of one is contained in the other), so a result meets only the
survivors it shares a token with, in rank order, and of those only the ones
sharing enough of them (a count, no set operation) are compared at all.
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from memstore.item import Item
from memstore.neardup import (
    MEMORY_NEAR_DUP_THRESHOLD,
    NEAR_DUP_CONTAINMENT,
    NEAR_DUP_SHORT_TEXT_THRESHOLD,
    Incoming,
    near_duplicate_tokens,
)
from memstore.text import dedup_tokens

_MIN_SHARE = min(MEMORY_NEAR_DUP_THRESHOLD, NEAR_DUP_SHORT_TEXT_THRESHOLD, NEAR_DUP_CONTAINMENT)
"""The least share of the smaller token set two near-duplicates have in common.

Each branch of :func:`~memstore.neardup.near_duplicate_tokens` implies it: a
Jaccard score of ``t`` means ``t x union >= t x smaller`` tokens shared, and
containment means that share of the smaller set. A survivor sharing fewer
tokens is passed over on the count alone, without a set operation.
"""

__all__ = ["Collapse"]


class Collapse:
    """Survivors so far, and which of them each token appears in.

    >>> from memstore import Item
    >>> fact = "the payment api retries failed ledger writes three times with backoff"
    >>> c = Collapse()
    >>> c.into(Item(id="a", kind="stable_fact", title=fact, confidence="high"))
    >>> c.into(Item(id="b", kind="stable_fact", title=fact + " always", confidence="high"))
    0
    >>> c.into(Item(id="c", kind="hypothesis", title=fact, stale_after=None))  # another kind
    """

    __slots__ = ("_by_token", "_kept", "_sizes")

    def __init__(self) -> None:
        self._kept: list[tuple[Item, frozenset[str]]] = []
        self._by_token: dict[str, list[int]] = {}
        self._sizes = np.zeros(16, np.int64)  # each survivor's token count

    def into(self, item: Item) -> int | None:
        """The survivor (its index among the survivors, in rank order) ``item`` collapses into.

        ``None``: ``item`` survives, and is kept for the results after it.
        Only the kinds in :data:`~memstore.consolidate.CONSOLIDATION_KINDS`
        ever collapse; the caller passes only those (every other item
        survives without being kept here).
        """
        tokens = dedup_tokens(item)
        index, n = self._by_token, len(self._kept)
        hits = list(chain.from_iterable(index.get(t, ()) for t in tokens))
        if hits:
            # How many tokens each survivor shares with the item, counted in one
            # pass; those sharing too few for any branch of the rule drop out here.
            shared = np.bincount(np.asarray(hits, np.intp), minlength=n)
            size = len(tokens)
            enough = shared >= _MIN_SHARE * np.minimum(self._sizes[:n], size)
            incoming: Incoming | None = None
            for i in np.flatnonzero(enough & (shared > 0)).tolist():
                other, other_tokens = self._kept[i]
                if other.kind != item.kind or not near_duplicate_tokens(other_tokens, tokens)[1]:
                    continue
                incoming = incoming or Incoming(item)
                if incoming.comparable(other):
                    return i
        self._kept.append((item, tokens))
        if n == self._sizes.size:
            self._sizes = np.concatenate([self._sizes, np.zeros(n, np.int64)])
        self._sizes[n] = len(tokens)
        for t in tokens:
            index.setdefault(t, []).append(n)
        return None
