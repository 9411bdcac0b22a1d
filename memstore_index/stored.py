"""Reading a folder's vector file without writing it: the vectors a reader may reuse.

A read-only :class:`~memstore.memory.Memory` (a reader beside a running writer)
keeps its vector index in memory, since the writer owns the folder's files.
Embedding every item again would cost minutes with a real model; instead it
takes the vectors the writer stored, matched by item id and text hash, and
embeds only what has none yet (``CellStore.offered``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memstore_index._vectorfile import VECTOR_FILE, translate
from memstore_index.embedder import Embedder

__all__ = ["stored_model", "stored_vectors"]


def stored_model(directory: str | Path) -> str | None:
    """The ``model_id`` that made ``directory``'s stored vectors, or None when it holds none.

    Read from the vector file's metadata, opened read-only: nothing is written, and a
    file that cannot be read answers None (opening the folder then reports why).
    """
    path = Path(directory) / VECTOR_FILE
    if not path.is_file():
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'model_id'").fetchone()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return str(row[0]) if row is not None else None


def stored_vectors(
    directory: str | Path, embedder: Embedder
) -> dict[tuple[str, str], npt.NDArray[np.float32]]:
    """``{(id, text_hash): vector}`` from ``directory``'s vector file, opened read-only.

    Empty when there is no file, or when its vectors were made by another
    model (or dimension) than ``embedder``'s: those must not be mixed in.

    :raises VectorFileError: the file exists but cannot be read.
    """
    path = Path(directory) / VECTOR_FILE
    if not path.is_file():
        return {}
    uri = f"{path.resolve().as_uri()}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except sqlite3.Error as e:
        raise translate(e, f"opening {str(path)!r} read-only", path) from e
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("model_id") != str(embedder.model_id) or meta.get("dim") != str(embedder.dim):
            return {}
        out: dict[tuple[str, str], npt.NDArray[np.float32]] = {}
        for id, th, blob in db.execute("SELECT id, text_hash, vector FROM vectors"):
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape == (embedder.dim,):
                out[(str(id), str(th))] = vec
        return out
    except sqlite3.Error as e:
        raise translate(e, f"reading {str(path)!r}", path) from e
    finally:
        db.close()
