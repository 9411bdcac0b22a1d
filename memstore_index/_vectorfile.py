"""Durable vectors: one SQLite file holds every vector with its entry and text.

The HNSW graph beside it is a cache: it is saved with the *generation* of the
vectors it was built from and the file's *stamp* (a random mark every write
renews, so that a folder restored from a backup, or a copy written to apart,
never matches a graph saved by the other history at the same generation), and a
graph whose generation, stamp, size or checksum does not match is rebuilt from
the vectors, never trusted.

The vector file is itself a cache of the store (every vector can be embedded
again from the items), so its failures are sorted by what they allow:

* damaged (``database disk image is malformed``, ``file is not a database``, a
  row of the wrong size): :class:`VectorFileCorruptError`. A CellStore that
  meets it while opening sets the file aside (:func:`set_aside`: renamed with a
  timestamped suffix, never deleted) and starts a fresh one, which the store's
  items fill again.
* full (the disk, or ``max_bytes``): :class:`VectorFileFullError`.
* anything else (a read-only or immutable folder, a failing disk):
  :class:`VectorFileError`, whose message says what to do.

SQLite's own words are kept in every message.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memstore.errors import MemstoreError
from memstore_index.entry import IndexEntry

__all__ = [
    "VECTOR_FILE",
    "GraphFile",
    "StoredVector",
    "VectorFile",
    "VectorFileCorruptError",
    "VectorFileError",
    "VectorFileFullError",
    "VectorFileWarning",
    "set_aside",
]

VECTOR_FILE = "vectors.sqlite3"
"""The vector file's name inside a CellStore's ``path`` folder."""
_LOW_DISK = 1 << 20
"""Free bytes below which a ``disk I/O error`` is read as a full disk."""


class VectorFileError(MemstoreError, OSError):
    """The vector file could not be opened, read or written; the message says what to do.

    After a store write committed, such a failure never fails the write: the
    vectors stay in memory (search is unchanged) and wait to be saved, see
    :attr:`~memstore_index.CellStore.pending`.
    """


class VectorFileCorruptError(VectorFileError):
    """The vector file is damaged or is not a vector file (it can be rebuilt from the items)."""


class VectorFileFullError(VectorFileError):
    """The disk, or the vector file's ``max_bytes`` cap, is full."""


class VectorFileWarning(UserWarning):
    """A damaged vector file was set aside and is being rebuilt from the store's items."""


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
    """The SQLite file under a CellStore's ``path`` (WAL, one writer).

    Every method raises :class:`VectorFileError` (or a subclass), never a raw
    ``sqlite3`` error. ``max_bytes`` caps the file as ``SqliteJournal``'s does:
    a write that would grow it beyond fails with :class:`VectorFileFullError`
    and changes nothing.
    """

    def __init__(self, directory: Path, *, max_bytes: int | None = None) -> None:
        self.path = directory / VECTOR_FILE
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise VectorFileError(
                f"cannot create the vector folder {str(directory)!r}: {e.strerror}; "
                "make its parent writable, or give another path"
            ) from None
        self._db: sqlite3.Connection | None = None
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self.max_bytes = max_bytes
        except sqlite3.Error as e:
            self.close()
            raise translate(e, f"opening the vector file {str(self.path)!r}", self.path) from e

    @property
    def max_bytes(self) -> int | None:
        """The file's size cap (``None``: the disk's size)."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        db = self._conn()
        try:
            page = int(db.execute("PRAGMA page_size").fetchone()[0])
            # 2**31 - 2 pages: SQLite's own limit, i.e. no cap. A cap below the
            # file's size holds it at its size.
            pages = (1 << 31) - 2 if value is None else max(1, value // page)
            db.execute(f"PRAGMA max_page_count = {pages}")
        except sqlite3.Error as e:
            raise translate(e, f"capping {str(self.path)!r}", self.path) from e
        self._max_bytes = value

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise VectorFileError(f"the vector file {str(self.path)!r} is closed")
        return self._db

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def meta(self) -> dict[str, str]:
        try:
            return dict(self._conn().execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error as e:
            raise translate(e, f"reading {str(self.path)!r}", self.path) from e

    def set_meta(self, **values: str) -> None:
        db = self._conn()
        try:
            with db:
                db.execute("BEGIN")
                db.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    list(values.items()),
                )
        except sqlite3.Error as e:
            raise translate(e, f"writing {str(self.path)!r}", self.path) from e

    def rows(self, dim: int) -> list[StoredVector]:
        """Every stored row, by label; a row that does not parse means a damaged file."""
        try:
            return list(self._rows(dim))
        except sqlite3.Error as e:
            raise translate(e, f"reading {str(self.path)!r}", self.path) from e
        except (ValueError, TypeError) as e:  # a row no writer of this format makes
            raise VectorFileCorruptError(
                f"reading {str(self.path)!r}: the file is damaged ({e})"
            ) from e

    def _rows(self, dim: int) -> Iterator[StoredVector]:
        cur = self._conn().execute(
            "SELECT id, label, kind, subject, scope, partition, tags, stale_after, text_hash, "
            "text, vector FROM vectors ORDER BY label"
        )
        for id, label, kind, subject, scope, partition, tags, stale, th, text, blob in cur:
            # A label is a row of the vectors in memory: a whole number >= 0. SQLite's
            # INTEGER column keeps whatever a damaged file holds ('abc', 2.5, -5).
            if type(label) is not int or label < 0:
                raise ValueError(f"stored vector of {id!r} has label {label!r}")
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
        meta: Mapping[str, str] | None = None,
    ) -> None:
        """Apply puts and deletes, bump the generation and set ``meta``, in one transaction."""
        try:
            self._write(puts, deletes, generation, meta or {})
        except sqlite3.Error as e:
            raise translate(e, f"writing {str(self.path)!r}", self.path) from e

    def _write(
        self,
        puts: list[StoredVector],
        deletes: list[str],
        generation: int,
        meta: Mapping[str, str],
    ) -> None:
        db = self._conn()
        with db:
            db.execute("BEGIN")
            if deletes:
                db.executemany("DELETE FROM vectors WHERE id = ?", [(d,) for d in deletes])
            if puts:
                # One row an id: a batch that writes an id twice keeps its last row.
                puts = list({p.entry.id: p for p in puts}.values())
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
            db.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [("generation", str(generation)), *meta.items()],
            )

    def relabel(self, mapping: dict[str, int], generation: int, stamp: str) -> None:
        """Rewrite labels after a compaction, with the new generation and stamp, in one go."""
        try:
            self._relabel(mapping, generation, stamp)
        except sqlite3.Error as e:
            raise translate(e, f"writing {str(self.path)!r}", self.path) from e

    def _relabel(self, mapping: dict[str, int], generation: int, stamp: str) -> None:
        db = self._conn()
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
            db.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [("generation", str(generation)), ("stamp", stamp)],
            )


def translate(e: sqlite3.Error, what: str, path: Path) -> VectorFileError:
    """The :class:`VectorFileError` a SQLite failure means, with SQLite's words kept."""
    text = str(e)
    code = getattr(e, "sqlite_errorname", "")
    damaged = "malformed" in text or "not a database" in text
    if code in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or damaged:
        return VectorFileCorruptError(
            f"{what}: the file is damaged ({text}); reopening sets it aside and rebuilds "
            "the vectors from the store's items"
        )
    if code == "SQLITE_FULL" or "full" in text or (code.startswith("SQLITE_IOERR") and _low(path)):
        return VectorFileFullError(
            f"{what}: the disk or the vector file's size cap is full ({text}); free space "
            "(the vectors wait in memory meanwhile and are saved by the next write)"
        )
    if code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return VectorFileError(
            f"{what}: {text}; is the folder or the file read-only or immutable "
            f"(chmod, chattr +i, a read-only mount)? Make {str(path.parent)!r} writable, "
            "or open the memory in another folder"
        )
    if code.startswith("SQLITE_IOERR"):
        return VectorFileError(
            f"{what}: {text}; the disk is failing or was removed: check it, then reopen"
        )
    return VectorFileError(f"{what}: {text}")


def _low(path: Path) -> bool:
    """Whether the disk holding ``path`` is (nearly) full."""
    try:
        return shutil.disk_usage(path.parent).free < _LOW_DISK
    except OSError:
        return False


def set_aside(path: Path, now: _dt.datetime | None = None) -> Path:
    """Rename a damaged vector file (and its WAL and shared memory) out of the way.

    The new name carries a UTC timestamp (``vectors.sqlite3.damaged-20250106T090000Z``,
    with ``-2``, ``-3``... when that name is taken); nothing is deleted, so the
    file can still be examined. Returns the new path of the main file.
    """
    stamp = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    base = path.with_name(f"{path.name}.damaged-{stamp}")
    target, n = base, 1
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    try:
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
        os.replace(path, target)
    except OSError as e:
        raise VectorFileError(
            f"the vector file {str(path)!r} is damaged and could not be set aside "
            f"({e.strerror}); move it away by hand, then reopen"
        ) from None
    return target


class GraphFile:
    """The saved HNSW graph and its sidecar (generation, size, checksum)."""

    def __init__(self, directory: Path) -> None:
        self.graph = directory / "hnsw.bin"
        self.sidecar = directory / "hnsw.json"

    def valid_for(self, generation: int, count: int, stamp: str) -> bool:
        """Whether the saved graph was built from exactly this generation of vectors.

        ``stamp`` is the vector file's random write mark: the generation and
        count alone match a graph saved by another history of the same origin
        (a backup restored into the folder, a copied store).
        """
        try:
            side = json.loads(self.sidecar.read_text())
            data = self.graph.read_bytes()
        except (OSError, ValueError):
            return False
        return bool(
            side.get("generation") == generation
            and side.get("count") == count
            and side.get("stamp") == stamp
            and side.get("size") == len(data)
            and side.get("sha256") == hashlib.sha256(data).hexdigest()
        )

    def sidecar_data(self) -> dict[str, object]:
        """The sidecar's fields (empty when it is missing or unreadable)."""
        try:
            side = json.loads(self.sidecar.read_text())
        except (OSError, ValueError):
            return {}
        return side if isinstance(side, dict) else {}

    def record(self, generation: int, count: int, stamp: str, **extra: object) -> None:
        """Write the sidecar for the graph just saved (atomically), with ``extra`` fields."""
        data = self.graph.read_bytes()
        side = {
            **extra,
            "generation": generation,
            "count": count,
            "stamp": stamp,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        tmp = self.sidecar.with_suffix(".tmp")
        tmp.write_text(json.dumps(side))
        os.replace(tmp, self.sidecar)

    def invalidate(self) -> None:
        self.sidecar.unlink(missing_ok=True)
