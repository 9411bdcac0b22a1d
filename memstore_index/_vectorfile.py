"""Durable vectors: one SQLite file holds every vector with its entry and text.

The HNSW graph beside it is a cache: it is saved with the *generation* of the
vectors it was built from, and a graph whose generation, size or checksum does
not match is rebuilt from the vectors, never trusted.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memstore_index.entry import IndexEntry

__all__ = ["GraphFile", "StoredVector", "VectorFile"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT PRIMARY KEY,
    label INTEGER NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    scope TEXT NOT NULL,
    partition TEXT NOT NULL,
    tags TEXT NOT NULL,
    stale_after TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    vector BLOB NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class StoredVector:
    """One row of the vector file."""

    entry: IndexEntry
    label: int
    text_hash: str
    text: str
    vector: npt.NDArray[np.float32]


def text_hash(text: str) -> str:
    """The content hash that decides whether a text must be embedded again."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class VectorFile:
    """The SQLite file under a CellStore's ``path`` (WAL, one writer)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "vectors.sqlite3"
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def set_meta(self, **values: str) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                list(values.items()),
            )

    def rows(self, dim: int) -> Iterator[StoredVector]:
        cur = self._db.execute(
            "SELECT id, label, kind, subject, scope, partition, tags, stale_after, text_hash, "
            "text, vector FROM vectors ORDER BY label"
        )
        for id, label, kind, subject, scope, partition, tags, stale, th, text, blob in cur:
            vec = np.frombuffer(blob, dtype=np.float32)
            if vec.shape != (dim,):
                raise ValueError(f"stored vector of {id!r} has {vec.size} values, expected {dim}")
            deadline = _dt.datetime.fromisoformat(stale) if stale else None
            entry = IndexEntry(
                id, kind, subject, scope, partition, tuple(json.loads(tags)), deadline
            )
            yield StoredVector(entry, label, th, text, vec)

    def write(
        self,
        puts: list[StoredVector],
        deletes: list[str],
        generation: int,
    ) -> None:
        """Apply puts and deletes and bump the generation, in one transaction."""
        db = self._db
        with db:
            db.execute("BEGIN")
            if deletes:
                db.executemany("DELETE FROM vectors WHERE id = ?", [(d,) for d in deletes])
            if puts:
                # Delete first: an update may move an id to a new label.
                db.executemany("DELETE FROM vectors WHERE id = ?", [(p.entry.id,) for p in puts])
                db.executemany(
                    "INSERT INTO vectors VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            p.entry.id,
                            p.label,
                            p.entry.kind,
                            p.entry.subject,
                            p.entry.scope,
                            p.entry.partition,
                            json.dumps(list(p.entry.tags)),
                            p.entry.stale_after.isoformat() if p.entry.stale_after else "",
                            p.text_hash,
                            p.text,
                            np.ascontiguousarray(p.vector, dtype=np.float32).tobytes(),
                        )
                        for p in puts
                    ],
                )
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('generation', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(generation),),
            )

    def relabel(self, mapping: dict[str, int], generation: int) -> None:
        """Rewrite labels after a compaction, in one transaction."""
        db = self._db
        with db:
            db.execute("BEGIN")
            # Two passes through negative labels keep the UNIQUE constraint happy.
            db.executemany(
                "UPDATE vectors SET label = ? WHERE id = ?",
                [(-1 - lab, id) for id, lab in mapping.items()],
            )
            db.executemany(
                "UPDATE vectors SET label = ? WHERE id = ?",
                [(lab, id) for id, lab in mapping.items()],
            )
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('generation', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (str(generation),),
            )


class GraphFile:
    """The saved HNSW graph and its sidecar (generation, size, checksum)."""

    def __init__(self, directory: Path) -> None:
        self.graph = directory / "hnsw.bin"
        self.sidecar = directory / "hnsw.json"

    def valid_for(self, generation: int, count: int) -> bool:
        """Whether the saved graph was built from exactly this generation of vectors."""
        try:
            side = json.loads(self.sidecar.read_text())
            data = self.graph.read_bytes()
        except (OSError, ValueError):
            return False
        return bool(
            side.get("generation") == generation
            and side.get("count") == count
            and side.get("size") == len(data)
            and side.get("sha256") == hashlib.sha256(data).hexdigest()
        )

    def record(self, generation: int, count: int) -> None:
        """Write the sidecar for the graph just saved (atomically)."""
        data = self.graph.read_bytes()
        side = {
            "generation": generation,
            "count": count,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        tmp = self.sidecar.with_suffix(".tmp")
        tmp.write_text(json.dumps(side))
        os.replace(tmp, self.sidecar)

    def invalidate(self) -> None:
        self.sidecar.unlink(missing_ok=True)
