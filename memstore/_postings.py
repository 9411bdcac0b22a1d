"""Columnar postings: word -> sorted int32 array of document slots.

The :class:`~memstore.lexical.Lexicon` gives every indexed document a fresh
integer *slot* (slots only grow, so appending a document's slot to a word's
postings keeps them sorted) and marks the slot dead when the document is
removed or re-indexed; dead slots stay in the arrays until a compaction
renumbers every slot (:meth:`Postings.renumber`). A query reads a word's
array as is: no per-query conversion from Python sets.

Writes are batched, as a search engine's indexing buffer is: a document's
words are numbered (a C-level map over a dict) and go to a pending log (one
list extend per document), and the next read turns the whole log into arrays
at once (:meth:`Postings.flush`: one stable argsort groups the log by word,
and each touched word's array grows by one concatenation).

>>> p = Postings()
>>> p.add_doc(0, ["payment", "api"])
>>> p.add_doc(1, ["payment"])
>>> p.get("payment").tolist(), p.get("api").tolist(), p.get("nothing").tolist()
([0, 1], [0], [])
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from itertools import chain, repeat
from operator import is_, itemgetter

import numpy as np
import numpy.typing as npt

__all__ = ["EMPTY", "Postings", "intersect_sorted"]

Slots = npt.NDArray[np.int32]

EMPTY: Slots = np.zeros(0, np.int32)
EMPTY.setflags(write=False)


def intersect_sorted(a: Slots, b: Slots) -> Slots:
    """The common elements of two sorted arrays of distinct slots.

    Binary-searches the smaller in the larger: O(small * log(large)).

    >>> intersect_sorted(np.array([1, 3, 5, 7], np.int32), np.array([3, 4, 7], np.int32)).tolist()
    [3, 7]
    """
    if a.size == 0 or b.size == 0:
        return EMPTY
    small, big = (a, b) if a.size <= b.size else (b, a)
    pos = np.searchsorted(big, small)
    np.minimum(pos, big.size - 1, out=pos)
    found: Slots = small[big[pos] == small]
    return found


class _WordNumbers(dict[str, int]):
    """word -> number; looking up (``[]``) a word not numbered yet numbers it.

    So :meth:`Postings.add_doc` numbers a document's words in one C-level
    map, new words included, without a second pass to find them. The
    compiled batch loop (``memstore._speedups``) numbers a new word itself,
    as :meth:`__missing__` does, from :attr:`_numbering` (read once a batch):
    a Python frame a new word fewer.
    """

    __slots__ = ("_owner",)

    def __init__(self, owner: Postings, pairs: Iterable[tuple[str, int]] = ()) -> None:
        super().__init__(pairs)
        self._owner = owner

    def __missing__(self, word: str) -> int:
        # The next number, the word listed, no array yet: in one frame, as every word
        # new to a batch passes here.
        owner = self._owner
        i = self[word] = len(owner._words)
        owner._words.append(word)
        owner._arrays.append(EMPTY)
        return i

    @property
    def _numbering(self) -> tuple[list[str], list[Slots | None], Slots]:
        """What :meth:`__missing__` numbers a word with: the next number is the length
        of the first list, the word is appended to it and the third item to the second."""
        owner = self._owner
        return owner._words, owner._arrays, EMPTY


class Postings:
    """Append-only word -> sorted slot arrays, with a pending write log.

    Not thread-safe on its own: the Lexicon calls it under its lock.
    """

    def __init__(self) -> None:
        self._wid: dict[str, int] = _WordNumbers(self)
        self._words: list[str] = []
        # A word's array, or None while it is still a slice of the base (a
        # snapshot's CSR arrays, sliced on first use: see from_csr).
        self._arrays: list[Slots | None] = []
        self._base: Slots = EMPTY
        self._base_offsets: npt.NDArray[np.int64] = np.zeros(1, np.int64)
        self._lazy = False
        # The pending log: every added document's words, flat, with the slot
        # and word count of each document.
        self._log_ids: list[int] = []
        self._log_slots: list[int] = []
        self._log_counts: list[int] = []

    def add_doc(self, slot: int, words: Collection[str]) -> None:
        """Append ``slot`` to the postings of each of ``words`` (distinct words).

        ``slot`` must exceed every slot added before (slots only grow). The
        words are numbered here (one C-level map over them), so the log holds
        small integers and a flush needs no string work.
        """
        if words:
            self.add_docs(slot, [words])

    def add_docs(self, start: int, docs: Sequence[Collection[str]]) -> None:
        """:meth:`add_doc` of ``docs[i]`` at slot ``start + i``, in one pass over the batch."""
        # One C-level map numbers every word, the new ones too, straight into
        # the log (no list of the batch's numbers in between).
        self._log_ids.extend(map(self._wid.__getitem__, chain.from_iterable(docs)))
        self._log_slots.extend(range(start, start + len(docs)))
        self._log_counts.extend(map(len, docs))

    def log_lists(self) -> tuple[dict[str, int], list[int], list[int]]:
        """The word numbers and the log's word-number and word-count lists, for a writer
        that logs documents itself (:func:`memstore._wordbatch.count_docs`'s compiled
        loop); it then calls :meth:`logged`. A word missing from the numbers is numbered
        by subscripting them (``numbers[word]``), or as that would, from their
        ``_numbering`` (:class:`_WordNumbers`)."""
        return self._wid, self._log_ids, self._log_counts

    def logged(self, start: int, n: int) -> None:
        """The slots of ``n`` documents logged through :meth:`log_lists`, from ``start``."""
        self._log_slots.extend(range(start, start + n))

    @classmethod
    def from_csr(cls, words: list[str], offsets: npt.NDArray[np.int64], slots: Slots) -> Postings:
        """Postings whose word ``words[i]`` holds ``slots[offsets[i]:offsets[i + 1]]``.

        Nothing is copied or sliced up front: a word's array is a view made
        the first time it is read. The caller checks the arrays are consistent.
        """
        p = cls()
        p._words = words
        p._wid = _WordNumbers(p, zip(words, range(len(words)), strict=True))
        p._arrays = [None] * len(words)
        p._base, p._base_offsets, p._lazy = slots, offsets, bool(words)
        return p

    def _array(self, i: int) -> Slots:
        a = self._arrays[i]
        if a is None:
            off = self._base_offsets
            a = self._arrays[i] = self._base[int(off[i]) : int(off[i + 1])]
        return a

    @property
    def numbered(self) -> int:
        """How many words have a number (grows when a word first reaches these postings)."""
        return len(self._words)

    @property
    def pending(self) -> int:
        """Word occurrences in the log, not yet in the arrays."""
        return len(self._log_ids)

    def flush(self) -> None:
        """Move the pending log into the arrays (a no-op when it is empty)."""
        if not self._log_ids:
            return
        ids, counts = self._log_ids, self._log_counts
        word_ids = np.fromiter(ids, np.int64, len(ids))
        slots = np.repeat(
            np.fromiter(self._log_slots, np.int64, len(self._log_slots)),
            np.fromiter(counts, np.int64, len(counts)),
        )
        self._log_ids, self._log_slots, self._log_counts = [], [], []
        # One sort of (word, slot) keys groups the log by word, each word's slots
        # increasing (a document logs a word once, and slots only grow): what a
        # stable argsort and two gathers by it gave, for a fraction of the work.
        keys = np.sort((word_ids << 32) | slots)
        word_ids = keys >> 32
        slots = (keys & 0xFFFFFFFF).astype(np.int32)
        cuts = np.flatnonzero(word_ids[1:] != word_ids[:-1]) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), int(word_ids.size)]
        arrays = self._arrays
        for w, s, e in zip(word_ids[starts].tolist(), starts, ends, strict=True):
            old = self._array(w)
            arrays[w] = slots[s:e].copy() if old.size == 0 else np.concatenate((old, slots[s:e]))

    def get(self, word: str) -> Slots:
        """The slots holding ``word`` (dead ones included), sorted."""
        if self._log_ids:
            self.flush()
        i = self._wid.get(word)
        return EMPTY if i is None else self._array(i)

    def gather(self, words: Iterable[str]) -> list[Slots]:
        """:meth:`get` for several words (the non-empty arrays only)."""
        if self._log_ids:
            self.flush()
        wid = self._wid
        out = []
        for w in words:
            i = wid.get(w)
            if i is not None:
                a = self._array(i)
                if a.size:
                    out.append(a)
        return out

    def ids(self, words: Iterable[str]) -> list[int]:
        """The internal numbers of those of ``words`` these postings hold.

        Stable until :meth:`renumber`; :meth:`concat` reads arrays by them.
        """
        return [i for i in map(self._wid.get, words) if i is not None]

    def concat(self, ids: Sequence[int]) -> Slots:
        """The arrays of the words numbered ``ids``, concatenated (one C-level gather)."""
        if self._log_ids:
            self.flush()
        if not ids:
            return EMPTY
        if len(ids) == 1:
            return self._array(ids[0])
        parts: tuple[Slots | None, ...] = itemgetter(*ids)(self._arrays)
        # Any array not sliced from the base yet? (A C-level scan: a short
        # token's prefix matches can number ten thousand words.)
        if self._lazy and any(map(is_, parts, repeat(None))):
            parts = tuple(map(self._array, ids))
        return np.concatenate(parts)  # type: ignore[arg-type]

    def renumber(self, new_slot: npt.NDArray[np.int32]) -> None:
        """Map every slot ``s`` to ``new_slot[s]``, dropping those mapped to -1.

        ``new_slot`` must be increasing on the slots it keeps, so the arrays
        stay sorted. Words left with no slot are forgotten.
        """
        self.flush()
        words: list[str] = []
        arrays: list[Slots | None] = []
        for i, w in enumerate(self._words):
            m = new_slot[self._array(i)]
            m = m[m >= 0]
            if m.size:
                words.append(w)
                arrays.append(m)
        self._words, self._arrays = words, arrays
        self._wid = _WordNumbers(self, zip(words, range(len(words)), strict=True))
        self._base, self._base_offsets, self._lazy = EMPTY, np.zeros(1, np.int64), False

    def items(self) -> Iterable[tuple[str, Slots]]:
        """Every word with its array."""
        self.flush()
        return ((w, self._array(i)) for i, w in enumerate(self._words))

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (a snapshot's base counted once)."""
        own = sum(a.nbytes for a in self._arrays if a is not None and a.base is not self._base)
        return int(own + self._base.nbytes)
