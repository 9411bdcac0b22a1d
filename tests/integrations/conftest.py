"""Fixtures for the LangGraph store tests: a deterministic embedder and stores to test.

``CharacterEmbeddings`` is the seeded character-projection embedder of
LangGraph's own store tests (libs/checkpoint-sqlite/tests/test_store.py,
MIT licence, adapted): texts sharing characters get similar vectors.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base", reason='needs "memstore-engine[langgraph]"')

from langchain_core.embeddings import Embeddings

from memstore.integrations.langgraph import MemstoreStore


class CharacterEmbeddings(Embeddings):
    """Character-frequency embeddings through seeded random projections."""

    def __init__(self, dims: int = 50, seed: int = 42) -> None:
        self._rng = random.Random(seed)
        self.dims = dims
        self.calls = 0
        self._proj: dict[str, list[float]] = defaultdict(
            lambda: [self._rng.gauss(0, 1 / math.sqrt(self.dims)) for _ in range(self.dims)]
        )

    def _embed_one(self, text: str) -> list[float]:
        counts = Counter(text)
        total = sum(counts.values())
        if total == 0:
            return [0.0] * self.dims
        vec = [0.0] * self.dims
        for ch, n in counts.items():
            for i, p in enumerate(self._proj[ch]):
                vec[i] += n / total * p
        norm = math.sqrt(sum(x * x for x in vec))
        return [x / norm for x in vec] if norm > 0 else vec

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._embed_one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed_one(text)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CharacterEmbeddings) and self.dims == other.dims

    __hash__ = None  # type: ignore[assignment]


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemstoreStore]:
    """A store without an index, in memory and on a SQLite journal."""
    where = None if request.param == "memory" else tmp_path / "lg"
    with MemstoreStore(where) as s:
        yield s
