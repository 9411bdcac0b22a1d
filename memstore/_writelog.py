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
removed, under the Lexicon's generation after it. A match computed at
generation ``g`` is still exact when no write logged after ``g`` holds one of
its words. A batch of more than ``bound`` documents, or more than ``bound``
writes since ``g``, means recompute (as does a compaction: it renumbers the
slots a match holds).

>>> log = WriteLog(bound=4)
>>> log.record(1, {"payment", "api"})
>>> log.untouched(0, {"payment": 1.0}.keys()), log.untouched(0, {"tokens": 1.0}.keys())
(False, True)
>>> log.forget(2)
>>> log.untouched(1, {"tokens": 1.0}.keys())
False
"""

from __future__ import annotations

from collections.abc import KeysView, Set

__all__ = ["WRITES_MAX", "WriteLog"]

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
        self._writes: list[tuple[int, frozenset[str]]] = []
        self._from = 0
        """Every write after this generation is logged."""

    def record(self, gen: int, words: Set[str]) -> None:
        """Log a write that made the generation ``gen``, touching documents holding ``words``."""
        self._writes.append((gen, frozenset(words)))
        if len(self._writes) >= 2 * self.bound:  # trimmed in batches
            drop = len(self._writes) - self.bound
            self._from = self._writes[drop - 1][0]
            del self._writes[:drop]

    def forget(self, gen: int) -> None:
        """Nothing before generation ``gen`` is checkable any more (a bulk write, a compaction)."""
        self._writes = []
        self._from = gen

    def untouched(self, since: int, *words: KeysView[str] | Set[str]) -> bool:
        """Whether no write logged after generation ``since`` touched a document holding ``words``.

        ``False`` also when some of those writes are forgotten, or more than ``bound``.
        """
        if since < self._from:
            return False
        for checked, (gen, touched) in enumerate(reversed(self._writes)):
            if gen <= since:
                return True
            if checked >= self.bound or any(not ws.isdisjoint(touched) for ws in words):
                return False
        return True
