"""Which vocabulary changes a query token's cached expansion can ignore.

The :class:`~memstore.lexical.Lexicon` caches each query token's *expansion*
(the vocabulary words it matches, by level; its joined-word pairs; whether
the fuzzy channel is open). Dropping every expansion whenever any word
enters or leaves the vocabulary made most of an agent's searches, which come
right after one of its writes, expand every token again, although the words
such a write brings (a date, a name) rarely touch the query's tokens.

A word ``w`` can change token ``tok``'s expansion only when it is *relevant*
to ``tok`` under one of the match rule's channels (:mod:`memstore.lexical`):

* substring, prefix, exact: ``tok in w``;
* stem: ``stem(w) == stem(tok)``;
* one edit, of ``tok`` or of a contiguous piece of it (the halves of a
  joined pair, and the digit words generated near one): then every
  character of ``w`` but at most one occurs in ``tok``, and ``w`` is at
  most one character longer than ``tok``. Every piece probed has two
  characters or more (``tok`` itself has three; the other half of a joined
  pair is at least two characters, as a vocabulary half one character short
  of ``tok`` is one edit from it, so strong, and never split off), so a
  word with a character ``tok`` lacks came by one insertion or
  substitution: it holds one such character, once, and at least one
  other. So a new number such as the "7" or "11" of "round 11" touches
  only the tokens holding its digits;
* fuzzy (trigram Dice): ``w`` holds one of ``tok``'s trigrams.

:meth:`VocabLog.relevant` tests a superset of these (the one-edit test is
loose on purpose: a word wrongly called relevant costs a recomputation, one
wrongly called irrelevant would be a wrong answer). The log keeps the last
words that entered or left the vocabulary, numbered by a running *stamp*; an
expansion remembers the stamp it was computed (or last checked) at, and is
still exact when every word logged since is irrelevant to its token. A
change too old for the log, or too many changes to check, means recompute.

>>> log = VocabLog(bound=4)
>>> since = log.stamp
>>> log.record(["2024", "alice"])
>>> log.unaffected("payment", since), log.unaffected("alic", since)
(True, False)
>>> since = log.stamp
>>> log.record(["7"])  # one character: only a token holding it is touched
>>> log.unaffected("payment", since), log.unaffected("b7", since)
(True, False)
>>> log.record(["x"] * 5)  # more than the bound: nothing before is checkable
>>> log.unaffected("payment", since)
False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstore.text import stem, trigrams

__all__ = ["LOG_MAX", "VocabLog"]

LOG_MAX = 256
"""Vocabulary changes a cached expansion is checked against before it is recomputed instead."""


@dataclass(frozen=True, slots=True)
class _Change:
    """A word that entered or left the vocabulary, with what the relevance test reads of it."""

    word: str
    stem: str
    chars: frozenset[str]
    grams: frozenset[str]
    """Its three-character substrings (none for a word under three characters)."""


def _change(w: str) -> _Change:
    grams = trigrams(w) if len(w) >= 3 else frozenset()
    return _Change(w, stem(w), frozenset(w), grams)


class VocabLog:
    """The last ``bound`` words that entered or left the vocabulary, and the relevance test.

    Not thread-safe on its own: the Lexicon calls it under its lock. Costs:
    :meth:`record` one list extend (nothing for a batch of more than
    ``bound`` words, which only moves the stamp on); :meth:`unaffected` a
    few set operations per word logged since, and the first check to read a
    word computes its stem, characters and trigrams once.
    """

    def __init__(self, bound: int = LOG_MAX) -> None:
        if bound < 1:
            raise ValueError(f"a vocabulary log holds at least one change, got bound={bound}")
        self._bound = bound
        # A word until a check first reads it, then its _Change (a write pays one append).
        self._changes: list[str | _Change] = []
        self._start = 0
        """The stamp of ``_changes[0]``: changes before it are forgotten."""

    @property
    def stamp(self) -> int:
        """How many changes were recorded so far (an expansion's "as of")."""
        return self._start + len(self._changes)

    def record(self, words: Sequence[str]) -> None:
        """Log ``words`` (each entered or left the vocabulary)."""
        if len(words) > self._bound:  # a bulk load: nothing older stays checkable
            self._start += len(self._changes) + len(words)
            self._changes = []
            return
        self._changes.extend(words)
        extra = len(self._changes) - self._bound
        if extra >= self._bound:  # trimmed in batches: one list shift per ``bound`` changes
            del self._changes[:extra]
            self._start += extra

    def forget(self) -> None:
        """Make every stamp up to now uncheckable (the postings were renumbered).

        The stamp moves on too: an expansion stamped now is not current any more.
        """
        self._start = self.stamp + 1
        self._changes = []

    def unaffected(self, tok: str, since: int) -> bool:
        """Whether no word logged since stamp ``since`` is relevant to ``tok`` (see the module).

        ``False`` also when those changes are forgotten or more than ``bound``.
        """
        now = self.stamp
        if since == now:
            return True
        if since < self._start or now - since > self._bound:
            return False
        n = len(tok)
        tstem = stem(tok)
        tchars = frozenset(tok)
        tgrams = trigrams(tok) if n >= 3 else frozenset()
        changes = self._changes
        for i in range(since - self._start, len(changes)):
            c = changes[i]
            if isinstance(c, str):
                c = changes[i] = _change(c)
            w = c.word
            if tok in w or c.stem == tstem or not c.grams.isdisjoint(tgrams):
                return False
            # Characters of w new to tok: none, or one, once, in a word of two or more.
            if len(w) <= n + 1 and len(c.chars - tchars) <= 1:
                kept = sum(map(tchars.__contains__, w))
                if kept == len(w) or (kept == len(w) - 1 and kept):
                    return False
        return True
