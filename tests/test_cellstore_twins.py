"""Duplicate vectors (memstore_index._twins): one copy in the graph, every copy found.

A differential state machine puts, updates, removes, compacts and reloads
entries whose vectors come from a handful of values, and checks every search
route (graph, exact scan, partition subsets, filters, subjects) against a
brute-force scan of the model; the deterministic tests pin the cases the
machine reaches only by luck.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import memstore_index._tuning as tune
from memstore.tags import SHARED_TAG
from memstore_index import _persistence
from memstore_index._vectorfile import StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

DIM = 16
POOL = 5  # distinct vectors most entries share; value POOL draws a fresh one


def unit(seed: int, dim: int = DIM) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return x / np.linalg.norm(x)


def put(cells: CellStore, rows: list[tuple[IndexEntry, str, np.ndarray]]) -> None:
    """Index raw vectors (``h`` names the vector: an equal name, an unchanged text)."""
    cells.apply(
        [
            StoredVector(
                e,
                -1,
                h,
                "",
                np.empty(0, np.float32) if cells._hash.get(e.id) == h else v,
            )
            for e, h, v in rows
        ]
    )


def graph_count(cells: CellStore) -> int:
    """Labels live in the graph (hnswlib counts its deleted ones too)."""
    return int(cells._in_graph.sum())


@pytest.fixture
def small_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """Searches of more than 8 entries walk the graph."""
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 8)


# -------------------------------------------------------------- the machine


class TwinMachine(RuleBasedStateMachine):
    """Entries over a few shared vectors: every search equals a brute-force scan."""

    def __init__(self) -> None:
        super().__init__()
        self.saved = (tune.EXACT_THRESHOLD, tune.COMPACT_MIN_DELETED, tune.SUBSET_SCAN_MAX)
        # Small enough that a dozen entries walk the graph, a partition set of
        # a few goes to it too, and churn compacts.
        tune.EXACT_THRESHOLD, tune.COMPACT_MIN_DELETED, tune.SUBSET_SCAN_MAX = 6, 4, 8
        self.dir = Path(tempfile.mkdtemp(prefix="twins-"))
        self.cells = CellStore(HashEmbedder(dim=DIM), path=self.dir)
        self.model: dict[str, tuple[IndexEntry, str, np.ndarray]] = {}
        self.fresh = 1000

    def teardown(self) -> None:
        self.cells.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        tune.EXACT_THRESHOLD, tune.COMPACT_MIN_DELETED, tune.SUBSET_SCAN_MAX = self.saved

    def _row(
        self, i: int, value: int, part: int, shared: bool, private: bool, subject: bool
    ) -> tuple[IndexEntry, str, np.ndarray]:
        if value == POOL:  # a vector of its own
            self.fresh += 1
            value = self.fresh
        entry = IndexEntry(
            f"v{i:02d}",
            subject="s" if subject else "",
            scope="private" if private else "public",
            partition=f"p{part}",
            tags=(SHARED_TAG,) if shared else (),
        )
        return entry, f"h{value}", unit(value)

    row = st.tuples(
        st.integers(0, 24),
        st.integers(0, POOL),
        st.integers(0, 1),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    )

    @rule(r=row)
    def put_one(self, r: tuple[int, int, int, bool, bool, bool]) -> None:
        row = self._row(*r)
        put(self.cells, [row])
        self.model[row[0].id] = row

    @rule(rs=st.lists(row, min_size=2, max_size=12))
    def put_batch(self, rs: list[tuple[int, int, int, bool, bool, bool]]) -> None:
        # One row an id (the vector file takes one row an id in a transaction).
        rows = list({row[0].id: row for row in map(lambda r: self._row(*r), rs)}.values())
        put(self.cells, rows)
        for row in rows:
            self.model[row[0].id] = row

    @rule(i=st.integers(0, 24))
    def remove(self, i: int) -> None:
        id = f"v{i:02d}"
        assert self.cells.remove(id) == (id in self.model)
        self.model.pop(id, None)

    @rule()
    def compact(self) -> None:
        self.cells.compact()

    @rule()
    def reload(self) -> None:
        self.cells.close()  # saves the graph: reopening loads it
        self.cells = CellStore(HashEmbedder(dim=DIM), path=self.dir)

    @precondition(lambda self: len(self.model) > tune.EXACT_THRESHOLD)
    @rule()
    def graph_is_one_node_a_vector(self) -> None:
        assert self.cells._hnsw is not None
        assert graph_count(self.cells) == len({h for _, h, _ in self.model.values()})

    def brute(
        self,
        q: np.ndarray,
        k: int,
        keep: Callable[[IndexEntry], bool],
    ) -> list[tuple[str, float]]:
        """The exact answer: each distinct vector scored once, ties by id."""
        score = {h: float(np.dot(v.astype(np.float64), q)) for _, h, v in self.model.values()}
        hits = [(e.id, score[h]) for e, h, _ in self.model.values() if keep(e)]
        return sorted(hits, key=lambda p: (-p[1], p[0]))[:k]

    @invariant()
    def searches_equal_brute_force(self) -> None:
        cells = self.cells
        cells._check()
        assert len(cells) == len(self.model)

        def everyone(e: IndexEntry) -> bool:
            return True

        def public(e: IndexEntry) -> bool:
            return not e.private

        def in_p0(e: IndexEntry) -> bool:
            return e.partition == "p0" or e.shared

        def public_in_p0(e: IndexEntry) -> bool:
            return in_p0(e) and public(e)

        for seed in (*range(POOL), 77):
            q = unit(seed)
            for k in (1, 3, 40):
                routes: list[tuple[dict[str, object], Callable[[IndexEntry], bool]]] = [
                    ({}, everyone),
                    ({"visible": public}, public),
                    ({"partitions": ["p0"]}, in_p0),
                    ({"partitions": ["p0"], "visible": public}, public_in_p0),
                    ({"subject": "s"}, everyone),
                ]
                for kwargs, keep in routes:
                    want = self.brute(q, k, keep)
                    for exact in (False, True):
                        got = cells.search_vector(q, k, exact=exact, **kwargs)  # type: ignore[arg-type]
                        assert [e.id for e, _ in got] == [id for id, _ in want], (
                            kwargs,
                            k,
                            exact,
                            seed,
                            [(e.id, s) for e, s in got],
                            want,
                        )
                        for (_, s), (_, w) in zip(got, want, strict=True):
                            assert s == pytest.approx(w, abs=1e-5)
                        # Twins score the very same float, in either route.
                        by_vector: dict[str, set[float]] = {}
                        for e, s in got:
                            by_vector.setdefault(self.model[e.id][1], set()).add(s)
                        assert all(len(scores) == 1 for scores in by_vector.values())


TestTwinMachine = TwinMachine.TestCase
TestTwinMachine.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# ------------------------------------------------------- deterministic cases


def copies(
    n: int, value: int, start: int = 0, **fields: str
) -> list[tuple[IndexEntry, str, np.ndarray]]:
    v = unit(value)
    return [(IndexEntry(f"c{i:05d}", **fields), f"h{value}", v) for i in range(start, start + n)]


def distinct(n: int) -> list[tuple[IndexEntry, str, np.ndarray]]:
    return [(IndexEntry(f"d{i:05d}"), f"d{i}", unit(10_000 + i)) for i in range(n)]


@pytest.fixture
def spy_rebuilds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts graph rebuilds (the real rebuild still runs)."""
    calls: list[int] = []
    real = _persistence.Persistence._rebuild_graph

    def counted(self: _persistence.Persistence) -> None:
        calls.append(1)
        real(self)

    monkeypatch.setattr(_persistence.Persistence, "_rebuild_graph", counted)
    yield calls


def test_copies_enter_the_graph_once_and_are_all_found(small_graph: None) -> None:
    cells = CellStore(HashEmbedder(dim=DIM))
    put(cells, copies(500, 1) + distinct(40))
    cells._check()
    assert graph_count(cells) == 41  # one node for the 500 copies
    got = cells.search_vector(unit(1), 600)
    assert [e.id for e, _ in got][:500] == [f"c{i:05d}" for i in range(500)]  # ties by id
    assert len({s for _, s in got[:500]}) == 1
    assert [e.id for e, _ in cells.search_vector(unit(1), 3)] == ["c00000", "c00001", "c00002"]


def test_a_copy_added_one_at_a_time_stays_out_of_the_graph(small_graph: None) -> None:
    cells = CellStore(HashEmbedder(dim=DIM))
    put(cells, distinct(20))
    for row in copies(30, 2):
        put(cells, [row])
    cells._check()
    assert graph_count(cells) == 21
    assert len(cells.search_vector(unit(2), 30)) == 30


def test_removing_the_representative_keeps_its_twins_findable(small_graph: None) -> None:
    cells = CellStore(HashEmbedder(dim=DIM))
    put(cells, copies(5, 1) + distinct(20))
    rep = cells._twins.group_of[cells._label_of["c00000"]].rep
    assert cells._entries[rep] is not None and cells._entries[rep].id == "c00000"
    cells.remove("c00000")  # the representative: a twin takes its place in the graph
    cells._check()
    assert graph_count(cells) == 21
    assert [e.id for e, _ in cells.search_vector(unit(1), 4)] == [f"c{i:05d}" for i in range(1, 5)]
    put(cells, [(IndexEntry("c00001"), "other", unit(3))])  # an update moves one away
    cells._check()
    assert [e.id for e, _ in cells.search_vector(unit(1), 3)] == ["c00002", "c00003", "c00004"]
    for i in (2, 3, 4):
        cells.remove(f"c{i:05d}")
    cells._check()
    assert not cells._twins.group_of and graph_count(cells) == 21


def test_a_filter_reaches_a_twin_behind_a_representative_it_refuses(small_graph: None) -> None:
    cells = CellStore(HashEmbedder(dim=DIM))
    rows = copies(1, 1, scope="private") + copies(3, 1, start=1) + distinct(20)
    put(cells, rows)
    assert not cells._twins.is_twin(cells._label_of["c00000"])  # the private one stands for them
    for kwargs in ({"visible": lambda e: not e.private}, {"partitions": [""]}):
        got = cells.search_vector(unit(1), 3, **kwargs)  # type: ignore[arg-type]
        want = (
            ["c00001", "c00002", "c00003"]
            if "visible" in kwargs
            else ["c00000", "c00001", "c00002"]
        )
        assert [e.id for e, _ in got] == want


def test_twins_score_the_same_float_in_an_exact_scan() -> None:
    # A BLAS product can round identical rows apart by their position in the
    # matrix; scored once per distinct vector, twins tie exactly and order by id.
    dim = 384
    cells = CellStore(HashEmbedder(dim=dim))
    v, q = unit(5, dim), unit(6, dim)
    put(cells, [(IndexEntry(f"c{i:03d}"), "h", v) for i in range(300)])
    got = cells.search_vector(q, 300)
    assert len({s for _, s in got}) == 1
    assert [e.id for e, _ in got] == [f"c{i:03d}" for i in range(300)]
    sub = cells.search_vector(q, 300, partitions=[""])  # the cached subset route
    assert [(e.id, s) for e, s in sub] == [(e.id, s) for e, s in got]


def test_centred_graph_search_equals_the_exact_centred_scan(small_graph: None) -> None:
    cells = CellStore(HashEmbedder(dim=DIM), center=True)
    rows = copies(60, 1) + copies(40, 2, start=60) + distinct(30)
    put(cells, rows)
    for seed in (1, 2, 10_003, 99):
        q = unit(seed)
        got = cells.search_vector(q, 70)
        want = cells.exact_search(q, 70)
        assert [e.id for e, _ in got] == [e.id for e, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_an_id_twice_in_one_batch_over_a_graph(small_graph: None) -> None:
    # The first row is placed and replaced before the batch reaches the graph
    # (it used to mark a label deleted that the graph never held: RuntimeError).
    cells = CellStore(HashEmbedder(dim=DIM))
    put(cells, distinct(20))
    put(cells, [(IndexEntry("y"), "one", unit(1)), (IndexEntry("y"), "two", unit(2))])
    cells._check()
    assert cells.search_vector(unit(2), 1)[0][0].id == "y"


def test_reload_loads_the_graph_with_the_promoted_representative(
    small_graph: None, tmp_path: Path, spy_rebuilds: list[int]
) -> None:
    with CellStore(HashEmbedder(dim=DIM), path=tmp_path) as cells:
        put(cells, copies(6, 1) + distinct(20))
        cells.remove("c00000")  # some twin now stands for the copies in the graph
        promoted = cells._twins.group_of[cells._label_of["c00001"]].rep
    built = len(spy_rebuilds)
    with CellStore(HashEmbedder(dim=DIM), path=tmp_path) as cells:
        assert len(spy_rebuilds) == built, "the saved graph was rebuilt, not loaded"
        cells._check()
        assert cells._twins.group_of[cells._label_of["c00001"]].rep == promoted
        got = cells.search_vector(unit(1), 5)
        assert [e.id for e, _ in got] == [f"c{i:05d}" for i in range(1, 6)]


def test_a_graph_holding_copies_is_rebuilt(
    small_graph: None, tmp_path: Path, spy_rebuilds: list[int]
) -> None:
    # What a version that put every copy in the graph saved: loaded, the twins
    # would be found twice; it is rebuilt instead, once.
    with CellStore(HashEmbedder(dim=DIM), path=tmp_path) as cells:
        put(cells, copies(6, 1) + distinct(20))
        assert cells._hnsw is not None
        twins = [lab for lab in cells._label_of.values() if cells._twins.is_twin(lab)]
        cells._hnsw.add_items(cells._vecs[twins], np.array(twins))
        cells._in_graph[twins] = True  # as that version's graph held them
        cells.save()
        cells._in_graph[twins] = False
    built = len(spy_rebuilds)
    with CellStore(HashEmbedder(dim=DIM), path=tmp_path) as cells:
        assert len(spy_rebuilds) == built + 1
        cells._check()
        assert graph_count(cells) == 21
        assert [e.id for e, _ in cells.search_vector(unit(1), 6)] == [f"c{i:05d}" for i in range(6)]


def test_memory_of_identical_notes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The reported case, small: many identical notes through Memory, durable."""
    from memstore import Memory

    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 64)
    with Memory(tmp_path, embedder=HashEmbedder()) as m:
        stored = m.add_many(["ok thanks"] * 300 + [f"note number {i}" for i in range(50)])
        assert m.cells is not None
        m.cells._check(m.store)
        assert graph_count(m.cells) == 51
        ids = {it.id for it in stored[:300]}
        hits = m.cells.search("ok thanks", 300)
        assert {e.id for e, _ in hits} == ids
    with Memory(tmp_path, embedder=HashEmbedder()) as m:
        assert m.cells is not None
        m.cells._check(m.store)
        assert {e.id for e, _ in m.cells.search("ok thanks", 300)} == ids
