"""``embedder="local-int8"``: the local model in integer arithmetic, from Python and the shell.

The same MiniLM weights as ``"local"``, multiplied in integers
(:mod:`memstore_index._onnx_int8`). Its vectors are a space of their own, so a
folder keeps the embedder that made its vectors: opening it with the other one
is refused, and the command line says which ``--embedder`` to give.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memstore import Item, Memory
from memstore_index import EmbedderMismatchError
from memstore_index import onnx_embedder as onnx_mod
from tests.cli_harness import memstore

pytestmark = pytest.mark.skipif(not onnx_mod.AVAILABLE, reason="the embed extra is missing")

NOTES = [
    ("cat", "the cat sat on the mat by the fire"),
    ("tax", "quarterly tax filing deadline is next week"),
    ("car", "my car needs new tyres before winter"),
]


def _fill(folder: Path) -> None:
    with Memory(folder, embedder="local-int8") as mem:
        assert mem.cells is not None
        emb = mem.cells.embedder
        assert isinstance(emb, onnx_mod.OnnxMiniLMEmbedder) and emb.int8
        assert emb.model_id == onnx_mod.MODEL_ID_INT8
        mem.add_many([Item(id=i, kind="fact", title=i, content=c) for i, c in NOTES])


def test_local_int8_finds_by_meaning_and_reopens_with_itself(tmp_path: Path) -> None:
    _fill(tmp_path)
    with Memory(tmp_path, embedder="local-int8") as mem:
        # No word shared with the note: only the vectors can find it.
        hits = mem.search("an automobile wants fresh tires", limit=1)
        assert [h.item.id for h in hits] == ["car"]


def test_the_other_local_embedder_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    _fill(tmp_path)
    with pytest.raises(EmbedderMismatchError, match="rowq"):
        Memory(tmp_path, embedder="local")
    with Memory(tmp_path, embedder="local-int8") as mem:  # still whole
        assert len(mem.search("kitten resting by the fireplace", limit=3)) >= 1
        assert mem.get("cat") is not None


def test_the_command_line_takes_it_and_names_it_on_a_mismatch(tmp_path: Path) -> None:
    _fill(tmp_path / "data")  # the commands' default --data
    query = "an automobile wants fresh tires"
    found = memstore("search", query, "--embedder", "local-int8", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert "car" in found.stdout
    refused = memstore("search", "tyres", "--embedder", "local", cwd=tmp_path)
    assert refused.returncode == 1
    assert "local-int8 for all-MiniLM-L6-v2-onnx-int8-rowq" in refused.stderr
