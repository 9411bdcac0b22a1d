"""A bare Store whose journal is closed, detached or attached inside ``store.batch()``.

Only the batch's own thread can do it (a detach waits for the store's lock).
Before, the batch then committed with no commit hook: its writes were
acknowledged and published, but never recorded, and gone at the next open.
Now the batch fails with :class:`JournalClosedError` and the store, its
indexes, its listeners and the journal are as they were before it. A
``Memory`` already refused this (``tests/test_restore_lexicon.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memstore import Item, Store
from memstore.errors import JournalClosedError, JournalError
from memstore.journal import JournalBase, Lsn
from tests.journals import Place, open_journal


def _dump(store: Store) -> list[str]:
    return sorted(it.model_dump_json() for it in store.items())


def _restored(place: Place) -> list[str]:
    journal, store = open_journal(place), Store()
    try:
        journal.attach(store)
        return _dump(store)
    finally:
        journal.close()


@pytest.mark.parametrize("stop", [JournalBase.close, JournalBase.detach])
def test_a_batch_whose_journal_stops_inside_it_is_refused_whole(
    place: Place, stop: Callable[[JournalBase], None]
) -> None:
    store, journal = Store(), open_journal(place)
    journal.attach(store)
    told: list[str] = []
    store.add_change_listener(lambda op, item, id, kind: told.append(id))
    store.upsert(Item(id="kept", kind="note", title="the deploy runs on Fridays"))
    store.upsert(Item(id="changed", kind="note", title="the old wording"))
    before, head, heard = _dump(store), journal.head(), list(told)
    with pytest.raises(JournalClosedError, match=r"inside this batch.*undone"), store.batch():
        store.upsert(Item(id="new", kind="note", title="zebracorn migration plan"))
        store.upsert(Item(id="changed", kind="note", title="the new wording"))
        stop(journal)
        store.delete("kept")
    assert _dump(store) == before
    assert [it.id for it in store.keyword_search("zebracorn")] == []
    assert [it.id for it in store.keyword_search("deploy fridays")] == ["kept"]
    assert told == heard  # no listener heard of the undone batch
    store._check()
    if stop is JournalBase.detach:
        assert journal.head() == head
        journal.close()
    assert _restored(place) == before  # the journal holds what the store holds
    store.upsert(Item(id="later", kind="note", title="a write with no journal"))
    assert store.get("later") is not None  # detached for good: the store goes on alone


def test_a_journal_attached_inside_a_batch_is_refused_and_adopts_nothing(place: Place) -> None:
    """Before: the journal adopted the batch's writes before they were made, and kept
    them when the batch was undone: the next open brought back what never happened."""
    store = Store()
    store.upsert(Item(id="kept", kind="note", title="written before the batch"))
    journal = open_journal(place)
    try:
        with pytest.raises(RuntimeError, match="the batch failed"), store.batch():
            store.upsert(Item(id="undone", kind="note", title="written inside the batch"))
            with pytest.raises(JournalError, match=r"inside store\.batch\(\)"):
                journal.attach(store)
            raise RuntimeError("the batch failed")
        assert [it.id for it in store.items()] == ["kept"]
        journal.attach(store)  # after the batch: it adopts what the store holds
        assert journal.head() > Lsn(0, 0)
    finally:
        journal.close()
    assert _restored(place) == _dump(store)
