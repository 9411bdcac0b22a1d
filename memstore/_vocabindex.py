"""The Lexicon's vocabulary-side indexes (grams, deletions, stems) as integer arrays.

The :class:`~memstore.lexical.Lexicon` answers a query token from indexes over
its *vocabulary* (see :mod:`memstore.lexical`): the 1-, 2- and 3-character
grams of every word (substring and fuzzy matches), the one-character
deletions of every word (one-edit neighbours) and the light stem of every
word. Kept as Python dicts of sets they cost a set insertion per key per new
word, most of a restore's time and memory, and every restore rebuilt them.

Here each word gets a number and each index is a *table*: sorted ``uint64``
keys, offsets, and the word numbers of each key (CSR), built by a few numpy
passes over the code points of a batch of words, with no per-key Python work:

* a gram's key is exact: its code points packed into 64 bits (three 21-bit
  code points, with tag bits telling one-, two- and three-character grams apart);
* a deletion's and a stem's key is a 64-bit polynomial hash of the string.
  Two strings may share a hash, so what a hash finds is only a candidate:
  callers verify it (a one-edit neighbour by :func:`~memstore.lexical.within_one_edit`,
  a stem by recomputing it), so a collision can add work, never a wrong answer.

New words go to a pending list (one append) and are indexed in a batch at
the next read (:meth:`VocabIndex.flush`) as a new *segment*; segments merge
when a newer one reaches the size of the one before, so there are
``O(log words)`` of them and each word is re-sorted ``O(log words)`` times
(the segment model of Lucene and tantivy). A word leaving the vocabulary is
only marked dead (a lookup skips it), and one coming back is marked live
again; :meth:`VocabIndex.flush` renumbers the live words once dead ones
outnumber them. A snapshot (:mod:`memstore._lexsnapshot`) saves the merged
tables and loads them back as arrays: nothing is recomputed at restore.

>>> v = VocabIndex()
>>> v.add_many(["payment", "pay", "1234"])
>>> sorted(v.gram_words("ay")), v.stem_words("pay")
(['pay', 'payment'], ['pay'])
>>> sorted(v.deletion_words(["pymnt", "paymnt"]))  # words with one of these as a deletion
['payment']
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np
import numpy.typing as npt
import regex

from memstore import _wordbatch
from memstore.text import stem

__all__ = [
    "Segment",
    "Table",
    "VocabIndex",
    "deletion_hashes",
    "gram_code",
    "hash_string",
    "span_edit_hashes",
    "string_hashes",
    "unique_counts",
]

_U64 = npt.NDArray[np.uint64]
_I64 = npt.NDArray[np.int64]
_I32 = npt.NDArray[np.int32]
_Bool = npt.NDArray[np.bool_]

_KEEP_CHAR = regex.compile(r"[\p{N}\p{Han}\p{Hiragana}\p{Katakana}\p{Extended_Pictographic}]")
"""Characters that are a gram on their own (digits, ideographs, emoji): as in the Lexicon."""

_BI = np.uint64(1 << 63)
_UNI = np.uint64((1 << 63) | (1 << 62))
_B = 0x100000001B3
"""The hash's base (odd, so powers of it never vanish modulo 2**64)."""
_LEN = 0x9E3779B97F4A7C15
"""The hash adds the string's length times this, so lengths rarely meet."""
_MASK = (1 << 64) - 1
_DIGIT_LO, _DIGIT_HI = ord("0"), ord("9")
_EMPTY_U64: _U64 = np.zeros(0, np.uint64)
_EMPTY_I32: _I32 = np.zeros(0, np.int32)
_EMPTY_I64: _I64 = np.zeros(0, np.int64)
_EMPTY_I32.setflags(write=False)

_keep_cache: dict[int, bool] = {}
_powers: list[int] = [1]
_powers_lock = threading.Lock()


def _power_table(n: int) -> _U64:
    """``_B ** j`` modulo 2**64 for ``j < n``.

    The table is shared and grows on demand, under a lock: two threads
    growing it at once could each append the power after the same last one
    (CPython 3.11 switches threads only between statements here, but a
    free-threaded build need not), and every later entry would be off by one.
    """
    if len(_powers) < n:
        with _powers_lock:
            while len(_powers) < n:
                _powers.append((_powers[-1] * _B) & _MASK)
    return np.array(_powers[:n], np.uint64)


def gram_code(gram: str) -> int:
    """The exact key of a gram of one to three characters.

    >>> gram_code("ab") == gram_code("ab") != gram_code("ba")
    True
    """
    cps = [ord(c) for c in gram]
    if len(cps) == 3:
        return (cps[0] << 42) | (cps[1] << 21) | cps[2]
    if len(cps) == 2:
        return (1 << 63) | (cps[0] << 21) | cps[1]
    if len(cps) == 1:
        return (1 << 63) | (1 << 62) | cps[0]
    raise ValueError(f"a gram has one to three characters, got {gram!r}")


def _codepoints(words: Sequence[str]) -> tuple[_I64, _I64, _I64]:
    """The code points of ``words`` concatenated, each word's start, and its length."""
    lens: _I64 = np.fromiter(map(len, words), np.int64, len(words))
    starts: _I64 = np.zeros(len(words), np.int64)
    if len(words) > 1:
        np.cumsum(lens[:-1], out=starts[1:])
    data = "".join(words).encode("utf-32-le", "surrogatepass")
    cps: _I64 = np.frombuffer(data, np.uint32).astype(np.int64)
    return cps, starts, lens


def _keep(cps: _I64) -> _Bool:
    """Which code points are kept alone as grams (ASCII: the digits)."""
    out: _Bool = (cps >= _DIGIT_LO) & (cps <= _DIGIT_HI)
    wide = np.flatnonzero(cps >= 128)
    if wide.size:
        uniq, inv = np.unique(cps[wide], return_inverse=True)
        flags = []
        for cp in uniq.tolist():
            f = _keep_cache.get(cp)
            if f is None:
                f = _keep_cache[cp] = _KEEP_CHAR.match(chr(cp)) is not None
            flags.append(f)
        out[wide] = np.array(flags, np.bool_)[inv]
    return out


def _gram_pairs(cps: _I64, starts: _I64, lens: _I64, first: int) -> tuple[_U64, _I32]:
    """Every (gram key, word number) of the words, numbered from ``first`` (repeats kept).

    The words are given as :func:`_codepoints` gives them. Pairs come by kind
    of gram, then in word order: a key's values are in increasing order.
    """
    wid = np.repeat(np.arange(first, first + lens.size, dtype=np.int32), lens)
    end = np.repeat(starts + lens, lens)
    pos = np.arange(cps.size, dtype=np.int64)
    c = cps.astype(np.uint64)
    keys: list[_U64] = []
    vals: list[_I32] = []
    bi = np.flatnonzero(pos + 1 < end)
    keys.append((c[bi] << np.uint64(21)) | c[bi + 1] | _BI)
    vals.append(wid[bi])
    tri = np.flatnonzero(pos + 2 < end)
    keys.append((c[tri] << np.uint64(42)) | (c[tri + 1] << np.uint64(21)) | c[tri + 2])
    vals.append(wid[tri])
    uni = np.flatnonzero(_keep(cps))
    keys.append(c[uni] | _UNI)
    vals.append(wid[uni])
    return np.concatenate(keys), np.concatenate(vals)


def _prefix_hashes(cps: _I64, starts: _I64, lens: _I64) -> tuple[_U64, _I64]:
    """Exclusive prefix sums of ``cp * _B**j`` (j: position in its word), and positions."""
    pos = np.arange(cps.size, dtype=np.int64) - np.repeat(starts, lens)
    pw = _power_table(int(lens.max()) + 1 if lens.size else 1)
    terms = cps.astype(np.uint64) * pw[pos]
    cs: _U64 = np.zeros(cps.size + 1, np.uint64)
    np.cumsum(terms, out=cs[1:])
    return cs, pos


def string_hashes(strings: Sequence[str]) -> _U64:
    """The 64-bit key of each string (deletion and stem tables): a polynomial hash.

    >>> a, b, c = string_hashes(["camp", "camp", "cmap"]).tolist()
    >>> a == b != c
    True
    """
    if not strings:
        return _EMPTY_U64
    return _hashes(*_codepoints(strings))


def _hashes(cps: _I64, starts: _I64, lens: _I64) -> _U64:
    """:func:`string_hashes` of strings given as :func:`_codepoints` gives them."""
    cs, _ = _prefix_hashes(cps, starts, lens)
    h: _U64 = cs[starts + lens] - cs[starts]
    return h + lens.astype(np.uint64) * np.uint64(_LEN)


def deletion_hashes(words: Sequence[str], first: int) -> tuple[_U64, _I32]:
    """Every (hash of a one-character deletion, word number) of ``words`` (repeats kept).

    The same keys :func:`string_hashes` gives the deleted strings, computed
    from two prefix sums instead of building the strings: deleting position
    ``i`` of a word keeps the hash terms before ``i`` and shifts the ones
    after it down a power of ``_B``.
    """
    if not words:
        return _EMPTY_U64, _EMPTY_I32
    cps, starts, lens = _codepoints(words)
    cs, pos = _prefix_hashes(cps, starts, lens)
    # The terms shifted down one power: cp * _B**(j - 1), zero at j == 0.
    pw = _power_table(int(lens.max()) + 1)
    shifted = np.where(pos > 0, cps.astype(np.uint64) * pw[np.maximum(pos - 1, 0)], np.uint64(0))
    cs2: _U64 = np.zeros(cps.size + 1, np.uint64)
    np.cumsum(shifted, out=cs2[1:])
    word_start = np.repeat(starts, lens)
    word_end = word_start + np.repeat(lens, lens)
    p = np.arange(cps.size, dtype=np.int64)
    h = (cs[p] - cs[word_start]) + (cs2[word_end] - cs2[p + 1])
    h = h + (np.repeat(lens, lens) - 1).astype(np.uint64) * np.uint64(_LEN)
    wid = np.repeat(np.arange(first, first + len(words), dtype=np.int32), lens)
    return h, wid


def unique_counts(ids: _I32) -> tuple[_I32, _I64]:
    """The distinct values of ``ids``, sorted, and how often each occurs (a sort, no ``np.unique``).

    >>> [a.tolist() for a in unique_counts(np.array([3, 1, 3], np.int32))]
    [[1, 3], [1, 2]]
    """
    if ids.size == 0:
        return ids, np.zeros(0, np.int64)
    s = np.sort(ids)
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    return s[starts], np.diff(np.append(starts, s.size))


@dataclass(frozen=True, slots=True, eq=False)
class Table:
    """Sorted distinct ``keys``; key ``k`` has words ``vals[offsets[k]:offsets[k + 1]]``."""

    keys: _U64
    offsets: _I64
    vals: _I32

    @staticmethod
    def build(keys: _U64, vals: _I32, *, ordered: bool = True) -> Table:
        """The table of (key, value) pairs, repeats dropped, each key's values sorted.

        ``ordered``: the pairs of one key come in increasing value order
        already (as generated, and as merged), so one stable sort by key
        suffices; otherwise they are sorted by key and value.
        """
        if keys.size == 0:
            return Table(_EMPTY_U64, np.zeros(1, np.int64), _EMPTY_I32)
        order = np.argsort(keys, kind="stable") if ordered else np.lexsort((vals, keys))
        keys, vals = keys[order], vals[order]
        new = np.ones(keys.size, np.bool_)
        new[1:] = (keys[1:] != keys[:-1]) | (vals[1:] != vals[:-1])
        keys, vals = keys[new], vals[new]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        offsets = np.append(starts, keys.size).astype(np.int64)
        return Table(keys[starts], offsets, vals.astype(np.int32, copy=False))

    def pairs(self) -> tuple[_U64, _I32]:
        """The (key, value) pairs, keys repeated."""
        return np.repeat(self.keys, np.diff(self.offsets)), self.vals

    def rows(self, probes: Sequence[int]) -> list[tuple[int, int]]:
        """For each probe key, the ``(start, end)`` of its values (``(0, 0)`` when absent).

        One binary search for all probes; the few answers (a query token's
        grams or stem: one to a dozen) are read back in Python, which costs
        less than numpy's fixed cost per array operation at that size.
        """
        keys = self.keys
        top = keys.size
        if top == 0:
            return [(0, 0)] * len(probes)
        offsets = self.offsets
        out: list[tuple[int, int]] = []
        at = keys.searchsorted(np.array(probes, np.uint64)).tolist()
        for i, key in zip(at, probes, strict=True):
            if i < top and int(keys[i]) == key:
                out.append((int(offsets[i]), int(offsets[i + 1])))
            else:
                out.append((0, 0))
        return out

    def remap(self, new_id: _I32) -> Table:
        """The table with value ``v`` renamed ``new_id[v]``, those mapped to -1 dropped."""
        keys, vals = self.pairs()
        mapped = new_id[vals]
        keep = mapped >= 0
        return Table.build(keys[keep], mapped[keep], ordered=False)

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.offsets.nbytes + self.vals.nbytes)


def _merge(a: Table, b: Table) -> Table:
    ka, va = a.pairs()
    kb, vb = b.pairs()
    return Table.build(np.concatenate((ka, kb)), np.concatenate((va, vb)))


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    """The three tables over a run of word numbers."""

    grams: Table
    dels: Table
    stems: Table
    words: int
    """How many words it indexes (its size, for the merge policy)."""

    @staticmethod
    def build(words: Sequence[str], first: int) -> Segment:
        """The tables of ``words``, numbered from ``first``: a few numpy passes.

        Python touches a word only to list the non-digit ones (they alone
        have deletion keys) and to stem the words of letters longer than
        three (any other word is its own stem, hashed with the rest).
        """
        cps, starts, lens = _codepoints(words)
        gk, gv = _gram_pairs(cps, starts, lens, first)
        # Words of ASCII digits alone: every code point a digit (lens > 0 always).
        digits = np.zeros(cps.size + 1, np.int64)
        np.cumsum((cps >= _DIGIT_LO) & (cps <= _DIGIT_HI), out=digits[1:])
        nondigit = np.flatnonzero(digits[starts + lens] - digits[starts] != lens)
        sub = [words[i] for i in nondigit.tolist()]
        dk, dv = deletion_hashes(sub, 0)
        dv = (nondigit.astype(np.int32) + np.int32(first))[dv] if dv.size else dv
        sk = _hashes(cps, starts, lens)
        long = [words[i] for i in np.flatnonzero(lens > 3).tolist()]
        stemmed = [(i, st) for i, w in enumerate(long) if w.isalpha() and (st := stem(w)) != w]
        if stemmed:
            at = np.flatnonzero(lens > 3)[[i for i, _ in stemmed]]
            sk[at] = string_hashes([st for _, st in stemmed])
        sv = np.arange(first, first + len(words), dtype=np.int32)
        return Segment(Table.build(gk, gv), Table.build(dk, dv), Table.build(sk, sv), len(words))

    def merge(self, other: Segment) -> Segment:
        return Segment(
            _merge(self.grams, other.grams),
            _merge(self.dels, other.dels),
            _merge(self.stems, other.stems),
            self.words + other.words,
        )

    def remap(self, new_id: _I32, words: int) -> Segment:
        return Segment(
            self.grams.remap(new_id), self.dels.remap(new_id), self.stems.remap(new_id), words
        )


_COMPACT_MIN = 4096
"""Dead words :meth:`VocabIndex.flush` tolerates before renumbering (if they outnumber the live)."""
_OVERLAY_MAX = 4096
"""Words the dictionary overlay holds before they are built into a segment of arrays."""
_TABLES = ("grams", "dels", "stems")


def hash_string(s: str) -> int:
    """:func:`string_hashes` of one string, in Python (cheaper than numpy for a few).

    >>> hash_string("camp") == string_hashes(["camp"]).tolist()[0]
    True
    """
    h = 0
    p = 1
    for c in s:
        h = (h + ord(c) * p) & _MASK
        p = (p * _B) & _MASK
    return (h + len(s) * _LEN) & _MASK


_INV_B = pow(_B, -1, 1 << 64)
"""The inverse of ``_B`` modulo 2**64 (it is odd): shifts a substring's hash terms down."""


def span_edit_hashes(s: str, spans: Sequence[tuple[int, int]]) -> list[list[int]]:
    """For each span ``(a, b)`` of ``s``: the keys of ``s[a:b]`` and of its one-character deletions.

    The deletion-index probes of a token and of the halves of it
    (:meth:`VocabIndex.edit_candidates`), each in a few integer operations
    from two prefix sums of ``s`` instead of a pass over the string: the
    terms of ``s[a:b]`` are those of ``s`` from ``a`` on, times ``_B**-a``.
    A group is ``b - a + 1`` keys (the span's, then deleting ``a``, ``a + 1``,
    ...), repeats kept.

    >>> [h] = span_edit_hashes("camp", [(1, 3)])
    >>> h == [hash_string(x) for x in ("am", "m", "a")]
    True
    """
    n = len(s)
    # pre[i]: the terms of s[:i]; low[i]: those of s[1:i], one power lower;
    # inv[i]: _B ** -i (all modulo 2**64).
    pre = [0] * (n + 1)
    low = [0] * (n + 1)
    inv = [1] * (n + 1)
    acc = acc_low = 0
    p = 1  # _B ** j
    for j, c in enumerate(s):
        cp = ord(c)
        if j:
            acc_low = (acc_low + cp * p) & _MASK  # p is still _B ** (j - 1)
            p = (p * _B) & _MASK
        acc = (acc + cp * p) & _MASK
        pre[j + 1] = acc
        low[j + 1] = acc_low
        inv[j + 1] = (inv[j] * _INV_B) & _MASK
    out: list[list[int]] = []
    for a, b in spans:
        shift, base, top, m = inv[a], pre[a], low[b], b - a
        keys = [((pre[b] - base) * shift + m * _LEN) & _MASK]
        tail = (m - 1) * _LEN
        keys.extend(
            ((pre[i] - base + top - low[i + 1]) * shift + tail) & _MASK for i in range(a, b)
        )
        out.append(keys)
    return out


class VocabIndex:
    """Gram, deletion and stem tables over a vocabulary of words that come and go.

    Not thread-safe on its own: the Lexicon calls it under its lock. Lookups
    return live words only. Words come in three places, numbered in this
    order: the segments (arrays), the *overlay* (the same keys in Python
    dictionaries: a few words written between reads are keyed in one numpy
    pass and probed by dictionary lookups, instead of each read adding a tiny
    segment), and the pending list (not keyed yet).
    """

    def __init__(self, *, compact_min: int = _COMPACT_MIN, overlay_max: int = _OVERLAY_MAX) -> None:
        self._compact_min = compact_min
        self._overlay_max = overlay_max
        self._words: list[str] = []
        self._wid: dict[str, int] = {}
        self._live: _Bool = np.zeros(64, np.bool_)
        self._dead = 0
        self._pending: list[str] = []
        self._overlay_words: list[str] = []
        self._overlay: dict[str, dict[int, list[int]]] = {t: {} for t in _TABLES}
        self._segments: list[Segment] = []
        # Per table, the segments' arrays as probe_view gives them, and the segments they are of.
        self._views: dict[str, tuple[list[Segment], tuple[tuple[_U64, _I64, _I32], ...]]] = {}

    # ----------------------------------------------------------------- writes

    def add(self, word: str) -> None:
        """Enter ``word`` into the vocabulary (a word already live is a no-op)."""
        self.add_many((word,))

    def add_many(self, words: Iterable[str]) -> None:
        """Enter each of ``words``: numbered and queued, indexed at the next read."""
        wid, live, known = self._wid, self._live, self._words
        first = len(known)  # the words new here are numbered from it on
        for w in words:
            i = wid.get(w)
            if i is None:
                wid[w] = len(known)
                known.append(w)
                self._pending.append(w)
            elif i < first and not live[i]:  # (a word new here, repeated: live below)
                live[i] = True
                self._dead -= 1
        end = len(known)
        if end > first:  # the new words made live in one assignment, not one by one
            if end > live.size:
                grown = np.zeros(max(2 * live.size, end), np.bool_)
                grown[: live.size] = live
                live = self._live = grown
            live[first:end] = True

    def remove(self, word: str) -> None:
        """Take ``word`` out of the vocabulary (it must be live)."""
        i = self._wid[word]
        if self._live[i]:
            self._live[i] = False
            self._dead += 1

    def flush(self) -> None:
        """Key the pending words: into the overlay, or with it into a new segment.

        A segment merges with the one before while it is at least half its
        size. Renumbers the live words densely first when dead ones outnumber them.
        """
        if self._dead >= self._compact_min and self._dead > len(self._words) - self._dead:
            self.compact()
        pending = self._pending
        if not pending:
            return
        if len(self._overlay_words) + len(pending) >= self._overlay_max:
            self._seal()
            segs = self._segments
            while len(segs) > 1 and segs[-1].words * 2 >= segs[-2].words:
                last = segs.pop()
                segs[-1] = segs[-1].merge(last)
            return
        seg = Segment.build(pending, len(self._words) - len(pending))
        for name in _TABLES:
            table: Table = getattr(seg, name)
            keys, vals = table.pairs()
            ov = self._overlay[name]
            for k, v in zip(keys.tolist(), vals.tolist(), strict=True):
                bucket = ov.get(k)
                if bucket is None:
                    ov[k] = [v]
                else:
                    bucket.append(v)
        self._overlay_words.extend(pending)
        self._pending = []

    def _seal(self) -> None:
        """Build the overlay's and the pending words into one new segment (last)."""
        words = self._overlay_words + self._pending
        if not words:
            return
        self._segments.append(Segment.build(words, len(self._words) - len(words)))
        self._overlay_words, self._pending = [], []
        self._overlay = {t: {} for t in _TABLES}

    def compact(self) -> None:
        """Drop the dead words and merge everything into one segment (a snapshot saves that)."""
        self._seal()
        n = len(self._words)
        if self._dead:
            keep = np.flatnonzero(self._live[:n])
            new_id = np.full(n, -1, np.int32)
            new_id[keep] = np.arange(keep.size, dtype=np.int32)
            words = [self._words[i] for i in keep.tolist()]
            segs = [s.remap(new_id, s.words) for s in self._segments]
            self._words = words
            self._wid = {w: i for i, w in enumerate(words)}
            live = np.zeros(max(64, 2 * len(words)), np.bool_)
            live[: len(words)] = True
            self._live = live
            self._dead = 0
        else:
            segs = self._segments
        while len(segs) > 1:
            last = segs.pop()
            segs[-1] = segs[-1].merge(last)
        self._segments = [Segment(s.grams, s.dels, s.stems, len(self._words)) for s in segs]

    # ------------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._words) - self._dead

    def _lookup(self, table: str, probes: list[int]) -> list[_I32]:
        """For each probe key, the live word numbers under it, sorted (segments, then overlay)."""
        self.flush()
        parts: list[list[_I32]] = [[] for _ in probes]
        if self._segments:
            for seg in self._segments:
                t: Table = getattr(seg, table)
                for k, (lo, hi) in enumerate(t.rows(probes)):
                    if hi > lo:
                        parts[k].append(t.vals[lo:hi])
        ov = self._overlay[table]
        if ov:
            for k, key in enumerate(probes):
                bucket = ov.get(key)
                if bucket:
                    parts[k].append(np.array(bucket, np.int32))
        out = [_EMPTY_I32 if not p else p[0] if len(p) == 1 else np.concatenate(p) for p in parts]
        if self._dead:
            live = self._live
            out = [a[live[a]] if a.size else a for a in out]
        return out

    def words_of(self, ids: _I32) -> list[str]:
        """The words numbered ``ids``."""
        if ids.size == 0:
            return []
        if ids.size == 1:
            return [self._words[int(ids[0])]]
        return list(itemgetter(*ids.tolist())(self._words))

    def gram_ids(self, grams: Sequence[str]) -> list[_I32]:
        """For each gram (one to three characters), the live words holding it, as numbers."""
        return self._lookup("grams", [gram_code(g) for g in grams])

    def gram_words(self, gram: str) -> list[str]:
        """The live words holding ``gram`` (one to three characters)."""
        return self.words_of(self.gram_ids([gram])[0])

    def _probe(self, table: str, probes: list[int]) -> tuple[_I64, _I32]:
        """Every (probe number, live word number) under the keys ``probes``, flushed first.

        :meth:`_lookup` without a Python step per probe and segment: each
        segment answers all probes with one binary search, and the value
        ranges of the keys found are gathered by one ``arange``. Pairs may
        repeat (a word under two of the probes), in no particular order.
        """
        ks: list[_I64] = []
        vs: list[_I32] = []
        if self._segments:
            arr = np.array(probes, np.uint64)
            for seg in self._segments:
                t: Table = getattr(seg, table)
                top = t.keys.size
                if top == 0:
                    continue
                at = t.keys.searchsorted(arr)
                at[at == top] = top - 1
                hit = (t.keys[at] == arr).nonzero()[0]
                if hit.size == 0:
                    continue
                lo = t.offsets[at[hit]]
                n = t.offsets[at[hit] + 1] - lo
                # Value positions lo[i], ..., lo[i] + n[i] - 1 of every hit i, in one pass.
                skip = np.repeat(lo - (np.cumsum(n) - n), n)
                ks.append(np.repeat(hit, n))
                vs.append(t.vals[np.arange(skip.size) + skip])
        ov = self._overlay[table]
        if ov:
            oks: list[int] = []
            ovs: list[int] = []
            for k, key in enumerate(probes):
                bucket = ov.get(key)
                if bucket:
                    oks.extend([k] * len(bucket))
                    ovs.extend(bucket)
            if oks:
                ks.append(np.array(oks, np.int64))
                vs.append(np.array(ovs, np.int32))
        if not ks:
            return _EMPTY_I64, _EMPTY_I32
        k_all = ks[0] if len(ks) == 1 else np.concatenate(ks)
        v_all = vs[0] if len(vs) == 1 else np.concatenate(vs)
        if self._dead:
            live = self._live[v_all]
            k_all, v_all = k_all[live], v_all[live]
        return k_all, v_all

    def deletion_words(self, strings: Sequence[str]) -> list[str]:
        """Live words one of whose one-character deletions may be one of ``strings``.

        A superset (hashes can meet): the caller verifies. Words of ASCII
        digits alone have no deletions here. Distinct, in word-number order.
        """
        return self._deletion_groups([[hash_string(s) for s in strings]])[0]

    def edit_candidates(self, s: str, spans: Sequence[tuple[int, int]]) -> list[list[str]]:
        """For each span ``(a, b)``: :meth:`deletion_words` of ``s[a:b]`` and its deletions.

        The one-edit candidates of a token and of halves of it (joined
        words) at once: keys from :func:`span_edit_hashes`, one probe.
        """
        return self._deletion_groups(span_edit_hashes(s, spans))

    def probe_view(
        self, table: str
    ) -> tuple[tuple[tuple[_U64, _I64, _I32], ...], dict[int, list[int]], _Bool | None, list[str]]:
        """One table (``"grams"``, ``"dels"``, ``"stems"``) as a compiled probe reads it.

        ``(tables, overlay, live, words)``: each segment's ``(keys, offsets,
        vals)``, the overlay's key -> word numbers, the live mask (``None``
        when every word is live) and the words by number. Flushed first;
        nothing is copied. Valid until the next write to the index.
        """
        self.flush()
        segs = self._segments
        held = self._views.get(table)
        # The segments compare by identity (eq=False), and the cache holds them: a
        # merged-away segment's id cannot come back to fool it.
        if held is None or held[0] != segs:
            tables = tuple((t.keys, t.offsets, t.vals) for t in (getattr(s, table) for s in segs))
            held = self._views[table] = (list(segs), tables)
        return held[1], self._overlay[table], self._live if self._dead else None, self._words

    def _deletion_groups(self, groups: list[list[int]]) -> list[list[str]]:
        """For each group of deletion-table keys, the distinct live words under them, in order.

        All groups are probed at once (:meth:`_probe`): one binary search
        per segment, however many groups.
        """
        self.flush()
        flat = list(chain.from_iterable(groups))
        per: list[set[int]] = [set() for _ in groups]
        if flat:
            owner = np.repeat(np.arange(len(groups)), list(map(len, groups)))
            probe, ids = self._probe("dels", flat)
            # A few dozen pairs: Python sets beat numpy's fixed costs.
            for g, i in zip(owner[probe].tolist(), ids.tolist(), strict=True):
                per[g].add(i)
        words = self._words
        return [[words[i] for i in sorted(got)] for got in per]

    def stem_words(self, key: str) -> list[str]:
        """The live words whose light stem is ``key`` (verified), in word-number order.

        The stem table's key is a hash: the words under it are checked by
        stemming them. Compiled where :mod:`memstore._speedups` is built (a
        binary search a segment instead of a few numpy calls).
        """
        native = _wordbatch.speedups
        if native is not None:
            tables, overlay, live, words = self.probe_view("stems")
            found: list[str] = native.key_words(hash_string(key), words, live, tables, overlay)
        else:
            (ids,) = self._lookup("stems", [hash_string(key)])
            found = self.words_of(ids)
        return [w for w in found if stem(w) == key]

    # --------------------------------------------------------------- snapshot

    def export(self, order: Sequence[str]) -> Segment:
        """One segment over the live words numbered as in ``order`` (every live word once).

        Compacts first. A snapshot numbers the words as its postings do, so
        that a load shares one word list and dictionary between the two.
        """
        self.compact()
        if len(order) != len(self) or not self._segments:
            if len(order) != len(self):
                raise ValueError("the order does not hold every live word once")
            empty = Table.build(_EMPTY_U64, _EMPTY_I32)
            return Segment(empty, empty, empty, 0)
        wid = self._wid
        new_id = np.full(len(self._words), -1, np.int32)
        at = [wid.get(w, -1) for w in order]
        if -1 in at:
            raise ValueError("the order holds a word that is not in the vocabulary")
        new_id[at] = np.arange(len(order), dtype=np.int32)
        if (new_id < 0).any():
            raise ValueError("the order does not hold every live word once")
        return self._segments[0].remap(new_id, len(order))

    @classmethod
    def restore(cls, words: list[str], wid: dict[str, int], segment: Segment) -> VocabIndex:
        """The index of ``words`` (numbered ``wid``) with the tables :meth:`export` gave.

        Trusted: a snapshot checks its arrays before it hands them over.
        """
        v = cls()
        v._words = words
        v._wid = wid
        live = np.zeros(max(64, 2 * len(words)), np.bool_)
        live[: len(words)] = True
        v._live = live
        if words:
            v._segments = [segment]
        return v

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables."""
        return sum(t.nbytes for s in self._segments for t in (s.grams, s.dels, s.stems))

    def live_words(self) -> list[str]:
        """Every live word (for checks)."""
        n = len(self._words)
        return [self._words[i] for i in np.flatnonzero(self._live[:n]).tolist()]

    def table_view(self, table: str) -> dict[int, set[str]]:
        """One table as key -> live words (for checks against a rebuild)."""
        self.flush()
        out: dict[int, set[str]] = {}
        live = self._live
        for seg in self._segments:
            t: Table = getattr(seg, table)
            inner = np.ones(max(t.vals.size - 1, 0), np.bool_)
            inner[t.offsets[1:-1] - 1] = False  # the steps from one key's values to the next
            assert np.all(np.diff(t.vals)[inner] > 0), f"{table} values not sorted and distinct"
            for k, lo, hi in zip(
                t.keys.tolist(), t.offsets[:-1].tolist(), t.offsets[1:].tolist(), strict=True
            ):
                ids = t.vals[lo:hi]
                ws = self.words_of(ids[live[ids]])
                if ws:
                    out.setdefault(k, set()).update(ws)
        for k, bucket in self._overlay[table].items():
            ids = np.array(bucket, np.int32)
            ws = self.words_of(ids[live[ids]])
            if ws:
                out.setdefault(k, set()).update(ws)
        return out
