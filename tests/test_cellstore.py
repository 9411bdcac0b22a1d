"""CellStore: exact against a brute-force scan, filtered inside the search, durable."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import memstore_index._tuning as tune
import memstore_index.cellstore as cs
from memstore import Change, Item, MemstoreError, Store, ThoughtLink
from memstore_index._vectorfile import VECTOR_FILE
from memstore_index.cellstore import CellStore, EmbedderMismatchError
from memstore_index.embedder import EmbedderConfigError
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

DIM = 384


def unit_rows(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def fill(cells: CellStore, vecs: np.ndarray, partitions: int = 1) -> None:
    """Index raw vectors under ids v0..vn (bypassing the embedder) through apply()."""
    from memstore_index._vectorfile import StoredVector

    cells.apply(
        [
            StoredVector(IndexEntry(f"v{i}", partition=f"p{i % partitions}"), -1, f"h{i}", "", v)
            for i, v in enumerate(vecs)
        ]
    )


def brute(vecs: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray | None = None) -> list[str]:
    scores = vecs @ q
    idx = np.arange(len(vecs)) if keep is None else np.flatnonzero(keep)
    order = idx[np.lexsort((idx, -scores[idx]))][:k]
    return [f"v{i}" for i in order]


@pytest.fixture(scope="module")
def big() -> tuple[CellStore, np.ndarray]:
    vecs = unit_rows(10_000)
    cells = CellStore(HashEmbedder(dim=DIM))
    fill(cells, vecs, partitions=100)
    return cells, vecs


def test_hnsw_recall_at_10_against_exact_scan(big: tuple[CellStore, np.ndarray]) -> None:
    cells, vecs = big
    assert cells._hnsw is not None, "10k vectors must be served by the graph"
    queries = unit_rows(200, seed=1)
    recalls = []
    for q in queries:
        got = {e.id for e, _ in cells.search_vector(q, 10)}
        recalls.append(len(got & set(brute(vecs, q, 10))) / 10)
    assert float(np.mean(recalls)) >= 0.97


def test_exact_search_equals_brute_force(big: tuple[CellStore, np.ndarray]) -> None:
    cells, vecs = big
    for q in unit_rows(20, seed=2):
        assert [e.id for e, _ in cells.exact_search(q, 10)] == brute(vecs, q, 10)


def test_filtered_search_equals_exact_filtered_scan(big: tuple[CellStore, np.ndarray]) -> None:
    cells, vecs = big
    tenant = np.array([i % 100 == 7 for i in range(len(vecs))])
    for q in unit_rows(20, seed=3):
        # A 1% tenant: served exactly from its label set, k hits although rare.
        got = [e.id for e, _ in cells.search_vector(q, 10, partitions=["p7"])]
        assert got == brute(vecs, q, 10, tenant)
        # The same restriction as a predicate runs inside the HNSW search.
        pred = [e.id for e, _ in cells.search_vector(q, 10, visible=lambda e: e.partition == "p7")]
        assert len(pred) == 10
        assert len(set(pred) & set(got)) >= 9


def test_wide_filter_runs_in_the_graph_and_still_finds_k(big: tuple[CellStore, np.ndarray]) -> None:
    cells, vecs = big
    wide = [f"p{i}" for i in range(40)]  # 40%: above the exact threshold
    keep = np.array([(i % 100) < 40 for i in range(len(vecs))])
    recalls = []
    for q in unit_rows(50, seed=4):
        got = [e.id for e, _ in cells.search_vector(q, 10, partitions=wide)]
        assert len(got) == 10
        assert all(int(g[1:]) % 100 < 40 for g in got)
        recalls.append(len(set(got) & set(brute(vecs, q, 10, keep))) / 10)
    assert float(np.mean(recalls)) >= 0.95


def test_scores_are_cosine_similarities(big: tuple[CellStore, np.ndarray]) -> None:
    cells, vecs = big
    q = vecs[123]
    top, score = cells.search_vector(q, 1)[0]
    assert top.id == "v123" and score == pytest.approx(1.0, abs=1e-5)


def test_subject_routing_merges_subject_and_global_hits() -> None:
    cells = CellStore(HashEmbedder(dim=64))
    cells.upsert(IndexEntry("a", subject="auth"), "token refresh fails at midnight")
    cells.upsert(IndexEntry("b", subject="billing"), "token refresh fails at midnight again")
    cells.upsert(IndexEntry("c", subject="auth"), "completely unrelated gardening note")
    got = [e.id for e, _ in cells.search("token refresh", 3, subject="auth")]
    assert set(got) == {"a", "b", "c"}
    top = cells.search("token refresh", 1, subject="auth")
    assert len(top) == 1 and top[0][0].id in {"a", "b"}


def test_reembeds_only_when_text_changes() -> None:
    calls: list[int] = []
    emb = HashEmbedder(dim=32)
    original = emb.embed

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return original(texts)

    emb.embed = counting  # type: ignore[method-assign]
    cells = CellStore(emb)
    cells.upsert(IndexEntry("a", kind="note"), "same text")
    cells.upsert(IndexEntry("a", kind="fact"), "same text")  # metadata only
    assert calls == [1]
    assert cells.entry("a") == IndexEntry("a", kind="fact")
    cells.upsert(IndexEntry("a", kind="fact"), "new text")
    assert calls == [1, 1]
    cells._check()


def test_delete_compaction_and_resize() -> None:
    vecs = unit_rows(3000, dim=16, seed=5)
    cells = CellStore(HashEmbedder(dim=16))
    fill(cells, vecs)
    for i in range(0, 3000, 2):
        assert cells.remove(f"v{i}")
    assert not cells.remove("v0")
    cells._check()
    assert cells._deleted < 1024 + 1  # compacted along the way
    assert len(cells) == 1500
    q = vecs[1]
    assert cells.search_vector(q, 1)[0][0].id == "v1"


class CellMachine(RuleBasedStateMachine):
    """Random add / update / remove: the invariant holds and every id finds itself."""

    def __init__(self) -> None:
        super().__init__()
        self.cells = CellStore(HashEmbedder(dim=16))
        self.vecs: dict[str, np.ndarray] = {}

    @rule(i=st.integers(0, 30), seed=st.integers(0, 10_000))
    def put(self, i: int, seed: int) -> None:
        from memstore_index._vectorfile import StoredVector

        v = unit_rows(1, 16, seed)[0]
        self.cells.apply([StoredVector(IndexEntry(f"v{i}"), -1, f"h{seed}", "", v)])
        self.vecs[f"v{i}"] = v

    @rule(i=st.integers(0, 30))
    def remove(self, i: int) -> None:
        assert self.cells.remove(f"v{i}") == (f"v{i}" in self.vecs)
        self.vecs.pop(f"v{i}", None)

    @invariant()
    def consistent(self) -> None:
        self.cells._check()
        assert len(self.cells) == len(self.vecs)
        for id, v in self.vecs.items():
            hits = self.cells.search_vector(v, 1)
            assert hits and hits[0][1] == pytest.approx(1.0, abs=1e-5)
            assert id in self.cells


TestCellMachine = CellMachine.TestCase
TestCellMachine.settings = settings(
    max_examples=30,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_graph_path_machine_with_small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same churn through the HNSW path (threshold lowered), compactions included."""
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 8)
    monkeypatch.setattr(tune, "COMPACT_MIN_DELETED", 5)
    rng = np.random.default_rng(9)
    cells = CellStore(HashEmbedder(dim=16))
    live: dict[str, np.ndarray] = {}
    from memstore_index._vectorfile import StoredVector

    for step in range(600):
        i = int(rng.integers(0, 60))
        if rng.random() < 0.35 and f"v{i}" in live:
            cells.remove(f"v{i}")
            del live[f"v{i}"]
        else:
            v = unit_rows(1, 16, step + 100)[0]
            cells.apply([StoredVector(IndexEntry(f"v{i}"), -1, f"h{step}", "", v)])
            live[f"v{i}"] = v
        if step % 50 == 0:
            cells._check()
    cells._check()
    assert cells._hnsw is not None
    for id, v in live.items():
        assert cells.search_vector(v, 1)[0][0].id == id


def test_persistence_round_trip_in_a_second_process(tmp_path: Path) -> None:
    vecs = unit_rows(3000, dim=32, seed=6)
    with CellStore(HashEmbedder(dim=32), path=tmp_path) as cells:
        fill(cells, vecs, partitions=3)
        cells.remove("v5")
    script = textwrap.dedent(
        f"""
        import numpy as np
        from memstore_index.cellstore import CellStore
        from memstore_index.hash_embedder import HashEmbedder
        calls = []
        emb = HashEmbedder(dim=32)
        orig = emb.embed
        emb.embed = lambda texts: (calls.append(len(texts)), orig(texts))[1]
        cells = CellStore(emb, path={str(tmp_path)!r})
        assert cells._hnsw is not None and len(cells) == 2999, len(cells)
        rng = np.random.default_rng(6)
        x = rng.standard_normal((3000, 32)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        assert cells.search_vector(x[7], 1)[0][0].id == "v7"
        assert "v5" not in cells
        assert calls == [], "no re-embedding after restart"
        cells._check()
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("damage", ["truncate", "delete", "stale"])
def test_a_damaged_graph_file_is_rebuilt_not_trusted(tmp_path: Path, damage: str) -> None:
    vecs = unit_rows(2500, dim=16, seed=7)
    with CellStore(HashEmbedder(dim=16), path=tmp_path) as cells:
        fill(cells, vecs)
    graph = tmp_path / "hnsw.bin"
    if damage == "truncate":
        graph.write_bytes(graph.read_bytes()[:1000])
    elif damage == "delete":
        graph.unlink()
    fresh = unit_rows(5, dim=16, seed=8)
    if damage == "stale":  # vectors written after the graph was saved (a crash before close)
        cells2 = CellStore(HashEmbedder(dim=16), path=tmp_path)
        fill(cells2, fresh)  # rewrites v0..v4
        assert cells2._file is not None
        cells2._file.close()
    cells3 = CellStore(HashEmbedder(dim=16), path=tmp_path)
    cells3._check()
    assert cells3._hnsw is not None
    assert cells3.search_vector(vecs[42], 1)[0][0].id == "v42"
    if damage == "stale":
        assert cells3.search_vector(fresh[3], 1)[0][0].id == "v3"


def test_model_mismatch_fails_closed_and_reembed_recovers(tmp_path: Path) -> None:
    with CellStore(HashEmbedder(dim=32, seed=1), path=tmp_path) as cells:
        cells.upsert(IndexEntry("a"), "ledger pool exhausted")
        cells.upsert(IndexEntry("b"), "tax filing deadline")
    with pytest.raises(EmbedderMismatchError, match="reembed"):
        CellStore(HashEmbedder(dim=32, seed=2), path=tmp_path)
    with pytest.raises(EmbedderMismatchError):
        CellStore(HashEmbedder(dim=64, seed=1), path=tmp_path)
    assert CellStore.reembed(tmp_path, HashEmbedder(dim=64, seed=2)) == 2
    cells = CellStore(HashEmbedder(dim=64, seed=2), path=tmp_path)
    assert cells.search("ledger pool", 1)[0][0].id == "a"
    cells._check()


def test_a_reembed_that_fails_at_its_last_step_leaves_the_old_model_whole(tmp_path: Path) -> None:
    """The new vectors and the new model's identity are written in one transaction.

    They were two: when the identity could not be written (here a real
    SQLite trigger refusing it; a full disk or a crash alike), the file held
    the new model's vectors under the old model's name, and the old model
    opened it without a mismatch and searched by the other model's vectors.
    """
    old, new = HashEmbedder(dim=32, seed=1), HashEmbedder(dim=32, seed=2)
    with CellStore(old, path=tmp_path) as cells:
        cells.upsert(IndexEntry("a"), "ledger pool exhausted")
        cells.upsert(IndexEntry("b"), "tax filing deadline")
        before = {id: cells.vector(id) for id in ("a", "b")}
    db = sqlite3.connect(tmp_path / VECTOR_FILE)
    db.execute(
        "CREATE TRIGGER refuse BEFORE UPDATE ON meta WHEN NEW.key = 'model_id' "
        "BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
    )
    db.close()
    with pytest.raises(MemstoreError, match="refused by test"):
        CellStore.reembed(tmp_path, new)
    with CellStore(old, path=tmp_path) as cells:  # the old model's file, as it was
        for id, vector in before.items():
            assert np.array_equal(cells.vector(id), vector), id  # type: ignore[arg-type]
        cells._check()
    with pytest.raises(EmbedderMismatchError):
        CellStore(new, path=tmp_path)


@pytest.mark.parametrize("batch_size", [-1, 0, "64", 2.5, True])
def test_reembed_refuses_a_batch_size_that_is_not_a_count(
    tmp_path: Path, batch_size: object
) -> None:
    with CellStore(HashEmbedder(dim=32, seed=1), path=tmp_path) as cells:
        cells.upsert(IndexEntry("a"), "ledger pool exhausted")
    with pytest.raises(ValueError, match=r"^batch_size must be"):
        CellStore.reembed(tmp_path, HashEmbedder(dim=32, seed=2), batch_size=batch_size)  # type: ignore[arg-type]
    # Nothing was stamped: the file still belongs to the old model, whose vectors it holds.
    with pytest.raises(EmbedderMismatchError):
        CellStore(HashEmbedder(dim=32, seed=2), path=tmp_path)
    with CellStore(HashEmbedder(dim=32, seed=1), path=tmp_path) as cells:
        cells._check(vectors=False)
        assert cells.ids() == ["a"]


def test_attach_follows_the_store() -> None:
    store = Store()
    cells = CellStore(HashEmbedder(dim=64))
    kept = store.upsert(Item(kind="note", title="ledger pool", content="exhausted at peak"))
    cells.attach(store)
    assert kept.id in cells
    b = store.upsert(Item(kind="note", title="tax filing", content="deadline in april"))
    hidden = store.upsert(Item(kind="note", title="secret", no_embed=True))
    assert b.id in cells and hidden.id not in cells
    store.expire(b.id)
    assert b.id not in cells
    store.delete(kept.id)
    assert kept.id not in cells
    c = store.upsert(Item(kind="note", title="c", content="x"))
    store.add_link(c.id, ThoughtLink(to_id="zzz", relation="explains"))
    assert c.id in cells
    cells._check()


def test_attached_embedding_failure_fails_the_write() -> None:
    store = Store()
    emb = HashEmbedder(dim=16)
    cells = CellStore(emb)
    cells.attach(store)

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model unavailable")

    emb.embed = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="model unavailable"):
        store.upsert(Item(kind="note", title="never stored"))
    assert len(store) == 0 and len(cells) == 0
    store._check()


def test_concurrent_writers_and_searchers_leave_a_consistent_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Threads adding, replacing, removing and searching (graph path included)."""
    import threading

    from memstore_index._vectorfile import StoredVector

    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 64)
    monkeypatch.setattr(tune, "COMPACT_MIN_DELETED", 32)
    cells = CellStore(HashEmbedder(dim=16))
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for step in range(300):
                i = int(rng.integers(0, 120))
                if rng.random() < 0.3:
                    cells.remove(f"v{i}")
                else:
                    v = unit_rows(1, 16, seed * 1000 + step)[0]
                    cells.apply([StoredVector(IndexEntry(f"v{i}"), -1, f"h{step}", "", v)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def searcher(seed: int) -> None:
        try:
            for q in unit_rows(200, 16, seed):
                for entry, score in cells.search_vector(q, 5):
                    assert -1.0001 <= score <= 1.0001 and entry.id.startswith("v")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
    threads += [threading.Thread(target=searcher, args=(s + 10,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    cells._check()
    for id in list(cells._label_of):
        v = cells.vector(id)
        assert v is not None and cells.search_vector(v, 1)[0][1] == pytest.approx(1.0, abs=1e-5)


def test_partition_set_scan_is_exact_and_sees_every_write() -> None:
    """A mid-size partition set is scanned exactly from a cached copy, dropped on writes."""
    vecs = unit_rows(6000, dim=32, seed=11)
    cells = CellStore(HashEmbedder(dim=32))
    fill(cells, vecs, partitions=2)  # 3000 per partition: above the exact threshold
    keep = np.array([i % 2 == 0 for i in range(len(vecs))])
    for q in unit_rows(10, dim=32, seed=12):
        got = [e.id for e, _ in cells.search_vector(q, 10, partitions=["p0"])]
        assert got == brute(vecs, q, 10, keep)
    q = unit_rows(1, dim=32, seed=13)[0]
    top = cells.search_vector(q, 1, partitions=["p0"])[0][0].id
    assert cells.remove(top)
    assert cells.search_vector(q, 1, partitions=["p0"])[0][0].id != top
    cells._check()


# ------------------------------------------------------------------ centring


def leaning_rows(n: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit rows that all lean towards one common direction, as sentence embeddings do.

    Returns the rows ``normalise(2 c + n_i)``, the common direction ``c`` and
    the specific parts ``n_i`` (unit, orthogonal to ``c``).
    """
    rng = np.random.default_rng(seed)
    c = rng.standard_normal(dim)
    c /= np.linalg.norm(c)
    noise = rng.standard_normal((n, dim))
    noise -= np.outer(noise @ c, c)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    rows = 2 * c + noise
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32), c.astype(np.float32), noise.astype(np.float32)


def centred_brute(
    vecs: np.ndarray, q: np.ndarray, k: int, keep: np.ndarray | None = None
) -> tuple[list[str], np.ndarray]:
    """Ids and scores of the top ``k`` by cosine around the mean of the kept rows."""
    idx = np.arange(len(vecs)) if keep is None else np.flatnonzero(keep)
    mu = vecs[idx].astype(np.float64).mean(0)
    rows = vecs[idx] - mu
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    qc = q - mu
    scores = rows @ (qc / np.linalg.norm(qc))
    order = np.lexsort((idx, -scores))[:k]
    return [f"v{idx[i]}" for i in order], scores[order]


def test_centring_keeps_a_generic_entry_from_answering_a_specific_query() -> None:
    rows, c, noise = leaning_rows(200, 64, seed=31)
    hub = c  # all common direction, nothing of its own: "Thanks, see you!"
    vecs = np.vstack([rows, hub[None, :]])
    # A query about entry 7, said in the collection's common register.
    rng = np.random.default_rng(32)
    other = rng.standard_normal(64).astype(np.float32)
    other -= (other @ c) * c + (other @ noise[7]) * noise[7]
    other /= np.linalg.norm(other)
    q = 2 * c + 0.4 * noise[7] + 0.9 * other
    q /= np.linalg.norm(q)
    plain = CellStore(HashEmbedder(dim=64))
    fill(plain, vecs)
    assert plain.search_vector(q, 1)[0][0].id == "v200", "plain cosine: the hub wins"
    centred = CellStore(HashEmbedder(dim=64), center=True)
    fill(centred, vecs)
    hits = centred.search_vector(q, 3)
    assert hits[0][0].id == "v7"
    assert "v200" not in [e.id for e, _ in hits]


def test_centred_scans_equal_cosines_around_the_mean_of_the_searched_partitions() -> None:
    rows, _, _ = leaning_rows(6000, 32, seed=33)
    cells = CellStore(HashEmbedder(dim=32), center=True)
    fill(cells, rows, partitions=4)  # 1500 a partition: exact scans; two: the subset scan
    part = np.array([i % 4 for i in range(len(rows))])
    for q in unit_rows(5, dim=32, seed=34):
        for parts in (["p0"], ["p1", "p3"]):
            keep = np.isin(part, [int(p[1:]) for p in parts])
            want_ids, want_scores = centred_brute(rows, q, 10, keep)
            hits = cells.search_vector(q, 10, partitions=parts)
            assert [e.id for e, _ in hits] == want_ids, parts
            assert [s for _, s in hits] == pytest.approx(want_scores.tolist(), abs=1e-4)
    cells._check()


def test_a_centred_mean_counts_a_shared_entry_once() -> None:
    from memstore_index._vectorfile import StoredVector

    rows, _, _ = leaning_rows(300, 16, seed=35)
    cells = CellStore(HashEmbedder(dim=16), center=True)
    # Partition p0 holds 0..149, p1 150..299; every tenth entry of p0 is shared.
    shared = {i for i in range(0, 150, 10)}
    cells.apply(
        [
            StoredVector(
                IndexEntry(
                    f"v{i}",
                    partition="p0" if i < 150 else "p1",
                    tags=("shared",) if i in shared else (),
                ),
                -1,
                f"h{i}",
                "",
                v,
            )
            for i, v in enumerate(rows)
        ]
    )
    q = unit_rows(1, 16, seed=36)[0]
    for parts, members in (
        (["p1"], set(range(150, 300)) | shared),
        (["p0", "p1"], set(range(300))),
    ):
        keep = np.array([i in members for i in range(300)])
        want_ids, want_scores = centred_brute(rows, q, 5, keep)
        hits = cells.search_vector(q, 5, partitions=parts)
        assert [e.id for e, _ in hits] == want_ids
        assert [s for _, s in hits] == pytest.approx(want_scores.tolist(), abs=1e-4)
    # Removing entries takes them out of the mean.
    for i in range(150, 200):
        assert cells.remove(f"v{i}")
    keep = np.array([i in (set(range(200, 300)) | shared) for i in range(300)])
    assert [e.id for e, _ in cells.search_vector(q, 5, partitions=["p1"])] == centred_brute(
        rows, q, 5, keep
    )[0]
    cells._check()


def test_a_centred_graph_search_rescores_the_graphs_beam() -> None:
    rows, _, _ = leaning_rows(4000, 32, seed=37)
    cells = CellStore(HashEmbedder(dim=32), center=True)
    fill(cells, rows)
    assert cells._hnsw is not None
    found = 0
    for q in unit_rows(10, dim=32, seed=38):
        want_ids, _ = centred_brute(rows, q, 10)
        hits = cells.search_vector(q, 10)
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        found += len(set(want_ids) & {e.id for e, _ in hits})
        exact = cells.exact_search(q, 10)
        assert [e.id for e, _ in exact] == want_ids
    assert found / 100 >= 0.9, found


def test_a_search_below_center_min_is_plain_cosine() -> None:
    rows, _, _ = leaning_rows(cs.CENTER_MIN - 1, 16, seed=39)
    plain, centred = CellStore(HashEmbedder(dim=16)), CellStore(HashEmbedder(dim=16), center=True)
    fill(plain, rows)
    fill(centred, rows)
    q = unit_rows(1, 16, seed=40)[0]
    assert centred.search_vector(q, 5) == plain.search_vector(q, 5)


def test_offered_vectors_replace_embedding_calls() -> None:
    """A replica takes vectors another process embedded, and embeds only what was not offered."""
    calls: list[str] = []
    emb = HashEmbedder(dim=32)
    original = emb.embed

    def counting(texts: list[str]) -> np.ndarray:
        calls.extend(texts)
        return original(texts)

    emb.embed = counting  # type: ignore[method-assign]
    store = Store()
    cells = CellStore(emb)
    cells.attach(store)
    theirs = unit_rows(1, dim=32, seed=21)[0]  # not what the hash embedder would make
    offer = {("a", cs.text_hash("offered text")): theirs}
    with cells.offered(offer):
        store.upsert(Item(id="a", kind="note", title="offered text"))
        store.upsert(Item(id="b", kind="note", title="not offered"))
        with cells.offered({}):  # offers nest
            store.upsert(Item(id="a", kind="note", title="offered text", content=""))
    assert calls == ["not offered"]
    assert np.array_equal(cells.vector("a"), theirs)
    store.upsert(Item(id="c", kind="note", title="offered text"))  # same text, other id
    assert calls == ["not offered", "offered text"]
    assert cells._offered == {}
    with pytest.raises(MemstoreError, match="shape"), cells.offered({("x", "h"): theirs[:3]}):
        pass
    cells._check()


def test_prepared_for_names_the_vector_of_the_committing_item() -> None:
    """During the commit hook, the journal can see the vector of each upserted item."""
    store = Store()
    cells = CellStore(HashEmbedder(dim=16))
    cells.attach(store)
    seen: list[tuple[str, int]] = []

    def hook(changes: Sequence[Change]) -> None:
        for c in changes:
            if c.item is not None:
                p = cells.prepared_for(c.item)
                seen.append((c.item.title, -1 if p is None else p.vector.size))

    store.set_commit_hook(hook)
    a = store.upsert(Item(kind="note", title="first text"))
    store.upsert(a.clone(kind="fact"))  # same text: prepared, but nothing embedded
    store.upsert(Item(kind="note", title="quiet", no_embed=True))
    assert seen == [("first text", 16), ("first text", 0), ("quiet", -1)]
    assert cells.prepared_for(a) is None  # outside a commit


# ------------------------------------------------------------- adaptive ef


def lowrank_rows(n: int, dim: int = 64, rank: int = 8, seed: int = 0) -> np.ndarray:
    """Embedding-like unit rows: near a random ``rank``-dimensional subspace, small noise."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(np.random.default_rng(99).standard_normal((dim, rank)))
    x = rng.standard_normal((n, rank)) @ basis.T + 0.05 * rng.standard_normal((n, dim))
    x = x.astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_calibrated_ef_is_smaller_on_embedding_like_data_and_keeps_recall(
    tmp_path: Path,
) -> None:
    vecs = lowrank_rows(6000)
    cells = CellStore(HashEmbedder(dim=64), path=tmp_path, ef_search=300)
    for start in range(0, len(vecs), 1000):  # grows through several calibrations
        fill_from = vecs[start : start + 1000]
        from memstore_index._vectorfile import StoredVector

        cells.apply(
            [
                StoredVector(IndexEntry(f"v{start + i}"), -1, f"h{start + i}", "", v)
                for i, v in enumerate(fill_from)
            ]
        )
    assert cells._hnsw is not None and cells.calibration is not None
    ef, measured = cells.calibration
    assert cells.search_ef == ef < 300 and measured >= 0.98
    # Fresh queries from the same distribution. The calibration's 0.98 is itself an
    # estimate from a held-out sample, and hnswlib builds the graph on several
    # threads (not bit-for-bit repeatable), so fresh recall may land a little under
    # it: seen 0.969 on a loaded machine.
    queries = lowrank_rows(200, seed=5)
    recalls = [
        len({e.id for e, _ in cells.search_vector(q, 10)} & set(brute(vecs, q, 10))) / 10
        for q in queries
    ]
    assert float(np.mean(recalls)) >= 0.96
    cells._check()
    cells.close()
    reopened = CellStore(HashEmbedder(dim=64), path=tmp_path, ef_search=300)
    assert reopened.search_ef == ef  # the saved graph keeps its measured beam
    reopened.close()
    other = CellStore(HashEmbedder(dim=64), path=tmp_path, target_recall=None)
    assert other.search_ef == DEFAULT_EF_FOR_TEST  # no target: the configured beam
    other.close()


DEFAULT_EF_FOR_TEST = cs.DEFAULT_EF


def test_bad_target_recall_is_refused() -> None:
    with pytest.raises(ValueError, match="target_recall"):
        CellStore(HashEmbedder(dim=8), target_recall=1.5)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("m", "16"),
        ("m", 16.5),
        ("m", float("nan")),
        ("m", True),
        ("m", 10**9),  # hnswlib would try to allocate 2e9 links a node at the first insert
        ("ef_construction", None),
        ("ef_construction", 0),
        ("ef_search", "300"),
        ("ef_search", float("inf")),
        ("ef_search", 10**30),  # would overflow hnswlib's size_t at the first search
        ("target_recall", "0.9"),
        ("target_recall", True),
        ("center", "no"),  # would centre: the string is truthy
        ("center", 1),
        ("max_bytes", "1MB"),
        ("max_bytes", -1),  # would cap the file at one page
        ("max_bytes", 0),
        ("max_bytes", True),
    ],
)
def test_an_option_of_the_wrong_type_is_refused(tmp_path: Path, option: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{option} must be"):
        CellStore(HashEmbedder(dim=8), path=tmp_path / "v", **{option: value})  # type: ignore[arg-type]
    assert not (tmp_path / "v").exists()  # refused before the file opened


class _WideEmbedder:
    """An embedder that says its vectors are longer than any model's."""

    model_id = "wide"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:  # never reached: refused before
        raise AssertionError("embedded")


@pytest.mark.parametrize("dim", [0, -3, 10**9])
def test_an_embedder_of_impossible_dimension_is_refused(tmp_path: Path, dim: int) -> None:
    with pytest.raises(EmbedderConfigError, match=r"dim must be a whole number in \[1, 65536\]"):
        CellStore(_WideEmbedder(dim), path=tmp_path / "v")
    assert not (tmp_path / "v").exists()  # refused before the file opened


_QUERY = [1.0] + [0.0] * 7
_WRONG_READS: list[tuple[str, Callable[[CellStore], object], str]] = [
    ("k str", lambda c: c.search("tea", "2"), "^k must be a whole number"),
    ("k bool", lambda c: c.search("tea", True), "^k must be a whole number"),
    ("k float", lambda c: c.search_vector(_QUERY, 2.0), "^k must be a whole number"),
    ("k negative", lambda c: c.exact_search(_QUERY, -1), "^k must be between"),
    ("exact text", lambda c: c.search_vector(_QUERY, 2, exact="no"), "^exact must be"),
    ("partitions text", lambda c: c.search("tea", 2, partitions="ops"), "^partitions must be"),
    ("partitions int", lambda c: c.search("tea", 2, partitions=5), "^partitions must be"),
    ("subject int", lambda c: c.search("tea", 2, subject=5), "^subject must be"),
    ("visible text", lambda c: c.search("tea", 2, visible="shared"), "^visible must be"),
    ("query list", lambda c: c.search(["tea"], 2), "^query must be a str"),
    ("query dict", lambda c: c.embed_query({"tea": 1}), "^query must be a str"),
    ("queries dict", lambda c: c.embed_queries({"tea": 1}), "got a dict"),
    ("entry list", lambda c: c.entry(["a"]), "^id must be text"),
    ("vector dict", lambda c: c.vector({"a": 1}), "^id must be text"),
    ("vector_rows str", lambda c: c.vector_rows("a"), "^ids must be a list of ids"),
    ("vector_rows set", lambda c: c.vector_rows({"a"}), "^ids must be a list of ids"),
    ("vector_rows list", lambda c: c.vector_rows(["a", ["a"]]), "^id must be text"),
    ("remove list", lambda c: c.remove(["a"]), "^id must be text"),
    ("upsert bytes", lambda c: c.upsert(IndexEntry(id="n"), b"new"), r"^pairs\[0\] must be"),
    ("upsert no entry", lambda c: c.upsert("n", "new"), r"^pairs\[0\] must be"),
    ("upsert_many None", lambda c: c.upsert_many(None), "^pairs must be a list"),
]


@pytest.mark.parametrize(
    ("call", "match"), [w[1:] for w in _WRONG_READS], ids=[w[0] for w in _WRONG_READS]
)
def test_a_call_with_an_argument_of_the_wrong_type_is_refused_and_changes_nothing(
    call: Callable[[CellStore], object], match: str
) -> None:
    cells = CellStore(HashEmbedder(dim=8))
    cells.upsert(IndexEntry(id="a", partition="ops"), "alice prefers tea")
    with pytest.raises(MemstoreError, match=match):
        call(cells)
    assert cells.ids() == ["a"] and cells.pending == 0
    assert [e.id for e, _ in cells.search("tea", 2)] == ["a"]


def test_calibration_finds_the_smallest_ef_meeting_the_target() -> None:
    """Against a linear scan of every ef: the binary search (hinted or not) agrees."""
    import hnswlib  # type: ignore[import-untyped]

    from memstore_index import _calibrate as cal

    vecs = lowrank_rows(3000, seed=3)
    labels = np.arange(2900, dtype=np.intp)
    index = hnswlib.Index(space="ip", dim=64)
    index.init_index(max_elements=3000, ef_construction=100, M=8, random_seed=1)
    index.add_items(vecs[labels], labels)
    queries = vecs[2900:]
    truth = cal.exact_top_k(vecs, labels, queries, 10)
    brute_truth = np.argsort(-(queries @ vecs[labels].T), axis=1)[:, :10]
    assert all(set(a) == set(b) for a, b in zip(truth.tolist(), brute_truth.tolist(), strict=True))

    def recall(ef: int) -> float:
        index.set_ef(ef)
        got, _ = index.knn_query(queries, k=10)
        pairs = zip(got.tolist(), truth.tolist(), strict=True)
        return sum(len(set(g) & set(t)) for g, t in pairs) / 1000

    target = 0.99
    smallest = next((ef for ef in range(10, 201) if recall(ef) >= target), 200)
    for hint in (None, 10, 50, 200):
        ef, measured = cal.calibrate_ef(
            index, queries, truth, floor=10, ceiling=200, target=target, hint=hint
        )
        # Recall is monotone in ef here up to hnswlib's tie-breaking noise:
        # the search lands on the linear scan's answer or right beside it.
        assert abs(ef - smallest) <= 2 and measured >= target, (hint, ef, smallest)
    ef, measured = cal.calibrate_ef(index, queries, truth, floor=10, ceiling=12, target=1.01)
    assert ef == 12 and measured < 1.01  # unreachable: the ceiling, with its recall


@pytest.mark.parametrize("center", [False, True])
def test_readable_rule_as_a_mask_equals_the_rule_per_entry(center: bool) -> None:
    """ReadableAt over a cached partition set (one mask) returns what the same rule,
    called entry by entry, returns: private rows and rows past their deadline left
    out, ties by id, before and after a write changes the set."""
    import datetime as dt

    from memstore._entry_rule import ReadableAt
    from memstore_index._vectorfile import StoredVector

    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    vecs = unit_rows(600, seed=5)
    vecs[10] = vecs[11]  # a tie
    cells = CellStore(HashEmbedder(dim=DIM), center=center)

    def entry(i: int) -> IndexEntry:
        return IndexEntry(
            f"v{i}",
            partition=f"p{i % 2}",
            scope="private" if i % 7 == 0 else "public",
            stale_after=None if i % 5 else now + dt.timedelta(days=(i % 3) - 1),
        )

    cells.apply([StoredVector(entry(i), -1, f"h{i}", "", v) for i, v in enumerate(vecs)])
    rule = ReadableAt(now)
    for round in range(2):
        for q in unit_rows(5, seed=6 + round):
            for k in (1, 10, 200, 400):
                masked = cells.search_vector(q, k, visible=rule, partitions=["p0"])
                called = cells.search_vector(q, k, visible=lambda e: rule(e), partitions=["p0"])
                assert [(e.id, s) for e, s in masked] == [(e.id, s) for e, s in called]
                assert all(rule(e) for e, _ in masked)
                assert len({e.id for e, _ in masked}) == len(masked)
        # A write: v0..v49 become public with no deadline; the cached set is rebuilt.
        cells.apply(
            [
                StoredVector(IndexEntry(f"v{i}", partition="p0"), -1, f"h{i}", "", vecs[i])
                for i in range(50)
            ]
        )


@pytest.mark.parametrize("center", [False, True])
def test_readable_rule_as_a_label_set_in_the_graph_equals_the_rule_per_entry(
    center: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a set too large for an exact scan the graph is walked with ReadableAt as a
    cached label set (no filter at all when it passes every live label) and returns
    exactly what the walk with the same rule called per entry returns: kinds, private
    rows, deadlines and other partitions left out, before and after writes."""
    import datetime as dt

    from memstore._entry_rule import ReadableAt
    from memstore_index._vectorfile import StoredVector

    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 50)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    vecs = unit_rows(800, seed=8)
    # No calibration: a rule that passes every label takes the plain (calibrated)
    # beam, the predicate the full one; with one beam the walks must agree.
    cells = CellStore(HashEmbedder(dim=DIM), center=center, target_recall=None)

    def entry(i: int, mixed: bool) -> IndexEntry:
        if not mixed:  # one partition, one kind, all readable: the unfiltered walk
            return IndexEntry(f"v{i}", partition="p0", kind="chunk")
        return IndexEntry(
            f"v{i}",
            partition=f"p{i % 3 != 0:d}",
            kind="chunk" if i % 4 else "episode",
            scope="private" if i % 7 == 0 else "public",
            stale_after=None if i % 5 else now + dt.timedelta(days=(i % 3) - 1),
        )

    for mixed in (False, True, False):
        cells.apply([StoredVector(entry(i, mixed), -1, f"h{i}", "", v) for i, v in enumerate(vecs)])
        assert cells._hnsw is not None
        for q in unit_rows(4, seed=9):
            for kind in ("", "chunk"):
                rule = ReadableAt(now, kind)
                for k in (1, 10, 100):
                    fast = cells.search_vector(q, k, visible=rule, partitions=["p1", "p0"])
                    slow = cells.search_vector(
                        q, k, visible=lambda e, r=rule: r(e), partitions=["p0", "p1"]
                    )
                    assert [(e.id, s) for e, s in fast] == [(e.id, s) for e, s in slow]
                    assert all(rule(e) for e, _ in fast)
                    assert len(fast) == min(k, len([e for e in cells._entries if e and rule(e)]))


def test_a_search_after_each_write_does_not_lay_out_the_whole_partition_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every write starts a generation; the readable labels of a large partition set are
    laid out only once that generation's searches have asked often enough to pay for the
    pass (tune.READABLE_AMORTISE), and the searches before it return the same results."""
    import datetime as dt

    from memstore._entry_rule import ReadableAt
    from memstore_index._vectorfile import StoredVector

    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 50)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    n = 4 * tune.READABLE_AMORTISE - 3  # laid out at the fourth search of a generation
    vecs = unit_rows(n + 3, seed=12)
    cells = CellStore(HashEmbedder(dim=DIM))
    cells.apply(
        [
            StoredVector(
                IndexEntry(f"v{i}", partition="p0", kind="chunk" if i % 3 else "episode"),
                -1,
                f"h{i}",
                "",
                v,
            )
            for i, v in enumerate(vecs[:n])
        ]
    )
    rule = ReadableAt(now, "chunk")
    queries = unit_rows(4, seed=13)

    def laid_out() -> bool:
        return any(r.built and r.generation == cells._generation for r in cells._readables.values())

    for write in range(3):
        answers = []
        for search in range(6):
            q = queries[search % 2]
            answers.append(
                [(e.id, s) for e, s in cells.search_vector(q, 10, visible=rule, partitions=["p0"])]
            )
            assert laid_out() == (search >= 3), (write, search)
        assert answers[0] == answers[2] == answers[4] and answers[1] == answers[3] == answers[5]
        slow = cells.search_vector(queries[0], 10, visible=lambda e: rule(e), partitions=["p0"])
        assert answers[0] == [(e.id, s) for e, s in slow]
        new = n + write
        cells.apply(
            [
                StoredVector(
                    IndexEntry(f"v{new}", partition="p0", kind="chunk"),
                    -1,
                    f"h{new}",
                    "",
                    vecs[new],
                )
            ]
        )
