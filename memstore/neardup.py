"""Near-duplicates: when two memory items state one fact, and grouping them.

Two items are compared only when :func:`dedup_comparable` allows it (same
kind, scope and owner, subject, partition, compatible service tag, trust rules); then the
Jaccard similarity of their :func:`~memstore.text.dedup_tokens` decides.

>>> a = Item(kind="stable_fact", title="payment api timeout",
...          content="payment api calls to the ledger time out after 30 seconds under load",
...          confidence="high")
>>> b = Item(kind="stable_fact", title="payment api timeouts",
...          content="under heavy load, ledger calls from the payment api time out after 30s",
...          confidence="high")
>>> near_duplicate_memory(a, b)[1]
True
>>> c = a.clone(title="payment api retry policy", content="failed ledger writes from the "
...             "payment api are retried three times with exponential backoff")
>>> near_duplicate_memory(a, c)  # doctest: +ELLIPSIS
(0.235..., False)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from memstore.item import (
    CONFIDENCE_RANK,
    ORIGIN_DERIVED,
    ORIGIN_HUMAN,
    ORIGIN_OBSERVED,
    ORIGIN_VERIFIED,
    SCOPE_PRIVATE,
    STATUS_ACTIVE,
    Item,
)
from memstore.tags import (
    AUTHOR_TAG_PREFIX,
    SHARED_TAG,
    partition_from_tags,
    private_owner,
    service_tag_value,
)
from memstore.text import dedup_tokens

__all__ = [
    "MEMORY_NEAR_DUP_THRESHOLD",
    "NEAR_DUP_CONTAINMENT",
    "NEAR_DUP_MIN_TOKENS",
    "NEAR_DUP_SHORT_TEXT_THRESHOLD",
    "DedupTokens",
    "Incoming",
    "better_routing_fact",
    "cluster_near_duplicates",
    "dedup_comparable",
    "find_near_duplicate",
    "near_duplicate_memory",
    "near_duplicate_tokens",
]

MEMORY_NEAR_DUP_THRESHOLD = 0.3
"""Jaccard similarity at or above which two comparable items state one fact.

It sits strictly above what two items merely discussing the same subject share
by vocabulary, and at or below what any genuine paraphrase shares. The
fixture ``fixtures/neardup_groups.json`` tunes it, and a test proves the
fixture still separates paraphrases from distinct facts at this value.
"""

NEAR_DUP_MIN_TOKENS = 8
"""Token-set size below which Jaccard stops being a meaningful signal.

When the smaller set is below it, only near-identical text
(:data:`NEAR_DUP_SHORT_TEXT_THRESHOLD`) counts as a duplicate.
"""

NEAR_DUP_SHORT_TEXT_THRESHOLD = 0.8
"""Jaccard similarity short texts need: near-identical (the same token set, or
one extra token once the smaller set has four or more)."""

NEAR_DUP_CONTAINMENT = 0.9
"""Share of the smaller token set contained in the larger that makes a restatement."""

_ORIGIN_TRUST = {ORIGIN_HUMAN: 4, ORIGIN_OBSERVED: 3, ORIGIN_VERIFIED: 2, ORIGIN_DERIVED: 1, "": 1}


def _is_model_written(item: Item) -> bool:
    return item.origin in ("", ORIGIN_DERIVED)


def _owner(item: Item) -> str:
    """A private item's owner (its ``user:`` tag); ``""`` for a shared one."""
    return private_owner(item) if item.scope == SCOPE_PRIVATE else ""


def _author_tags(item: Item) -> frozenset[str]:
    return frozenset(t for t in item.tags if t.startswith(AUTHOR_TAG_PREFIX))


def dedup_comparable(a: Item, b: Item) -> bool:
    """Whether ``a`` (the existing item) and ``b`` (the incoming one) may be scored at all.

    They share kind, scope, subject (case-insensitively) and partition tag (no
    tag is its own identity, not a wildcard), and two private items share their
    owner (the ``user:`` tag: one owner's note never folds into another's);
    service tags match when both carry one. A model-written ``b`` never folds
    into a human-written ``a``. A shared ``a`` is never a merge target, and an
    ``a`` with an ``author/`` tag only takes a ``b`` carrying the identical
    author tags.
    """
    return Incoming(b).comparable(a)


class Incoming:
    """What :func:`dedup_comparable` reads of the incoming item, derived once.

    The write gate checks one incoming item against many candidates: its
    subject, partition, service and author tags are read from it here, once,
    not again for every candidate.
    """

    __slots__ = (
        "authors",
        "kind",
        "model_written",
        "owner",
        "partition",
        "scope",
        "service",
        "subject",
    )

    def __init__(self, b: Item) -> None:
        self.kind, self.scope = b.kind, b.scope
        self.owner = _owner(b)
        self.subject = b.subject.casefold()
        self.partition = partition_from_tags(b.tags)
        self.service = service_tag_value(b)
        self.model_written = _is_model_written(b)
        self.authors = _author_tags(b)

    def comparable(self, a: Item) -> bool:
        """:func:`dedup_comparable` of ``a`` (the existing item) and this incoming one."""
        if a.kind != self.kind or a.scope != self.scope:
            return False
        if self.scope == SCOPE_PRIVATE and private_owner(a) != self.owner:
            return False
        if a.subject.casefold() != self.subject:
            return False
        if partition_from_tags(a.tags) != self.partition:
            return False
        sa, sb = service_tag_value(a), self.service
        if sa is not None and sb is not None and sa != sb:
            return False
        if a.origin == ORIGIN_HUMAN and self.model_written:
            return False
        if SHARED_TAG in a.tags:
            return False
        authors_a = _author_tags(a)
        return not authors_a or authors_a == self.authors


def near_duplicate_tokens(ta: frozenset[str], tb: frozenset[str]) -> tuple[float, bool]:
    """The near-duplicate rule on two token sets: ``(jaccard, is_duplicate)``."""
    if not ta or not tb:
        return 0.0, False
    return _near_duplicate_counts(len(ta & tb), len(ta), len(tb))


def _near_duplicate_counts(inter: int, na: int, nb: int) -> tuple[float, bool]:
    """:func:`near_duplicate_tokens` from the sizes of two non-empty sets and their overlap."""
    score = inter / (na + nb - inter)
    smaller = min(na, nb)
    if smaller < NEAR_DUP_MIN_TOKENS:
        return score, score >= NEAR_DUP_SHORT_TEXT_THRESHOLD
    if score >= MEMORY_NEAR_DUP_THRESHOLD:
        return score, True
    return score, inter >= NEAR_DUP_CONTAINMENT * smaller


def near_duplicate_memory(a: Item, b: Item) -> tuple[float, bool]:
    """Score ``a`` and ``b`` for near-duplication: ``(score, is_duplicate)``.

    ``(0.0, False)`` when they are not comparable or either token set is empty;
    otherwise ``score`` is the Jaccard similarity. Below
    :data:`NEAR_DUP_MIN_TOKENS` only near-identical text is a duplicate;
    otherwise the score must reach :data:`MEMORY_NEAR_DUP_THRESHOLD`, or 90% of
    the smaller set must be contained in the larger (a short restatement of a
    long fact, which plain Jaccard under-counts).
    """
    if not dedup_comparable(a, b):
        return 0.0, False
    return near_duplicate_tokens(dedup_tokens(a), dedup_tokens(b))


def find_near_duplicate(candidates: Iterable[Item], item: Item) -> tuple[Item, float] | None:
    """The highest-scoring active near-duplicate of ``item`` among ``candidates``.

    Candidates that are not active, or share ``item``'s id, are ignored: an item
    never duplicates itself, and a retired cell is no live target. Ties keep
    the first candidate.
    """
    best: tuple[Item, float] | None = None
    tokens = dedup_tokens(item)
    incoming = Incoming(item)
    for cand in candidates:
        if cand.status != STATUS_ACTIVE or (item.id and cand.id == item.id):
            continue
        if not incoming.comparable(cand):
            continue
        score, dup = near_duplicate_tokens(dedup_tokens(cand), tokens)
        if dup and (best is None or score > best[1]):
            best = (cand, score)
    return best


class DedupTokens:
    """Each item's :func:`~memstore.text.dedup_tokens`, kept while its text stays the same.

    The store's write gate compares a restatement with every candidate cell;
    tokenising a candidate costs more than scoring it, and the same cells are
    candidates write after write. An entry is keyed by id and checked against
    the title and content it was computed from (the same string objects while
    the item is unchanged, so the check is an identity test), so an edited or
    rolled-back item is simply re-tokenised; :meth:`forget` drops a deleted id.

    >>> cache = DedupTokens()
    >>> it = Item(id="a", kind="note", title="payment api timeouts", content="under load")
    >>> sorted(cache.tokens(it))
    ['api', 'load', 'payment', 'timeout']
    >>> cache.tokens(it) is cache.tokens(it)
    True
    """

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[str, str, frozenset[str]]] = {}

    def tokens(self, item: Item) -> frozenset[str]:
        """The token set of ``item`` (computed on first use, or after its text changed)."""
        got = self._by_id.get(item.id)
        if got is not None and got[0] == item.title and got[1] == item.content:
            return got[2]
        toks = dedup_tokens(item)
        self._by_id[item.id] = (item.title, item.content, toks)
        return toks

    def forget(self, id: str) -> None:
        """Drop what is kept for ``id`` (it was deleted)."""
        self._by_id.pop(id, None)


def cluster_near_duplicates(items: Sequence[Item]) -> list[list[Item]]:
    """Group items into near-duplicate clusters in one greedy, order-keeping pass.

    Each item joins the first cluster whose *first* member it near-duplicates
    (``dedup_comparable(first, item)`` and the token rule), else starts its
    own: every cluster has a stable representative (its first member).

    Each item's comparable key is derived once, and the heads are indexed by
    the parts of it that must be equal (kind, scope, owner, subject, partition) and
    then by token: an item is scored only against the heads of its bucket that
    share a token with it (two sets sharing none are never near-duplicates),
    and the overlap is counted from the postings rather than intersected
    (heads sharing fewer tokens than any near-duplicate needs are skipped).
    ``O(shared postings)`` per item instead of ``O(clusters)``.

    >>> a = Item(id="a", kind="note", content="ledger calls time out after 30 seconds")
    >>> b = a.clone(id="b", content="ledger db pool allows 20 connections")
    >>> c = a.clone(id="c", tags=["service/auth"])
    >>> [[it.id for it in cl] for cl in cluster_near_duplicates([a, b, c])]
    [['a', 'c'], ['b']]
    """
    clusters: list[list[Item]] = []
    buckets: dict[tuple[str, str, str, str, str], _Bucket] = {}
    for it in items:
        key = _Key(it)
        toks = dedup_tokens(it)
        bucket = buckets.get(key.bucket)
        if bucket is None:
            bucket = buckets[key.bucket] = _Bucket()
        found = bucket.first_match(key, toks)
        if found is not None:
            clusters[found].append(it)
            continue
        bucket.add(len(clusters), key, toks)
        clusters.append([it])
    return clusters


class _Key:
    """Both sides of :func:`dedup_comparable` for one item, read once.

    ``bucket`` holds what two comparable items share exactly; the rest is
    checked by :meth:`takes`.
    """

    __slots__ = ("authors", "bucket", "human", "model_written", "service", "shared")

    def __init__(self, it: Item) -> None:
        self.bucket = (
            it.kind,
            it.scope,
            _owner(it),
            it.subject.casefold(),
            partition_from_tags(it.tags),
        )
        self.service = service_tag_value(it)
        self.human = it.origin == ORIGIN_HUMAN
        self.model_written = _is_model_written(it)
        self.shared = SHARED_TAG in it.tags
        self.authors = _author_tags(it)

    def takes(self, b: _Key) -> bool:
        """``dedup_comparable(self, b)`` for two items of one bucket."""
        if self.service is not None and b.service is not None and self.service != b.service:
            return False
        if self.human and b.model_written:
            return False
        if self.shared:
            return False
        return not self.authors or self.authors == b.authors


class _Bucket:
    """The cluster heads of one bucket, with an inverted index of their tokens."""

    __slots__ = ("heads", "postings")

    def __init__(self) -> None:
        self.heads: dict[int, tuple[_Key, int]] = {}
        """Cluster index to the head's key and token-set size."""
        self.postings: dict[str, list[int]] = {}
        """Token to the clusters (ascending) whose head holds it."""

    def add(self, cluster: int, key: _Key, toks: frozenset[str]) -> None:
        self.heads[cluster] = (key, len(toks))
        postings = self.postings
        for t in toks:
            got = postings.get(t)
            if got is None:
                postings[t] = [cluster]
            else:
                got.append(cluster)

    def first_match(self, key: _Key, toks: frozenset[str]) -> int | None:
        """The first cluster whose head takes an item of ``key`` and ``toks``, if any."""
        if not toks:
            return None
        overlap: dict[int, int] = {}
        get = overlap.get
        postings = self.postings
        for t in toks:
            for c in postings.get(t, ()):
                overlap[c] = get(c, 0) + 1
        n = len(toks)
        need = _min_overlap(n)
        heads = self.heads
        # The first cluster wins, as in a scan of all; most heads share a
        # common word or two with the item, too few to be a duplicate.
        for c in sorted(c for c, k in overlap.items() if k >= need):
            head, size = heads[c]
            if _near_duplicate_counts(overlap[c], size, n)[1] and head.takes(key):
                return c
        return None


def _min_overlap(n: int) -> int:
    """A lower bound on the tokens a set of ``n`` shares with any near-duplicate.

    The union is at least ``n``, so a Jaccard rule ``t`` needs ``t * n``; the
    containment rule needs ``NEAR_DUP_CONTAINMENT`` of at least
    ``NEAR_DUP_MIN_TOKENS``. Rounded down a hair, so float error only loosens it.
    """
    jaccard = min(MEMORY_NEAR_DUP_THRESHOLD, NEAR_DUP_SHORT_TEXT_THRESHOLD) * n
    return max(1, math.ceil(min(jaccard, NEAR_DUP_CONTAINMENT * NEAR_DUP_MIN_TOKENS) - 1e-9))


def better_routing_fact(a: Item, b: Item) -> bool:
    """Whether ``a`` should be trusted over ``b``.

    Higher confidence, then the more trusted origin (human, observed, verified,
    derived), then the newer, then the smaller id: two restatements never tie.
    """
    ca, cb = CONFIDENCE_RANK[a.confidence], CONFIDENCE_RANK[b.confidence]
    if ca != cb:
        return ca > cb
    oa, ob = _ORIGIN_TRUST[a.origin], _ORIGIN_TRUST[b.origin]
    if oa != ob:
        return oa > ob
    ta, tb = a.updated_at, b.updated_at
    if ta != tb:
        if ta is None or tb is None:
            return tb is None
        return ta > tb
    return a.id < b.id
