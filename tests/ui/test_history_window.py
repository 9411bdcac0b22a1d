"""The item view reads an item's newest versions, not its whole history: same answer.

An item that always lived in the tenant's partition, never private, has its
newest 100 versions (and two more) read with a count of the rest
(``JournalBase.history_tail``); any other is read whole and filtered, as
before. The view of a past moment reads back from the newest version only as
far as the moment and the window listed around it, and its neighbours' states
then only as far as the moment (``memstore.ui.tails.state_at``). Each test
compares the view with what every version gives
(:func:`~memstore.ui.views._theirs` over ``Memory.history``, or the partition
rebuilt as of the moment), on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, Memory
from memstore.item import ThoughtLink
from memstore.journal import Lsn
from memstore.ui import views
from memstore.ui.neighbourhood import past_neighbourhood
from memstore.ui.tails import state_at
from memstore.ui.views import MAX_HISTORY, forget, item_view
from tests.journals import open_journal
from tests.pgtest import PgPlace


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    if request.param == "sqlite":
        m = Memory(tmp_path, embedder=None)
    else:
        pg: PgPlace = request.getfixturevalue("pg_place")
        m = Memory(journal=open_journal(pg), embedder=None)
    with m:
        yield m


def from_every_version(mem: Memory, partition: str, id: str) -> dict[str, Any]:
    """The history as the view built it from every version of the item."""
    h = views._history(views._theirs(mem.history(id), partition), None)
    return {"history": h["versions"], "history_older": h["older"], "history_newer": h["newer"]}


def shown(view: dict[str, Any]) -> dict[str, Any]:
    return {k: view[k] for k in ("history", "history_older", "history_newer")}


def write(mem: Memory, id: str, n: int, partition: str, **how: Any) -> None:
    for i in range(n):
        mem.add(
            Item(id=id, kind="note", content=f"{id} {partition} {i}"), partition=partition, **how
        )


def test_an_item_always_of_the_partition_is_read_from_its_tail(mem: Memory) -> None:
    write(mem, "steady", 90, "acme")
    mem.delete("steady")  # a delete and a revival inside the history
    write(mem, "steady", MAX_HISTORY, "acme")
    view = item_view(mem, "acme", "steady")
    assert shown(view) == from_every_version(mem, "acme", "steady")
    assert view["history_older"] == 91 and len(view["history"]) == MAX_HISTORY
    assert mem.journal is not None
    tail = mem.journal.history_tail("steady", MAX_HISTORY + 2)  # what the view read
    assert (tail.partition, tail.maybe_private, tail.complete) == ("acme", False, False)


def test_a_deleted_item_with_a_long_history(mem: Memory) -> None:
    write(mem, "gone", MAX_HISTORY + 20, "acme")
    mem.delete("gone")
    view = item_view(mem, "acme", "gone")
    assert view["deleted"] and shown(view) == from_every_version(mem, "acme", "gone")
    assert view["history"][-1]["op"] == "delete"
    preview = forget(mem, "acme", "gone", hard=True, key=secrets.token_bytes(32))
    assert preview["versions"] == len(mem.history("gone")) == MAX_HISTORY + 21


@pytest.mark.parametrize(
    "before",
    [
        {"partition": "beta"},  # another tenant's versions first
        {"partition": "acme", "private_to": "u1"},  # once private
    ],
)
def test_an_item_that_changed_hands_shows_only_the_partitions_versions(
    mem: Memory, before: dict[str, str]
) -> None:
    write(mem, "moved", 30, "acme")
    for i in range(40):
        mem.add(Item(id="moved", kind="note", content=f"not acme's {i}"), **before)
    write(mem, "moved", MAX_HISTORY + 5, "acme")
    view = item_view(mem, "acme", "moved")
    assert shown(view) == from_every_version(mem, "acme", "moved")
    assert view["history_older"] == 35  # acme's own older versions, not the others'
    text = repr(view)
    assert "not acme's" not in text


def test_a_short_history_is_read_whole(mem: Memory) -> None:
    write(mem, "short", 5, "acme")
    view = item_view(mem, "acme", "short")
    assert shown(view) == from_every_version(mem, "acme", "short")
    assert view["history_older"] == 0 and len(view["history"]) == 5


def at_moment(mem: Memory, partition: str, id: str, when: Lsn) -> dict[str, Any]:
    """The history of a moment as the view built it from every version of the item."""
    h = views._history(views._theirs(mem.history(id), partition), when)
    return {"history": h["versions"], "history_older": h["older"], "history_newer": h["newer"]}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def long_history(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Memory, list[Lsn]]]:
    """600 versions of "long" (a delete and a revival among them), and the head after each.

    Written once a backend and then only read, by every ``back`` below (the
    same 600 versions each test used to write again into a memory of its own).
    """
    if request.param == "sqlite":
        m = Memory(tmp_path_factory.mktemp("long"), embedder=None)
    else:
        place: PgPlace = request.getfixturevalue("pg_schemas").new("long")
        m = Memory(journal=open_journal(place), embedder=None)
    with m:
        assert m.journal is not None
        moments = []
        for i in range(600):
            if i == 300:
                m.delete("long")
            m.add(Item(id="long", kind="note", content=f"long {i}"), partition="acme")
            moments.append(m.journal.head())
        yield m, moments


@pytest.mark.parametrize("back", [0, 1, 30, 49, 50, 51, 52, 53, 120, 300, 520, 599])
def test_the_view_of_a_moment_reads_back_only_as_far_as_it_shows(
    long_history: tuple[Memory, list[Lsn]], back: int
) -> None:
    # 600 versions (a delete and a revival among them); the view of the moment ``back``
    # versions before the newest lists what the whole history gives, and reads only
    # the versions since it (and a window's worth before) when the item never changed hands.
    mem, moments = long_history
    when = moments[-1 - back]
    view = item_view(mem, "acme", "long", when=when)
    assert shown(view) == at_moment(mem, "acme", "long", when)
    (current,) = [v for v in view["history"] if v["current"]]
    assert current["item"]["content"] == f"long {599 - back}"
    versions, skipped, _ = views._history_then(mem, "acme", "long", when)
    assert skipped > 0 if back < 400 else skipped >= 0
    assert len(versions) <= 4 * (back + MAX_HISTORY + 2) + MAX_HISTORY + 2


@pytest.mark.parametrize(
    "before",
    [{"partition": "beta"}, {"partition": "acme", "private_to": "u1"}],
)
def test_the_view_of_a_moment_of_an_item_that_changed_hands(
    mem: Memory, before: dict[str, str]
) -> None:
    assert mem.journal is not None
    write(mem, "moved", 30, "acme")
    early = mem.journal.head()
    for i in range(40):
        mem.add(Item(id="moved", kind="note", content=f"not acme's {i}"), **before)
    write(mem, "moved", MAX_HISTORY + 80, "acme")
    late = mem.journal.head()
    for when in (early, late):
        view = item_view(mem, "acme", "moved", when=when)
        assert shown(view) == at_moment(mem, "acme", "moved", when)
        assert "not acme's" not in repr(view)


def test_the_state_at_a_moment_equals_the_one_found_in_every_version(mem: Memory) -> None:
    # 120 versions (deletes and revivals among them): at every moment, the state read back
    # from the newest versions is the one a look through the whole history finds.
    assert mem.journal is not None
    moments = [mem.journal.head()]  # before the item existed
    for i in range(120):
        if i % 37 == 36:
            mem.delete("many")
            moments.append(mem.journal.head())
        mem.add(Item(id="many", kind="note", content=f"many {i}"), partition="acme")
        moments.append(mem.journal.head())
    every = mem.history("many")
    for when in moments:
        want = next((v.item for v in every if v.visible_at(when)), None)
        assert state_at(mem, "many", when) == want, when
    assert state_at(mem, "never", moments[-1]) is None


def test_a_past_neighbourhood_of_long_histories_equals_the_partition_rebuilt(mem: Memory) -> None:
    # Neighbours written many times since the moment (and before it): their state then is
    # read back from their newest versions, the same as rebuilding the whole partition.
    assert mem.journal is not None
    link = ThoughtLink(to_id="hub", relation="explains")
    mem.add(Item(id="hub", kind="note", content="the hub"), partition="acme")
    for n in range(4):
        for i in range(20):
            mem.add(
                Item(id=f"s{n}", kind="note", content=f"s{n} {i}", links=[link]), partition="acme"
            )
    then = mem.journal.head()
    for n in range(4):
        for i in range(40 * n):  # s0 not since; s3 120 times
            mem.update(f"s{n}", content=f"s{n} later {i}")
    hood = past_neighbourhood(mem, "acme", "hub", then)
    rebuilt = {it.id: it for it in mem.as_of(then, partition="acme")}
    assert hood.complete and sorted(hood.items) == ["hub", "s0", "s1", "s2", "s3"]
    assert all(hood.items[id] == rebuilt[id] for id in hood.items)
    assert hood.items["s3"].content == "s3 19"
