"""Restore loads the lexical index saved beside the journal, and only when it is current.

A journal closing over a large store saves the store's lexical index beside
its file; the next attach loads it instead of re-tokenising every item. The
saved index carries the journal head it was saved at: after any later write,
a crash before the next close, a damaged file or a different set of items,
it is ignored and the items are indexed as usual. Either way the restored
store must be the same as one restored without it.
"""

from __future__ import annotations

import io
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memstore import Config, Item, Memory, Store
from memstore._lexindex import LexicalIndex
from memstore.errors import MemstoreError
from memstore.journal import SqliteJournal
from memstore.journal import base as journal_base
from memstore.journal.sqlite import LEXICON_SUFFIX

QUERIES = [
    "invoice timeout",
    "payment timeout",
    "paymnet",
    "rollout 7",
    "orders table lock",
    "api-3",
    "build 12",
]


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_base, "LEXICON_SNAPSHOT_MIN_ITEMS", 30)


def _fill(path: Path, n: int, start: int = 0, word: str = "payment") -> None:
    with SqliteJournal(path) as journal:
        store = Store()
        journal.attach(store)
        with store.batch():
            for i in range(start, start + n):
                store.upsert(
                    Item(
                        id=f"n{i}",
                        kind="observation",
                        title=f"deploy {i % 7} of api-{i % 5}",
                        content=f"rollout {i % 9} of build {i}: {word} timeout on the orders "
                        "table lock",
                    )
                )


def _open(path: Path) -> tuple[SqliteJournal, Store]:
    journal, store = SqliteJournal(path), Store()
    journal.attach(store)
    return journal, store


def _answers(store: Store) -> list[list[tuple[str, float]]]:
    return [[(it.id, hit.score) for it, hit in store.keyword_hits(q)[0]] for q in QUERIES]


def _reference(path: Path, tmp: Path) -> list[list[tuple[str, float]]]:
    """The answers of a restore that re-tokenises (a copy without the saved index)."""
    copy = tmp / "reference.db"
    shutil.copy(path, copy)
    journal, store = _open(copy)
    try:
        assert not (tmp / f"reference.db{LEXICON_SUFFIX}").exists()
        return _answers(store)
    finally:
        journal.close()


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = LexicalIndex.from_snapshot.__func__  # type: ignore[attr-defined]

    def spy(cls: type[LexicalIndex], *a: object, **kw: object) -> LexicalIndex:
        calls.append(1)
        return real(cls, *a, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(LexicalIndex, "from_snapshot", classmethod(spy))
    return calls


def test_a_closed_large_store_is_restored_from_its_saved_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.db"
    _fill(path, 60)
    saved = Path(f"{path}{LEXICON_SUFFIX}")
    assert saved.exists(), "closing a large store saves its lexical index"
    expected = _reference(path, tmp_path)
    calls = _loads(monkeypatch)
    journal, store = _open(path)
    try:
        assert calls == [1]
        assert store._lex.lexicon is not None and len(store._lex) == 60
        store._check()
        assert _answers(store) == expected
        store.upsert(Item(id="late", kind="observation", content="a late payment timeout"))
        assert "late" in [it.id for it in store.keyword_search("late payment")]
    finally:
        journal.close()


def test_a_stale_or_damaged_saved_index_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    _fill(path, 40)
    saved = Path(f"{path}{LEXICON_SUFFIX}")
    old = saved.read_bytes()
    _fill(path, 10, start=30, word="invoice")  # new text for the same ids, saved at close
    saved.write_bytes(old)  # as if the process had died before that close
    expected = _reference(path, tmp_path)
    journal, store = _open(path)
    try:
        assert [it.id for it in store.keyword_search("invoice", limit=20)] != []
        store._check()
        assert _answers(store) == expected
    finally:
        journal.close()
    saved.write_bytes(b"\x00" * 100)  # damaged
    journal, store = _open(path)
    try:
        store._check()
        assert _answers(store) == expected
    finally:
        journal.close()


def test_a_small_store_saves_nothing_and_drops_an_old_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    _fill(path, 40)
    saved = Path(f"{path}{LEXICON_SUFFIX}")
    assert saved.exists()
    journal, store = _open(path)
    for i in range(20):
        store.delete(f"n{i}")
    journal.close()
    assert not saved.exists(), "below the threshold the index is rebuilt, not kept"


def _as_if_killed_here(saved: Path) -> Callable[[], None]:
    """What the saved index is now, to put back after a close (a process killed here)."""
    was = saved.read_bytes() if saved.exists() else None

    def put_back() -> None:
        if was is None:
            saved.unlink(missing_ok=True)
        else:
            saved.write_bytes(was)

    return put_back


def test_an_import_below_the_head_then_a_crash_does_not_leave_a_stale_saved_index(
    tmp_path: Path,
) -> None:
    # An import keeps the versions' own stamps, so it can change an item's
    # text without moving the journal head the saved index is checked against.
    path, other = tmp_path / "journal.db", tmp_path / "other.db"
    with SqliteJournal(path) as journal, SqliteJournal(other) as elsewhere:
        store, theirs = Store(), Store()
        journal.attach(store)
        elsewhere.attach(theirs)
        store.upsert(Item(id="n0", kind="observation", content="payment timeout"))
        time.sleep(0.005)  # stamps are milliseconds: theirs is newer than ours...
        theirs.upsert(Item(id="n0", kind="observation", content="zebra crossing"))
        time.sleep(0.005)
        with store.batch():  # the head moves past the other journal's stamp
            for i in range(1, 60):
                store.upsert(Item(id=f"n{i}", kind="observation", content=f"payment {i}"))
        exported = io.StringIO()
        elsewhere.export(None, exported)
    saved = Path(f"{path}{LEXICON_SUFFIX}")
    assert saved.exists()
    journal, store = _open(path)
    head = journal.head()
    assert journal.import_(io.StringIO(exported.getvalue())) == 1
    assert journal.head() == head, "the import kept its own stamps"
    assert [it.id for it in store.keyword_search("zebra")] == ["n0"]
    put_back = _as_if_killed_here(saved)
    journal.close()
    put_back()
    journal, store = _open(path)
    try:
        assert [it.id for it in store.keyword_search("zebra")] == ["n0"]
        assert store.keyword_search("payment timeout")[:1] != ["n0"]
        store._check()
    finally:
        journal.close()


def test_closing_inside_a_write_group_saves_no_index_of_writes_not_on_record(
    tmp_path: Path,
) -> None:
    # A Memory closed inside a batch of its own thread refuses the batch (its
    # writes are never recorded), but the close used to save the lexical index
    # first, with the batch's writes in it, at the unchanged head: the next
    # open took it as current and found items by words they do not hold.
    _fill(tmp_path / "journal.db", 60)
    mem = Memory(tmp_path, embedder=None)
    with pytest.raises(MemstoreError, match="closed"), mem.store.batch():
        mem.update("n5", content="zebracorn stampede")
        mem.close()
    with Memory(tmp_path, embedder=None) as again:
        assert "zebracorn" not in again.get("n5").content  # type: ignore[union-attr]
        assert again.store.keyword_search("zebracorn") == []
        again.store._check()


class _OvertakenReader(SqliteJournal):
    """A read-only journal whose restore is overtaken by the writer of its file.

    Right after the reader has read the live items, ``writer_step`` runs: the
    writer (another process, in life; another journal object here) writes once
    more and closes, saving its lexical index at the head that write made.
    """

    def __init__(self, path: Path, writer_step: Callable[[], None]) -> None:
        super().__init__(path, readonly=True)
        self._writer_step: Callable[[], None] | None = writer_step

    def _restore_items(self) -> list[Item]:
        items = super()._restore_items()
        step, self._writer_step = self._writer_step, None
        if step is not None:
            step()
        return items


def test_a_reader_overtaken_by_a_closing_writer_does_not_load_its_newer_index(
    tmp_path: Path,
) -> None:
    # A read-only attach read the items, then the head in a read of its own,
    # and loaded the saved index carrying that head: a writer that wrote and
    # closed between the two reads left an index of its last write beside
    # items from before it, and the reader found n5 by words n5 did not hold.
    path = tmp_path / "journal.db"
    _fill(path, 60)
    writer, store = _open(path)

    def write_and_close() -> None:
        store.upsert(Item(id="n5", kind="observation", content="zebracorn stampede"))
        writer.close()

    reader, seen = _OvertakenReader(path, write_and_close), Store()
    try:
        reader.attach(seen)
        assert "zebracorn" not in seen.get("n5").content  # type: ignore[union-attr]
        assert seen.keyword_search("zebracorn") == []
        seen._check()
    finally:
        reader.close()


def test_a_saved_index_of_other_id_words_is_not_loaded(tmp_path: Path) -> None:
    # Which ids have their words indexed is the store's config (id_prefix,
    # skip_id_text). A saved index made under another config was loaded as it
    # was: a store told not to index ids still found items by their id's words.
    path = tmp_path / "journal.db"
    with SqliteJournal(path) as journal:
        store = Store()
        journal.attach(store)
        store.upsert_many(
            [Item(id=f"zebracorn-{i}", kind="note", title=f"deploy {i}") for i in range(60)]
        )
        assert len(store.keyword_search("zebracorn", limit=100)) == 60
    assert Path(f"{path}{LEXICON_SUFFIX}").exists()
    journal, store = SqliteJournal(path), Store(Config(skip_id_text=lambda id: True))
    journal.attach(store)
    try:
        assert store.keyword_search("zebracorn") == []
        assert len(store.keyword_search("deploy", limit=100)) == 60
        store._check()
    finally:
        journal.close()
