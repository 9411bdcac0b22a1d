"""What a CellStore holds: vectors by label, entries, groups, and the primitives that change them.

A vector lives at an integer *label* (its row in ``_vecs`` and its id in the
HNSW graph); an id moved to a new text gets a new label and its old one is
marked deleted, until a compaction renumbers the live labels densely. Every
change goes through :meth:`CellState._place` and :meth:`CellState._unplace`,
which keep the partition, subject and shared label sets and the centring sums
in step. The parts of the CellStore (persistence, writes, search, store
binding) are mixins over this state.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import hnswlib  # type: ignore[import-untyped]
import numpy as np
import numpy.typing as npt

from memstore.arguments import describe
from memstore.errors import InvalidItemError, MemstoreError
from memstore.item import Item
from memstore_index import _tuning as tune
from memstore_index._calibrate import DEFAULT_TARGET_RECALL, FreshProbe
from memstore_index._centring import Sums, Vector, normalise
from memstore_index._querycache import DEFAULT_QUERY_CACHE, QueryCache
from memstore_index._slots import SlotTable
from memstore_index._twins import Twins
from memstore_index._vectorfile import GraphFile, StoredVector, VectorFile
from memstore_index.embedder import Embedder, EmbedderInputError, check_dim, check_texts
from memstore_index.entry import IndexEntry

if TYPE_CHECKING:
    from memstore_index._exact import Subset
    from memstore_index._search import Readable

__all__ = [
    "CellState",
    "Distances",
    "EmbedderMismatchError",
    "Labels",
    "Vector",
    "Visible",
    "Walks",
]

Visible = Callable[[IndexEntry], bool]


Labels = npt.NDArray[np.uint64]
"""The labels a graph walk returns (one row per query)."""
Distances = npt.NDArray[np.float32]
"""Their distances (``1 - inner product``), nearest first."""


@dataclass(slots=True)
class Walks:
    """The unfiltered graph walks of one index generation over one graph, by query.

    ``found`` maps ``(query bytes, k, beam)`` to what the walk returned:
    :meth:`~memstore_index._search.Searching._walk` keeps them while the generation and
    the graph last. ``graph`` is a weak reference (``None``: none kept yet), so
    the walks of a graph since replaced never keep that graph, and its memory,
    alive.
    """

    generation: int
    graph: weakref.ref[object] | None
    found: dict[tuple[bytes, int, int], tuple[Labels, Distances]] = field(default_factory=dict)

    def of(self, generation: int, graph: object) -> bool:
        """Whether these are the walks of ``graph`` at ``generation``."""
        return self.generation == generation and self.graph is not None and self.graph() is graph


class EmbedderMismatchError(MemstoreError, ValueError):
    """The stored vectors were made by another model (or dimension) than the embedder given."""


class CellState:
    """The state every part of a CellStore reads, and the label primitives (lock held)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        space: str = "cosine",
        m: int = tune.DEFAULT_M,
        ef_construction: int = tune.DEFAULT_EF_CONSTRUCTION,
        ef_search: int = tune.DEFAULT_EF,
        center: bool = False,
        target_recall: float | None = DEFAULT_TARGET_RECALL,
        query_cache: int = DEFAULT_QUERY_CACHE,
    ) -> None:
        if space != "cosine":
            raise ValueError(f"space {space!r} is not supported; only 'cosine' is")
        for name, value, low, high in (
            ("m", m, 2, tune.MAX_M),
            ("ef_construction", ef_construction, 1, tune.MAX_EF),
            ("ef_search", ef_search, 1, tune.MAX_EF),
        ):
            whole = isinstance(value, int | np.integer) and not isinstance(value, bool)
            if not whole or not low <= value <= high:  # "16", 16.5, nan and True are not
                raise ValueError(f"{name} must be a whole number in [{low}, {high}], got {value!r}")
        if target_recall is not None and (
            isinstance(target_recall, bool)
            or not isinstance(target_recall, int | float)
            or not 0.0 < target_recall <= 1.0
        ):
            raise ValueError(f"target_recall must be in (0, 1] or None, got {target_recall!r}")
        if type(center) is not bool:  # center="no" must not centre
            raise ValueError(f"center must be True or False, got {center!r}")
        if isinstance(query_cache, bool) or not isinstance(query_cache, int) or query_cache < 0:
            raise ValueError(f"query_cache must be a whole number >= 0, got {query_cache!r}")
        self._embedder = embedder
        # The vectors of the queries asked lately (none kept: query_cache=0).
        self._query_cache = QueryCache(query_cache) if query_cache else None
        self._dim = check_dim(embedder.dim, f"the embedder's ({type(embedder).__name__})")
        self._model_id = str(embedder.model_id)
        self._m, self._efc, self._ef = m, ef_construction, ef_search
        # Adaptive ef (memstore_index._calibrate): the beam plain graph searches
        # use, and the graph size it was last measured at.
        self._target = target_recall
        self._ef_plain = ef_search
        self._calibrated_n = 0
        self.calibration: tuple[int, float] | None = None
        """The last calibration: ``(ef, recall on the held-out sample)``, or ``None``."""
        self._probe: FreshProbe | None = None  # a sample gathered by small writes
        self._lock = threading.RLock()
        cap = 1024
        self._vecs: Vector = np.zeros((cap, self._dim), np.float32)
        self._alive = np.zeros(cap, np.bool_)
        # Duplicate vectors (memstore_index._twins): only one label of each
        # distinct vector is in the graph. ``_in_graph`` marks the labels live in
        # it; between a batch's placements and its insertion (and promotions) it
        # lags, otherwise it equals ``_alive`` less the twins.
        self._twins = Twins()
        self._in_graph = np.zeros(cap, np.bool_)
        # A vector's number: the label it was first placed at, shared by its
        # twins and never changed (a removal promotes another label in the
        # graph, not here). An exact scan scores each number once, so twins
        # score the very same float (a BLAS product may round identical rows
        # apart by their position in the matrix).
        self._vid = np.zeros(cap, np.int64)
        self._promoted: list[int] = []
        self._entries: list[IndexEntry | None] = []
        self._label_of: dict[str, int] = {}
        self._hash: dict[str, str] = {}
        self._by_partition: dict[str, set[int]] = {}
        self._by_subject: dict[str, set[int]] = {}
        self._shared: set[int] = set()
        self._center = center
        self._sums = Sums(self._dim)
        self._deleted = 0
        self._hnsw: hnswlib.Index | None = None
        self._staged: dict[str, list[tuple[Item, StoredVector]]] = {}
        self._offered: dict[tuple[str, str], Vector] = {}
        self._subsets: dict[tuple[str, ...], Subset] = {}
        self._readables: dict[tuple[str, ...], Readable] = {}
        self._walks = Walks(-1, None)
        self._slot_table: SlotTable | None = None
        """Labels' slots in the last ``id -> slot`` dictionary searched with (``search_slots``)."""
        self._member_sets: dict[tuple[str, ...], tuple[int, set[int]]] = {}
        self._file: VectorFile | None = None
        self._graph: GraphFile | None = None
        self._generation = 0
        # A random mark each write to the vector file renews: two histories
        # that reach one generation (and count) still differ here, so a graph
        # saved for one is never loaded for the other (see GraphFile.valid_for).
        self._stamp = ""
        # The backlog (see ``pending``): rows indexed in memory but not yet in
        # the vector file (``None``: a delete), and texts not yet embedded.
        self._unsaved: dict[str, StoredVector | None] = {}
        self._unembedded: dict[str, tuple[IndexEntry, str]] = {}
        self._fail_writes = True
        self.set_aside_as: Path | None = None
        """Where a damaged vector file found at open was moved (``None``: it was sound)."""

    @property
    def embedder(self) -> Embedder:
        """The embedder queries and texts go through."""
        return self._embedder

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def search_ef(self) -> int:
        """The beam a plain (unfiltered, uncentred) graph search uses now.

        ``ef_search`` until a calibration measured a smaller one that reaches
        ``target_recall`` (see :mod:`memstore_index._calibrate`). A search whose
        partitions and readable rule pass every live label walks the graph
        unfiltered, so it uses this beam too.
        """
        return self._ef_plain

    def _grow(self, need: int) -> None:
        cap = len(self._alive)
        if need <= cap:
            return
        new = max(need, cap * 2)
        vecs = np.zeros((new, self._dim), np.float32)
        vecs[:cap] = self._vecs
        alive = np.zeros(new, np.bool_)
        alive[:cap] = self._alive
        in_graph = np.zeros(new, np.bool_)
        in_graph[:cap] = self._in_graph
        vid = np.zeros(new, np.int64)
        vid[:cap] = self._vid
        self._vecs, self._alive, self._in_graph, self._vid = vecs, alive, in_graph, vid
        if self._hnsw is not None:
            self._hnsw.resize_index(new)

    def _place(
        self, entry: IndexEntry, label: int, vec: Vector, h: str, *, graph: bool = True
    ) -> None:
        """Put a vector at ``label`` in memory (and in the graph, unless the caller batches).

        A twin of a vector already held (:mod:`memstore_index._twins`) never
        enters the graph: its representative stands for it there.
        """
        while len(self._entries) <= label:
            self._entries.append(None)
        self._grow(label + 1)
        self._vecs[label] = vec
        self._alive[label] = True
        self._entries[label] = entry
        self._label_of[entry.id] = label
        self._hash[entry.id] = h
        self._group(entry, label, add=True)
        twin = self._twins.add(label, self._vecs, self._entries)
        self._vid[label] = self._vid[self._twins.group_of[label].rep] if twin else label
        if graph and not twin and self._hnsw is not None:
            self._hnsw.add_items(vec[None, :], np.array([label]))
            self._in_graph[label] = True

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
        promoted = self._twins.remove(label, self._vecs, self._entries)
        self._group(entry, label, add=False)
        self._entries[label] = None
        self._alive[label] = False
        self._hash.pop(id, None)
        self._deleted += 1
        if self._in_graph[label]:
            assert self._hnsw is not None
            self._hnsw.mark_deleted(label)
            self._in_graph[label] = False
        if promoted is not None and self._hnsw is not None:
            self._promoted.append(promoted)  # the caller inserts it (see _graph_due)

    def _graph_due(self, placed: Sequence[int] = ()) -> npt.NDArray[np.intp]:
        """The labels to insert into the graph now: those of ``placed`` and of the
        twins promoted since the last call that are alive, not twins, and not in it yet."""
        promoted, self._promoted = self._promoted, []
        if not placed and not promoted:
            return np.zeros(0, np.intp)
        labels = np.unique(np.array([*placed, *promoted], np.intp))
        twins = self._twins.group_of
        keep = self._alive[labels] & ~self._in_graph[labels]
        if twins:
            keep &= np.array([not self._twins.is_twin(lab) for lab in labels.tolist()], np.bool_)
        return labels[keep]

    def _graph_labels(self) -> npt.NDArray[np.intp]:
        """Every label a complete graph holds: the live ones less the twins, ascending."""
        labels = np.flatnonzero(self._alive)
        if self._twins.count:
            is_twin = self._twins.is_twin
            labels = labels[np.array([not is_twin(lab) for lab in labels.tolist()], np.bool_)]
        return labels

    @property
    def _graph_live(self) -> int:
        """How many labels a complete graph holds live: one per distinct vector."""
        return len(self._label_of) - self._twins.count

    def _embed(self, texts: Sequence[str]) -> Vector:
        """One unit row per text, or :class:`~memstore_index.embedder.EmbeddingError`.

        The embedder's answer is checked (:func:`~memstore_index._centring.normalise`):
        one row per text, ``dim`` finite values, none all zeros. It is called
        before anything changes, so a bad answer refuses the write it was for.
        A text the batch holds more than once is embedded once (the same text
        embeds to the same row: repeated notes cost the model nothing more).
        """
        batch = list(texts)
        unique = list(dict.fromkeys(batch))
        rows = normalise(self._embedder.embed(unique), self._dim, len(unique))
        if len(unique) == len(batch):
            return rows
        at = {text: i for i, text in enumerate(unique)}
        return rows[[at[text] for text in batch]]

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
        if type(id) is not str:
            raise InvalidItemError(f"id must be text, got {describe(id)}")
        with self._lock:
            label = self._label_of.get(id)
            return None if label is None else self._entries[label]

    def vector(self, id: str) -> Vector | None:
        """A copy of the vector indexed under ``id``, or ``None``."""
        if type(id) is not str:
            raise InvalidItemError(f"id must be text, got {describe(id)}")
        with self._lock:
            label = self._label_of.get(id)
            return None if label is None else self._vecs[label].copy()

    def vector_rows(self, ids: Sequence[str]) -> tuple[Vector, list[int]]:
        """The vectors indexed under ``ids``, one row each (a copy), and the positions in
        ``ids`` of those the index holds (the rows are theirs, in that order).

        :meth:`vector` for many ids at once: one lock, one gather (a search's
        relevance step reads its ten results' vectors so). Row ``j`` equals
        ``vector(ids[at[j]])``, bit for bit. Each id must be text, as for
        :meth:`vector`; so must ``ids`` be a sequence of them, not one string.
        """
        if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
            raise InvalidItemError(f"ids must be a list of ids, got {describe(ids)}")
        for id in ids:
            if type(id) is not str:
                raise InvalidItemError(f"id must be text, got {describe(id)}")
        with self._lock:
            held = [
                (i, lab) for i, lab in enumerate(map(self._label_of.get, ids)) if lab is not None
            ]
            rows: Vector = self._vecs[[lab for _, lab in held]]
        return rows, [i for i, _ in held]

    def embed_query(self, query: str) -> Vector:
        """The unit vector of ``query`` (one embedding call, none when it was asked lately)."""
        if type(query) is not str:
            raise EmbedderInputError(f"query must be a str, got {type(query).__name__}")
        vec: Vector = self._embed_queries([query])[0]
        return vec

    def embed_queries(self, queries: Sequence[str]) -> Vector:
        """The unit vectors of ``queries``, one row each, in one embedding call.

        Row ``i`` is what :meth:`embed_query` returns for ``queries[i]`` (the
        embedder's promise: a text embeds the same whatever else is in its
        batch), so a server answering many searches at once embeds them
        together and passes each row as a search's ``query_vector``. An empty
        list is shape ``(0, dim)``.
        """
        texts = check_texts(queries)
        if not texts:
            return np.zeros((0, self._dim), np.float32)
        return self._embed_queries(texts)

    def remembered_queries(self, queries: Sequence[str]) -> list[Vector | None]:
        """The vector of each query asked lately (the query cache), ``None`` for the others.

        Never runs the model: a server batching the queries of concurrent
        searches (:class:`~memstore.web.batching.QueryBatcher`) answers the
        remembered ones at once and sends only the others to the model. All
        ``None`` when the cache is off (``query_cache=0``). A query that is not
        a string is ``None`` too (:meth:`embed_queries` refuses it).
        """
        cache = self._query_cache
        if cache is None:
            return [None] * len(queries)
        texts = [q for q in queries if type(q) is str]
        if len(texts) == len(queries):
            return cache.peek(texts)
        found = iter(cache.peek(texts))
        return [next(found) if type(q) is str else None for q in queries]

    def _embed_queries(self, texts: list[str]) -> Vector:
        """``texts`` embedded, the ones in the query cache taken from it, the others in one call."""
        cache = self._query_cache
        if cache is None:
            return self._embed(texts)
        rows = cache.get(texts)
        missing = list(dict.fromkeys(t for t, row in zip(texts, rows, strict=True) if row is None))
        if not missing:
            return np.stack(cast(list[Vector], rows))
        fresh = self._embed(missing)
        cache.put(missing, fresh)
        if len(missing) == len(texts):
            return fresh
        made = dict(zip(missing, fresh, strict=True))
        return np.stack(
            [made[t] if row is None else row for t, row in zip(texts, rows, strict=True)]
        )
