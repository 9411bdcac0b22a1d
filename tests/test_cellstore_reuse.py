"""CellStore searches that reuse a partition set's labels, and graph hits kept in their order.

A server asks the same partition set (its tenant) in search after search. The set's
labels are gathered once per index generation: every write that changes who is in the
set starts a new one, so a search never answers from a set that a write has changed.
The graph gives its hits nearest first; they are sorted again (ties by id) only when
some similarities tie.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memstore_index._tuning as tune
from memstore._entry_rule import ReadableAt
from memstore.tags import SHARED_TAG
from memstore_index._vectorfile import StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

DIM = 16
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def unit_rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def row(i: int, vec: np.ndarray, partition: str, shared: bool = False) -> StoredVector:
    return StoredVector(
        IndexEntry(
            f"v{i}", partition=partition, kind="chunk", tags=(SHARED_TAG,) if shared else ()
        ),
        -1,
        f"h{i}",
        "",
        vec,
    )


def test_a_partition_sets_labels_are_not_copied_for_every_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Searches of one tenant copy no label set when the tenant's partition holds them
    all; with shared entries too, the union is gathered once between two writes (each
    gathering copies the whole set), and again by the first search after a write."""
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 50)
    vecs = unit_rows(302, seed=1)
    cells = CellStore(HashEmbedder(dim=DIM))
    cells.apply([row(i, v, f"p{i % 2}") for i, v in enumerate(vecs[:299])])
    gathered = []
    members = cells._members
    monkeypatch.setattr(cells, "_members", lambda ps: gathered.append(ps) or members(ps))
    rule = ReadableAt(NOW, "chunk")
    queries = unit_rows(5, seed=2)

    def search(q: np.ndarray, k: int = 10) -> list[str]:
        return [e.id for e, _ in cells.search_vector(q, k, visible=rule, partitions=("", "p0"))]

    for q in queries:
        search(q)
    assert gathered == []
    cells.apply([row(299, vecs[299], "p2", shared=True)])
    for q in queries:
        search(q)
    assert len(gathered) == 1
    cells.apply([row(300, vecs[300], "p0")])
    assert search(vecs[300], 1) == ["v300"] and search(vecs[299], 1) == ["v299"]
    assert len(gathered) == 2


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    moves=st.lists(
        st.tuples(
            st.integers(0, 119),
            st.sampled_from(["p0", "p1", "shared", "gone"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_every_write_to_a_partition_set_is_seen_by_its_next_search(
    moves: list[tuple[int, str]],
) -> None:
    """Entries moved into or out of a tenant, made shared, or deleted between searches:
    a graph search of the tenant asking for all of it returns exactly the entries that
    are in it now (its own and the shared ones), never one that left."""
    old = tune.EXACT_THRESHOLD
    tune.EXACT_THRESHOLD = 20  # the graph serves the set
    try:
        vecs = unit_rows(120, seed=3)
        cells = CellStore(HashEmbedder(dim=DIM), target_recall=None)
        where = {i: f"p{i % 2}" for i in range(120)}
        cells.apply([row(i, v, where[i]) for i, v in enumerate(vecs)])
        rule = ReadableAt(NOW, "chunk")
        for i, to in moves:
            cells.search_vector(vecs[i], 5, visible=rule, partitions=("", "p0"))
            if to == "gone":
                cells.remove(f"v{i}")
                where.pop(i, None)
            else:
                part = "p2" if to == "shared" else to
                cells.apply([row(i, vecs[i], part, shared=to == "shared")])
                where[i] = to
            expected = {f"v{i}" for i, p in where.items() if p in ("p0", "shared")}
            got = cells.search_vector(vecs[0], 200, visible=rule, partitions=("", "p0"))
            assert {e.id for e, _ in got} == expected
    finally:
        tune.EXACT_THRESHOLD = old


def test_tied_graph_hits_are_ordered_by_id() -> None:
    """Entries with the same vector tie: the graph's hits come best first, ties by id,
    as the exact scan orders them."""
    old = tune.EXACT_THRESHOLD
    tune.EXACT_THRESHOLD = 20
    try:
        base = unit_rows(40, seed=4)
        vecs = np.concatenate([base, base[:10], base[:10]])  # three copies of ten rows
        cells = CellStore(HashEmbedder(dim=DIM), target_recall=None)
        cells.apply([row(i, v, "p0") for i, v in enumerate(vecs)])
        assert cells._hnsw is not None
        for q in base[:10]:
            graph = [(e.id, s) for e, s in cells.search_vector(q, 12, partitions=("p0",))]
            exact = [(e.id, s) for e, s in cells.exact_search(q, 12, partitions=("p0",))]
            assert [i for i, _ in graph[:3]] == sorted(i for i, _ in graph[:3])
            assert [i for i, _ in graph] == [i for i, _ in exact]
    finally:
        tune.EXACT_THRESHOLD = old


def test_an_id_written_twice_in_one_batch_is_saved_once_with_its_last_text(
    tmp_path: Path,
) -> None:
    """The vector file keeps one row an id: the batch's last, saved at once, not left pending."""
    cells = CellStore(HashEmbedder(dim=64), path=tmp_path / "cells")
    cells.upsert_many(
        [(IndexEntry("a", kind="note"), "the first text"), (IndexEntry("a", kind="note"), "kept")]
    )
    assert cells.pending == 0
    cells.close()
    again = CellStore(HashEmbedder(dim=64), path=tmp_path / "cells")
    try:
        [(entry, score)] = again.search("kept", 5)
        assert entry.id == "a" and score == pytest.approx(1.0)
        assert again.pending == 0 and len(again) == 1
    finally:
        again.close()


def test_a_text_repeated_in_a_batch_is_embedded_once() -> None:
    """The model sees each distinct text of a batch once; every entry still gets its row."""
    seen: list[str] = []

    class Recording(HashEmbedder):
        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            seen.extend(texts)
            return super().embed(texts)

    cells = CellStore(Recording(dim=64))
    texts = ["ok", "thanks", "ok", "a longer note", "ok", "thanks"]
    cells.upsert_many([(IndexEntry(f"e{i}", kind="note"), t) for i, t in enumerate(texts)])
    assert sorted(seen) == ["a longer note", "ok", "thanks"]
    assert len(cells) == len(texts)
    for text in set(texts):
        got = {e.id for e, score in cells.search(text, 10) if score == pytest.approx(1.0)}
        assert got == {f"e{i}" for i, t in enumerate(texts) if t == text}
