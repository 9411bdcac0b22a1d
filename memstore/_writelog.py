"""Which writes a query token's cached match can ignore.

The :class:`~memstore.lexical.Lexicon` caches what each query token matches
(its documents and levels, a :class:`~memstore._tokenmatch.TokenMatch`).
A write used to drop every cached match, yet a search right after an
agent's write seldom asks about the words that write brought. A token's
match is made of the documents holding one of its expansion's words (the
words it matches at some level, the words of its joined pairs, its fuzzy
words: :mod:`memstore.lexical`). So, while the expansion itself stands
(:mod:`memstore._vocablog`), a write changes the match only if a document
it adds or takes out holds one of those words: the others are not in it
before and are not in it after, and no other document's postings move.

The log keeps, for the last writes, the words of the documents each added or
removed, under the Lexicon's generation after it, and the slots of the
documents a write only added (none replaced or removed). A match computed at
generation ``g`` is still exact when no write logged after ``g`` holds one of
its words. When the writes that do hold one only added documents, the match
is the old one plus those documents (new slots come after every old one, and
no old document moved): :func:`doc_levels` gives each one's levels from its
words, as the postings would. Any other write touching the words, a batch of
more than ``bound`` documents, or more than ``bound`` writes since ``g``
means recompute (as does a compaction: it renumbers the slots a match holds).

>>> log = WriteLog(bound=4)
>>> log.record(1, {"payment", "api"}, range(0, 1))
>>> log.record(2, {"tokens"}, None)  # a removal or a re-index
>>> log.changed_since(0, {"payment": 1.0}.keys()), log.changed_since(0, {"camp": 1.0}.keys())
([range(0, 1)], [])
>>> print(log.changed_since(0, {"tokens": 1.0}.keys()))
None
"""

from __future__ import annotations

from collections.abc import KeysView, Mapping, Sequence, Set

import numpy as np

from memstore._tokenmatch import TokenMatch

__all__ = ["WRITES_MAX", "WriteLog", "doc_levels", "extend_match"]

WRITES_MAX = 64
"""Writes (and documents per write) a cached match is checked against before it is recomputed."""


class WriteLog:
    """The words each of the last ``bound`` writes added or removed, by generation.

    Not thread-safe on its own: the Lexicon calls it under its lock. Costs:
    :meth:`record` one list append; :meth:`untouched` a C-level set test per
    write logged since (over the smaller of the two sets).
    """

    def __init__(self, bound: int = WRITES_MAX) -> None:
        if bound < 1:
            raise ValueError(f"a write log holds at least one write, got bound={bound}")
        self.bound = bound
        """The most documents one write may touch, and writes one check reads, to stay checkable."""
        self._writes: list[tuple[int, Set[str], range | None]] = []
        self._from = 0
        """Every write after this generation is logged."""

    def record(self, gen: int, words: Set[str], added: range | None) -> None:
        """Log a write that made generation ``gen``, touching documents holding ``words``.

        ``added``: the slots of its documents when it only added some, else
        ``None``. ``words`` is kept as it is: the caller must not change it.
        """
        self._writes.append((gen, words, added))
        if len(self._writes) >= 2 * self.bound:  # trimmed in batches
            drop = len(self._writes) - self.bound
            self._from = self._writes[drop - 1][0]
            del self._writes[:drop]

    def forget(self, gen: int) -> None:
        """Nothing before generation ``gen`` is checkable any more (a bulk write, a compaction)."""
        self._writes = []
        self._from = gen

    def changed_since(
        self, since: int, words: KeysView[str], more: Set[str] = frozenset()
    ) -> list[range] | None:
        """The slots added since generation ``since`` by the writes holding ``words`` or ``more``.

        ``[]``: no write logged after ``since`` touched a document holding
        one of them. ``None`` (recompute): one that did removed or replaced
        documents, or some of those writes are forgotten, or more than ``bound``.
        """
        if since < self._from:
            return None
        found: list[range] = []
        for checked, (gen, touched, added) in enumerate(reversed(self._writes)):
            if gen <= since:
                break
            if checked >= self.bound:
                return None
            # C-level tests, over the smaller set of each pair.
            if not words.isdisjoint(touched) or not more.isdisjoint(touched):
                if added is None:
                    return None
                found.append(added)
        found.reverse()
        return found


def doc_levels(
    text: str,
    ntitle: int,
    levels: Mapping[str, float],
    fuzzy: Mapping[str, float],
    pairs: Sequence[tuple[str, str]],
    pair_level: float,
) -> tuple[float, float]:
    """One document's best level for a token, and its title's (``0.0``: no match).

    ``text`` is the document as the Lexicon keeps it (its words space-padded,
    title first, ``ntitle`` of them); ``levels`` the token's words by level,
    ``fuzzy`` its fuzzy words (empty when the channel is closed), ``pairs``
    its joined pairs, found adjacent at ``pair_level``. The same best level
    the postings give: every word of the document is in its postings, the
    title's in the title postings (by the exact levels alone), and a pair is
    adjacent when ``" w1 w2 "`` is in the text.

    >>> doc_levels(" camp trip ", 1, {"camp": 1.0, "camping": 0.9}, {}, [], 0.8)
    (1.0, 1.0)
    >>> doc_levels(" pay ment ", 0, {}, {"payments": 0.3}, [("pay", "ment")], 0.8)
    (0.8, 0.0)
    """
    ws = text.split()
    best = max([levels.get(w, 0.0) for w in ws] + [fuzzy.get(w, 0.0) for w in ws], default=0.0)
    if best < pair_level and any(f" {a} {b} " in text for a, b in pairs):
        best = pair_level
    title = max([levels.get(w, 0.0) for w in ws[:ntitle]], default=0.0)
    return best, title


def extend_match(
    m: TokenMatch,
    added: Sequence[range],
    texts: Sequence[str],
    ntitles: Sequence[int],
    levels: Mapping[str, float],
    fuzzy: Mapping[str, float],
    pairs: Sequence[tuple[str, str]],
    pair_level: float,
) -> TokenMatch:
    """``m`` with the documents at the ``added`` slots, each at its :func:`doc_levels`.

    The added slots are all above ``m``'s (slots only grow), so the columns
    stay sorted by appending.
    """
    slots: list[int] = []
    lvs: list[float] = []
    tslots: list[int] = []
    tlvs: list[float] = []
    for r in added:
        for s in r:
            lv, tlv = doc_levels(texts[s], ntitles[s], levels, fuzzy, pairs, pair_level)
            if lv:
                slots.append(s)
                lvs.append(lv)
            if tlv:
                tslots.append(s)
                tlvs.append(tlv)
    if not slots and not tslots:
        return m
    cols = (
        np.concatenate((m.slots, np.array(slots, np.intp))),
        np.concatenate((m.levels, np.array(lvs, np.float64))),
        np.concatenate((m.title_slots, np.array(tslots, np.intp))),
        np.concatenate((m.title_levels, np.array(tlvs, np.float64))),
    )
    for a in cols:
        a.setflags(write=False)  # cached and shared, as the Lexicon's own
    return TokenMatch(*cols, m.fuzzy_ok)
