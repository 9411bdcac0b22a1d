"""CellStore: item ids to vectors, searched by an HNSW graph or an exact scan.

The vector side of search. Each entry is an :class:`~memstore_index.entry.IndexEntry`
(what a visibility predicate needs) plus one L2-normalised vector, so cosine
similarity is an inner product. Small sets, small filtered subsets and the
exhaustive fallback use an exact numpy scan; larger ones an ``hnswlib`` graph
whose filter applies visibility *during* the search, so a tenant with few items
still gets ``k`` hits when it has ``k``.

>>> from memstore_index.hash_embedder import HashEmbedder
>>> cells = CellStore(HashEmbedder(dim=64))
>>> cells.upsert(IndexEntry("a", kind="note"), "ledger connection pool exhausted")
>>> cells.upsert(IndexEntry("b", kind="note"), "quarterly tax filing deadline")
>>> [(e.id, round(s, 2) > 0) for e, s in cells.search("ledger pool", 1)]
[('a', True)]

With ``center=True`` similarities are measured around the mean of the
vectors searched (see :class:`CellStore`), which keeps short, generic texts
from crowding every result list.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hnswlib  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt

from memstore.config import Change
from memstore.errors import MemstoreError
from memstore.item import Item
from memstore_index._vectorfile import (
    VECTOR_FILE,
    GraphFile,
    StoredVector,
    VectorFile,
    VectorFileCorruptError,
    VectorFileError,
    VectorFileWarning,
    set_aside,
    text_hash,
)
from memstore_index.embedder import Embedder
from memstore_index.entry import IndexEntry, embed_text, embeddable, entry_for

if TYPE_CHECKING:
    from memstore.store import Store

__all__ = [
    "CENTER_MIN",
    "COMPACT_MIN_DELETED",
    "COMPACT_RATIO",
    "DEFAULT_EF",
    "DEFAULT_EF_CONSTRUCTION",
    "DEFAULT_M",
    "EXACT_THRESHOLD",
    "CellStore",
    "EmbedderMismatchError",
    "SearchTiming",
]

DEFAULT_M = 32
"""HNSW graph degree: links per node (memory grows with it, so does recall)."""
DEFAULT_EF_CONSTRUCTION = 200
"""Candidate list size while building the graph (build time vs graph quality)."""
DEFAULT_EF = 300
"""Candidate list size while searching (latency vs recall); at least ``k`` is used."""
EXACT_THRESHOLD = 2048
"""At or below this many candidates an exact scan is both exact and faster than HNSW."""
SUBSET_SCAN_MAX = 50_000
"""Largest partition set scanned exactly from a cached contiguous copy (above: the graph)."""
SUBSET_CACHE_SIZE = 8
"""Partition sets whose contiguous copies are kept (oldest dropped first)."""
COMPACT_RATIO = 0.25
"""Rebuild the graph once deleted labels exceed this share of live ones..."""
COMPACT_MIN_DELETED = 1024
"""...and this many, so small churn never triggers a rebuild."""
CENTER_MIN = 64
"""Fewest vectors searched for ``center=True`` to apply; below it, plain cosine.

The mean of a handful of vectors is mostly each of them: centring on it
would measure every entry against a blend of the others.
"""

Vector = npt.NDArray[np.float32]
Visible = Callable[[IndexEntry], bool]

_log = logging.getLogger("memstore")


class EmbedderMismatchError(MemstoreError, ValueError):
    """The stored vectors were made by another model (or dimension) than the embedder given."""


@dataclass(frozen=True, slots=True)
class SearchTiming:
    """How long a search spent embedding the query and searching the index."""

    embed_s: float
    index_s: float


class CellStore:
    """Ids to vectors with filtered k-NN search; optionally durable under ``path``.

    Thread-safe. Cost: an upsert embeds only when the text changed (content
    hash); a search is one embedding call plus an HNSW query (or an exact scan
    of at most :data:`EXACT_THRESHOLD` rows).

    ``center=True`` scores a search by the cosine of the query and each entry
    after both are moved by minus the mean vector of the entries searched
    (the partitions asked for, or everything). Sentence embeddings share a
    large common component: within one collection (a conversation, a
    project's notes) every vector leans the same way, and the entries nearest
    that common direction (short, generic texts like "Thanks, see you!") come
    out near every query. Centring removes the shared lean, so what remains is
    what sets an entry apart from the rest ("hubness reduction"; Suzuki et al.,
    "Centering Similarity Measures to Reduce Hubs", EMNLP 2013). The mean is
    kept as running sums per partition, so it costs one more matrix-vector
    product per exact scan. A graph search (a set too large to scan) rescores
    the graph's best ``max(k, ef_search)`` by plain cosine, so it is centred
    only among those. Searches of fewer than :data:`CENTER_MIN` entries are
    not centred. Similarities are then centred cosines: 0 is "as close as the
    average entry".
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        path: str | Path | None = None,
        space: str = "cosine",
        m: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        ef_search: int = DEFAULT_EF,
        center: bool = False,
        max_bytes: int | None = None,
    ) -> None:
        if space != "cosine":
            raise ValueError(f"space {space!r} is not supported; only 'cosine' is")
        if m < 2 or ef_construction < 1 or ef_search < 1:
            raise ValueError("m must be >= 2, ef_construction and ef_search >= 1")
        self._embedder = embedder
        self._dim = int(embedder.dim)
        self._model_id = str(embedder.model_id)
        self._m, self._efc, self._ef = m, ef_construction, ef_search
        self._lock = threading.RLock()
        cap = 1024
        self._vecs: Vector = np.zeros((cap, self._dim), np.float32)
        self._alive = np.zeros(cap, np.bool_)
        self._entries: list[IndexEntry | None] = []
        self._label_of: dict[str, int] = {}
        self._hash: dict[str, str] = {}
        self._by_partition: dict[str, set[int]] = {}
        self._by_subject: dict[str, set[int]] = {}
        self._shared: set[int] = set()
        self._center = center
        self._sums = _Sums(self._dim)
        self._deleted = 0
        self._hnsw: hnswlib.Index | None = None
        self._staged: dict[str, list[tuple[Item, StoredVector]]] = {}
        self._offered: dict[tuple[str, str], Vector] = {}
        self._subsets: dict[tuple[str, ...], tuple[int, npt.NDArray[np.intp], Vector]] = {}
        self._file: VectorFile | None = None
        self._graph: GraphFile | None = None
        self._generation = 0
        # The backlog (see ``pending``): rows indexed in memory but not yet in
        # the vector file (``None``: a delete), and texts not yet embedded.
        self._unsaved: dict[str, StoredVector | None] = {}
        self._unembedded: dict[str, tuple[IndexEntry, str]] = {}
        self._fail_writes = True
        self.set_aside_as: Path | None = None
        """Where a damaged vector file found at open was moved (``None``: it was sound)."""
        if path is not None:
            self._open(Path(path), max_bytes)

    # ------------------------------------------------------------ lifecycle

    @property
    def embedder(self) -> Embedder:
        """The embedder queries and texts go through."""
        return self._embedder

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_bytes(self) -> int | None:
        """The vector file's size cap (``None``: no cap, or no file); settable."""
        return self._file.max_bytes if self._file is not None else None

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        with self._lock:
            if self._file is None:
                raise MemstoreError("max_bytes caps the vector file: this CellStore has no path")
            self._file.max_bytes = value

    def _open(self, directory: Path, max_bytes: int | None) -> None:
        """Open (or create) the vector file; a damaged one is set aside and started afresh."""
        self._graph = GraphFile(directory)
        try:
            file = VectorFile(directory, max_bytes=max_bytes)
        except VectorFileCorruptError as e:
            file = self._start_afresh(directory, e, max_bytes)
        try:
            rows = self._read(file, directory)
        except VectorFileCorruptError as e:
            file.close()
            file = self._start_afresh(directory, e, max_bytes)
            rows = self._read(file, directory)
        except BaseException:
            file.close()  # a failed open leaves no connection (nor lock) behind
            raise
        self._file = file
        for row in rows:
            self._place(row.entry, row.label, row.vector, row.text_hash)
        live = len(self._label_of)
        self._deleted = len(self._entries) - live  # labels freed before the last close
        if live > EXACT_THRESHOLD:
            self._load_or_build_graph(live)

    def _read(self, file: VectorFile, directory: Path) -> list[StoredVector]:
        """Check the file's model and read its rows (and generation)."""
        meta = file.meta()
        if "model_id" in meta:
            if meta["model_id"] != self._model_id or meta.get("dim") != str(self._dim):
                raise EmbedderMismatchError(
                    f"the vectors under {str(directory)!r} were made by {meta['model_id']!r} "
                    f"(dim {meta.get('dim')}), not {self._model_id!r} (dim {self._dim}); "
                    f"open it with that embedder, or re-embed every stored text with "
                    f"CellStore.reembed({str(directory)!r}, new_embedder)"
                )
        else:
            file.set_meta(model_id=self._model_id, dim=str(self._dim), generation="0")
        try:
            self._generation = int(meta.get("generation", "0"))
        except ValueError:
            raise VectorFileCorruptError(
                f"{str(file.path)!r}: the generation is not a number"
            ) from None
        return file.rows(self._dim)

    def _start_afresh(
        self, directory: Path, damage: VectorFileCorruptError, max_bytes: int | None
    ) -> VectorFile:
        """Set a damaged vector file aside, warn naming both paths, and open an empty one.

        The vectors are a cache of the store: a CellStore attached to a store
        (``Memory`` does it) embeds every item again as it attaches.
        """
        path = directory / VECTOR_FILE
        moved = set_aside(path)
        if self._graph is not None:
            with contextlib.suppress(OSError):
                self._graph.invalidate()  # the old graph's labels mean nothing now
        self.set_aside_as = moved
        warnings.warn(
            f"memstore: the vector file {str(path)!r} is damaged ({damage}); it was set "
            f"aside as {str(moved)!r} (kept, not deleted) and a new one is being rebuilt "
            "from the store's items",
            VectorFileWarning,
            stacklevel=4,
        )
        return VectorFile(directory, max_bytes=max_bytes)

    def _load_or_build_graph(self, live: int) -> None:
        graph = self._graph
        if graph is not None and graph.valid_for(self._generation, live):
            index = hnswlib.Index(space="ip", dim=self._dim)
            try:
                index.load_index(str(graph.graph), max_elements=len(self._alive))
                index.set_ef(self._ef)
            except (RuntimeError, ValueError, OSError):
                _log.warning("memstore: the saved HNSW graph did not load; rebuilding it")
            else:
                if set(np.flatnonzero(self._alive).tolist()) <= set(index.get_ids_list()):
                    self._hnsw = index
                    return
        self._rebuild_graph()

    def save(self) -> None:
        """Save the HNSW graph beside the vectors, so the next open skips the rebuild."""
        with self._lock:
            if self._graph is None or self._hnsw is None:
                return
            self._hnsw.save_index(str(self._graph.graph))
            self._graph.record(self._generation, len(self._label_of))

    def close(self) -> None:
        """Save the backlog and the graph (if any) and close the vector file.

        Rows that still cannot be saved are logged as lost from the file: the
        next open of a CellStore attached to the store embeds them again.
        """
        with self._lock:
            if self._file is not None and self._unsaved:
                try:
                    self._save_backlog()
                except VectorFileError as e:
                    _log.warning(
                        "memstore: closing with %d vector(s) not saved (%s); they are "
                        "embedded again when the store is next attached",
                        len(self._unsaved),
                        e,
                    )
            with contextlib.suppress(OSError, RuntimeError):
                self.save()  # a cache: a graph that cannot be saved is rebuilt at open
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> CellStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def reembed(cls, path: str | Path, embedder: Embedder, *, batch_size: int = 64) -> int:
        """Re-embed every text stored under ``path`` with ``embedder``; returns the count.

        The way out of :class:`EmbedderMismatchError` after changing models: the
        stored texts are read back, embedded anew, and written with the new
        model's identity in one transaction; the old graph is discarded.
        """
        directory = Path(path)
        old = VectorFile(directory)
        try:
            meta = old.meta()
            dim = int(meta.get("dim", "0"))
            rows = list(old.rows(dim)) if dim else []
            generation = int(meta.get("generation", "0")) + 1
            puts: list[StoredVector] = []
            for start in range(0, len(rows), batch_size):
                chunk = rows[start : start + batch_size]
                vecs = _normalise(embedder.embed([r.text for r in chunk]), int(embedder.dim))
                puts.extend(
                    StoredVector(r.entry, r.label, r.text_hash, r.text, v)
                    for r, v in zip(chunk, vecs, strict=True)
                )
            old.write(puts, [], generation)
            old.set_meta(model_id=str(embedder.model_id), dim=str(int(embedder.dim)))
        finally:
            old.close()
        GraphFile(directory).invalidate()
        return len(rows)

    # ---------------------------------------------------------------- writes

    def _grow(self, need: int) -> None:
        cap = len(self._alive)
        if need <= cap:
            return
        new = max(need, cap * 2)
        vecs = np.zeros((new, self._dim), np.float32)
        vecs[:cap] = self._vecs
        alive = np.zeros(new, np.bool_)
        alive[:cap] = self._alive
        self._vecs, self._alive = vecs, alive
        if self._hnsw is not None:
            self._hnsw.resize_index(new)

    def _place(
        self, entry: IndexEntry, label: int, vec: Vector, h: str, *, graph: bool = True
    ) -> None:
        """Put a vector at ``label`` in memory (and in the graph, unless the caller batches)."""
        while len(self._entries) <= label:
            self._entries.append(None)
        self._grow(label + 1)
        self._vecs[label] = vec
        self._alive[label] = True
        self._entries[label] = entry
        self._label_of[entry.id] = label
        self._hash[entry.id] = h
        self._group(entry, label, add=True)
        if graph and self._hnsw is not None:
            self._hnsw.add_items(vec[None, :], np.array([label]))

    def _group(self, entry: IndexEntry, label: int, *, add: bool) -> None:
        self._sums.change(entry, self._vecs[label], 1.0 if add else -1.0)
        for table, key in (
            (self._by_partition, entry.partition),
            (self._by_subject, entry.subject),
        ):
            if add:
                table.setdefault(key, set()).add(label)
            else:
                labels = table.get(key)
                if labels is not None:
                    labels.discard(label)
                    if not labels:
                        del table[key]
        if entry.shared:
            if add:
                self._shared.add(label)
            else:
                self._shared.discard(label)

    def _unplace(self, id: str) -> None:
        label = self._label_of.pop(id)
        entry = self._entries[label]
        assert entry is not None
        self._group(entry, label, add=False)
        self._entries[label] = None
        self._alive[label] = False
        self._hash.pop(id, None)
        self._deleted += 1
        if self._hnsw is not None:
            self._hnsw.mark_deleted(label)

    def _embed(self, texts: Sequence[str]) -> Vector:
        return _normalise(self._embedder.embed(list(texts)), self._dim)

    def prepare(self, pairs: Iterable[tuple[IndexEntry, str]]) -> list[StoredVector]:
        """Embed what must be embedded for ``pairs`` (no change to the index).

        A text whose hash matches the stored one is not embedded again; its row
        has an empty ``vector`` and :meth:`apply` keeps the stored one (or, if
        the index changed meanwhile, embeds it then). The expensive, fallible
        half of an upsert.
        """
        pairs = list(pairs)
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

        >>> from memstore_index.hash_embedder import HashEmbedder
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

    def _apply(self, prepared: Sequence[StoredVector]) -> None:
        rows = list(prepared)
        while True:
            with self._lock:
                stale = [
                    i
                    for i, p in enumerate(rows)
                    if p.vector.size == 0 and self._hash.get(p.entry.id) != p.text_hash
                ]
                if not stale:
                    self._apply_locked(rows)
                    return
            # Prepared against a state the index does not hold (any more): the
            # text is embedded after all, outside the lock, and the rows retried.
            vecs = self._embed([rows[i].text for i in stale])
            for i, v in zip(stale, vecs, strict=True):
                p = rows[i]
                rows[i] = StoredVector(p.entry, p.label, p.text_hash, p.text, v)

    def _apply_locked(self, prepared: Sequence[StoredVector]) -> None:
        """Index rows that all carry a vector or match the stored text (lock held)."""
        puts: list[StoredVector] = []
        added: list[int] = []
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
                continue
            if old is not None:
                self._unplace(p.entry.id)
            label = len(self._entries)
            self._place(p.entry, label, p.vector, p.text_hash, graph=False)
            added.append(label)
            puts.append(StoredVector(p.entry, label, p.text_hash, p.text, p.vector))
        if added and self._hnsw is not None:
            # One call for the batch: hnswlib inserts it on every core.
            labels = np.array(added)
            self._hnsw.add_items(self._vecs[labels], labels)
        self._persist(puts, [])
        self._maybe_graph()

    def upsert(self, entry: IndexEntry, text: str) -> None:
        """Index ``text`` under ``entry.id``; embeds only when the text changed."""
        self.apply(self.prepare([(entry, text)]))

    def upsert_many(self, pairs: Iterable[tuple[IndexEntry, str]]) -> None:
        """:meth:`upsert` for many entries with one batched embedding call."""
        self.apply(self.prepare(pairs))

    def remove(self, id: str) -> bool:
        """Drop ``id``; returns whether it was indexed."""
        self._retry_backlog()
        return self._remove(id)

    def _remove(self, id: str) -> bool:
        with self._lock:
            self._unembedded.pop(id, None)
            if id not in self._label_of:
                return False
            self._unplace(id)
            self._persist([], [id])
            self._maybe_compact()
            return True

    def _persist(self, puts: list[StoredVector], deletes: list[str]) -> None:
        """Write rows to the vector file, or add them to the backlog (lock held).

        The index in memory already holds them: a failure here is a degraded
        state, not a failed write. The first failure is logged once; until the
        backlog is saved (:meth:`flush`, the next write group, or the next
        direct write) rows join it without another attempt, so a batch of
        thousands logs one warning, not thousands of tracebacks.
        """
        if not puts and not deletes:
            return
        self._generation += 1
        if self._file is None:
            return
        if not self._unsaved:
            try:
                self._file.write(puts, deletes, self._generation)
                return
            except VectorFileError as e:
                _log.warning(
                    "memstore: %d vector(s) could not be saved (%s); they stay in memory, "
                    "search is unaffected, and they are saved by the next write or flush()",
                    len(puts) + len(deletes),
                    e,
                )
        for p in puts:
            self._unsaved[p.entry.id] = p
        for id in deletes:
            self._unsaved[id] = None

    # --------------------------------------------------------------- backlog

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

    def _save_backlog(self) -> None:
        """Write every unsaved row, as the index holds it now, in one transaction (lock held)."""
        if self._file is None or not self._unsaved:
            return
        puts: list[StoredVector] = []
        deletes: list[str] = []
        for id, row in self._unsaved.items():
            label = self._label_of.get(id)
            if label is None or row is None:
                deletes.append(id)
                continue
            entry = self._entries[label]
            assert entry is not None and self._hash[id] == row.text_hash
            puts.append(StoredVector(entry, label, row.text_hash, row.text, self._vecs[label]))
        self._file.write(puts, deletes, self._generation)
        self._unsaved.clear()

    def _maybe_graph(self) -> None:
        if self._hnsw is None and len(self._label_of) > EXACT_THRESHOLD:
            self._rebuild_graph()
        else:
            self._maybe_compact()

    def _maybe_compact(self) -> None:
        live = len(self._label_of)
        if self._unsaved:
            return  # the file's labels lag behind: relabelling it would not fit them
        if self._deleted >= COMPACT_MIN_DELETED and self._deleted > COMPACT_RATIO * live:
            try:
                self.compact()
            except VectorFileError as e:
                _log.warning("memstore: compaction skipped, the vector file refused it (%s)", e)

    def compact(self) -> None:
        """Renumber the live labels densely and rebuild the graph (drops deleted slots).

        The vector file is relabelled first: if it refuses (:class:`VectorFileError`),
        nothing changed. Refused while vectors wait to be saved (:attr:`pending`).
        """
        with self._lock:
            if self._unsaved:
                raise VectorFileError(
                    f"{len(self._unsaved)} vector(s) wait to be saved: flush() first, then compact"
                )
            order = sorted(self._label_of.items(), key=lambda p: p[1])
            if self._file is not None:
                mapping = {id: n for n, (id, _) in enumerate(order)}
                self._file.relabel(mapping, self._generation + 1)
            vecs = np.stack([self._vecs[lab] for _, lab in order]) if order else None
            entries = [self._entries[lab] for _, lab in order]
            hashes = dict(self._hash)
            self._vecs = np.zeros((max(1024, len(order) * 2), self._dim), np.float32)
            self._alive = np.zeros(len(self._vecs), np.bool_)
            self._entries, self._label_of, self._hash = [], {}, {}
            self._by_partition, self._by_subject, self._shared = {}, {}, set()
            self._sums = _Sums(self._dim)
            self._deleted = 0
            self._hnsw = None
            for new, ((id, _), entry) in enumerate(zip(order, entries, strict=True)):
                assert entry is not None and vecs is not None
                self._place(entry, new, vecs[new], hashes[id])
            self._generation += 1
            if len(self._label_of) > EXACT_THRESHOLD:
                self._rebuild_graph()

    def _rebuild_graph(self) -> None:
        index = hnswlib.Index(space="ip", dim=self._dim)
        index.init_index(
            max_elements=len(self._alive), ef_construction=self._efc, M=self._m, random_seed=100
        )
        index.set_ef(self._ef)
        labels = np.flatnonzero(self._alive)
        if labels.size:
            index.add_items(self._vecs[labels], labels)
        self._hnsw = index

    # ---------------------------------------------------------------- reads

    def __len__(self) -> int:
        return len(self._label_of)

    def __contains__(self, id: object) -> bool:
        return id in self._label_of

    def ids(self) -> list[str]:
        """The ids that have a vector here, sorted."""
        with self._lock:
            return sorted(self._label_of)

    def entry(self, id: str) -> IndexEntry | None:
        """The entry indexed under ``id``, or ``None``."""
        with self._lock:
            label = self._label_of.get(id)
            return None if label is None else self._entries[label]

    def vector(self, id: str) -> Vector | None:
        """A copy of the vector indexed under ``id``, or ``None``."""
        with self._lock:
            label = self._label_of.get(id)
            return None if label is None else self._vecs[label].copy()

    def embed_query(self, query: str) -> Vector:
        """The unit vector of ``query`` (one embedding call)."""
        vec: Vector = self._embed([query])[0]
        return vec

    def search(
        self,
        query: str,
        k: int,
        *,
        visible: Visible | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
    ) -> list[tuple[IndexEntry, float]]:
        """The ``k`` entries most similar to ``query`` (cosine, best first).

        ``visible`` is applied inside the search; ``partitions`` restricts to
        entries of those partitions (plus ``shared`` ones) by precomputed label
        sets, which lets a small tenant be scanned exactly; ``subject`` routes
        through that subject's entries, merged with the global result.
        """
        return self.search_timed(query, k, visible=visible, subject=subject, partitions=partitions)[
            0
        ]

    def search_timed(
        self,
        query: str,
        k: int,
        *,
        visible: Visible | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
    ) -> tuple[list[tuple[IndexEntry, float]], SearchTiming]:
        """:meth:`search`, plus the embed and index seconds separately."""
        t0 = time.perf_counter()
        vec = self._embed([query])[0]
        t1 = time.perf_counter()
        hits = self.search_vector(vec, k, visible=visible, subject=subject, partitions=partitions)
        return hits, SearchTiming(t1 - t0, time.perf_counter() - t1)

    def search_vector(
        self,
        vec: npt.ArrayLike,
        k: int,
        *,
        visible: Visible | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> list[tuple[IndexEntry, float]]:
        """:meth:`search` for a caller that already has the query vector."""
        q = _normalise(np.asarray(vec, np.float32).reshape(1, -1), self._dim)[0]
        if k <= 0:
            return []
        with self._lock:
            allowed = self._allowed(partitions)
            mu = self._mean(partitions, allowed)
            cached = None
            if partitions is not None and visible is None and allowed is not None:
                cached = self._subset(tuple(sorted(set(partitions))), allowed)
            if cached is not None:
                hits = self._scan_subset(q, k, *cached, mu)
            else:
                hits = self._knn(q, k, allowed, visible, exact, mu)
            if subject is not None:
                labels = self._by_subject.get(subject, set())
                routed = labels if allowed is None else labels & allowed
                merged = {id(e): (e, s) for e, s in hits}
                # Centred on the whole set searched, so the scores compare.
                for e, s in self._knn(q, k, routed, visible, exact, mu):
                    merged.setdefault(id(e), (e, s))
                hits = sorted(merged.values(), key=lambda p: (-p[1], p[0].id))[:k]
            return hits

    def exact_search(
        self,
        vec: npt.ArrayLike,
        k: int,
        *,
        visible: Visible | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
    ) -> list[tuple[IndexEntry, float]]:
        """:meth:`search_vector` by an exact scan of every candidate (the exhaustive fallback)."""
        return self.search_vector(
            vec, k, visible=visible, subject=subject, partitions=partitions, exact=True
        )

    def _mean(self, partitions: Collection[str] | None, allowed: set[int] | None) -> Vector | None:
        """The mean vector a ``center=True`` search is centred on, ``None`` for plain cosine."""
        if not self._center:
            return None
        n = len(self._label_of) if allowed is None else len(allowed)
        if n < CENTER_MIN:
            return None
        return self._sums.mean(partitions, n)

    def _subset(
        self, key: tuple[str, ...], allowed: set[int]
    ) -> tuple[npt.NDArray[np.intp], Vector] | None:
        """A contiguous copy of a partition set's vectors, kept until the next write.

        Scanning a contiguous matrix is ~30x faster than gathering the rows on
        every query, and an exact scan beats a filtered graph walk up to
        :data:`SUBSET_SCAN_MAX` rows. ``None`` when the set is too large.
        """
        if len(allowed) > SUBSET_SCAN_MAX or len(allowed) <= EXACT_THRESHOLD:
            return None
        hit = self._subsets.get(key)
        if hit is not None and hit[0] == self._generation:
            return hit[1], hit[2]
        labels = np.fromiter(allowed, np.intp, len(allowed))
        labels.sort()
        matrix = np.ascontiguousarray(self._vecs[labels])
        if len(self._subsets) >= SUBSET_CACHE_SIZE:
            self._subsets.pop(next(iter(self._subsets)))
        self._subsets[key] = (self._generation, labels, matrix)
        return labels, matrix

    def _scan_subset(
        self,
        q: Vector,
        k: int,
        labels: npt.NDArray[np.intp],
        matrix: Vector,
        mu: Vector | None,
    ) -> list[tuple[IndexEntry, float]]:
        scores = _scores(matrix, q, mu)
        if labels.size > k:
            kth = np.partition(scores, labels.size - k)[labels.size - k]
            keep = scores >= kth
            labels, scores = labels[keep], scores[keep]
        entries = self._entries
        out = [
            (e, float(sc))
            for lab, sc in zip(labels.tolist(), scores.tolist(), strict=True)
            if (e := entries[lab]) is not None
        ]
        out.sort(key=lambda p: (-p[1], p[0].id))
        return out[:k]

    def _allowed(self, partitions: Collection[str] | None) -> set[int] | None:
        if partitions is None:
            return None
        allowed = set(self._shared)
        for p in partitions:
            allowed |= self._by_partition.get(p, set())
        return allowed

    def _knn(
        self,
        q: Vector,
        k: int,
        allowed: set[int] | None,
        visible: Visible | None,
        exact: bool,
        mu: Vector | None,
    ) -> list[tuple[IndexEntry, float]]:
        candidates = len(self._label_of) if allowed is None else len(allowed)
        if candidates == 0:
            return []
        if exact or self._hnsw is None or candidates <= EXACT_THRESHOLD:
            return self._scan(q, k, allowed, visible, mu)
        entries = self._entries
        if allowed is None and visible is None:
            keep: Callable[[int], bool] | None = None
        elif visible is None:
            assert allowed is not None
            keep = allowed.__contains__
        else:

            def keep(label: int) -> bool:
                if allowed is not None and label not in allowed:
                    return False
                e = entries[label]
                return e is not None and visible(e)

        want = min(k, candidates)
        # Centred, the graph (built for plain cosine) proposes its whole beam
        # and the centred score reorders it.
        fetch = want if mu is None else min(max(k, self._ef), candidates)
        self._hnsw.set_ef(max(self._ef, fetch))
        try:
            labels, dists = self._hnsw.knn_query(q[None, :], k=fetch, filter=keep)
        except RuntimeError:
            # Fewer than ``fetch`` entries pass the filter within reach of the
            # graph: the exact scan finds every one that exists.
            return self._scan(q, k, allowed, visible, mu)
        found = labels[0]
        sims = 1.0 - dists[0] if mu is None else _scores(self._vecs[found], q, mu)
        out: list[tuple[IndexEntry, float]] = []
        for label, sim in zip(found.tolist(), sims.tolist(), strict=True):
            e = entries[label]
            if e is not None:
                out.append((e, float(sim)))
        if len(out) < fetch:
            return self._scan(q, k, allowed, visible, mu)  # the graph lost some: be exact
        out.sort(key=lambda p: (-p[1], p[0].id))
        return out[:want]

    def _scan(
        self,
        q: Vector,
        k: int,
        allowed: set[int] | None,
        visible: Visible | None,
        mu: Vector | None,
    ) -> list[tuple[IndexEntry, float]]:
        if allowed is None:
            labels = np.flatnonzero(self._alive)
        else:
            labels = np.fromiter(allowed, np.intp, len(allowed))
        if labels.size == 0:
            return []
        scores = _scores(self._vecs[labels], q, mu)
        entries = self._entries
        if visible is None and labels.size > k:
            # Keep everything tied with the k-th score, so ties break by id below.
            kth = np.partition(scores, labels.size - k)[labels.size - k]
            keep = scores >= kth
            labels, scores = labels[keep], scores[keep]
        order = np.argsort(-scores, kind="stable")
        out: list[tuple[IndexEntry, float]] = []
        last = 0.0
        for i in order.tolist():
            s = float(scores[i])
            if len(out) >= k and s < last:
                break
            e = entries[int(labels[i])]
            if e is None or (visible is not None and not visible(e)):
                continue
            out.append((e, s))
            last = s
        out.sort(key=lambda p: (-p[1], p[0].id))
        return out[:k]

    # ------------------------------------------------------- store binding

    def attach(self, store: Store, *, fail_writes: bool = True) -> None:
        """Keep this index in step with ``store`` through its change listeners.

        An upsert of an active item embeds and indexes ``embed_text(item)``
        (unless ``no_embed``, or the text did not change); a delete, expiry,
        supersession or refutation removes it. With ``fail_writes`` (the
        default) the embedding runs before the write commits, so an embedding
        failure fails the write and store and index never disagree; without it
        embedding runs after the commit and a failure leaves the item pending
        (:attr:`pending`: found lexically, never by its old vector) until the
        next write group or :meth:`flush` embeds it.

        Saving vectors to the file happens after the commit either way: a
        vector file that refuses them (full disk) does not fail the write; the
        vectors join the backlog, and each write group starts by retrying it.

        The index follows the store in commit order even when writers race:
        "text unchanged" is decided against the item the change replaced (the
        store's committed state, exact under its lock), not against the index,
        which lags until earlier commits are published.
        """
        self._fail_writes = fail_writes
        store.add_change_listener(self._before_commit, before_commit=True)
        store.add_change_listener(self._after_commit)
        self.sync(store)

    def sync(self, store: Store) -> None:
        """Make the index hold exactly the store's embeddable items (embedding what is missing)."""
        store.lock.acquire()
        try:
            items = [it for it in store.items_locked() if embeddable(it)]
        finally:
            store.lock.release()
        want = {it.id for it in items}
        with self._lock:
            for id in [i for i in self._label_of if i not in want]:
                self.remove(id)
        self.upsert_many((entry_for(it), embed_text(it)) for it in items)

    def _before_commit(self, changes: Sequence[Change]) -> None:
        self._retry_backlog()  # a write group is the backlog's natural retry point
        if not self._fail_writes:
            return
        todo = [c for c in changes if c.op == "upsert" and c.item and embeddable(c.item)]
        if not todo:
            return
        items = [c.item for c in todo if c.item is not None]
        # By the time these rows apply, every change committed before them has
        # applied: the id then holds its ``previous`` item's text.
        base = [
            text_hash(embed_text(c.previous))
            if c.previous is not None and embeddable(c.previous)
            else None
            for c in todo
        ]
        prepared = self._prepare([(entry_for(it), embed_text(it)) for it in items], base)
        with self._lock:
            for it, p in zip(items, prepared, strict=True):
                self._staged.setdefault(it.id, []).append((it, p))

    def _after_commit(self, op: str, item: Item | None, id: str, kind: str) -> None:
        prepared: StoredVector | None = None
        with self._lock:
            staged = self._staged.get(id)
            if staged:
                # Staged for this very object: use it, and drop what was staged
                # before it (older versions, or groups that were undone).
                for i, (obj, p) in enumerate(staged):
                    if obj is item:
                        prepared = p
                        del staged[: i + 1]
                        break
                if not staged:
                    del self._staged[id]
        if op == "delete" or item is None or not embeddable(item):
            self._remove(id)
            return
        entry, text = entry_for(item), embed_text(item)
        try:
            self._apply([prepared] if prepared is not None else self.prepare([(entry, text)]))
        except Exception as e:
            # Committed, not embedded: the old vector must not answer for the
            # new text. The item waits in the backlog (lexical search finds it).
            with self._lock:
                first = not self._unembedded
                self._remove(id)
                self._unembedded[id] = (entry, text)
            if first:
                _log.warning(
                    "memstore: embedding %r failed after its write committed (%s); it is "
                    "searched lexically until the next write or flush() embeds it",
                    id,
                    e,
                )

    # ------------------------------------------------------------ invariant

    def _check(self, store: Store | None = None, *, vectors: bool = False) -> None:
        """Assert labels, ids, groups, vectors and the graph agree (for tests).

        With ``store`` (its writes all published), also that the index holds
        exactly the store's embeddable items (less the pending ones), each with
        the content hash and entry of the item's current text; ``vectors=True``
        re-embeds every text and compares the vectors too. With a file and no
        unsaved backlog, the file's rows must equal the index.
        """
        if store is not None:
            self._check_store(store, vectors)
        with self._lock:
            if self._file is not None and not self._unsaved:
                rows = {r.entry.id: r for r in self._file.rows(self._dim)}
                assert set(rows) == set(self._label_of), "vector file ids disagree"
                for id, r in rows.items():
                    lab = self._label_of[id]
                    assert r.label == lab and r.text_hash == self._hash[id], id
                    assert r.entry == self._entries[lab], id
                    assert np.array_equal(r.vector, self._vecs[lab]), id
            assert not set(self._unembedded) & set(self._label_of), "a pending id has a vector"
            live = {lab for lab, e in enumerate(self._entries) if e is not None}
            assert live == set(np.flatnonzero(self._alive).tolist()), "alive mask disagrees"
            assert {self._label_of[e.id] for e in self._entries if e is not None} == live
            assert len(self._label_of) == len(live)
            assert set(self._hash) == set(self._label_of)
            for id, lab in self._label_of.items():
                e = self._entries[lab]
                assert e is not None and e.id == id
                norm = float(np.linalg.norm(self._vecs[lab]))
                assert abs(norm - 1.0) < 1e-3 or norm == 0.0, (id, norm)
            parts: dict[str, set[int]] = {}
            subjects: dict[str, set[int]] = {}
            for lab in live:
                e = self._entries[lab]
                assert e is not None
                parts.setdefault(e.partition, set()).add(lab)
                subjects.setdefault(e.subject, set()).add(lab)
            assert parts == self._by_partition and subjects == self._by_subject
            sums = _Sums(self._dim)
            for lab in live:
                e = self._entries[lab]
                assert e is not None
                sums.change(e, self._vecs[lab], 1.0)
            for name in ("all", "shared"):
                assert np.allclose(getattr(sums, name), getattr(self._sums, name), atol=1e-6), name
            for table in ("by_partition", "shared_by_partition"):
                want, got = getattr(sums, table), getattr(self._sums, table)
                for key in set(want) | set(got):
                    zero = np.zeros(self._dim)
                    assert np.allclose(want.get(key, zero), got.get(key, zero), atol=1e-6), key
            assert self._deleted == len(self._entries) - len(live)
            if self._hnsw is not None:
                ids = set(self._hnsw.get_ids_list())
                assert live <= ids <= set(range(len(self._entries))), "graph labels disagree"
                assert self._hnsw.get_current_count() == len(ids)

    def _check_store(self, store: Store, vectors: bool) -> None:
        store.lock.acquire()
        try:
            items = {it.id: it for it in store.items_locked() if embeddable(it)}
        finally:
            store.lock.release()
        with self._lock:
            pending = set(self._unembedded)
            want = set(items) - pending
            assert set(self._label_of) == want, (
                f"index ids disagree: missing {sorted(want - set(self._label_of))[:5]}, "
                f"extra {sorted(set(self._label_of) - want)[:5]}"
            )
            for id in sorted(want):
                it = items[id]
                text = embed_text(it)
                assert self._hash[id] == text_hash(text), (
                    f"stale vector for {id!r}: the index holds another text than {text!r}"
                )
                lab = self._label_of[id]
                assert self._entries[lab] == entry_for(it), f"stale entry for {id!r}"
                if vectors:
                    got = self._vecs[lab]
                    assert np.allclose(got, self._embed([text])[0], atol=1e-5), id


class _Sums:
    """Running vector sums per partition, for the mean a centred search subtracts.

    A search's candidates are its partitions' entries plus every ``shared``
    one; a shared entry of a requested partition is in both, so the shared
    sums are also kept per partition, to count it once. Float64, so that
    adding and removing the same vector many times leaves no drift worth
    the name.
    """

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self.all = np.zeros(dim, np.float64)
        self.by_partition: dict[str, npt.NDArray[np.float64]] = {}
        self.shared = np.zeros(dim, np.float64)
        self.shared_by_partition: dict[str, npt.NDArray[np.float64]] = {}

    def _bucket(self, table: dict[str, npt.NDArray[np.float64]], key: str) -> npt.NDArray[Any]:
        got = table.get(key)
        if got is None:
            got = table[key] = np.zeros(self._dim, np.float64)
        return got

    def change(self, entry: IndexEntry, vec: Vector, sign: float) -> None:
        """Add (``sign`` 1) or remove (-1) one entry's vector."""
        v = vec.astype(np.float64) * sign
        self.all += v
        self._bucket(self.by_partition, entry.partition)[:] += v
        if entry.shared:
            self.shared += v
            self._bucket(self.shared_by_partition, entry.partition)[:] += v

    def mean(self, partitions: Collection[str] | None, n: int) -> Vector:
        """The mean over everything (``None``) or those partitions plus shared entries."""
        if partitions is None:
            total = self.all
        else:
            total = self.shared.copy()
            for p in set(partitions):
                if p in self.by_partition:
                    total += self.by_partition[p]
                if p in self.shared_by_partition:
                    total -= self.shared_by_partition[p]
        mean: Vector = (total / n).astype(np.float32)
        return mean


def _scores(rows: Vector, q: Vector, mu: Vector | None) -> npt.NDArray[np.float32]:
    """Cosine of unit query ``q`` with each row, or of both moved by ``-mu`` when given.

    cos(q - mu, d - mu) expands to inner products the rows already give:
    ``(q.d - mu.d - q.mu + mu.mu) / (|q - mu| |d - mu|)``, with
    ``|d - mu|^2 = d.d - 2 mu.d + mu.mu``: two matrix-vector products and no
    copy of the rows.
    """
    dots: npt.NDArray[np.float32] = rows @ q
    if mu is None:
        return dots
    m = rows @ mu
    mm = float(mu @ mu)
    qm = float(q @ mu)
    sq = np.einsum("ij,ij->i", rows, rows)
    q_norm = max(1.0 - 2.0 * qm + mm, 1e-12) ** 0.5
    d_norm = np.sqrt(np.maximum(sq - 2.0 * m + mm, 1e-12))
    out: npt.NDArray[np.float32] = ((dots - m - qm + mm) / (q_norm * d_norm)).astype(np.float32)
    return out


def _normalise(vecs: npt.ArrayLike, dim: int) -> Vector:
    """Rows as float32 unit vectors of ``dim`` values (zero rows stay zero)."""
    arr = np.asarray(vecs, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise MemstoreError(f"embedder returned shape {arr.shape}, expected (n, {dim})")
    if not np.all(np.isfinite(arr)):
        raise MemstoreError("embedder returned non-finite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.where(norms > 0, arr / np.maximum(norms, 1e-12), arr).astype(np.float32)
