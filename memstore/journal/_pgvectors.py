"""Vectors beside the versions: what a writer stores, what a follower reads back.

A writer's CellStore embeds a group's texts in its before-commit listener;
the journal's commit hook then finds each prepared vector
(:meth:`~memstore_index.CellStore.prepared_for`) and stores the newest one of
each id in the same transaction as the versions, keyed by ``(id, model)``
with the text's hash. A follower reads the vectors of the ids it brings up
to date and offers them to its own CellStore
(:meth:`~memstore_index.CellStore.offered`), which takes a vector only when
the hash matches the text it would embed: a vector can be missing or stale
(another model, a newer text), never wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from memstore.config import Change
from memstore.journal._pgsql import Queries, ids_json

if TYPE_CHECKING:
    from memstore.journal._pgconn import Conn
    from memstore_index import CellStore

__all__ = ["GroupVectors", "Vector", "read_vectors", "vector_bytes", "vectors_for"]

Vector = npt.NDArray[np.float32]


@dataclass(slots=True)
class GroupVectors:
    """The vectors a write group stores, and the ids whose vectors it drops."""

    puts: list[tuple[str, str, str, int, bytes]]
    deleted: list[str]


def vectors_for(changes: Sequence[Change], cells: CellStore) -> GroupVectors:
    """The newest fresh vector of each id a group leaves embedded; ids it deletes."""
    model, dim = str(cells.embedder.model_id), cells.dim
    final: dict[str, tuple[str, str, str, int, bytes] | None] = {}
    for c in changes:
        if c.op == "delete" or c.item is None:
            final[c.id] = None
            continue
        p = cells.prepared_for(c.item)
        if p is not None and p.vector.size:
            final[c.id] = (c.id, model, p.text_hash, dim, vector_bytes(p.vector))
        else:  # text unchanged (stored already), or not embedded: nothing to store
            final.pop(c.id, None)
    puts = [v for v in final.values() if v is not None]
    return GroupVectors(puts, [id for id, v in final.items() if v is None])


def vector_bytes(vec: npt.ArrayLike) -> bytes:
    """A vector as the ``vectors`` table stores it: little-endian float32."""
    return np.ascontiguousarray(vec, dtype="<f4").tobytes()


def read_vectors(
    conn: Conn, q: Queries, model: tuple[str, int], ids: Iterable[str]
) -> dict[tuple[str, str], Vector]:
    """The stored vectors of ``ids`` for ``model``: ``(id, text_hash)`` to a float32 row."""
    name, dim = model
    out: dict[tuple[str, str], Vector] = {}
    params = {"model": name, "dim": dim, "ids": ids_json(ids)}
    for id, text_hash, blob in conn.execute(q.vectors_of, params):
        vec = np.frombuffer(blob, dtype="<f4")
        if vec.shape == (dim,):
            out[(str(id), str(text_hash))] = vec.astype(np.float32)
    return out
