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

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memstore_index._binding import StoreBinding
from memstore_index._calibrate import DEFAULT_TARGET_RECALL
from memstore_index._centring import Sums
from memstore_index._querycache import DEFAULT_QUERY_CACHE
from memstore_index._search import Searching, SearchTiming
from memstore_index._state import EmbedderMismatchError
from memstore_index._tuning import (
    CENTER_MIN,
    COMPACT_MIN_DELETED,
    COMPACT_RATIO,
    DEFAULT_EF,
    DEFAULT_EF_CONSTRUCTION,
    DEFAULT_M,
    EXACT_THRESHOLD,
)
from memstore_index._vectorfile import text_hash
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
    "IndexEntry",
    "SearchTiming",
]


class CellStore(StoreBinding, Searching):
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

    ``ef_search`` is the widest beam a graph search uses. With
    ``target_recall`` (default 0.98; ``None`` to turn it off) the graph
    measures, as it is built and grows, the smallest beam whose recall@10 on
    a held-out sample of its own vectors reaches the target (or, grown by
    small writes, on those writes probed as fresh queries before they go
    in), and plain searches use that (:attr:`search_ef`): embedding-like data
    needs far less than uniform noise. A filter that passes every live label
    is a plain search; other filtered and centred searches keep ``ef_search``.
    ``query_cache`` (default 1024; 0 turns it off) is how many recent query
    texts keep their vectors (:mod:`memstore_index._querycache`): a query
    asked again is not embedded again. The embedder is fixed for the
    CellStore's life, so a remembered vector is the one the model would give.
    The vector file, the graph cache and adaptive ``ef`` are described in ``docs/vector.md``.
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
        target_recall: float | None = DEFAULT_TARGET_RECALL,
        query_cache: int = DEFAULT_QUERY_CACHE,
    ) -> None:
        super().__init__(
            embedder,
            space=space,
            m=m,
            ef_construction=ef_construction,
            ef_search=ef_search,
            center=center,
            target_recall=target_recall,
            query_cache=query_cache,
        )
        if max_bytes is not None and (type(max_bytes) is not int or max_bytes < 1):
            raise ValueError(
                f"max_bytes must be a whole number of bytes above 0, got {max_bytes!r}"
            )
        if path is not None:
            self._open(Path(path), max_bytes)

    # The public surface in one place (each part lives in its own module):
    # lifecycle and persistence (memstore_index._persistence)
    save = StoreBinding.save
    close = StoreBinding.close
    compact = StoreBinding.compact
    reembed = StoreBinding.reembed
    # writes and the backlog (memstore_index._writes)
    prepare = StoreBinding.prepare
    offered = StoreBinding.offered
    prepared_for = StoreBinding.prepared_for
    apply = StoreBinding.apply
    upsert = StoreBinding.upsert
    upsert_many = StoreBinding.upsert_many
    remove = StoreBinding.remove
    flush = StoreBinding.flush
    # the store binding (memstore_index._binding)
    attach = StoreBinding.attach
    sync = StoreBinding.sync
    # reads (memstore_index._state) and search (memstore_index._search)
    ids = Searching.ids
    entry = Searching.entry
    vector = Searching.vector
    embed_query = Searching.embed_query
    embed_queries = Searching.embed_queries
    remembered_queries = Searching.remembered_queries
    search = Searching.search
    search_timed = Searching.search_timed
    search_vector = Searching.search_vector
    exact_search = Searching.exact_search

    # ------------------------------------------------------------ invariant

    def _check(self, store: Store | None = None, *, vectors: bool = False) -> None:
        """Assert labels, ids, groups, vectors and the graph agree (for tests).

        With ``store`` (once it has published every write it committed: a
        publication under way in another thread is waited for), also that the
        index holds exactly the store's embeddable items (less the pending
        ones), each with the content hash and entry of the item's current
        text; ``vectors=True`` re-embeds every text and compares the vectors
        too. With a file and no unsaved backlog, the file's rows must equal
        the index.
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
            sums = Sums(self._dim)
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
            self._check_twins(live)
            if self._hnsw is not None:
                ids = set(self._hnsw.get_ids_list())
                in_graph = set(np.flatnonzero(self._in_graph).tolist())
                twins = {lab for lab in live if self._twins.is_twin(lab)}
                assert in_graph == live - twins, "the graph holds other than one label a vector"
                assert in_graph <= ids <= set(range(len(self._entries))), "graph labels disagree"
                assert self._hnsw.get_current_count() == len(ids)
            else:
                assert not self._in_graph.any()
            assert not self._promoted, "a promoted twin was left out of the graph"

    def _check_twins(self, live: set[int]) -> None:
        """Every group of twins: live labels holding its representative's very vector."""
        groups = self._twins.groups()
        members: dict[int, int] = {}
        for g in groups:
            assert g.twins and g.rep not in g.twins, g
            for lab in (g.rep, *g.twins):
                assert lab in live and lab not in members, lab
                assert self._twins.group_of[lab] is g, lab
                assert np.array_equal(self._vecs[lab], self._vecs[g.rep]), lab
                assert self._vid[lab] == self._vid[g.rep], lab
                members[lab] = g.rep
            want = sorted((self._entries[lab].id, lab) for lab in (g.rep, *g.twins))  # type: ignore[union-attr]
            assert g.by_id == want, "a group's labels out of id order"
        assert set(self._twins.group_of) == set(members), "group_of names other labels"
        vids = {int(self._vid[lab]): members.get(lab, lab) for lab in live}
        assert len(vids) == len(live) - self._twins.count, "two vectors share a number"
        assert self._twins.count == sum(len(g.twins) for g in groups)

    def _check_store(self, store: Store, vectors: bool) -> None:
        # The index follows the store by publication. A write returns once it
        # was published, but not a write under the store's lock or inside a
        # listener (memstore/_publisher.py): wait for those first.
        assert store._settled(), "the store's publication did not end"
        store.lock.acquire()
        try:
            items = {it.id: it for it in store.items_locked() if embeddable(it)}
        finally:
            store.lock.release()
        with self._lock:
            # Every write published: a staged row left over is a group that
            # never committed (see StoreBinding._undone).
            assert not self._staged, f"rows staged for no commit: {sorted(self._staged)[:5]}"
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
