"""Vectors that cannot be made durable after their write committed: a backlog, not a failure.

The contract (see ``docs/vector.md``, "When the vector file fails"): once the journal
has committed a write, the write stands. A vector file that refuses the new
vectors (a full disk) leaves them in memory, indexed and searched as usual,
and queued to be saved; an embedder that fails after the commit
(``fail_writes=False``) leaves the item out of the semantic channel (never
answered by its old vector) and queued to be embedded. One warning per write
group, never a traceback per item; the next write group (or ``flush()``)
drains the queue; ``Memory.stats().vectors_pending`` counts it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memstore import Item, Memory, Store
from memstore_index import CellStore, EmbeddingError, HashEmbedder

DIM = 32


class CountingEmbedder(HashEmbedder):
    """A hash embedder that counts the texts it embedded and can be told to fail."""

    def __init__(self) -> None:
        super().__init__(dim=DIM)
        self.texts = 0
        self.failing = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.failing:
            raise EmbeddingError("the embedding service is down")
        self.texts += len(texts)
        return super().embed(texts)


def texts(n: int, start: int = 0) -> list[str]:
    return [f"note {i}: the zebra{i} ledger pool" for i in range(start, start + n)]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "memstore" and r.levelno >= logging.WARNING]


def test_add_many_on_a_full_vector_file_commits_warns_once_and_drains_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mem = Memory(tmp_path, embedder=CountingEmbedder())
    mem.add("the first note, saved before the disk filled")
    assert mem.cells is not None
    mem.cells.max_bytes = 1  # held at its size: the next row that needs a page is refused
    with caplog.at_level(logging.INFO, logger="memstore"):
        stored = mem.add_many(texts(300))
        assert len(stored) == 300  # committed: the journal has them
        assert len(warnings_of(caplog)) == 1, [r.getMessage() for r in warnings_of(caplog)]
        assert not [r for r in caplog.records if r.exc_info], "no traceback per item"
        stats = mem.stats()
        # The file's free pages took the first few; every one after is pending.
        pending = stats.vectors_pending
        assert stats.items == 301 and stats.vectors == 301 and 0 < pending <= 300
        # Search is whole meanwhile: lexically, and semantically from memory.
        assert [h.item.id for h in mem.search("zebra17")][:1] == [stored[17].id]
        assert mem.cells.search(texts(1, 17)[0], 1)[0][0].id == stored[17].id
        mem.cells._check(mem.store, vectors=True)
        # A second batch while still full: one more warning, the backlog grows.
        mem.add_many(texts(10, 300))
        assert len(warnings_of(caplog)) == 2
        assert mem.stats().vectors_pending == pending + 10
        # Room again: the next write drains everything, in one transaction.
        mem.cells.max_bytes = None
        mem.add("the disk has room again")
        assert mem.stats().vectors_pending == 0
    mem.cells._check(mem.store, vectors=True)  # the file's rows included, now
    mem.close()
    with Memory(tmp_path, embedder=CountingEmbedder()) as again:
        assert again.cells is not None
        assert isinstance(again.cells.embedder, CountingEmbedder)
        assert again.cells.embedder.texts == 0  # every vector was saved: nothing re-embedded
        assert again.stats().vectors == 312


def test_closing_with_a_backlog_embeds_the_missing_vectors_at_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mem = Memory(tmp_path, embedder=CountingEmbedder())
    mem.add("saved")
    assert mem.cells is not None
    mem.cells.max_bytes = 1
    with caplog.at_level(logging.WARNING, logger="memstore"):
        mem.add_many(texts(50))
        pending = mem.stats().vectors_pending
        mem.close()  # the backlog cannot be saved: said once more, not lost
    assert "not saved" in caplog.text
    with Memory(tmp_path, embedder=CountingEmbedder()) as again:
        assert again.cells is not None and isinstance(again.cells.embedder, CountingEmbedder)
        assert 0 < pending == again.cells.embedder.texts  # exactly the ones the file lacked
        assert again.stats().vectors == 51 and again.stats().vectors_pending == 0
        again.cells._check(again.store, vectors=True)


def test_an_embedding_failure_after_commit_never_leaves_a_stale_vector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store()
    embedder = CountingEmbedder()
    cells = CellStore(embedder)
    cells.attach(store, fail_writes=False)
    store.upsert(Item(id="x", kind="note", title="x", content="T0 apples"))
    assert cells.search("apples", 1)[0][0].id == "x"
    embedder.failing = True
    with caplog.at_level(logging.WARNING, logger="memstore"), store.batch():
        store.upsert(Item(id="x", kind="note", title="x", content="T1 bananas"))
        store.upsert(Item(id="y", kind="note", title="y", content="T1 cherries"))
    assert len(warnings_of(caplog)) == 1 and not [r for r in caplog.records if r.exc_info]
    got = store.get("x")
    assert got is not None and got.content == "T1 bananas"  # committed
    assert cells.pending == 2
    assert "x" not in cells  # the apples vector no longer answers for x
    assert [e.id for e, _ in cells.search_vector(cells.vector("x") or np.ones(DIM), 5)] == []
    cells._check(store)
    embedder.failing = False
    store.upsert(Item(id="z", kind="note", title="z", content="another write"))
    assert cells.pending == 0
    assert cells.search("bananas", 1)[0][0].id == "x"
    cells._check(store, vectors=True)


def test_flush_raises_while_the_cause_remains(tmp_path: Path) -> None:
    store = Store()
    embedder = CountingEmbedder()
    cells = CellStore(embedder, path=tmp_path)
    cells.attach(store, fail_writes=False)
    embedder.failing = True
    store.upsert(Item(kind="note", title="pending"))
    with pytest.raises(EmbeddingError):
        cells.flush()
    embedder.failing = False
    assert cells.flush() == 1 and cells.pending == 0
    cells._check(store, vectors=True)
    cells.close()
