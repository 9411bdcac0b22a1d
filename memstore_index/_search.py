"""Search: the query's route through partitions, subjects, the HNSW graph or an exact scan.

A search picks its candidates (partitions plus shared entries, by precomputed
label sets), its mean (``center=True``), and then the cheapest exact answer:
a cached subset scan, an exact scan of a small set, or the graph, whose
filter applies visibility *during* the walk. A graph answer short of ``k``
(the filter starved it) falls back to the exact scan.
"""

from __future__ import annotations

import math
import sys
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from memstore._entry_rule import ReadableAt
from memstore.arguments import count, describe, flag, query_vector_arg
from memstore.errors import InvalidItemError
from memstore.item import SCOPE_PRIVATE
from memstore.search._slothits import SlotHits
from memstore_index import _tuning as tune
from memstore_index._centring import Vector, similarities
from memstore_index._exact import ExactScan, by_score_then_id
from memstore_index._slots import SlotTable
from memstore_index._state import Distances, Labels, Visible, Walks
from memstore_index.embedder import unit_rows
from memstore_index.entry import IndexEntry

__all__ = ["Readable", "SearchTiming", "Searching"]

Found = list[tuple[IndexEntry, float]] | tuple[Labels, npt.NDArray[np.floating[Any]]]
"""A search's answer under the lock: pairs, or a graph walk's labels and similarities."""


@dataclass(frozen=True, slots=True)
class SearchTiming:
    """How long a search spent embedding the query and searching the index."""

    embed_s: float
    index_s: float


@dataclass(frozen=True, slots=True)
class Readable:
    """A partition set's labels that a :class:`~memstore._entry_rule.ReadableAt` of one
    kind can pass, valid for one index generation: what a graph walk's filter tests
    instead of calling the rule on each entry it meets."""

    generation: int
    labels: frozenset[int]
    """The set's live labels whose entry is not private and of the rule's kind (if any)."""
    deadlines: tuple[tuple[int, object], ...]
    """``(label, stale_after)`` of those that have a deadline (a query's ``now`` drops some)."""
    asks: int = 0
    """Searches of this generation that asked for the set before it was laid out."""
    built: bool = True
    """``False``: not laid out yet (``labels`` and ``deadlines`` are empty), only counted."""


def _unit_query(vec: object, dim: int) -> Vector | None:
    """``vec`` at unit length as :func:`~memstore_index.embedder.unit_rows` makes it, bit
    for bit, when it is a 1-D float32 array of ``dim`` finite values, not all zero (what
    a searcher hands over: an embedder's row, checked once already); else ``None``.

    The same arithmetic (scaled by the power of two that brings its largest magnitude
    into [0.5, 1), the same pairwise sum of squares), without the checks and the copy
    :func:`~memstore.arguments.query_vector_arg` makes: one reduction finds the largest
    magnitude and, by it, a NaN, an infinity or a zero vector (left to the full path).
    ``tests/test_slot_hits.py`` holds it to the full path.
    """
    if type(vec) is not np.ndarray or vec.dtype != np.float32 or vec.shape != (dim,):
        return None
    top = float(np.abs(vec).max())
    if not 0.0 < top < math.inf:  # NaN compares false too
        return None
    scaled = np.ldexp(vec, np.int32(-math.frexp(top)[1]))
    out: Vector = (scaled / np.sqrt(np.add.reduce(scaled * scaled))).astype(np.float32)
    return out


class Searching(ExactScan):
    """The read side of a CellStore: k-NN search, exact or by the graph."""

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
        vec = self.embed_query(query)
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
        """:meth:`search` for a caller that already has the query vector.

        ``vec`` is any finite, non-zero vector of ``dim`` real numbers; only its
        direction counts, whatever its size (``v * 1e20`` searches as ``v``).

        :raises InvalidItemError: ``vec`` is not such a vector
            (:func:`~memstore.arguments.query_vector_arg`).
        """
        q, k, exact = self._query(vec, k, visible, subject, partitions, exact)
        if k == 0:
            return []
        with self._lock:
            found = self._found(q, k, visible, subject, partitions, exact)
            return found if isinstance(found, list) else self._pairs(*found)

    def search_slots(
        self,
        vec: npt.ArrayLike,
        k: int,
        slot: Mapping[str, int],
        *,
        visible: Visible | None = None,
        subject: str | None = None,
        partitions: Collection[str] | None = None,
        exact: bool = False,
    ) -> SlotHits:
        """:meth:`search_vector`'s hits as columns: each one's value in ``slot`` (an
        ``id -> slot`` dictionary; -1 for an id it does not hold) and its similarity.

        For a caller that wants the hits as its own integer slots (the lean
        fusion, :mod:`memstore.search._slothits`): a graph walk's labels are
        mapped by a table learnt as searches meet them (:class:`SlotTable`),
        without a tuple or an entry read per hit. ``slot`` must never change the
        value of an id it holds (it may gain ids). The same hits, in the same
        order, as :meth:`search_vector` (a subclass's own, when it has one); its
        pairs are made only if read.
        """
        if type(self).search_vector is not Searching.search_vector:  # a subclass's own answer
            theirs = self.search_vector(
                vec, k, visible=visible, subject=subject, partitions=partitions, exact=exact
            )
            slots = np.fromiter((slot.get(e.id, -1) for e, _ in theirs), np.intp, len(theirs))
            sims = np.fromiter((sim for _, sim in theirs), np.float64, len(theirs))
            return SlotHits(slots, sims, lambda: theirs)
        q, k, exact = self._query(vec, k, visible, subject, partitions, exact)
        with self._lock:
            found = [] if k == 0 else self._found(q, k, visible, subject, partitions, exact)
            labels: npt.NDArray[Any]
            if isinstance(found, list):
                label_of = self._label_of
                labels = np.fromiter((label_of[e.id] for e, _ in found), np.intp, len(found))
                sims = np.fromiter((sim for _, sim in found), np.float64, len(found))
            else:
                labels, sims = found[0], found[1].astype(np.float64)
            table = self._slot_table
            if table is None or not table.holds(slot, self._entries):
                table = self._slot_table = SlotTable(slot, self._entries)
            slots = table.slots(labels)

        def made() -> list[tuple[Any, float]]:
            with self._lock:  # the entries as they stand now (made only if read)
                return self._pairs(labels, sims)

        return SlotHits(slots, sims, made)

    def _query(
        self,
        vec: npt.ArrayLike,
        k: int,
        visible: Visible | None,
        subject: str | None,
        partitions: Collection[str] | None,
        exact: bool,
    ) -> tuple[Vector, int, bool]:
        """A search's arguments checked: the unit query vector, ``k`` and ``exact``."""
        q = _unit_query(vec, self._dim)
        if q is None:  # not a plain finite float32 row: checked (and refused) in full
            q = unit_rows(query_vector_arg(vec, self._dim)[None, :], "the query vector")[0]
        if type(k) is not int or k < 0 or type(exact) is not bool:  # the rare wrong call
            k = count(k, "k", 0, sys.maxsize)
            exact = flag(exact, "exact")
        if (
            partitions is not None
            and type(partitions) is not tuple  # what the searcher passes: no ABC check
            and (
                isinstance(partitions, str | bytes | Mapping)
                or not isinstance(partitions, Iterable)
            )
        ):
            raise InvalidItemError(
                f"partitions must be a collection of partition names, got {describe(partitions)}"
            )
        if subject is not None and type(subject) is not str:
            raise InvalidItemError(f"subject must be text or None, got {describe(subject)}")
        if visible is not None and not callable(visible):
            raise InvalidItemError(f"visible must be a function or None, got {describe(visible)}")
        return q, k, exact

    def _found(
        self,
        q: Vector,
        k: int,
        visible: Visible | None,
        subject: str | None,
        partitions: Collection[str] | None,
        exact: bool,
    ) -> Found:
        """The search itself (lock held): the hits as pairs, or a graph walk's as columns."""
        allowed: set[int] | None = None
        sub = None
        key: tuple[str, ...] | None = None
        hits: Found
        if partitions is not None:
            key = tuple(sorted(set(partitions)))
            sub = self._subset_hit(key)
            if sub is None:
                allowed = members = self._members_of(key, partitions)
                if visible is None or len(members) <= tune.EXACT_THRESHOLD:
                    sub = self._subset(key, members, self._mean(partitions, members))
            # A visibility filter over a large set walks the graph instead.
            if sub is not None and visible is not None:
                sub = sub if sub.labels.size <= tune.EXACT_THRESHOLD else None
        if sub is not None:
            mu = sub.mu
            hits = self._scan_subset(q, k, sub, visible)
        else:
            if allowed is None:
                allowed = self._allowed(partitions)
            mu = self._mean(partitions, allowed)
            hits = self._knn(q, k, allowed, visible, exact, mu, key)
        if subject is not None:
            if allowed is None:
                allowed = self._allowed(partitions)
            labels = self._by_subject.get(subject, set())
            routed = labels if allowed is None else labels & allowed
            merged = {id(e): (e, s) for e, s in self._as_pairs(hits)}
            # Centred on the whole set searched, so the scores compare.
            for e, s in self._as_pairs(self._knn(q, k, routed, visible, exact, mu)):
                merged.setdefault(id(e), (e, s))
            pairs = list(merged.values())
            if self._twins.count:
                pairs = self._one_score_a_vector(pairs)
            hits = sorted(pairs, key=lambda p: (-p[1], p[0].id))[:k]
        return hits

    def _as_pairs(self, found: Found) -> list[tuple[IndexEntry, float]]:
        return found if isinstance(found, list) else self._pairs(*found)

    def _pairs(
        self, labels: npt.NDArray[Any], sims: npt.NDArray[Any]
    ) -> list[tuple[IndexEntry, float]]:
        """Live labels and their similarities as ``(entry, similarity)`` pairs (lock held).

        ``tolist`` gives Python floats already: no float() per row; the pairs are made in C.
        """
        met = list(map(self._entries.__getitem__, labels.tolist()))
        return cast("list[tuple[IndexEntry, float]]", list(zip(met, sims.tolist(), strict=True)))

    def _one_score_a_vector(
        self, pairs: list[tuple[IndexEntry, float]]
    ) -> list[tuple[IndexEntry, float]]:
        """``pairs`` with every twin scored as the first of its vector met.

        The two routes of a subject search score a vector by different
        products (the graph's, a scan's), which may round it apart by an ulp:
        twins found by each would then order by that, not by id.
        """
        first: dict[int, float] = {}
        vid, label_of = self._vid, self._label_of
        return [(e, first.setdefault(int(vid[label_of[e.id]]), s)) for e, s in pairs]

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
        if n < tune.CENTER_MIN:
            return None
        return self._sums.mean(partitions, n)

    def _allowed(self, partitions: Collection[str] | None) -> set[int] | None:
        return None if partitions is None else self._members(partitions)

    def _members(self, partitions: Collection[str]) -> set[int]:
        """The labels of those partitions' entries and of every shared one."""
        allowed = set(self._shared)
        for p in partitions:
            allowed |= self._by_partition.get(p, set())
        return allowed

    def _members_of(self, key: tuple[str, ...], partitions: Collection[str]) -> set[int]:
        """:meth:`_members` of the partition set ``key``, without copying it for every search.

        Gathering them copies every label of the set (a tenant of 10,000 entries:
        ~0.1 ms, a tenth of its graph walk), and a server asks for the same set in
        search after search. When one partition (or the shared entries) holds them
        all, as a tenant without shared or untagged entries does, that partition's own
        set is returned; otherwise their union is kept per generation, as the subsets
        and readable sets are (every change of a label's partition or sharing is a
        write, which starts a new one), for at most
        :data:`~memstore_index._tuning.SUBSET_CACHE_SIZE` sets. Either way the set is
        the index's own, read under its lock: callers never change it nor keep it.
        """
        sources = [s for s in (self._shared, *map(self._by_partition.get, key)) if s]
        if len(sources) == 1:
            return sources[0]
        got = self._member_sets.get(key)
        if got is not None and got[0] == self._generation:
            return got[1]
        members = self._members(partitions)
        if key not in self._member_sets and len(self._member_sets) >= tune.SUBSET_CACHE_SIZE:
            self._member_sets.pop(next(iter(self._member_sets)))
        self._member_sets[key] = (self._generation, members)
        return members

    def _readable_now(
        self, key: tuple[str, ...], allowed: set[int], rule: ReadableAt
    ) -> frozenset[int] | None:
        """The labels of ``allowed`` (partition set ``key``) that ``rule`` passes.

        Laid out once per generation and kind, and only once the generation's
        searches have asked for it often enough to pay for it: the layout is a
        pass over every entry of the set (~0.8 us each), while the walk without
        it calls the rule on the entries it meets (~0.3 ms more a search, at any
        size). A store written between searches starts a new generation each
        time: laid out at once, a 10,000-label set cost each search after a
        write ~8 ms (80 ms at 100,000), so the set waits until ``asks x``
        :data:`~memstore_index._tuning.READABLE_AMORTISE` reaches its size.
        ``None`` until then, and when a deadline does not compare with the
        rule's ``now``: the caller then tests entry by entry, as the rule
        itself would. One difference follows: a set that passes every live
        label walks the graph unfiltered, at the calibrated plain beam, while
        the walk that tests each entry takes the full ``ef_search``; both meet
        the recall target, and the wider one may find a neighbour the
        calibrated one misses, so a search that lands on either side of the
        layout can differ in its last hits.
        """
        kind, now = rule.kind, rule.now
        slot = (*key, kind)
        got = self._readables.get(slot)
        if got is None or got.generation != self._generation or not got.built:
            asks = got.asks + 1 if got is not None and got.generation == self._generation else 1
            if asks * tune.READABLE_AMORTISE < len(allowed):
                counted = Readable(self._generation, frozenset(), (), asks, built=False)
                self._remember_readable(slot, counted)
                return None
            entries = self._entries
            rows = [(lab, entries[lab]) for lab in allowed]
            public = [
                (lab, e)
                for lab, e in rows
                if e is not None and e.scope != SCOPE_PRIVATE and (not kind or e.kind == kind)
            ]
            got = Readable(
                self._generation,
                frozenset(lab for lab, _ in public),
                tuple((lab, e.stale_after) for lab, e in public if e.stale_after is not None),
            )
            self._remember_readable(slot, got)
        if not got.deadlines:
            return got.labels
        try:
            past = {lab for lab, deadline in got.deadlines if now >= deadline}  # type: ignore[operator]
        except TypeError:
            return None
        return got.labels - past if past else got.labels

    def _remember_readable(self, slot: tuple[str, ...], got: Readable) -> None:
        """Keep ``got`` for its partition set and kind (at most SUBSET_CACHE_SIZE sets)."""
        if slot not in self._readables and len(self._readables) >= tune.SUBSET_CACHE_SIZE:
            self._readables.pop(next(iter(self._readables)))
        self._readables[slot] = got

    def _knn(
        self,
        q: Vector,
        k: int,
        allowed: set[int] | None,
        visible: Visible | None,
        exact: bool,
        mu: Vector | None,
        key: tuple[str, ...] | None = None,
    ) -> Found:
        """The ``k`` best of ``allowed`` that ``visible`` passes: a graph walk's as columns
        (labels, similarities; strictly decreasing), any other answer as pairs."""
        candidates = len(self._label_of) if allowed is None else len(allowed)
        if candidates == 0:
            return []
        if exact or self._hnsw is None or candidates <= tune.EXACT_THRESHOLD:
            return self._scan(q, k, allowed, visible, mu)
        entries = self._entries
        readable = None
        if isinstance(visible, ReadableAt) and allowed is not None and key is not None:
            readable = self._readable_now(key, allowed, visible)
        if allowed is None and visible is None:
            keep: Callable[[int], bool] | None = None
        elif readable is not None:
            # The entry rule as a label set: when it passes every live label
            # the walk needs no filter at all (and runs without the GIL: no
            # Python call per candidate), otherwise one set lookup each.
            keep = None if len(readable) == len(self._label_of) else readable.__contains__
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
        twins = self._twins.group_of
        hits_keep = keep
        if twins:
            # The graph holds one label per distinct vector (memstore_index._twins):
            # it can give no more than that, and its filter passes a vector when any
            # label holding it passes (the hits are filtered label by label below).
            fetch = min(fetch, self._graph_live)
            if keep is not None:
                pool = readable if readable is not None else allowed if visible is None else None
                keep = self._twins.walk_filter(keep, pool)
        # A plain search takes the calibrated beam, and so does a filtered one
        # whose filter passes every live label (``keep`` is None: the very same
        # walk); a truly filtered or a centred one takes the full ef_search (a
        # filter thins the beam; centring rescores it).
        ef = self._ef_plain if keep is None and mu is None else self._ef
        try:
            if keep is None:
                labels, dists = self._walk(q, fetch, max(ef, fetch))
            else:
                self._hnsw.set_ef(max(ef, fetch))
                labels, dists = self._hnsw.knn_query(q[None, :], k=fetch, filter=keep)
        except RuntimeError:
            # Fewer than ``fetch`` entries pass the filter within reach of the
            # graph: the exact scan finds every one that exists.
            return self._scan(q, k, allowed, visible, mu)
        found = labels[0]
        sims = 1.0 - dists[0] if mu is None else similarities(self._vecs[found], q, mu)
        if twins and not twins.keys().isdisjoint(found.tolist()):
            expanded = self._with_twins(found, sims, want, hits_keep)
            return self._scan(q, k, allowed, visible, mu) if expanded is None else expanded
        # A walk that met a deleted label (not alive: its entry is None) gave fewer.
        alive = self._alive[found]
        if found.size < fetch or fetch < want or not alive.all():
            return self._scan(q, k, allowed, visible, mu)  # the graph lost some: be exact
        # The graph gives its hits nearest first: strictly decreasing similarities are
        # already the order below (ties by id), and checking that in C costs less than
        # sorting 200 rows by a Python key. Ties, or a centred score, are sorted.
        if sims.size > 1 and not bool((sims[1:] < sims[:-1]).all()):
            out = self._pairs(found, sims)
            out.sort(key=lambda p: (-p[1], p[0].id))
            return out[:want]
        return found[:want], sims[:want]

    def _with_twins(
        self,
        found: Labels,
        sims: npt.NDArray[np.float32],
        want: int,
        keep: Callable[[int], bool] | None,
    ) -> list[tuple[IndexEntry, float]] | None:
        """The best ``want`` hits of a walk that met representatives of twins, each
        expanded into every label of its vector at its score (``None``: the graph
        gave a deleted label or too few, and the caller scans exactly instead).

        ``keep`` filters the labels one by one (the walk's filter let a vector
        through when any of its labels passed). Representatives are taken best
        first until ``want`` hits are held and the next scores less than the
        last one taken: everything tied with it is kept, so ties order by id.
        """
        entries = self._entries
        group_of = self._twins.group_of
        order = np.argsort(-sims, kind="stable")  # a centred score comes unordered
        out: list[tuple[IndexEntry, float]] = []
        last = 0.0
        for rep, s in zip(found[order].tolist(), sims[order].tolist(), strict=True):
            if len(out) >= want and s < last:
                break
            e = entries[rep]
            if e is None:
                return None
            group = group_of.get(rep)
            if group is None:
                if keep is None or keep(rep):
                    out.append((e, s))
                    last = s
                continue
            taken = 0
            for _, lab in group.by_id:  # kept in id order: the first ``want`` that pass
                if keep is None or keep(lab):
                    out.append((entries[lab], s))  # type: ignore[arg-type]
                    last = s
                    taken += 1
                    if taken == want:  # the rest tie with these and come after them by id
                        break
        if len(out) < want:
            return None
        out.sort(key=by_score_then_id)
        return out[:want]

    def _walk(self, q: Vector, fetch: int, ef: int) -> tuple[Labels, Distances]:
        """The graph's ``fetch`` nearest labels to ``q`` and their distances, unfiltered,
        with beam ``ef``: walked, or remembered from a walk of this generation (lock held).

        An unfiltered walk is a function of the graph, the query and the beam
        alone: hnswlib's search has no randomness, so walking the same graph
        again gives the same labels in the same order. A server is asked the same
        questions again and again (its query cache hands their vectors over
        unchanged), so the walks of the current generation are kept, at most
        :data:`~memstore_index._tuning.WALK_CACHE_SIZE` of them (the oldest
        dropped first); every write to the index starts a new generation, and a
        rebuilt graph (a compaction, a loaded file) is another graph, so a kept
        walk is never one the graph would not give now. The arrays are read-only:
        every caller shares them.
        """
        graph: Any = self._hnsw  # hnswlib is untyped
        assert graph is not None  # _knn walks only when there is a graph
        walks = self._walks
        if not walks.of(self._generation, graph):
            walks = self._walks = Walks(self._generation, weakref.ref(graph))
        key = (q.tobytes(), fetch, ef)
        got = walks.found.get(key)
        if got is None:
            graph.set_ef(ef)
            labels, dists = graph.knn_query(q[None, :], k=fetch)
            labels.flags.writeable = dists.flags.writeable = False
            if len(walks.found) >= tune.WALK_CACHE_SIZE:
                walks.found.pop(next(iter(walks.found)))
            got = walks.found[key] = (labels, dists)
        return got
