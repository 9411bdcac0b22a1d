"""The vector file under damage and refusal: set aside and rebuilt, or a clear MemstoreError.

The vectors are a cache of the store (every one can be embedded again from
the journal's items), so a damaged ``vectors.sqlite3`` must never stop a
``Memory`` from opening: it is renamed with a timestamped suffix (kept, not
deleted), a warning names both paths, and the vectors are rebuilt. What
cannot be repaired that way (a read-only or immutable folder, a full disk) is
a :class:`~memstore_index.VectorFileError` that says what to do, never a raw
``sqlite3`` error. Tests run as root, where ``chmod`` stops nothing: a folder
is made read-only with ``chattr +i``, as ``tests/test_journal.py`` does.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstore import Memory, MemstoreError, Store
from memstore.item import Item
from memstore_index import (
    CellStore,
    HashEmbedder,
    IndexEntry,
    VectorFileCorruptError,
    VectorFileError,
    VectorFileFullError,
    VectorFileWarning,
)
from tests.test_journal import _can_create

DIM = 32
VECTORS = "vectors.sqlite3"


@contextlib.contextmanager
def immutable(folder: Path) -> Iterator[None]:
    """The folder made read-only for root too (chattr +i), as the journal tests do."""
    root = os.geteuid() == 0
    if root:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
    try:
        assert not _can_create(folder / "probe")
        yield
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            folder.chmod(0o755)


def filled_memory(folder: Path, n: int = 40) -> list[str]:
    with Memory(folder, embedder=HashEmbedder(dim=DIM)) as mem:
        items = mem.add_many(f"note {i} about the ledger pool and item {i}" for i in range(n))
    return [it.id for it in items]


def damage_truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def damage_random(path: Path) -> None:
    path.write_bytes(os.urandom(max(path.stat().st_size, 8192)))


@pytest.mark.parametrize("damage", [damage_truncate, damage_random], ids=["truncated", "random"])
def test_memory_opens_over_a_damaged_vector_file_and_rebuilds_it(
    tmp_path: Path, damage: object
) -> None:
    ids = filled_memory(tmp_path)
    path = tmp_path / VECTORS
    assert callable(damage)
    damage(path)
    broken = path.read_bytes()
    with pytest.warns(VectorFileWarning) as caught:
        mem = Memory(tmp_path, embedder=HashEmbedder(dim=DIM))
    with mem:
        assert mem.cells is not None
        moved = mem.cells.set_aside_as
        assert moved is not None and moved.name.startswith(VECTORS + ".damaged-")
        message = str(caught[0].message)
        assert str(path) in message and str(moved) in message  # both paths named
        assert moved.read_bytes() == broken  # set aside, never deleted
        assert sorted(mem.cells.ids()) == sorted(ids)  # re-embedded from the items
        mem.cells._check(mem.store, vectors=True)
        assert mem.stats().vectors == len(ids)
        assert mem.cells.search("ledger pool item 7", 1)[0][0].id in ids
    # The rebuilt file is sound: the next open neither warns nor embeds.
    with Memory(tmp_path, embedder=HashEmbedder(dim=DIM)) as again:
        assert again.cells is not None and again.cells.set_aside_as is None
        again.cells._check(again.store, vectors=True)


def test_a_second_damage_gets_a_second_name(tmp_path: Path) -> None:
    path = tmp_path / VECTORS
    moved = []
    for _ in range(2):
        path.write_bytes(os.urandom(4096))
        with pytest.warns(VectorFileWarning):
            cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
        moved.append(cells.set_aside_as)
        cells.close()
    assert moved[0] != moved[1] and all(m is not None and m.exists() for m in moved)


def test_a_row_of_the_wrong_size_is_damage(tmp_path: Path) -> None:
    cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    cells.upsert(IndexEntry("a"), "alpha")
    cells.close()
    with sqlite3.connect(tmp_path / VECTORS) as db:
        db.execute("UPDATE vectors SET vector = x'00'")
    db.close()
    with pytest.warns(VectorFileWarning, match="damaged"):
        cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    assert len(cells) == 0
    cells.close()


@pytest.mark.parametrize(
    "label", [-5, "'abc'", 2.5, "x'01'"], ids=["negative", "text", "real", "blob"]
)
def test_a_row_whose_label_is_not_a_row_number_is_damage(tmp_path: Path, label: object) -> None:
    """A label is a row of the vectors in memory; SQLite's INTEGER column keeps anything.

    Such a file is set aside and rebuilt like any damaged one, not an IndexError
    or TypeError out of ``Memory()``.
    """
    ids = filled_memory(tmp_path, n=5)
    with sqlite3.connect(tmp_path / VECTORS) as db:
        db.execute(f"UPDATE vectors SET label = {label} WHERE id = ?", (ids[2],))
    db.close()
    with pytest.warns(VectorFileWarning, match="label"):
        mem = Memory(tmp_path, embedder=HashEmbedder(dim=DIM))
    with mem:
        assert mem.cells is not None and mem.cells.set_aside_as is not None
        assert mem.cells.set_aside_as.exists()  # kept, not deleted
        assert sorted(mem.cells.ids()) == sorted(ids)  # rebuilt from the items
        mem.cells._check(mem.store, vectors=True)


def test_a_failed_open_leaves_no_connection_behind(tmp_path: Path) -> None:
    """An embedder mismatch refuses the file and closes it: the next open is not 'locked'."""
    CellStore(HashEmbedder(dim=DIM), path=tmp_path).close()
    with pytest.raises(MemstoreError, match="made by"):
        CellStore(HashEmbedder(dim=DIM + 1), path=tmp_path)
    (tmp_path / VECTORS).write_bytes(b"")  # would be 'database is locked' with a leak
    CellStore(HashEmbedder(dim=DIM), path=tmp_path).close()


def test_an_immutable_folder_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    with immutable(folder):
        with pytest.raises(VectorFileError, match="read-only or immutable") as err:
            CellStore(HashEmbedder(dim=DIM), path=folder)
        assert not isinstance(err.value, sqlite3.Error)
        with pytest.raises(VectorFileError, match="cannot create the vector folder"):
            CellStore(HashEmbedder(dim=DIM), path=folder / "sub")
    assert list(folder.iterdir()) == []


def test_an_existing_file_in_an_immutable_folder_is_a_clear_error(tmp_path: Path) -> None:
    cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    cells.upsert(IndexEntry("a"), "alpha")
    cells.close()
    for side in tmp_path.glob(VECTORS + "-*"):
        side.unlink()
    with immutable(tmp_path), pytest.raises(VectorFileError) as err:
        CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    assert "read-only or immutable" in str(err.value)
    assert not isinstance(err.value, VectorFileCorruptError)  # not set aside: not damage
    assert (tmp_path / VECTORS).exists()


def test_a_full_vector_file_is_a_full_error_from_flush(tmp_path: Path) -> None:
    """``max_bytes`` caps the file, as the journal's does: full, named, nothing raw."""
    cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path, max_bytes=64 * 1024)
    for i in range(2000):
        cells.upsert(IndexEntry(f"n{i}"), f"note {i} " + "x" * 200)
        if cells.pending:
            break
    assert cells.pending, "the cap never filled"
    with pytest.raises(VectorFileFullError, match="full"):
        cells.flush()
    cells.max_bytes = None
    assert cells.flush() > 0 and cells.pending == 0
    cells._check()
    cells.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real, tiny filesystem (a 512 KiB tmpfs) for the test; skipped where mount is refused."""
    where = tmp_path / "disk"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_really_full_disk_keeps_the_vectors_pending_then_drains(small_disk: Path) -> None:
    store = Store()
    cells = CellStore(HashEmbedder(dim=DIM), path=small_disk)
    cells.attach(store)
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # fill the disk: the vector file has no room left
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    for i in range(300):
        store.upsert(Item(kind="note", title=f"note {i}", content="x" * 300))
        if cells.pending:
            break
    assert cells.pending, "the disk never filled"
    cells._check(store, vectors=True)  # the index in memory is whole
    with pytest.raises(VectorFileFullError, match="full") as err:
        cells.flush()
    assert not isinstance(err.value, sqlite3.Error)
    filler.unlink()
    cells.flush()
    assert cells.pending == 0
    cells._check(store, vectors=True)
    cells.close()
