"""``Memory(folder, readonly=True)``: a reader beside the writer that holds the folder."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memstore import Memory, MemstoreError, ReadOnlyError
from memstore.errors import JournalLockedError
from memstore_index import HashEmbedder


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts += len(texts)
        return super().embed(texts)


def _export(mem: Memory) -> str:
    out = io.StringIO()
    mem.export(out)
    return out.getvalue()


def test_a_reader_beside_the_writer_sees_its_items_and_reuses_its_vectors(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=HashEmbedder()) as writer:
        writer.add("the nightly backup runs at 02:00", partition="ops")
        writer.add("the staging database is rebuilt on Mondays", partition="ops")
        with pytest.raises(JournalLockedError):
            Memory(tmp_path, embedder=None)  # a second writer is refused
        counting = CountingEmbedder()
        with Memory(tmp_path, embedder=counting, readonly=True) as reader:
            assert counting.texts == 0, "the writer's stored vectors are reused, not re-embedded"
            assert len(reader.cells or ()) == 2
            hits = reader.search("when does the backup run?", partition="ops")
            assert hits and "backup" in hits[0].item.content
            before = _export(reader)
            with pytest.raises(ReadOnlyError, match="read-only"):
                reader.add("a write through the reader", partition="ops")
            with pytest.raises(ReadOnlyError):
                reader.delete(hits[0].item.id)
            assert _export(reader) == before, "a refused write changes nothing"
            assert reader.get(hits[0].item.id) is not None
        writer.add("the writer still writes", partition="ops")
    with Memory(tmp_path, embedder=None) as again:
        assert len(again.store) == 3


def test_readonly_never_creates_a_memory(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "dir"
    with pytest.raises(MemstoreError, match="does not exist"):
        Memory(missing, embedder=None, readonly=True)
    assert not missing.exists() and not (tmp_path / "typo").exists()
    with pytest.raises(MemstoreError, match="give the folder"):
        Memory(None, readonly=True)
