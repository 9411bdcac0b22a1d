"""A lexical ranking's hits: as tuples (:class:`LexicalHits`) or columns (:class:`LexicalColumns`).

:meth:`~memstore._lexindex.LexicalIndex.rank` returns :class:`LexicalHit`
tuples, best first. The searcher's lean path (:mod:`memstore.search._lean`)
reads a deep pool of them (a couple of hundred a search) as two columns only,
scores and snapshot slots, and reads a hit's other fields for a handful.
Building a tuple, a float and an int per hit and freeing them again was about
a third of the compiled rank's cost there, so the compiled rank can hand the
columns over instead (``lex_rank`` with no hit type): :class:`LexicalColumns`
holds them, with the lexicon slot of each hit. :class:`SlotMap` turns those
into the slots of the searcher's snapshot, remembering each answer, so the
fusion reads neither an id nor a dictionary for a hit it has seen before.

A :class:`LexicalColumns` is still a sequence of :class:`LexicalHit` for any
other reader, the same tuples the ranking would have built (made when read):
``tests/test_lexcols.py`` holds the two to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from operator import attrgetter
from typing import NamedTuple, overload

import numpy as np
import numpy.typing as npt

from memstore import _wordbatch

__all__ = ["LexicalColumns", "LexicalHit", "LexicalHits", "SlotMap", "any_fuzzy"]

_FUZZY = attrgetter("fuzzy")
_WIDE = np.dtype(np.intp).itemsize == 8
"""The compiled ``slot_map`` reads and writes 8-byte slots: numpy's ``intp`` here."""


class LexicalHit(NamedTuple):
    """One ranked lexical hit: the id, its score in [0, 1], tokens covered, fuzzy use.

    A named tuple (immutable, hashable): a hybrid search builds one per hit of
    a deep pool, and a tuple is built several times faster than a frozen
    dataclass.
    """

    id: str
    score: float
    covered: int
    fuzzy: bool


class LexicalHits(list[LexicalHit]):
    """:meth:`LexicalIndex.rank`'s hits, best first, with their ids and scores as columns too.

    ``ids`` (a tuple) and ``scores`` (a read-only float64 array) hold each
    hit's ``id`` and ``score`` in order, as the ranking made them: a caller
    that works on arrays (the searcher's lean path) takes them whole instead
    of reading a deep pool's tuples field by field. Best first: ``scores``
    never increase (the lean path reads their range at the two ends). A copy (a slice,
    ``list(...)``) is a plain list; the hits must not be changed in place.
    """

    __slots__ = ("ids", "scores")

    def __init__(
        self, hits: Iterable[LexicalHit], ids: tuple[str, ...], scores: npt.NDArray[np.float64]
    ) -> None:
        super().__init__(hits)
        self.ids = ids
        self.scores = scores


def tuple_hits(
    ids: Sequence[str], scores: list[float], covered: list[int], fuzzy: list[bool]
) -> Iterator[LexicalHit]:
    """The hits of four columns (Python numbers), built by ``tuple.__new__`` from C."""
    fields = zip(ids, scores, covered, fuzzy, strict=True)
    # tuple.__new__ straight from C: the named tuple's own __new__ is a Python frame.
    return map(tuple.__new__, repeat(LexicalHit, len(ids)), fields)


class SlotMap:
    """Lexicon slot -> a snapshot's ``slot`` value, learned from the hits as they pass.

    Exact for as long as the two it was learned over are the same objects: a
    lexicon slot's id never changes within one ids list (a write that removes a
    document leaves its slot ``None``, and only a compaction renumbers, into a
    new list), and a snapshot's ``id -> slot`` dictionary never changes a
    value (a derived snapshot adds ids; a deletion builds a new dictionary).
    So the map is keyed by both objects (held, so neither can be freed and its
    address reused) and starts again when either changes. An id the dictionary
    did not hold (``-1``) is looked up again next time: a later snapshot
    sharing the dictionary may add it. One per index; it holds the last list and
    dictionary (an 8-byte entry per lexicon slot) until a search brings others.
    """

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state: tuple[list[str | None], dict[str, int], npt.NDArray[np.intp]] | None = None

    def slots(
        self,
        lexicon_ids: list[str | None],
        slot: dict[str, int],
        lex_slots: npt.NDArray[np.intp],
        ids: tuple[str, ...],
        size: int,
    ) -> tuple[npt.NDArray[np.intp], bool]:
        """Each hit's slot in ``slot`` below ``size`` (-1: none), from the hits' lexicon slots
        and, where the map has no answer yet, their ``ids``; and whether every hit has one
        (``slots_of``'s answer: :func:`memstore.search._lean.slots_of`)."""
        state = self._state
        if state is None or state[0] is not lexicon_ids or state[1] is not slot:
            known = np.full(len(lexicon_ids), -1, np.intp)
        else:
            known = state[2]
            if known.size < len(lexicon_ids):  # the lexicon grew since
                grown = np.full(max(len(lexicon_ids), 2 * known.size), -1, np.intp)
                grown[: known.size] = known
                known = grown
        self._state = (lexicon_ids, slot, known)  # one assignment: another thread sees either
        native = _wordbatch.speedups
        if native is not None and _WIDE:
            raw, every = native.slot_map(known, lex_slots, ids, slot, size)
            return np.frombuffer(raw, np.intp), every
        return _slot_map(known, lex_slots, ids, slot, size)


def _slot_map(
    known: npt.NDArray[np.intp],
    lex_slots: npt.NDArray[np.intp],
    ids: Sequence[str],
    slot: dict[str, int],
    size: int,
) -> tuple[npt.NDArray[np.intp], bool]:
    """:meth:`SlotMap.slots` in numpy, the oracle of the compiled ``slot_map``: ``known``
    read at the hits' lexicon slots, the rest looked up in ``slot`` (and remembered)."""
    got = known[lex_slots]
    missing = np.flatnonzero(got < 0)
    if missing.size:
        found = np.fromiter((slot.get(ids[i], -1) for i in missing.tolist()), np.intp, missing.size)
        got[missing] = found
        held = found >= 0
        known[lex_slots[missing[held]]] = found[held]
    if got.size and int(got.max()) >= size:  # a later snapshot's ids: not this one's
        got[got >= size] = -1
    return got, got.size == 0 or bool(got.min() >= 0)


class LexicalColumns(Sequence[LexicalHit]):
    """A ranking's hits as columns, best first: what the compiled rank hands the lean path.

    ``lex_slots`` (each hit's lexicon slot), ``ids`` (a tuple of the lexicon's
    own strings), ``scores`` (read-only float64, never increasing), ``covered``
    (int32) and ``fuzzy`` (bool). Read as a sequence, it holds the
    :class:`LexicalHit` tuples the tuple path builds, made on first use
    (one at a time for an index, all at once to iterate or slice).
    """

    __slots__ = (
        "_hits",
        "_lexicon_ids",
        "_map",
        "covered",
        "fuzzy",
        "ids",
        "lex_slots",
        "scores",
    )

    def __init__(
        self,
        raw: tuple[bytes, tuple[str, ...], bytes, bytes, bytes],
        lexicon_ids: list[str | None],
        slot_map: SlotMap,
    ) -> None:
        lex_slots, ids, scores, covered, fuzzy = raw
        self.lex_slots: npt.NDArray[np.intp] = np.frombuffer(lex_slots, np.intp)
        self.ids = ids
        self.scores: npt.NDArray[np.float64] = np.frombuffer(scores, np.float64)
        self.covered: npt.NDArray[np.int32] = np.frombuffer(covered, np.int32)
        self.fuzzy: npt.NDArray[np.bool_] = np.frombuffer(fuzzy, np.bool_)
        self._lexicon_ids = lexicon_ids
        self._map = slot_map
        self._hits: list[LexicalHit] | None = None

    def snapshot_slots(self, slot: dict[str, int], size: int) -> tuple[npt.NDArray[np.intp], bool]:
        """Each hit's slot in a snapshot (its ``id -> slot`` dictionary, its length): -1 where
        it holds none; and whether it holds them all. By the index's :class:`SlotMap`."""
        return self._map.slots(self._lexicon_ids, slot, self.lex_slots, self.ids, size)

    def any_fuzzy(self) -> bool:
        """Whether a hit used the fuzzy channel."""
        return bool(self.fuzzy.any())

    def _all(self) -> list[LexicalHit]:
        hits = self._hits
        if hits is None:
            cols = (self.scores.tolist(), self.covered.tolist(), self.fuzzy.tolist())
            hits = self._hits = list(tuple_hits(self.ids, *cols))
        return hits

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[LexicalHit]:
        return iter(self._all())

    @overload
    def __getitem__(self, i: int) -> LexicalHit: ...
    @overload
    def __getitem__(self, i: slice) -> list[LexicalHit]: ...
    def __getitem__(self, i: int | slice) -> LexicalHit | list[LexicalHit]:
        if isinstance(i, slice) or self._hits is not None:
            return self._all()[i]
        ids = self.ids  # one hit: its fields read at i (IndexError as a list's)
        return tuple.__new__(
            LexicalHit,
            (ids[i], float(self.scores[i]), int(self.covered[i]), bool(self.fuzzy[i])),
        )


def any_fuzzy(hits: Sequence[LexicalHit]) -> bool:
    """Whether one of ``hits`` used the fuzzy channel (columns read as a column)."""
    if isinstance(hits, LexicalColumns):
        return hits.any_fuzzy()
    return any(map(_FUZZY, hits))
