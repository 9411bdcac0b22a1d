"""The store's lexical index: a Lexicon plus per-document arrays for filters.

The :class:`~memstore.lexical.Lexicon` finds candidate documents per token;
this module accumulates their scores with numpy over integer slots and applies
the kind, subject and deadline filters as vectorised masks, so a query costs
O(candidates) in C-level set and array operations, never a loop over all items.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memstore.item import Item
from memstore.lexical import TITLE_WEIGHT, Lexicon, TokenMatch, token_weight
from memstore.tags import SHARED_TAG, partition_from_tags, service_tag_value
from memstore.text import event_date_words, words

__all__ = ["LexicalHit", "LexicalIndex", "QueryPlan"]

_INF = float("inf")


@dataclass(frozen=True, slots=True)
class LexicalHit:
    """One ranked lexical hit: the id, its score in [0, 1], tokens covered, fuzzy use."""

    id: str
    score: float
    covered: int
    fuzzy: bool


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """A query's tokens with what each matched and its weight, computed once."""

    tokens: tuple[str, ...]
    matches: tuple[TokenMatch, ...]
    weights: tuple[float, ...]
    fuzzy_ok: tuple[bool, ...]

    @property
    def total_weight(self) -> float:
        return sum(self.weights)


class _Codes:
    """Interns strings to small ints ("" is 0) for vectorised equality tests."""

    def __init__(self) -> None:
        self._code: dict[str, int] = {"": 0}

    def code(self, s: str) -> int:
        c = self._code.get(s)
        if c is None:
            c = self._code[s] = len(self._code)
        return c

    def lookup(self, s: str) -> int:
        return self._code.get(s, -1)


def _deadline_ts(dt: _dt.datetime | None) -> float:
    """A deadline as a timestamp; no deadline is +inf (never due)."""
    return dt.timestamp() if dt is not None else _INF


def _updated_ts(dt: _dt.datetime | None) -> float:
    """An update time as a timestamp; none is -inf (the oldest), as the store orders it."""
    return dt.timestamp() if dt is not None else -_INF


class LexicalIndex:
    """Lexicon + per-slot metadata (kind, subject, service, recency, deadline)."""

    def __init__(self) -> None:
        self.lexicon = Lexicon()
        self._kinds = _Codes()
        self._subjects = _Codes()  # subjects and service tag values share codes
        self._partitions = _Codes()
        cap = 64
        self._kind = np.zeros(cap, np.int32)
        self._subject = np.zeros(cap, np.int32)
        self._service = np.zeros(cap, np.int32)
        self._updated = np.zeros(cap, np.float64)
        self._stale = np.full(cap, _INF, np.float64)
        self._partition = np.zeros(cap, np.int32)
        self._shared = np.zeros(cap, np.bool_)
        self._text: dict[str, tuple[str, str, str, bool]] = {}

    def __len__(self) -> int:
        return len(self.lexicon)

    def __contains__(self, id: str) -> bool:
        return id in self._text

    def _grow(self, need: int) -> None:
        cap = len(self._kind)
        if need <= cap:
            return
        new = max(need, cap * 2)
        for name in (
            "_kind",
            "_subject",
            "_service",
            "_updated",
            "_stale",
            "_partition",
            "_shared",
        ):
            old = getattr(self, name)
            arr = np.full(new, _INF if name == "_stale" else 0, old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def put(self, item: Item, index_id: bool) -> None:
        """Index (or re-index) ``item``; the text is re-split only when it changed."""
        key = (item.title, item.content, item.event_date, index_id)
        slot = self.lexicon.slot(item.id)
        if slot is None or self._text.get(item.id) != key:
            content = words(item.content)
            if item.event_date:
                content.extend(event_date_words(item.event_date))
            if index_id:
                content.extend(words(item.id))
            slot = self.lexicon.index_words(item.id, words(item.title), content)
            self._text[item.id] = key
        self._grow(slot + 1)
        self._kind[slot] = self._kinds.code(item.kind)
        self._subject[slot] = self._subjects.code(item.subject)
        self._service[slot] = self._subjects.code(service_tag_value(item) or "")
        self._updated[slot] = _updated_ts(item.updated_at)
        self._stale[slot] = _deadline_ts(item.stale_after)
        self._partition[slot] = self._partitions.code(partition_from_tags(item.tags))
        self._shared[slot] = SHARED_TAG in item.tags

    def remove(self, id: str) -> None:
        """Drop ``id``; unknown ids are a no-op."""
        if self._text.pop(id, None) is not None:
            self.lexicon.remove(id)

    def plan(self, tokens: Sequence[str]) -> QueryPlan:
        """Match every token once and weigh it by the documents it matches."""
        lex = self.lexicon
        n = len(lex)
        matches = tuple(lex.match_token(t) for t in tokens)
        weights = tuple(token_weight(m.df, n) for m in matches)
        fuzzy_ok = tuple(m.fuzzy_ok for m in matches)
        return QueryPlan(tuple(tokens), matches, weights, fuzzy_ok)

    def rank(
        self,
        plan: QueryPlan,
        *,
        kind: str,
        subject: str,
        hidden_kinds: Sequence[str],
        now_ts: float,
        limit: int | None,
        partition: str | None = None,
    ) -> list[LexicalHit]:
        """Score the plan's candidates, filter them, and return the best ``limit``.

        Order: score descending, then the most recently updated, then id.
        ``limit=None`` returns every match. ``partition`` keeps the items tagged
        for it, the untagged ones and the ``shared`` ones (``None``: no filter).
        """
        total_w = plan.total_weight
        cap = self.lexicon.capacity
        if total_w <= 0.0 or cap == 0:
            return []
        acc = np.zeros(cap, np.float64)
        title = np.zeros(cap, np.float64)
        covered = np.zeros(cap, np.int32)
        fuzzy = np.zeros(cap, np.bool_)
        for m, w in zip(plan.matches, plan.weights, strict=True):
            for level, slots, fz in m.groups:
                idx = np.fromiter(slots, np.intp, len(slots))
                acc[idx] += w * level
                if fz:
                    fuzzy[idx] = True
                else:
                    covered[idx] += 1
            for level, slots in m.title:
                title[np.fromiter(slots, np.intp, len(slots))] += w * level
        cand: npt.NDArray[np.intp] = np.flatnonzero(acc)
        if kind:
            cand = cand[self._kind[cand] == self._kinds.lookup(kind)]
        elif hidden_kinds:
            hidden = [self._kinds.lookup(k) for k in hidden_kinds]
            cand = cand[~np.isin(self._kind[cand], hidden)]
        if subject:
            code = self._subjects.lookup(subject)
            cand = cand[(self._subject[cand] == code) | (self._service[cand] == code)]
        cand = cand[self._stale[cand] > now_ts]
        if partition is not None:
            code = self._partitions.lookup(partition)
            part = self._partition[cand]
            cand = cand[(part == code) | (part == 0) | self._shared[cand]]
        if cand.size == 0:
            return []
        scores = (acc[cand] + TITLE_WEIGHT * title[cand]) / ((1.0 + TITLE_WEIGHT) * total_w)
        if limit is not None and cand.size > limit:
            # argpartition-style cut: keep everything tied with the limit-th score
            # so the id tie-break below sees the whole tie.
            kth = np.partition(scores, cand.size - limit)[cand.size - limit]
            keep = scores >= kth
            cand, scores = cand[keep], scores[keep]
        id_at = self.lexicon.id_at
        updated = self._updated
        rows = [
            (-float(s), -float(updated[slot]), id_at(int(slot)) or "", int(slot))
            for slot, s in zip(cand.tolist(), scores.tolist(), strict=True)
        ]
        rows.sort()
        if limit is not None:
            rows = rows[:limit]
        return [LexicalHit(r[2], -r[0], int(covered[r[3]]), bool(fuzzy[r[3]])) for r in rows]

    def _check(self, expected: dict[str, Item], index_id: dict[str, bool]) -> None:
        """Assert the index holds exactly ``expected`` with matching metadata."""
        self.lexicon._check()
        assert set(self._text) == set(expected), (
            sorted(set(self._text) ^ set(expected))[:10],
            "indexed ids disagree with indexable items",
        )
        assert len(self.lexicon) == len(expected)
        for id, item in expected.items():
            slot = self.lexicon.slot(id)
            assert slot is not None
            assert self._text[id] == (item.title, item.content, item.event_date, index_id[id])
            assert self._kind[slot] == self._kinds.lookup(item.kind)
            assert self._subject[slot] == self._subjects.lookup(item.subject)
            assert self._updated[slot] == _updated_ts(item.updated_at)
            assert self._stale[slot] == _deadline_ts(item.stale_after)
            assert self._partition[slot] == self._partitions.lookup(partition_from_tags(item.tags))
            assert self._shared[slot] == (SHARED_TAG in item.tags)
