"""The saved HNSW graph is used only with the very vectors it was built from.

The graph beside ``vectors.sqlite3`` is a cache, checked at open against the
file's *generation* (a count of writes) and the number of vectors. Two
histories that diverge from one state reach the same generation and count
after the same number of writes, so a graph saved for one was loaded for the
other: restore a backup's files into a folder whose graph was saved later,
write as many times as the folder had since the backup, crash before close,
and the next open took the old graph, whose nodes hold other vectors under
the same labels. Searches then walked a graph of vectors the store no longer
has. Each write now also stamps the file with a random mark the graph's
sidecar must match.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import memstore_index._tuning as tune
from memstore.journal.sqlite import backup_file
from memstore_index._vectorfile import VECTOR_FILE, StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

DIM = 16


def _rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _put(cells: CellStore, id: str, vector: np.ndarray) -> None:
    cells.apply([StoredVector(IndexEntry(id), -1, f"h-{id}", "", vector)])


def _crash(cells: CellStore) -> None:
    """Stop without close(): the vectors are on disk, the graph is not saved."""
    assert cells._file is not None
    cells._file.close()


def _graph_holds_the_stores_vectors(cells: CellStore) -> None:
    assert cells._hnsw is not None
    for id, label in cells._label_of.items():
        stored = np.asarray(cells._hnsw.get_items([label]), np.float32)[0]
        assert np.allclose(stored, cells._vecs[label], atol=1e-6), id


def test_a_graph_saved_in_another_history_is_rebuilt_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 8)  # a graph from 9 vectors on
    folder, kept = tmp_path / "data", tmp_path / "backup"
    base, (x,) = _rows(60, seed=1), _rows(1, seed=2)
    with CellStore(HashEmbedder(dim=DIM), path=folder) as cells:
        cells.apply(
            [StoredVector(IndexEntry(f"v{i}"), -1, f"h{i}", "", v) for i, v in enumerate(base)]
        )
    kept.mkdir()
    backup_file(folder / VECTOR_FILE, kept / VECTOR_FILE)  # a backup, taken here
    with CellStore(HashEmbedder(dim=DIM), path=folder) as cells:
        _put(cells, "x", x)  # one more write; the graph is saved at close
    shutil.copy(kept / VECTOR_FILE, folder / VECTOR_FILE)  # the backup's file restored in place
    cells = CellStore(HashEmbedder(dim=DIM), path=folder)
    _graph_holds_the_stores_vectors(cells)  # the newer graph is not taken for the older file
    _put(cells, "y", -x)  # as many writes as the other history: same generation and count
    _crash(cells)
    reopened = CellStore(HashEmbedder(dim=DIM), path=folder)
    try:
        assert "x" not in reopened and "y" in reopened
        _graph_holds_the_stores_vectors(reopened)
        assert reopened.search_vector(-x, 1)[0][0].id == "y"
        reopened._check()
    finally:
        reopened.close()


def test_a_graph_copied_from_a_store_of_the_same_origin_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 8)
    a, b = tmp_path / "a", tmp_path / "b"
    base, (x,) = _rows(60, seed=3), _rows(1, seed=4)
    with CellStore(HashEmbedder(dim=DIM), path=a) as cells:
        cells.apply(
            [StoredVector(IndexEntry(f"v{i}"), -1, f"h{i}", "", v) for i, v in enumerate(base)]
        )
    shutil.copytree(a, b)  # two stores from one state (a copy, one import into both)
    with CellStore(HashEmbedder(dim=DIM), path=a) as cells:
        _put(cells, "x", x)
    with CellStore(HashEmbedder(dim=DIM), path=b) as cells:
        _put(cells, "y", -x)
    for name in ("hnsw.bin", "hnsw.json"):  # a's graph cache lands in b
        shutil.copy(a / name, b / name)
    with CellStore(HashEmbedder(dim=DIM), path=b) as cells:
        _graph_holds_the_stores_vectors(cells)
        assert cells.search_vector(-x, 1)[0][0].id == "y"


def test_a_graph_saved_at_close_is_loaded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp does not cost the cache its use: the same folder reopened loads its graph."""
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 8)
    base = _rows(60, seed=5)
    with CellStore(HashEmbedder(dim=DIM), path=tmp_path) as cells:
        cells.apply(
            [StoredVector(IndexEntry(f"v{i}"), -1, f"h{i}", "", v) for i, v in enumerate(base)]
        )
        cells.remove("v3")
    rebuilt: list[bool] = []
    real = CellStore._rebuild_graph

    def rebuild(self: CellStore) -> None:
        rebuilt.append(True)
        real(self)

    monkeypatch.setattr(CellStore, "_rebuild_graph", rebuild)
    with CellStore(HashEmbedder(dim=DIM), path=tmp_path) as cells:
        assert cells._hnsw is not None and rebuilt == []
        _graph_holds_the_stores_vectors(cells)
