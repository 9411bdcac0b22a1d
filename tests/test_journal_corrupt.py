"""A damaged journal row, on both backends: named, never dropped, the rest still readable.

The policy (docs/journal.md, "A damaged row"): opening a journal whose live
row cannot be read fails with :class:`JournalCorruptError` naming the row
(table, id, position) and changes nothing; every other row still reads
(``history``, ``as_of``, ``export`` of other items); ``export(on_corrupt=...)``
salvages all that is readable into a new journal, reporting what it left out.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memstore import Config, Item, Memory, Store
from memstore.errors import JournalCorruptError
from memstore.journal import JournalBase, Lsn, SqliteJournal
from tests.conftest import FakeClock, Places
from tests.journals import Place, open_journal

DAMAGE = "{not json"


def damage(place: Place, id: str, *, current: bool = True, text: str = DAMAGE) -> None:
    """Overwrite the stored item of ``id``'s current (or first) version, below the journal."""
    where = "to_lsn IS NULL" if current else "to_lsn IS NOT NULL"
    if isinstance(place, Path):
        conn = sqlite3.connect(place)
        conn.execute(f"UPDATE versions SET item = ? WHERE id = ? AND {where}", (text, id))
        conn.commit()
        conn.close()
        return
    place.sql(f"UPDATE {{s}}.versions SET item = %s WHERE id = %s AND {where}", text, id)


def fill(place: Place) -> tuple[Lsn, Lsn]:
    """Items a, b (two versions), c; the positions before and after b's second version."""
    journal = open_journal(place)
    store = Store(Config(clock=FakeClock()))
    journal.attach(store)
    for id in ("a", "b", "c"):
        store.upsert(Item(id=id, kind="note", title=f"{id} first"))
    before = journal.head()
    store.upsert(Item(id="b", kind="note", title="b second"))
    after = journal.head()
    journal.close()
    return before, after


def reader(place: Place) -> JournalBase:
    """A journal to read from, never attached (a damaged one cannot be)."""
    if isinstance(place, Path):
        return SqliteJournal(place, readonly=True)
    return open_journal(place)


def test_open_refuses_naming_the_row(places: Places) -> None:
    place = places("journal")
    fill(place)
    damage(place, "b")
    journal = open_journal(place)
    with pytest.raises(JournalCorruptError) as got:
        journal.attach(Store())
    journal.close()
    e = got.value
    assert (e.table, e.item_id) == ("versions", "b")
    assert e.position is not None and Lsn.parse(e.position)
    assert "versions(id='b'" in str(e) and "nothing was dropped" in str(e)
    assert "A damaged row" in str(e)  # where to read how to recover
    # Nothing changed: the damaged text is still there, the file opens read-only.
    with reader(place) as j:
        assert [v.item.title for v in j.history("a") if v.item] == ["a first"]


def test_memory_refuses_to_open_and_releases_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "mem"
    with Memory(folder, embedder=None) as mem:
        mem.add("kept", id="keep")
        mem.add("hurt", id="hurt")
    damage(folder / "journal.db", "hurt")
    with pytest.raises(JournalCorruptError, match="id='hurt'"):
        Memory(folder, embedder=None)
    # The failed open left no lock behind: a writer can open the file (to salvage it).
    SqliteJournal(folder / "journal.db").close()


def test_other_rows_keep_reading(places: Places) -> None:
    place = places("journal")
    before, after = fill(place)
    damage(place, "b")
    with reader(place) as j:
        assert [v.item.title for v in j.history("c") if v.item] == ["c first"]
        with pytest.raises(JournalCorruptError, match="id='b'"):
            j.history("b")
        # Before the damaged version existed, the state reads whole.
        assert [it.title for it in j.as_of(before)] == ["a first", "b first", "c first"]
        with pytest.raises(JournalCorruptError, match="id='b'"):
            j.as_of(after)
        with pytest.raises(JournalCorruptError, match="id='b'"):
            j.export(None, io.StringIO())


def test_export_on_corrupt_salvages_the_rest(places: Places) -> None:
    place = places("journal")
    fill(place)
    damage(place, "b")
    skipped: list[JournalCorruptError] = []
    buf = io.StringIO()
    with reader(place) as j:
        assert j.export(None, buf, on_corrupt=skipped.append) == 3
    assert [(e.item_id, e.table) for e in skipped] == [("b", "versions")]
    lines = [json.loads(ln) for ln in buf.getvalue().splitlines()[1:-1]]
    assert [(ln["id"], len(ln["versions"])) for ln in lines] == [("a", 1), ("b", 1), ("c", 1)]
    # Imported into a new journal: b is back at its last readable version.
    fresh = open_journal(places("salvaged"))
    store = Store()
    fresh.attach(store)
    buf.seek(0)
    assert fresh.import_(buf) == 3
    assert {it.id: it.title for it in store.items()} == {
        "a": "a first",
        "b": "b first",
        "c": "c first",
    }
    fresh.close()


def test_a_damaged_old_version_does_not_block_opening(places: Places) -> None:
    place = places("journal")
    before, _ = fill(place)
    damage(place, "b", current=False)
    journal = open_journal(place)
    store = Store()
    journal.attach(store)  # only live rows are read to restore
    assert {it.id: it.title for it in store.items()}["b"] == "b second"
    with pytest.raises(JournalCorruptError, match="id='b'"):
        journal.as_of(before)
    # Purging the damaged item's record is a repair (it needs no parse).
    assert journal.purge(["b"]) == ["b"]
    assert [it.title for it in journal.as_of(before)] == ["a first", "c first"]
    journal.close()
    # A valid JSON item that breaks the model is damage too, named the same way.
    damage(place, "a", text=json.dumps({"id": "a", "kind": 5}))
    again = open_journal(place)
    with pytest.raises(JournalCorruptError, match="id='a'"):
        again.attach(Store())
    again.close()


def test_a_follower_meeting_a_damaged_row_applies_nothing(pg_place: Any) -> None:
    from memstore.journal._pgfeed import Commit, FeedBatch

    journal = open_journal(pg_place)
    store = Store()
    journal.attach(store)
    store.upsert(Item(id="x", kind="note", title="x as written here"))
    position = journal.feed_position()  # type: ignore[attr-defined]
    batch = FeedBatch(
        [Commit(position + 1, 7, journal.head().packed() + 1, "upsert", ("x", "y"))],
        position + 1,
        False,
        items={"x": None, "y": DAMAGE},  # x deleted elsewhere, y damaged
    )
    with pytest.raises(JournalCorruptError, match="id='y'") as got:
        journal.feed_apply(batch)  # type: ignore[attr-defined]
    assert got.value.item_id == "y"
    assert [it.title for it in store.items()] == ["x as written here"]  # x kept: nothing applied
    journal.close()


def test_a_damaged_row_past_the_first_fetch_is_named(tmp_path: Path) -> None:
    """SQLite parses the live rows a fetch (4,096) at a time: a row in a later one is named too."""
    path = tmp_path / "journal.db"
    with SqliteJournal(path, durability="off") as journal:
        store = Store()
        journal.attach(store)
        with store.batch():
            for i in range(5000):
                store.upsert(Item(id=f"n{i:05d}", kind="note", title=f"note {i}"))
    damage(path, "n04500", text='{"id": "n04500", "scope": "nowhere"}')  # JSON, not an item
    journal = SqliteJournal(path)
    with pytest.raises(JournalCorruptError, match="id='n04500'"):
        journal.attach(Store())
    journal.close()
    damage(path, "n04500", text=Item(id="n04500", kind="note", title="mended").model_dump_json())
    with SqliteJournal(path) as journal:
        store = Store()
        journal.attach(store)
        mended = store.get("n04500")
        assert len(store) == 5000 and mended is not None and mended.title == "mended"
