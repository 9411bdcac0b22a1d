"""What one query token matched, as columns, and the merge that builds it.

A token matches documents at several levels (exact, prefix, stem, one edit,
substring, fuzzy; :mod:`memstore._matchrule`), each level through many
vocabulary words (the token's :class:`Expansion`). :func:`best_levels` merges
those per-word slot arrays into one sorted column of documents with the best
level each reaches, and :class:`TokenMatch` carries the result (content and title) for the ranking.

>>> slots, levels = best_levels([(0.6, [np.array([3, 1])]), (1.0, [np.array([1])])], 8, None)
>>> slots.tolist(), levels.tolist()
([1, 3], [1.0, 0.6])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np
import numpy.typing as npt

from memstore import _wordbatch
from memstore._matchrule import LEVEL_SUBSTRING

__all__ = ["Expansion", "TokenMatch", "best_levels"]


@dataclass(slots=True)
class Expansion:
    """A token's matches in the vocabulary (no documents), as a Lexicon caches them.

    Valid until a word relevant to the token comes or goes (:mod:`memstore._vocablog`).
    """

    levels: dict[str, float]
    """Every word the exact rule admits, with its level."""
    by_level: list[tuple[float, list[str]]]
    """``levels`` grouped, increasing level."""
    strong: list[str]
    """The words at :data:`LEVEL_EDIT` or better."""
    pairs: list[tuple[str, str]]
    """Adjacent-word pairs the token is one edit from, neither word strong."""
    fuzzy_ok: bool
    stamp: int
    """The vocabulary log's stamp it is known exact at (checked from there on)."""
    fuzzy: list[tuple[float, list[str]]] | None = None
    """Fuzzy words by level, once computed (``fuzzy_ok`` tokens of four or more characters)."""
    content_ids: list[tuple[float, list[int]]] | None = None
    """``by_level`` as the content postings' word numbers, once computed."""
    title_ids: list[tuple[float, list[int]]] | None = None
    """``by_level`` as the title postings' word numbers, once computed."""
    title_numbered: int = -1
    """The title postings' :attr:`~memstore._postings.Postings.numbered` when
    ``title_ids`` was computed: a vocabulary word may reach a title later."""
    fuzzy_ids: list[tuple[float, list[int]]] | None = None
    """``fuzzy`` as the content postings' word numbers, once computed."""
    others: frozenset[str] | None = None
    """The words of ``pairs`` and ``fuzzy`` (with ``levels``: what a match of it is made of)."""


@dataclass(frozen=True, slots=True, eq=False)
class TokenMatch:
    """What one query token matched in a :class:`Lexicon`, as columns.

    ``slots`` are the matched documents' slots (sorted, distinct, live) and
    ``levels`` the best level each reaches (a level below
    :data:`LEVEL_SUBSTRING` came from the fuzzy channel); ``title_slots`` and
    ``title_levels`` are the same for the title words alone (a subset of
    ``slots``). :attr:`groups` and :attr:`title` give the set-per-level view.
    """

    slots: npt.NDArray[np.intp]
    levels: npt.NDArray[np.float64]
    title_slots: npt.NDArray[np.intp]
    title_levels: npt.NDArray[np.float64]
    fuzzy_ok: bool = False
    """Whether the fuzzy channel was open to the token: no vocabulary word
    matches it at the one-edit level or better (it looks like a typo)."""

    @property
    def df(self) -> int:
        """How many documents the token matches at any level."""
        return int(self.slots.size)

    @property
    def groups(self) -> tuple[tuple[float, frozenset[int], bool], ...]:
        """Disjoint slot sets, one per level, best first, with whether it is fuzzy."""
        return tuple((lv, s, lv < LEVEL_SUBSTRING) for lv, s in _by_level(self.slots, self.levels))

    @property
    def title(self) -> tuple[tuple[float, frozenset[int]], ...]:
        """Disjoint title slot sets by the best level a title word reaches, best first."""
        return _by_level(self.title_slots, self.title_levels)


def _by_level(
    slots: npt.NDArray[np.intp], levels: npt.NDArray[np.float64]
) -> tuple[tuple[float, frozenset[int]], ...]:
    out = []
    for lv in sorted(set(levels.tolist()), reverse=True):
        out.append((lv, frozenset(slots[levels == lv].tolist())))
    return tuple(out)


_NO_SLOTS: npt.NDArray[np.intp] = np.zeros(0, np.intp)
_NO_LEVELS: npt.NDArray[np.float64] = np.zeros(0, np.float64)
_SPARSE = 8
"""Below ``capacity / _SPARSE`` entries a merge sorts them instead of using a dense array."""
_FEW = 128
"""At most this many entries a merge runs in Python (numpy's fixed costs dominate below)."""
_WIDE = np.dtype(np.intp).itemsize == 8
"""The compiled ``best_levels`` writes 8-byte slots: numpy's ``intp`` here."""


def best_levels(
    groups: Sequence[tuple[float, Sequence[npt.NDArray[np.int32]]]],
    capacity: int,
    alive: npt.NDArray[np.bool_] | None,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Each live slot of ``groups`` with the best level it reaches: ``(slots, levels)``.

    ``groups`` pairs a level with slot arrays; ``alive`` is ``None`` when
    every slot is. The levels are written in increasing order, so that a
    better level overwrites a worse one: a handful of entries into a
    dictionary, more into a dense array; in between, a sort (slot, then
    level: the last of each slot's run is its best) merges them. Compiled
    where :mod:`memstore._speedups` is built (``best_levels`` in
    ``memstore/_bestlevels.c``: a byte per slot keeps its best level's rank, one
    pass, then one scan), the same columns; :func:`_best_levels` is its oracle.
    """
    parts = [(lv, a) for lv, arrays in groups for a in arrays if a.size]
    if not parts:
        return _NO_SLOTS, _NO_LEVELS
    native = _wordbatch.speedups
    if native is not None and _WIDE:
        got = native.best_levels(parts, capacity, alive)
        if got is not NotImplemented:
            raw_slots, raw_levels = got
            return np.frombuffer(raw_slots, np.intp), np.frombuffer(raw_levels, np.float64)
    return _merge(parts, capacity, alive)


def _best_levels(
    groups: Sequence[tuple[float, Sequence[npt.NDArray[np.int32]]]],
    capacity: int,
    alive: npt.NDArray[np.bool_] | None,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """:func:`best_levels` in Python and numpy: the oracle of the compiled merge."""
    parts = [(lv, a) for lv, arrays in groups for a in arrays if a.size]
    if not parts:
        return _NO_SLOTS, _NO_LEVELS
    return _merge(parts, capacity, alive)


def _merge(
    parts: list[tuple[float, npt.NDArray[np.int32]]],
    capacity: int,
    alive: npt.NDArray[np.bool_] | None,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """:func:`_best_levels` of its non-empty ``(level, slots)`` parts."""
    total = sum(a.size for _, a in parts)
    if len(parts) == 1 and (total == 1 or (parts[0][1][1:] > parts[0][1][:-1]).all()):
        # One increasing array (one word's postings): the slots as they are.
        lv1, a1 = parts[0]
        slots, levels = a1.astype(np.intp), np.full(a1.size, lv1, np.float64)
    elif total <= _FEW:
        best: dict[int, float] = {}
        for lv_, a in sorted(parts, key=itemgetter(0)):  # stable, levels increasing
            best.update(dict.fromkeys(a.tolist(), lv_))
        keys = sorted(best)
        slots = np.array(keys, np.intp)
        levels = np.array([best[s] for s in keys], np.float64)
    elif total * _SPARSE < capacity:
        idx = np.concatenate([a for _, a in parts]).astype(np.intp)
        lv = np.repeat(np.array([p[0] for p in parts], np.float64), [a.size for _, a in parts])
        order = np.lexsort((lv, idx))
        idx, lv = idx[order], lv[order]
        last = np.flatnonzero(np.append(idx[1:] != idx[:-1], True))
        slots, levels = idx[last], lv[last]
    else:
        by: dict[float, list[npt.NDArray[np.int32]]] = {}
        for lv_, a in parts:
            by.setdefault(lv_, []).append(a)
        table = np.array([0.0, *sorted(by)], np.float64)
        # Level ranks, not levels: a byte per slot, and a bool test for nonzero
        # (numpy's nonzero is several times faster on bools than on floats).
        codes = np.zeros(capacity, np.uint8 if table.size <= 256 else np.uint16)
        for rank in range(1, table.size):
            arrays = by[float(table[rank])]
            codes[arrays[0] if len(arrays) == 1 else np.concatenate(arrays)] = rank
        slots = np.flatnonzero(codes != 0)
        levels = table[codes[slots]]
    if alive is not None:
        keep = alive[slots]
        if not keep.all():
            slots, levels = slots[keep], levels[keep]
    return slots, levels
