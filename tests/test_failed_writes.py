"""A failed write changes nothing: real SQLite failures under every write of a ``Memory``.

Each case opens a folder, fills it, subscribes to the change hub, takes a
snapshot of everything a caller can observe (every item, lexical and vector
hits, the vector index, the stats with the journal head), makes the journal
fail for real, runs one write, and checks:

* the write raised a :class:`~memstore.errors.JournalError`;
* the snapshot is unchanged, every index agrees with the items, and no
  vector was left staged for the write that never committed;
* no subscriber saw a change;
* once the failure is gone, reopening the folder gives the state from before
  (the journal holds nothing of the failed write), and the same write succeeds.

The failures are SQLite's own: another connection holding ``BEGIN EXCLUSIVE``
(a locked database), ``PRAGMA max_page_count`` at the journal's current size
(``SQLITE_FULL``), and the journal file deleted, moved or replaced under the
open memory (which SQLite in WAL mode does not notice by itself).
"""

from __future__ import annotations

import io
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, JournalError, Memory, Store
from memstore.journal import Journal, Lsn
from memstore.journal.sqlite import backup_file
from memstore.transaction import transaction
from memstore_hub import ItemChanged
from tests.pgtest import PgPlace, postgres_module

QUERIES = ("ledger pool", "deploy friday", "rota changed", "vegetarian dinner", "imported")
BIG = " ".join(f"filler{i}" for i in range(600))  # a row that needs new pages

Op = Callable[[Memory], object]


def fill(mem: Memory) -> None:
    mem.add("ledger pool exhausted at 09:12", id="pool", partition="ops")
    mem.add("the deploy moved to friday", id="deploy", partition="ops")
    mem.add("the on-call rota changed", id="rota")
    mem.add("vegetarian dinner for two", id="diet", kind="stable_fact", confidence="high")
    mem.add("a private reminder", id="mine", private_to="alice")
    mem.link("deploy", "pool", "caused_by")


def items(store: Store) -> dict[str, dict[str, Any]]:
    """Every stored item (private and stale ones too), as its persisted fields."""
    with store.lock:  # type: ignore[attr-defined]
        return {it.id: it.model_dump() for it in store.items_locked()}


def snapshot(mem: Memory) -> dict[str, Any]:
    """What a caller can observe, and the indexes checked against the items.

    Taken right after a write returned: the vector index and the hub have
    heard it by then, whichever thread told them (read your writes).
    """
    store, cells = mem.store, mem.cells
    assert cells is not None
    store._check()
    cells._check(store)
    stats = mem.stats()
    return {
        "items": items(store),
        "hits": {q: [(h.item.id, h.score) for h in mem.search(q, partition="*")] for q in QUERIES},
        "lexical": {q: [it.id for it in store.keyword_search(q, limit=50)] for q in QUERIES},
        "vectors": {id: cells.vector(id).tolist() for id in cells.ids()},  # type: ignore[union-attr]
        "stats": (stats.items, stats.active, stats.vectors, stats.head, stats.vectors_pending),
    }


def on_record(folder: Path) -> dict[str, Any]:
    """The folder's journal, reopened: the live items and every item's history."""
    with Memory(folder, embedder=None) as mem:
        held = items(mem.store)
        return {
            "items": held,
            "history": {id: [v.lsn for v in mem.history(id)] for id in held},
            "head": mem.stats().head,
        }


def _transaction(mem: Memory) -> None:
    with transaction(mem):
        mem.add("written in a transaction " + BIG, id="txn")
        mem.delete("rota")
        mem.update("pool", content="ledger pool raised to 40 " + BIG)


OPS: dict[str, Op] = {
    "add": lambda m: m.add("the new runbook " + BIG, id="new"),
    "add a restatement": lambda m: m.add(
        "vegetarian dinner for two people " + BIG, kind="stable_fact", confidence="high"
    ),
    "add_many": lambda m: m.add_many(["first " + BIG, {"text": "second " + BIG, "id": "pool"}]),
    "add_many with progress": lambda m: m.add_many(["first " + BIG, "second"], progress=True),
    "update": lambda m: m.update("pool", content="ledger pool raised to 40 " + BIG),
    "supersede": lambda m: m.supersede("deploy", "the deploy moved to monday " + BIG),
    "delete": lambda m: m.delete("rota"),
    "expire": lambda m: m.expire("pool"),
    "refute": lambda m: m.refute("pool", "a misread graph"),
    "link": lambda m: m.link("rota", "pool", "explains"),
    "transaction": _transaction,
    "import": lambda m: m.import_(io.StringIO(EXPORT[0])),
    "purge": lambda m: m.purge(["pool", "deploy"]),
    "purge with its record": lambda m: m.journal.purge(  # type: ignore[union-attr]
        ["pool", "deploy"], record=lambda gone: Item(id="audit", kind="note", title=f"{gone}")
    ),
}
SMALL = ("delete", "expire", "refute", "link", "purge", "purge with its record")
"""Writes that may fit in the pages the file has: a size cap need not stop them."""

EXPORT: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _export(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("export")
    with Memory(folder, embedder=None) as source:
        source.add("imported runbook " + BIG, id="imported-1")
        source.add("imported rota " + BIG, id="imported-2")
        out = io.StringIO()
        source.export(out)
    EXPORT[:] = [out.getvalue()]


class Locked:
    """Another connection holds ``BEGIN EXCLUSIVE`` on the journal file."""

    def __init__(self, mem: Memory, folder: Path) -> None:
        assert mem.journal is not None
        mem.journal._conn.execute("PRAGMA busy_timeout = 20")  # type: ignore[attr-defined]
        self.mem = mem
        self.other = sqlite3.connect(folder / "journal.db", isolation_level=None)
        self.other.execute("BEGIN EXCLUSIVE")

    def end(self) -> None:
        self.other.execute("ROLLBACK")
        self.other.close()
        self.mem.journal._conn.execute("PRAGMA busy_timeout = 5000")  # type: ignore[union-attr]


class Full:
    """The journal's connection may not grow the file (``SQLITE_FULL``)."""

    def __init__(self, mem: Memory, folder: Path) -> None:
        assert mem.journal is not None
        self.conn: sqlite3.Connection = mem.journal._conn  # type: ignore[attr-defined]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        self.conn.execute(f"PRAGMA max_page_count = {pages}")

    def end(self) -> None:
        self.conn.execute("PRAGMA max_page_count = 1073741823")


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "memory"


def run_failing(folder: Path, op: Op, failure: Callable[[Memory, Path], Any]) -> None:
    """Fill, snapshot, fail ``op`` under ``failure``, compare; then reopen and retry."""
    mem = Memory(folder, embedder="hash", hub=True)
    try:
        fill(mem)
        before = snapshot(mem)  # after every change of fill() was published
        sub = mem.subscribe(topics=["change"])
        failing = failure(mem, folder)
        try:
            with pytest.raises(JournalError):
                op(mem)
        finally:
            failing.end()
        assert snapshot(mem) == before
        assert sub.get_nowait() is None, "a subscriber saw a change that never committed"
    finally:
        mem.close()
    record = on_record(folder)
    assert record["items"] == before["items"]
    assert record["head"] == before["stats"][3]
    with Memory(folder, embedder="hash") as again:  # the same write succeeds once it can
        assert snapshot(again)["items"] == before["items"]
        op(again)
        again.cells._check(again.store)  # type: ignore[union-attr]


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_write_on_a_locked_journal_changes_nothing(folder: Path, name: str) -> None:
    run_failing(folder, OPS[name], Locked)


@pytest.mark.parametrize("name", sorted(set(OPS) - set(SMALL)))
def test_a_write_on_a_full_journal_changes_nothing(folder: Path, name: str) -> None:
    run_failing(folder, OPS[name], Full)


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_write_while_another_process_holds_the_commit_lock_changes_nothing(
    pg_place: PgPlace, name: str
) -> None:
    """The same writes on a PostgreSQL journal, refused for real.

    Another connection holds the commit lock (the ``head`` row, ``FOR
    UPDATE``), as a process stuck mid-commit would; each write gives up after
    ``lock_timeout``. Nothing changes in the memory, in its hub or on record.
    """
    journal_class = postgres_module().PostgresJournal

    def journal() -> Journal:
        return journal_class(  # type: ignore[no-any-return]
            pg_place.dsn, schema=pg_place.schema, durability="off", lock_timeout=0.05
        )

    mem = Memory(journal=journal(), embedder="hash", hub=True)
    try:
        fill(mem)
        before = snapshot(mem)  # after every change of fill() was published
        sub = mem.subscribe(topics=["change"])
        with pg_place.commit_lock_held(), pytest.raises(JournalError, match="commit lock"):
            OPS[name](mem)
        assert snapshot(mem) == before
        assert sub.get_nowait() is None, "a subscriber saw a change that never committed"
    finally:
        mem.close()
    with Memory(journal=journal(), embedder="hash") as again:
        assert items(again.store) == before["items"]
        assert again.stats().head == before["stats"][3]
        OPS[name](again)  # and it goes through once the lock is free
        again.cells._check(again.store)  # type: ignore[union-attr]


# ------------------------------------------------- the file under the memory


def _delete(folder: Path) -> None:
    os.remove(folder / "journal.db")


def _move(folder: Path) -> None:
    os.rename(folder / "journal.db", folder / "journal.old.db")


def _replace_with_a_copy(folder: Path) -> None:
    # "Restore a backup" over a writer that was not stopped: the copy is the
    # same journal as of now, so nothing tells it apart but the file itself.
    copy = folder.parent / "copy.db"
    backup_file(folder / "journal.db", copy)
    os.replace(copy, folder / "journal.db")


def _delete_the_log(folder: Path) -> None:
    os.remove(folder / "journal.db-wal")


@pytest.mark.parametrize(
    "swap", [_delete, _move, _replace_with_a_copy, _delete_the_log], ids=lambda f: f.__name__
)
def test_a_journal_file_gone_from_under_the_memory_refuses_writes(
    folder: Path, swap: Callable[[Path], None]
) -> None:
    """Acknowledged means found again: a write into a file nobody will open is refused.

    SQLite in WAL mode keeps writing through its open descriptors when its
    files are unlinked or replaced: before, ``add`` returned, and reopening the
    folder showed nothing of it (or of what followed).
    """
    mem = Memory(folder, embedder="hash", hub=True)
    fill(mem)
    before = snapshot(mem)  # after every change of fill() was published
    sub = mem.subscribe(topics=["change"])
    swap(folder)
    with pytest.raises(JournalError, match="deleted, moved or replaced"):
        mem.add("written after the file went", id="late")
    with pytest.raises(JournalError, match="deleted, moved or replaced"):
        mem.delete("rota")
    with pytest.raises(JournalError, match="deleted, moved or replaced"):
        mem.history("rota")  # a new read connection would read another file
    assert snapshot(mem) == before
    assert sub.get_nowait() is None
    mem.close()
    if swap in (_replace_with_a_copy, _delete_the_log):
        # The file at the path holds everything acknowledged, and nothing more.
        assert on_record(folder)["items"] == before["items"]


def test_a_journal_head_does_not_move_for_a_failed_write(folder: Path) -> None:
    with Memory(folder, embedder=None) as mem:
        mem.add("first", id="first")
        assert mem.journal is not None
        head = mem.journal.head()
        locked = Locked(mem, folder)
        try:
            for _ in range(3):
                with pytest.raises(JournalError):
                    mem.add("never written")
        finally:
            locked.end()
        assert mem.journal.head() == head == mem.stats().head
        mem.add("second", id="second")
        assert mem.journal.head() > head
        assert mem.journal.head() == mem.journal.last_lsn()
    assert on_record(folder)["head"] > head > Lsn(0, 0)


def test_failed_writes_leave_no_staged_vectors_behind(folder: Path) -> None:
    """Each failed group embedded its texts: none of it may stay after the failure."""
    with Memory(folder, embedder="hash") as mem:
        mem.add("first", id="first")
        locked = Locked(mem, folder)
        try:
            for i in range(50):
                with pytest.raises(JournalError):
                    mem.add(f"note {i} that never lands", id=f"n{i}")
        finally:
            locked.end()
        assert mem.cells is not None
        assert mem.cells._staged == {}
        mem.add("note 7 that never lands", id="n7")  # the retry embeds or reuses, either way
        mem.cells._check(mem.store)


# ------------------------------------------------------- threads and failures


def test_threads_writing_through_a_flickering_lock_keep_every_promise(folder: Path) -> None:
    """Writers, readers and a subscriber on one Memory while the journal keeps locking.

    Another connection takes ``BEGIN EXCLUSIVE`` on and off, and the journal
    waits only a millisecond for it, so a good share of the writes fail for
    real, in every thread, at random points of add, update, delete, add_many
    and transactions. Each thread writes its own ids, so what it was told
    (the acknowledged writes, in its order) is the history of those ids.
    Then: every index agrees with the items; the subscriber saw exactly the
    acknowledged changes of each id, in order, and nothing of a failed one;
    searches never raised; and the reopened folder holds the last
    acknowledged state of every id.
    """
    mem = Memory(folder, embedder="hash", hub=True)
    assert mem.journal is not None
    mem.journal._conn.execute("PRAGMA busy_timeout = 1")  # type: ignore[attr-defined]
    sub = mem.subscribe(topics=["change"], maxsize=100_000)
    told: dict[str, list[str | None]] = {}  # id -> acknowledged contents (None: deleted)
    failures: list[str] = []
    surprises: list[BaseException] = []
    stop = threading.Event()

    held = threading.Event()

    def flicker() -> None:
        other = sqlite3.connect(folder / "journal.db", isolation_level=None, timeout=5)
        rng = random.Random(1)
        hold = 0.05  # the first hold meets the writers' first writes, however fast they are
        while not stop.is_set():
            other.execute("BEGIN EXCLUSIVE")
            held.set()
            time.sleep(hold)
            hold = rng.uniform(0.001, 0.004)
            other.execute("ROLLBACK")
            time.sleep(rng.uniform(0.001, 0.008))
        other.close()

    def writer(t: int) -> None:
        rng = random.Random(t)
        ids = [f"t{t}-{i}" for i in range(6)]

        def ack(id: str, content: str | None) -> None:
            told.setdefault(id, []).append(content)

        for step in range(80):
            op = rng.choice(["add", "add", "update", "delete", "many", "txn", "search"])
            a, b = rng.sample(ids, 2)
            text = f"thread {t} step {step} word{rng.randrange(9)}"
            try:
                if op == "add":
                    ack(a, mem.add(text, id=a, dedup=False).content)
                elif op == "update" and mem.get(a) is not None:
                    ack(a, mem.update(a, content=text).content)
                elif op == "delete":
                    if mem.delete(a):
                        ack(a, None)
                elif op == "many":
                    for it in mem.add_many([{"text": text, "id": a}, {"text": text, "id": b}]):
                        ack(it.id, it.content)
                elif op == "txn":
                    abort = rng.random() < 0.3
                    try:
                        with transaction(mem):
                            made = mem.add(text, id=a, dedup=False)
                            gone = mem.delete(b)
                            if abort:
                                raise LookupError("changed my mind")
                    except LookupError:
                        continue
                    ack(a, made.content)
                    if gone:
                        ack(b, None)
                elif op == "search":
                    mem.search(f"thread {t} word{rng.randrange(9)}", partition="*")
            except JournalError as e:
                failures.append(str(e))
            except BaseException as e:  # anything else is a bug
                surprises.append(e)

    flickering = threading.Thread(target=flicker)
    flickering.start()
    assert held.wait(10)
    writers = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    flickering.join()

    assert surprises == []
    assert failures, "the lock never refused a write: the test tested nothing"
    assert sum(map(len, told.values())) > 50, "too few writes went through"
    snapshot(mem)  # every index against the items, nothing staged
    seen: dict[str, list[str | None]] = {}
    while (event := sub.get_nowait()) is not None:
        assert isinstance(event, ItemChanged) and event.dropped == 0
        seen.setdefault(event.id, []).append(event.item.content if event.item else None)
    assert seen == told
    last = {id: contents[-1] for id, contents in told.items()}
    mem.close()
    with Memory(folder, embedder=None) as again:
        held = {id: it.content for id, it in ((id, again.get(id)) for id in last) if it}
    assert held == {id: c for id, c in last.items() if c is not None}
