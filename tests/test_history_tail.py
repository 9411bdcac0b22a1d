"""``JournalBase.history_tail``: the newest versions of an item and a summary, on both backends.

Checked against :meth:`~memstore.journal.JournalBase.history` (every version)
after random writes: the tail is the history's last ``newest`` versions, the
count its length, and the summary says where the versions lived (one
partition, or several) and whether one was private.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memstore import Item, Store
from memstore.errors import InvalidItemError
from memstore.journal import JournalBase, Version
from memstore.tags import partition_from_tags
from tests.journals import Place, open_journal
from tests.pgtest import PgPlace


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "sqlite":
        return tmp_path / "journal.db"
    pg: PgPlace = request.getfixturevalue("pg_place")
    return pg


def summary(versions: list[Version]) -> tuple[str | None, bool]:
    """Where every version lived (a delete: where the item it ended was), and any private."""
    places: set[str] = set()
    last = ""
    private = False
    for v in versions:
        if v.item is not None:
            last = partition_from_tags(v.item.tags)
            private = private or v.item.scope == "private"
        places.add(last)
    return (places.pop() if len(places) == 1 else None), private


def check(journal: JournalBase, id: str) -> None:
    every = journal.history(id)
    for newest in (1, 2, 3, 7, 100):
        tail = journal.history_tail(id, newest)
        assert tail.versions == every[-newest:], (id, newest)
        assert tail.total == len(every)
        assert tail.complete == (newest >= len(every))
        assert (tail.partition, tail.maybe_private) == summary(every), id


def test_the_tail_is_the_end_of_the_history(place: Place) -> None:
    rng = random.Random(7)
    store = Store()
    journal = open_journal(place)
    journal.attach(store)
    try:
        ids = ["steady", "mover", "hidden", "gone"]
        for step in range(120):
            id = rng.choice(ids)
            partition = "acme" if id == "steady" else rng.choice(["acme", "beta", ""])
            tags = [f"tenant/{partition}"] if partition else []
            if id == "hidden" and rng.random() < 0.3:
                item = Item(
                    id=id, kind="note", content=f"v{step}", scope="private", tags=[*tags, "user:u1"]
                )
            else:
                item = Item(id=id, kind="note", content=f"v{step}", tags=tags)
            if id != "steady" and store.get(id) is not None and rng.random() < 0.2:
                store.delete(id)
            else:
                store.upsert(item)
        for id in ids:
            check(journal, id)
        steady, mover = journal.history_tail("steady", 1), journal.history_tail("mover", 1)
        assert (steady.partition, steady.maybe_private) == ("acme", False)
        assert mover.partition is None and not mover.complete
        assert journal.history_tail("hidden", 1).maybe_private
        assert any(v.op == "delete" for v in journal.history("gone"))
        never = journal.history_tail("never-written", 5)
        assert (never.versions, never.total, never.partition) == ([], 0, None)
        with pytest.raises(InvalidItemError):
            journal.history_tail("steady", 0)
    finally:
        journal.close()
