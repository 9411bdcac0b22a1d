"""How far a process has followed the feed, and its own commits still ahead of that.

The position is the sequence number (and stamp) of the last commit whose
state is in the store. A process's *own* commits are in its store the moment
they are acknowledged, before the follower reaches them, so the position
also remembers them until it passes them:

* the follower need not read back what an own commit wrote (its ids are
  already up to date, :meth:`FeedPosition.is_acked`);
* a snapshot the follower took *before* an own commit must not roll that
  commit's ids back to an older state (:meth:`FeedPosition.not_overtaken`).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable, Sequence

__all__ = ["FeedPosition"]


class FeedPosition:
    """The applied position of one journal's follower (thread-safe)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._seq = 0
        self._lsn = 0
        self._tracking = False
        self._acked: collections.deque[tuple[int, tuple[str, ...]]] = collections.deque()
        self._acked_seqs: set[int] = set()
        self._own_latest: dict[str, int] = {}
        self._partial = False

    def track(self, on: bool) -> None:
        """Start (or stop, forgetting them) remembering own commits."""
        with self._cond:
            self._tracking = on
            if not on:
                self._acked.clear()
                self._acked_seqs.clear()
                self._own_latest.clear()

    def start_at(self, seq: int, lsn: int) -> None:
        """The store reflects the record up to commit ``seq`` (stamp ``lsn``)."""
        with self._cond:
            self._seq, self._lsn = seq, lsn
            self._cond.notify_all()

    @property
    def seq(self) -> int:
        with self._cond:
            return self._seq

    @property
    def lsn(self) -> int:
        """The packed stamp of the last commit applied."""
        with self._cond:
            return self._lsn

    def acknowledge(self, seq: int, ids: Sequence[str]) -> None:
        """An own commit the store already holds (call it with the store's lock held)."""
        with self._cond:
            if not self._tracking:
                return
            self._acked.append((seq, tuple(ids)))
            self._acked_seqs.add(seq)
            for id in ids:
                self._own_latest[id] = seq

    def retract(self, seq: int) -> None:
        """Own commit ``seq``, acknowledged before its COMMIT, did not land: forget it.

        Call it with the store's lock held, as :meth:`acknowledge`. The
        number is free again (another process's next commit may take it),
        and each id it touched is owned by its previous own commit, if any.
        """
        with self._cond:
            if seq not in self._acked_seqs:
                return
            self._acked_seqs.discard(seq)
            ids = set(next(touched for s, touched in self._acked if s == seq))
            self._acked = collections.deque((s, t) for s, t in self._acked if s != seq)
            for id in ids:
                if self._own_latest.get(id) == seq:
                    del self._own_latest[id]
            for s, touched in self._acked:
                for id in touched:
                    if id in ids and s > self._own_latest.get(id, 0):
                        self._own_latest[id] = s

    def is_acked(self, seq: int) -> bool:
        """Whether commit ``seq`` is an own commit not yet passed."""
        with self._cond:
            return seq in self._acked_seqs

    def not_overtaken(self, ids: Iterable[str], top: int) -> list[str]:
        """The ``ids`` a snapshot of commits ``1..top`` may set: no own commit after ``top``."""
        with self._cond:
            own = self._own_latest
            return [id for id in ids if own.get(id, 0) <= top]

    def unseen(self, commits: Iterable[tuple[int, Sequence[str]]], ids: Iterable[str]) -> set[str]:
        """The ``ids`` that one of ``commits`` (``(seq, ids)``) wrote after the store took them in.

        An id's state in the store is the record's as of the position, or as
        of this process's own latest commit of it, whichever is later; another
        process's commit past both is one the store has not seen (yet).
        """
        wanted = set(ids)
        with self._cond:
            own = self._own_latest
            return {
                id
                for seq, touched in commits
                if seq > self._seq and seq not in self._acked_seqs
                for id in touched
                if id in wanted and seq > own.get(id, 0)
            }

    def partly_applied(self) -> None:
        """Part of a batch is in the store, the rest (and :meth:`advance`) to come.

        Call it with the store's lock held, as the part is applied.
        """
        with self._cond:
            self._partial = True

    def prefix(self) -> int | None:
        """The packed stamp the store's state is the record's state at, or ``None``.

        The store holds exactly the commits up to the position (call it with
        the store's lock held, under which the follower applies a batch and
        advances past it) unless an own commit is in it ahead of the
        follower, or the follower is part-way through a batch: then no one
        position names its state, and the answer is ``None`` (wait for the
        follower to pass the head, and ask again).
        """
        with self._cond:
            return None if self._acked or self._partial else self._lsn

    def advance(self, seq: int, lsn: int) -> None:
        """Commits up to ``seq`` are applied; forget the own commits among them."""
        with self._cond:
            self._seq, self._lsn = seq, max(self._lsn, lsn)
            self._partial = False
            while self._acked and self._acked[0][0] <= seq:
                done, ids = self._acked.popleft()
                self._acked_seqs.discard(done)
                for id in ids:
                    if self._own_latest.get(id) == done:
                        del self._own_latest[id]
            self._cond.notify_all()

    def wait_for(self, lsn: int, timeout: float | None) -> bool:
        """Wait until the applied stamp reaches ``lsn``; whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._lsn >= lsn, timeout)
