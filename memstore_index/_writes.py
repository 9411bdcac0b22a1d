"""Writes: prepare (embed, fallible, no change) then apply (index, persist).

An upsert is split so that a store can embed before its commit and index
after it: :meth:`Writes.prepare` embeds what changed (a content hash says
what did) and :meth:`Writes.apply` indexes the rows. A row prepared as
"unchanged" carries no vector; if the id holds another text by the time it
applies (a write landed in between), it is embedded then. Failures after a
commit join the backlog (``pending``): unsaved rows (persistence) and
unembedded texts (here).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from memstore.arguments import describe
from memstore.errors import InvalidItemError, MemstoreError
from memstore.item import Item
from memstore_index._centring import Vector
from memstore_index._persistence import Persistence
from memstore_index._vectorfile import StoredVector, text_hash
from memstore_index.entry import IndexEntry

__all__ = ["Writes"]

_log = logging.getLogger("memstore")


class Writes(Persistence):
    """Prepare, apply, upsert, remove; the backlog as a whole."""

    def prepare(self, pairs: Iterable[tuple[IndexEntry, str]]) -> list[StoredVector]:
        """Embed what must be embedded for ``pairs`` (no change to the index).

        A text whose hash matches the stored one is not embedded again; its row
        has an empty ``vector`` and :meth:`apply` keeps the stored one (or, if
        the index changed meanwhile, embeds it then). The expensive, fallible
        half of an upsert.
        """
        if isinstance(pairs, str | bytes | Mapping) or not isinstance(pairs, Iterable):
            raise InvalidItemError(
                f"pairs must be a list of (IndexEntry, text) pairs, got {describe(pairs)}"
            )
        pairs = list(pairs)
        for n, (e, t) in enumerate(pairs):  # before anything is embedded
            if type(t) is not str or not isinstance(e, IndexEntry):
                raise InvalidItemError(
                    f"pairs[{n}] must be (IndexEntry, str), got ({type(e).__name__}, "
                    f"{type(t).__name__})"
                )
        with self._lock:
            base = [self._hash.get(e.id) for e, _ in pairs]
        return self._prepare(pairs, base)

    def _prepare(
        self, pairs: list[tuple[IndexEntry, str]], base: Sequence[str | None]
    ) -> list[StoredVector]:
        """:meth:`prepare` against ``base``: the hash each id will have when the rows apply.

        A row whose text hashes to its base is "unchanged" (empty vector). Any
        other text takes a vector already known for it (offered, indexed, or
        staged by an earlier group) before it is embedded.
        """
        hashes = [text_hash(t) for _, t in pairs]
        fresh: dict[int, Vector] = {}
        embed: list[int] = []
        with self._lock:
            for i, ((e, _), h) in enumerate(zip(pairs, hashes, strict=True)):
                if base[i] == h:
                    continue
                known = self._known(e.id, h)
                if known is None:
                    embed.append(i)
                else:
                    fresh[i] = known
        if embed:
            vecs = self._embed([pairs[i][1] for i in embed])
            fresh.update(zip(embed, vecs, strict=True))
        empty = np.empty(0, np.float32)  # "unchanged": apply keeps the stored vector
        return [
            StoredVector(entry, -1, h, text, fresh.get(i, empty))
            for i, ((entry, text), h) in enumerate(zip(pairs, hashes, strict=True))
        ]

    def _known(self, id: str, h: str) -> Vector | None:
        """A vector this store already has for text hash ``h`` of ``id`` (lock held)."""
        if self._offered and (v := self._offered.get((id, h))) is not None:
            return v
        if self._hash.get(id) == h:
            indexed: Vector = self._vecs[self._label_of[id]].copy()
            return indexed
        for _, p in reversed(self._staged.get(id, ())):
            if p.text_hash == h and p.vector.size:
                return p.vector
        return None

    @contextlib.contextmanager
    def offered(self, vectors: Mapping[tuple[str, str], Vector]) -> Iterator[None]:
        """Use vectors made elsewhere instead of embedding, inside the block.

        ``vectors`` maps ``(id, text_hash(text))`` to a unit vector of this
        store's model and dimension, e.g. what another process embedded and a
        shared journal kept. A :meth:`prepare` (an upsert, a store write, a
        :meth:`sync`) that would embed that text for that id takes the vector
        instead; a text not offered is embedded as usual. Offers nest.

        >>> from memstore_index import CellStore, HashEmbedder
        >>> donor, cells = CellStore(HashEmbedder(dim=8)), CellStore(HashEmbedder(dim=8))
        >>> donor.upsert(IndexEntry("a"), "pool exhausted")
        >>> with cells.offered({("a", text_hash("pool exhausted")): donor.vector("a")}):
        ...     cells.upsert(IndexEntry("a"), "pool exhausted")   # no embedding call
        >>> bool((cells.vector("a") == donor.vector("a")).all())
        True
        """
        for (id, _), vec in vectors.items():
            if vec.shape != (self._dim,):
                raise MemstoreError(
                    f"offered vector for {id!r} has shape {vec.shape}, expected ({self._dim},)"
                )
        with self._lock:
            before = self._offered
            self._offered = {**before, **vectors} if before else dict(vectors)
        try:
            yield
        finally:
            with self._lock:
                self._offered = before

    def prepared_for(self, item: Item) -> StoredVector | None:
        """What the before-commit listener prepared for this very ``item`` object, if anything.

        For the store's commit hook (a journal keeping vectors beside its
        versions): during the commit of a group, each embeddable upserted item
        has a prepared row, whose ``vector`` is empty when the text was
        unchanged (the stored vector stays). ``None`` outside a commit, or for
        an item that is not embedded.
        """
        with self._lock:
            for obj, prepared in self._staged.get(item.id, ()):
                if obj is item:
                    return prepared
        return None

    def apply(self, prepared: Sequence[StoredVector]) -> None:
        """Index what :meth:`prepare` produced (and persist it, with a ``path``).

        A row prepared as unchanged whose id no longer holds that text (another
        write landed in between) is embedded now. With a path, the backlog of
        rows not yet saved (:attr:`pending`) is retried first.
        """
        self._retry_backlog()
        self._apply(prepared)

    def _apply(self, prepared: Sequence[StoredVector], deletes: Sequence[str] = ()) -> None:
        """:meth:`apply` without the backlog retry; ``deletes`` (ids no row names) go first."""
        rows = list(prepared)
        while True:
            with self._lock:
                stale = [
                    i
                    for i, p in enumerate(rows)
                    if p.vector.size == 0 and self._hash.get(p.entry.id) != p.text_hash
                ]
                if not stale:
                    self._apply_locked(rows, deletes)
                    return
            # Prepared against a state the index does not hold (any more): the
            # text is embedded after all, outside the lock, and the rows retried.
            vecs = self._embed([rows[i].text for i in stale])
            for i, v in zip(stale, vecs, strict=True):
                p = rows[i]
                rows[i] = StoredVector(p.entry, p.label, p.text_hash, p.text, v)

    def _apply_locked(self, prepared: Sequence[StoredVector], deletes: Sequence[str] = ()) -> None:
        """Index rows that all carry a vector or match the stored text (lock held).

        ``deletes`` are removed first. Whatever the count, the new vectors go
        into the graph in one call and every row and removal into the vector
        file in one transaction.
        """
        puts: list[StoredVector] = []
        added: list[int] = []
        gone: list[str] = []
        for id in deletes:
            self._unembedded.pop(id, None)
            if id in self._label_of:
                self._unplace(id)
                gone.append(id)
        for p in prepared:
            self._unembedded.pop(p.entry.id, None)
            old = self._label_of.get(p.entry.id)
            if p.vector.size == 0:  # text unchanged: the stored vector stays
                assert old is not None
                entry = self._entries[old]
                assert entry is not None
                if entry != p.entry:  # metadata only: same label, same vector
                    self._group(entry, old, add=False)
                    self._entries[old] = p.entry
                    self._group(p.entry, old, add=True)
                    puts.append(StoredVector(p.entry, old, p.text_hash, p.text, self._vecs[old]))
                else:
                    # The same entry, held as the caller's: a store syncing its items
                    # passes their own id strings, and a hit's id then finds the store's
                    # dictionary entries by identity (an equal copy, read from the
                    # vector file, costs a comparison of its characters each time).
                    self._entries[old] = p.entry
                continue
            if old is not None:
                self._unplace(p.entry.id)
            label = len(self._entries)
            self._place(p.entry, label, p.vector, p.text_hash, graph=False)
            added.append(label)
            puts.append(StoredVector(p.entry, label, p.text_hash, p.text, p.vector))
        if self._hnsw is not None:
            # One call for the batch: hnswlib inserts it on every core. Twins
            # stay out; a twin promoted by a removal above goes in.
            due = self._graph_due(added)
            if due.size:
                self._graph_add(due)
        self._persist(puts, gone)
        self._maybe_graph()

    def upsert(self, entry: IndexEntry, text: str) -> None:
        """Index ``text`` under ``entry.id``; embeds only when the text changed."""
        self.apply(self.prepare([(entry, text)]))

    def upsert_many(self, pairs: Iterable[tuple[IndexEntry, str]]) -> None:
        """:meth:`upsert` for many entries with one batched embedding call."""
        self.apply(self.prepare(pairs))

    def remove(self, id: str) -> bool:
        """Drop ``id``; returns whether it was indexed."""
        if type(id) is not str:
            raise InvalidItemError(f"id must be text, got {describe(id)}")
        self._retry_backlog()
        return self._remove(id)

    def _remove(self, id: str) -> bool:
        with self._lock:
            self._unembedded.pop(id, None)
            if id not in self._label_of:
                return False
            self._unplace(id)
            due = self._graph_due()  # a twin promoted in its place
            if due.size:
                self._graph_add(due)
            self._persist([], [id])
            self._maybe_compact()
            return True

    @property
    def pending(self) -> int:
        """Vectors not yet durable: indexed but unsaved, or committed but not yet embedded.

        Both kinds come from failures after a store write committed (a full
        disk, a failing embedder with ``fail_writes=False``). The write stands;
        search stays correct meanwhile (an unsaved vector is searched from
        memory, an unembedded item is found lexically only, never by a stale
        vector). :meth:`flush`, the next write group, or a direct write drains
        the backlog; closing with a backlog left is safe (attaching the store
        again embeds what the file lacks).
        """
        with self._lock:
            return len(self._unsaved) + len(self._unembedded)

    def flush(self) -> int:
        """Embed and save the backlog now; returns how many entries it drained.

        Raises the :class:`VectorFileError` (or embedding error) that still
        stops it; what was drained before the failure stays drained.
        """
        with self._lock:
            before = len(self._unsaved) + len(self._unembedded)
        self._embed_backlog()
        with self._lock:
            self._save_backlog()
            return before - len(self._unsaved) - len(self._unembedded)

    def _retry_backlog(self) -> None:
        """:meth:`flush` as a write's first step: a failure is logged, never raised."""
        if not self._unsaved and not self._unembedded:  # an unlocked peek
            return
        try:
            drained = self.flush()
        except Exception as e:
            _log.warning("memstore: %d vector(s) still pending (%s)", self.pending, e)
        else:
            _log.info("memstore: %d pending vector(s) embedded and saved", drained)

    def _embed_backlog(self) -> None:
        """Embed the texts whose embedding failed after their write committed."""
        with self._lock:
            todo = dict(self._unembedded)
        if not todo:
            return
        pairs = list(todo.values())
        vecs = self._embed([t for _, t in pairs])
        with self._lock:
            rows = [
                StoredVector(e, -1, text_hash(t), t, v)
                for (id, want), (e, t), v in zip(todo.items(), pairs, vecs, strict=True)
                if self._unembedded.get(id) is want  # not overtaken by a newer write
            ]
            self._apply_locked(rows)
