"""``embedder="auto"`` opens a folder with the embedder that made its vectors.

The trap it closes: a folder made while the ``embed`` extra was missing holds hash
vectors (``auto`` fell back to :class:`HashEmbedder`); once the extra is installed,
``auto`` meant the local model and every open and command was refused ("vectors made
by 'hash-v1-256-0'"), with no way out from the command line. Now ``auto`` reads the
folder's recorded ``model_id`` first and builds that embedder when memstore ships it;
a new folder, or one whose vectors another embedder made, gets the default as before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memstore import Memory
from memstore._memory_wiring import shipped_embedder
from memstore_index import EmbedderMismatchError, HashEmbedder, stored_model
from memstore_index import onnx_embedder as onnx_mod
from tests.cli_harness import memstore

needs_model = pytest.mark.skipif(not onnx_mod.AVAILABLE, reason="the embed extra is missing")


class Custom:
    """An embedder of the host's own: memstore cannot build it from its id."""

    model_id = "custom-embedder-v1"
    dim = 8

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def _embedder_of(mem: Memory) -> object:
    assert mem.cells is not None
    return mem.cells.embedder


def test_a_hash_folder_opens_with_its_hash_embedder(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=HashEmbedder(dim=64, seed=3)) as mem:
        mem.add("the ledger pool is exhausted")
    assert stored_model(tmp_path) == "hash-v1-64-3"
    with Memory(tmp_path) as mem:  # auto
        emb = _embedder_of(mem)
        assert isinstance(emb, HashEmbedder) and emb.model_id == "hash-v1-64-3"
        assert [h.item.content for h in mem.search("ledger pool")] == [
            "the ledger pool is exhausted"
        ]
    with Memory(tmp_path, readonly=True) as mem:  # a reader beside a writer, too
        assert getattr(_embedder_of(mem), "model_id", None) == "hash-v1-64-3"


@needs_model
def test_a_new_folder_gets_the_local_model_and_keeps_it(tmp_path: Path) -> None:
    assert stored_model(tmp_path) is None
    with Memory(tmp_path) as mem:
        mem.add("deploys freeze on fridays")
        assert getattr(_embedder_of(mem), "model_id", None) == onnx_mod.MODEL_ID
    with Memory(tmp_path) as mem:
        assert getattr(_embedder_of(mem), "model_id", None) == onnx_mod.MODEL_ID


@needs_model
def test_a_local_int8_folder_opens_with_int8(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder="local-int8") as mem:
        mem.add("deploys freeze on fridays")
    with Memory(tmp_path) as mem:
        assert getattr(_embedder_of(mem), "model_id", None) == onnx_mod.MODEL_ID_INT8


@needs_model
def test_a_folder_of_another_embedders_vectors_is_still_refused(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=Custom()) as mem:  # type: ignore[arg-type]
        mem.add("made by the host's own embedder")
    with pytest.raises(EmbedderMismatchError, match="custom-embedder-v1"):
        Memory(tmp_path)


@pytest.mark.parametrize(
    "model_id", ["hash-v1-0-0", "hash-v1--1-0", "hash-v1-x-0", "hash-v1-64", "other-model"]
)
def test_an_id_memstore_did_not_write_builds_nothing(model_id: str) -> None:
    assert shipped_embedder(model_id) is None


def test_the_command_line_reads_a_hash_folder_without_the_flag(tmp_path: Path) -> None:
    made = memstore("add", "the ledger pool is exhausted", "--embedder", "hash", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    found = memstore("search", "ledger pool", cwd=tmp_path)  # --data ./data, --embedder auto
    assert found.returncode == 0, found.stderr
    assert "ledger pool is exhausted" in found.stdout
