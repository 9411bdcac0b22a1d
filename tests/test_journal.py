"""The journal on both backends: restore, versions, as-of reads, purge, export/import.

Every test taking ``place`` (or ``places``) runs twice: against an SQLite file
and against a PostgreSQL schema (:mod:`tests.journals`). The tests about
SQLite files as such (bad files, the single-writer lock, the size cap, the
vector file beside the journal) take ``db`` and run on SQLite only.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import (
    Config,
    Item,
    JournalCorruptError,
    JournalError,
    JournalFullError,
    JournalLockedError,
    JournalSchemaError,
    MemstoreError,
    Store,
    ThoughtLink,
)
from memstore.errors import InvalidItemError, JournalClosedError
from memstore.journal import EXPORT_FORMAT, Hlc, Journal, JournalBase, Lsn, SqliteJournal
from memstore.journal.hlc import COUNTER_BITS, MAX_COUNTER
from memstore_index import CellStore, HashEmbedder
from tests.conftest import FakeClock, Places
from tests.journals import (
    Place,
    allow_writes,
    count_rows_like,
    open_journal,
    refuse_writes,
    set_schema_version,
)


class Wall:
    """A millisecond clock for stamps that moves only when told to (or backwards)."""

    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def state(store: Store) -> dict[str, dict[str, object]]:
    """Every stored item (private and stale included), as its persisted fields."""
    with store.lock:  # type: ignore[attr-defined]
        return {it.id: it.model_dump() for it in store.items_locked()}


def open_store(place: Place, **kwargs: object) -> tuple[JournalBase, Store]:
    journal = open_journal(place, **kwargs)
    store = Store(Config(clock=FakeClock()))
    journal.attach(store)
    return journal, store


@pytest.fixture
def place(places: Places) -> Place:
    return places("journal")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """An SQLite journal file (for the tests about SQLite files themselves)."""
    return tmp_path / "journal.db"


@pytest.fixture
def pair(place: Place) -> Iterator[tuple[JournalBase, Store]]:
    journal, store = open_store(place, wall=Wall())
    yield journal, store
    journal.close()


def note(title: str, **kw: object) -> Item:
    return Item(kind="note", title=title, **kw)  # type: ignore[arg-type]


# ----------------------------------------------------------------- restart


def test_restart_restores_every_kind_of_write(place: Place) -> None:
    journal, store = open_store(place)
    a = store.upsert(note("alpha", tags=["tenant/acme"]))
    b = store.upsert(note("beta"))
    store.upsert(Item(id=a.id, kind="note", title="alpha, revised", tags=["tenant/acme"]))
    store.add_link(a.id, ThoughtLink(to_id=b.id, relation="supports", weight=0.5))
    c = store.upsert(note("gamma"))
    store.expire(c.id)
    d = store.upsert(note("delta"))
    store.delete(d.id)
    new = store.supersede(b.id, note("beta, replaced"))
    private = store.upsert(Item(kind="note", title="mine", scope="private", tags=["user:abc"]))
    before = state(store)
    journal.close()

    journal2, store2 = open_store(place)
    assert state(store2) == before
    assert store2.get(a.id) is not None and store2.get(a.id).title == "alpha, revised"  # type: ignore[union-attr]
    assert store2.get(d.id) is None
    assert new.id in before and private.id in before
    store2._check()
    journal2.close()


def test_write_after_restart_continues_history(place: Place) -> None:
    journal, store = open_store(place)
    a = store.upsert(note("one"))
    journal.close()
    journal, store = open_store(place)
    store.upsert(Item(id=a.id, kind="note", title="two"))
    titles = [v.item.title for v in journal.history(a.id) if v.item is not None]
    assert titles == ["one", "two"]
    journal.close()


def test_attach_refuses_two_histories(place: Place) -> None:
    journal, store = open_store(place)
    store.upsert(note("on record"))
    journal.close()
    other = Store()
    other.upsert(note("elsewhere"))
    journal = open_journal(place)
    with pytest.raises(JournalError, match="already holds items"):
        journal.attach(other)
    # and nothing was changed: the other store keeps its item, the journal its own
    assert [it.title for it in other.items()] == ["elsewhere"]
    assert [it.title for it in journal.current()] == ["on record"]
    journal.close()


def test_empty_journal_adopts_a_filled_store(place: Place) -> None:
    store = Store()
    a = store.upsert(note("already here"))
    journal = open_journal(place)
    journal.attach(store)
    assert [it.id for it in journal.current()] == [a.id]
    journal.close()


def test_one_store_one_journal(places: Places) -> None:
    j1 = open_journal(places("a"))
    j2 = open_journal(places("b"))
    store = Store()
    j1.attach(store)
    with pytest.raises(MemstoreError, match="commit hook"):
        j2.attach(store)
    with pytest.raises(JournalError, match="already attached"):
        j1.attach(Store())
    j1.close()
    j2.close()


def test_journal_is_a_journal(pair: tuple[JournalBase, Store]) -> None:
    assert isinstance(pair[0], Journal)


# ------------------------------------------------------------ stamps


def test_stamps_increase_even_when_the_wall_clock_steps_back(place: Place) -> None:
    wall = Wall(5_000)
    journal, store = open_store(place, wall=wall)
    ids = [store.upsert(note("a")).id]
    wall.ms = 1_000  # the clock stepped backwards
    ids.append(store.upsert(note("b")).id)
    ids.append(store.upsert(note("c")).id)
    stamps = [journal.history(i)[0].valid_from for i in ids]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    assert stamps[1] == Hlc(5_000, 1, 0)
    last = journal.head()
    journal.close()

    wall.ms = 10  # restart with a clock far in the past
    journal, store = open_store(place, wall=wall)
    assert journal.head() == last
    d = store.upsert(note("d"))
    assert journal.history(d.id)[0].valid_from.lsn > last
    journal.close()


def test_head_and_last_lsn_track_acknowledged_groups(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    assert journal.last_lsn() is None
    assert journal.head() == Lsn(0, 0)
    store.upsert(note("x"))
    first = journal.last_lsn()
    assert first is not None and journal.head() == first
    with store.batch():
        store.upsert(note("y"))
        store.upsert(note("z"))
    assert journal.last_lsn() is not None and journal.last_lsn() > first  # type: ignore[operator]
    assert journal.head() == journal.last_lsn()


def test_purge_and_import_move_last_lsn_as_writes_do(places: Places) -> None:
    """``last_lsn()`` names every acknowledged write: a purge and an import too."""
    journal, store = open_store(places("a"))
    a = store.upsert(note("a"))
    b = store.upsert(note("b"))
    written = journal.last_lsn()
    assert written is not None
    journal.purge([a.id])
    purged = journal.last_lsn()
    assert purged is not None and purged >= written and purged == journal.head()
    assert journal.purge(["never-existed"]) == ["never-existed"]  # only the record to erase
    assert journal.last_lsn() is not None and journal.last_lsn() >= purged  # type: ignore[operator]
    out = io.StringIO()
    journal.export(None, out)

    journal2, _ = open_store(places("b"))
    assert journal2.last_lsn() is None
    assert journal2.import_(io.StringIO(out.getvalue())) == 1
    imported = journal2.last_lsn()
    assert imported is not None and imported == journal2.head()
    assert imported >= journal2.history(b.id)[-1].lsn
    journal.close()
    journal2.close()


def test_node_id_is_in_every_stamp(place: Place) -> None:
    journal, store = open_store(place, node_id=513)
    a = store.upsert(note("x"))
    assert journal.history(a.id)[0].valid_from.node_id == 513
    journal.close()
    with pytest.raises(ValueError, match="node_id"):  # refused before it opens
        open_journal(place, node_id=70_000)


# ------------------------------------------------------------- as_of


def test_as_of_sees_each_past_state(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    wall = journal._wall
    assert isinstance(wall, Wall)
    a = store.upsert(note("v1"))
    at1 = journal.head()
    wall.ms += 10
    store.upsert(Item(id=a.id, kind="note", title="v2"))
    at2 = journal.head()
    wall.ms += 10
    store.delete(a.id)
    at3 = journal.head()

    assert [it.title for it in journal.as_of(at1)] == ["v1"]
    assert [it.title for it in journal.as_of(at2)] == ["v2"]
    assert journal.as_of(at3) == []
    assert journal.as_of(Lsn(at1.wall_ms - 1, 0)) == []
    # the same positions as text, Hlc and datetime
    assert [it.title for it in journal.as_of(str(at2))] == ["v2"]
    assert [it.title for it in journal.as_of(Hlc(at1.wall_ms, at1.counter, 0))] == ["v1"]
    when = dt.datetime.fromtimestamp(at1.wall_ms / 1000, tz=dt.UTC)
    assert [it.title for it in journal.as_of(when)] == ["v1"]
    versions = journal.history(a.id)
    assert [v.op for v in versions] == ["upsert", "upsert", "delete"]
    assert versions[0].valid_to == versions[1].valid_from
    assert versions[-1].valid_to is None and versions[-1].item is None


def test_as_of_partition_keeps_shared_items(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    store.upsert(note("acme's", tags=["tenant/acme"]))
    store.upsert(note("globex's", tags=["tenant/globex"]))
    store.upsert(note("everyone's", tags=["tenant/globex", "shared"]))
    at = journal.head()
    assert {it.title for it in journal.as_of(at, partition="acme")} == {"acme's", "everyone's"}
    assert len(journal.as_of(at, partition="*")) == 3
    assert len(journal.as_of(at)) == 3


def test_snapshot_streams_what_as_of_returns(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    for i in range(1200):  # more than one fetch batch
        store.upsert(note(f"n{i}"))
    mid = journal.head()
    store.delete(store.items()[0].id)
    snap = journal.snapshot(mid)
    first = next(snap)
    assert first.op == "upsert" and first.item is not None
    rest = list(snap)
    assert [v.item for v in [first, *rest]] == journal.as_of(mid)
    assert len(rest) + 1 == 1200


def test_snapshot_keeps_one_partition_as_as_of_does(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    store.upsert(note("alpha one", tags=["tenant/alpha"]))
    store.upsert(note("beta one", tags=["tenant/beta"]))
    store.upsert(note("everyone", tags=["tenant/beta", "shared"]))
    at = journal.head()
    alpha = [v.item for v in journal.snapshot(at, partition="alpha")]
    assert alpha == journal.as_of(at, partition="alpha")
    assert sorted(it.title for it in alpha if it is not None) == ["alpha one", "everyone"]
    assert len(list(journal.snapshot(at, partition="*"))) == 3


def test_bad_as_of_positions_are_refused(pair: tuple[JournalBase, Store]) -> None:
    journal, _ = pair
    for bad in ("12", "a.b", "1.2.3.4", "1.99999999999"):
        with pytest.raises(ValueError, match=r"Lsn|counter|out of range"):
            journal.as_of(bad)
    with pytest.raises(ValueError, match="timezone"):
        journal.as_of(dt.datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="as of what"):
        journal.as_of(12)  # type: ignore[arg-type]


# ------------------------------------------------------------ batches


def test_batch_commits_together_and_rolls_back_together(place: Place) -> None:
    journal, store = open_store(place)
    keep = store.upsert(note("kept"))
    with pytest.raises(RuntimeError), journal.transaction():
        store.upsert(note("lost 1"))
        store.delete(keep.id)
        raise RuntimeError("abort the batch")
    assert [it.title for it in store.items()] == ["kept"]
    assert [it.title for it in journal.current()] == ["kept"]
    assert len(journal.history(keep.id)) == 1
    with journal.transaction():
        store.upsert(note("in 1"))
        store.upsert(Item(id=keep.id, kind="note", title="kept, edited"))
        store.upsert(Item(id=keep.id, kind="note", title="kept, edited twice"))
    # A group is atomic: only each id's final state in it becomes a version,
    # and the whole group shares one position.
    versions = journal.history(keep.id)
    assert [v.item.title for v in versions if v.item] == ["kept", "kept, edited twice"]
    assert versions[0].valid_to == versions[1].valid_from
    assert versions[1].lsn == journal.last_lsn()
    journal.close()
    journal, store2 = open_store(place)
    assert sorted(it.title for it in store2.items()) == ["in 1", "kept, edited twice"]
    journal.close()


def test_a_failed_journal_write_undoes_the_store(place: Place) -> None:
    journal, store = open_store(place)
    kept = store.upsert(note("before"))
    refuse_writes(journal)
    with pytest.raises(JournalError, match="refused by test"):
        store.upsert(note("never acknowledged"))
    with pytest.raises(JournalError):
        store.delete(kept.id)
    assert [it.title for it in store.items()] == ["before"]
    store._check()
    allow_writes(journal)
    store.upsert(note("after"))
    assert sorted(it.title for it in journal.current()) == ["after", "before"]
    journal.close()


def test_before_commit_veto_leaves_no_version(place: Place) -> None:
    journal, store = open_store(place)

    def refuse(changes: object) -> None:
        raise RuntimeError("the embedder failed")

    store.add_change_listener(refuse, before_commit=True)
    with pytest.raises(RuntimeError):
        store.upsert(note("x"))
    assert list(journal.current()) == [] and journal.head() == Lsn(0, 0)
    journal.close()


# -------------------------------------------------------------- purge


def test_purge_erases_every_version(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    a = store.upsert(note("secret v1", tags=["tenant/acme"]))
    store.upsert(Item(id=a.id, kind="note", title="secret v2", tags=["tenant/acme"]))
    gone = store.upsert(note("deleted earlier"))
    store.delete(gone.id)
    b = store.upsert(note("kept"))
    early = journal.head()
    assert journal.purge([a.id, gone.id, "never-existed"]) == sorted(
        [a.id, gone.id, "never-existed"]
    )
    assert store.get(a.id) is None
    assert journal.history(a.id) == [] and journal.history(gone.id) == []
    assert [it.id for it in journal.as_of(early)] == [b.id]
    assert count_rows_like(journal, "%secret%") == 0


def test_a_purge_by_predicate_never_erases_a_write_made_while_it_matched(place: Place) -> None:
    """The predicate judges each item as the purge finds it: no write lands in between.

    Another thread rewrites the matching item without its secret while the
    predicate runs. Before, the purge matched the old text outside the store's
    lock, the rewrite was acknowledged meanwhile, and the purge then erased
    every version of the item, the acknowledged rewrite included. Now the
    rewrite waits for the purge and lands after it.
    """
    journal, store = open_store(place)
    secret = store.upsert(note("the api key is sk-123"))
    kept = store.upsert(note("unrelated"))
    rewritten: list[Item] = []
    done = threading.Event()

    def rewrite() -> None:
        rewritten.append(store.upsert(Item(id=secret.id, kind="note", title="api key rotated")))
        done.set()

    def has_secret(item: Item) -> bool:
        if not done.is_set() and not any(t.name == "rewrite" for t in threading.enumerate()):
            threading.Thread(target=rewrite, name="rewrite").start()
            done.wait(0.5)  # the rewrite lands now, unless the purge holds the store
        return "sk-" in item.title

    assert journal.purge(has_secret) == [secret.id]
    assert done.wait(5) and rewritten  # acknowledged: it must stand
    assert store.get(secret.id) is not None
    assert store.get(secret.id).title == "api key rotated"  # type: ignore[union-attr]
    assert sorted((it.id, it.title) for it in journal.current()) == sorted(
        [(secret.id, "api key rotated"), (kept.id, "unrelated")]
    )
    assert [v.item.title for v in journal.history(secret.id) if v.item] == ["api key rotated"]
    journal.close()


def test_purge_by_predicate_sees_deleted_items(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    x = store.upsert(note("x", tags=["tenant/acme"]))
    y = store.upsert(note("y", tags=["tenant/acme"]))
    z = store.upsert(note("z", tags=["tenant/other"]))
    store.delete(y.id)
    purged = journal.purge(lambda it: "tenant/acme" in it.tags)
    assert purged == sorted([x.id, y.id])
    assert [it.id for it in journal.current()] == [z.id]
    assert journal.purge([]) == []
    with pytest.raises(InvalidItemError):
        journal.purge("one-id")
    with pytest.raises(InvalidItemError):
        journal.purge(None)  # type: ignore[arg-type]


_WRONG_CALLS: list[tuple[str, Callable[[JournalBase], object], str]] = [
    ("purge bytes", lambda j: j.purge(b"ab"), "^match: expected a list of ids"),
    ("purge ints", lambda j: j.purge([5, 6]), r"^match\[0\] must be text"),
    ("purge mapping", lambda j: j.purge({"x": 1}), "^match: expected a list of ids"),
    ("matching text", lambda j: j.matching("tenant/acme"), "^match must be a function"),
    ("history bool", lambda j: j.history(True), "^id must be text"),
    ("history huge", lambda j: j.history(10**30), "^id must be text"),
    ("as_of partition", lambda j: j.as_of(j.head(), partition=5), "^partition must be text"),
    ("snapshot partition", lambda j: list(j.snapshot(j.head(), partition=b"p")), "^partition"),
    ("export partition", lambda j: j.export(b"p", io.StringIO()), "^partition must be text"),
    ("export fp", lambda j: j.export(None, "out.ndjson"), "^fp must be a file"),  # type: ignore[arg-type]
    ("export binary", lambda j: j.export(None, io.BytesIO()), "^fp must be a file"),  # type: ignore[arg-type]
    ("export on_corrupt", lambda j: j.export(None, io.StringIO(), on_corrupt=[]), "^on_corrupt"),  # type: ignore[arg-type]
    ("import_ text", lambda j: j.import_('{"format": 1}'), "^fp must be a file"),
    ("import_ none", lambda j: j.import_(None), "^fp must be a file"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("call", "match"), [c[1:] for c in _WRONG_CALLS], ids=[c[0] for c in _WRONG_CALLS]
)
def test_a_journal_call_with_a_wrong_argument_is_refused_and_changes_nothing(
    pair: tuple[JournalBase, Store], call: Callable[[JournalBase], object], match: str
) -> None:
    journal, store = pair
    a = store.upsert(note("kept", tags=["tenant/acme"]))
    head = journal.head()
    with pytest.raises(InvalidItemError, match=match):
        call(journal)
    assert journal.head() == head and store.get(a.id) is not None
    assert len(journal.history(a.id)) == 1


def test_purge_inside_a_batch_is_refused(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    a = store.upsert(note("a"))
    with pytest.raises(JournalError, match="inside a batch"), store.batch():
        journal.purge([a.id])
    assert store.get(a.id) is not None and len(journal.history(a.id)) == 1


# ------------------------------------------------------ export / import


def test_export_import_reproduces_items_and_as_of(places: Places) -> None:
    wall = Wall()
    journal, store = open_store(places("a"), wall=wall)
    a = store.upsert(note("a1", tags=["tenant/acme"]))
    positions = [journal.head()]
    wall.ms += 5
    store.upsert(Item(id=a.id, kind="note", title="a2", tags=["tenant/acme"]))
    b = store.upsert(note("b", tags=["tenant/acme"], data={"k": "ünïcødé"}))
    positions.append(journal.head())
    wall.ms += 5
    store.delete(b.id)
    store.upsert(note("other tenant", tags=["tenant/globex"]))
    positions.append(journal.head())

    out = io.StringIO()
    assert journal.export("acme", out) == 2
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0])["format"] == EXPORT_FORMAT

    journal2, store2 = open_store(places("b"))
    assert journal2.import_(io.StringIO(out.getvalue())) == 2
    for at in positions:
        assert journal2.as_of(at) == journal.as_of(at, partition="acme")
    assert [it.title for it in store2.items()] == ["a2"]
    assert journal2.history(b.id) == journal.history(b.id)
    # importing again changes nothing, and says so
    assert journal2.import_(io.StringIO(out.getvalue())) == 0
    assert journal2.history(a.id) == journal.history(a.id)
    # new writes stamp after the imported history
    c = store2.upsert(note("later"))
    assert journal2.history(c.id)[0].lsn > positions[-1]
    journal.close()
    journal2.close()
    journal3, store3 = open_store(places("b"))
    assert sorted(it.title for it in store3.items()) == ["a2", "later"]
    journal3.close()


def test_import_checking_rules_refuses_an_item_the_hosts_validate_refuses_and_changes_nothing(
    places: Places,
) -> None:
    # Asked to check the write rules, an import checked the rules every item
    # obeys, but not the host's own Config.validate: an item every write of the
    # host refused came in by import. (Unasked, an import restores the record
    # as it was: tests/test_import_rules.py.)
    journal, store = open_store(places("a"))
    store.upsert(note("the api key is sk-123", id="leak"))
    store.upsert(note("harmless", id="fine"))
    out = io.StringIO()
    journal.export(None, out)
    journal.close()

    def no_keys(item: Item) -> str:
        return "no api keys in memory" if "sk-" in item.title else ""

    strict = open_journal(places("b"))
    host = Store(Config(clock=FakeClock(), validate=no_keys))
    strict.attach(host)
    try:
        host.upsert(note("kept", id="kept"))
        head = strict.head()
        with pytest.raises(InvalidItemError, match=r"line \d+: leak: item: no api keys"):
            strict.import_(io.StringIO(out.getvalue()), check_rules=True)
        assert state(host).keys() == {"kept"} and strict.head() == head
        assert strict.history("fine") == [] and strict.history("leak") == []
    finally:
        strict.close()


@pytest.mark.parametrize("year", [2200, 2248])
def test_import_refuses_a_far_future_stamp_that_would_stop_later_writes(
    places: Places, year: int
) -> None:
    # An import moves the journal's clock past every stamp it brings. A version
    # stamped at the end of the range (a broken clock, or a hand edit) was
    # taken: every later write then failed with a bare OverflowError, after a
    # reopen too; one from a far future stamped every later write after it.
    journal, store = open_store(places("a"))
    store.upsert(note("hello", id="h"))
    out = io.StringIO()
    journal.export(None, out)
    journal.close()
    header, line, end = out.getvalue().splitlines()
    entry = json.loads(line)
    wall_ms = int(dt.datetime(year, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
    wall_ms = min(wall_ms, (1 << (63 - COUNTER_BITS)) - 1)  # 2248: the last millisecond there is
    entry["versions"][0]["valid_from"] = {"wall_ms": wall_ms, "counter": 0, "node_id": 0}
    text = "\n".join([header, json.dumps(entry), end]) + "\n"

    other, theirs = open_store(places("b"))
    try:
        head = other.head()
        with pytest.raises(InvalidItemError, match=rf"line 2: h: valid_from .* year {year}"):
            other.import_(io.StringIO(text))
        assert state(theirs) == {} and other.head() == head
        later = theirs.upsert(note("written after the refusal"))
        assert other.history(later.id)[0].lsn.to_datetime().year < 2200
    finally:
        other.close()


class _WritesMidExport(io.StringIO):
    """An export's file that, as the first item line arrives, lets ``write_group`` commit.

    Another writer's group landing while an export streams out (as
    ``memstore export`` beside a running server does), at a moment the test names.
    """

    def __init__(self, write_group: Callable[[], None]) -> None:
        super().__init__()
        self._write_group: Callable[[], None] | None = write_group

    def write(self, text: str) -> int:
        if self._write_group is not None and text.startswith('{"id"'):
            self._write_group, run = None, self._write_group
            run()
        return super().write(text)


def test_a_partition_export_sees_a_group_written_meanwhile_wholly_or_not_at_all(
    place: Place,
) -> None:
    # The SQLite journal read a partition's items as their ids, then their rows
    # 500 ids at a time, each in a read of its own: a group committed between
    # two reads went out in part (its first item's old version, its last
    # item's new one), and an import of that export held a state never on record.
    journal, store = open_store(place)
    ids = [f"n{i:04d}" for i in range(1200)]
    store.upsert_many([Item(id=i, kind="note", title="first", tags=["tenant/acme"]) for i in ids])

    def group() -> None:
        with store.batch():
            for i in (ids[0], ids[-1]):
                store.upsert(Item(id=i, kind="note", title="second", tags=["tenant/acme"]))

    try:
        out = _WritesMidExport(group)
        assert journal.export("acme", out) == len(ids)
        lines = [json.loads(line) for line in out.getvalue().splitlines()[1:-1]]
        titles = {o["id"]: o["versions"][-1]["item"]["title"] for o in lines}
        assert titles[ids[-1]] == titles[ids[0]], "the group went out in part"
        assert store.get(ids[0]).title == "second"  # type: ignore[union-attr]
    finally:
        journal.close()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty input"),
        ('{"format": "something-else"}\n', "not a memstore export"),
        (f'{{"format": "{EXPORT_FORMAT}"}}\nnot json\n', "line 2: not JSON"),
        (f'{{"format": "{EXPORT_FORMAT}"}}\n{{"id": "x", "versions": []}}\n', "no versions"),
        (
            f'{{"format": "{EXPORT_FORMAT}"}}\n'
            '{"id": "x", "versions": [{"valid_from": {"wall_ms": 1, "counter": 0}, '
            '"op": "upsert", "item": {"id": "y", "kind": "note"}}]}\n',
            "carries item 'y'",
        ),
        (
            f'{{"format": "{EXPORT_FORMAT}"}}\n'
            '{"id": "x", "versions": [{"valid_from": {"wall_ms": -1, "counter": 0}, '
            '"op": "upsert", "item": {"id": "x", "kind": "note"}}]}\n',
            "out of range",
        ),
        (
            f'{{"format": "{EXPORT_FORMAT}"}}\n'
            '{"id": "x", "versions": [{"valid_from": {"wall_ms": 1, "counter": 0}, '
            '"op": "upsert", "item": {"id": "x", "kind": "note", "bogus": 1}}]}\n',
            "item",
        ),
    ],
)
def test_bad_import_changes_nothing(pair: tuple[JournalBase, Store], text: str, why: str) -> None:
    journal, store = pair
    store.upsert(note("existing"))
    before, head = state(store), journal.head()
    with pytest.raises(InvalidItemError, match=why):
        journal.import_(io.StringIO(text))
    assert state(store) == before and journal.head() == head
    assert len(list(journal.current())) == 1


def test_a_purge_and_its_record_land_in_one_transaction(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    store.upsert(note("secret", id="s1"))
    store.upsert(note("kept", id="k"))
    store.delete("s1")
    gone = journal.purge(["s1", "never-held"], record=lambda ids: note(f"erased {ids}", id="audit"))
    assert gone == ["never-held", "s1"]
    assert journal.history("s1") == []
    (audit,) = journal.history("audit")
    assert audit.item is not None and audit.item.title == "erased ['never-held', 's1']"
    assert audit.lsn == journal.head() == journal.last_lsn()
    assert sorted(it.id for it in store.items()) == ["audit", "k"]
    assert journal.purge(["nothing-here"], record=lambda ids: note("x", id="x")) == ["nothing-here"]


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ("audit", "record must be a function"),
        (lambda ids: note("x", id="s1"), "an Item the purge does not erase, got item 's1'"),
        (lambda ids: {"id": "audit"}, "an Item the purge does not erase"),
    ],
)
def test_a_purge_record_that_cannot_be_written_changes_nothing(
    pair: tuple[JournalBase, Store], record: Any, why: str
) -> None:
    journal, store = pair
    store.upsert(note("secret", id="s1"))
    before, head = state(store), journal.head()
    with pytest.raises(InvalidItemError, match=why):
        journal.purge(["s1"], record=record)
    assert state(store) == before and journal.head() == head
    assert len(journal.history("s1")) == 1


def test_an_export_cut_off_at_any_line_is_refused(
    pair: tuple[JournalBase, Store], places: Places
) -> None:
    """Before: an export cut at a line boundary imported the lines before the cut, silently."""
    journal, store = pair
    for n in range(3):
        store.upsert(note(f"n{n}"))
    out = io.StringIO()
    assert journal.export(None, out) == 3
    lines = out.getvalue().splitlines(keepends=True)
    assert json.loads(lines[-1]) == {"end": True, "items": 3}
    journal2, store2 = open_store(places("copy"))
    try:
        for cut in range(1, len(lines)):  # header only, header and 1 item, ...
            with pytest.raises(InvalidItemError, match="cut off"):
                journal2.import_(io.StringIO("".join(lines[:cut])))
            assert state(store2) == {} and journal2.head() == Lsn(0, 0)
        assert journal2.import_(io.StringIO("".join(lines))) == 3
    finally:
        journal2.close()


@pytest.mark.parametrize(
    ("end", "why"),
    [
        ('{"end": true, "items": 2}\n', "counts 2 item\\(s\\) but the export holds 1"),
        ('{"end": true, "items": "1"}\n', "expected the end line"),
        ('{"end": 1, "items": 1}\n', "expected the end line"),
        ('{"end": true, "items": 1}\n{"id": "x"}\n', "line 4: text after the export's end line"),
    ],
)
def test_a_damaged_end_line_is_refused(
    pair: tuple[JournalBase, Store], places: Places, end: str, why: str
) -> None:
    journal, store = pair
    store.upsert(note("only"))
    out = io.StringIO()
    journal.export(None, out)
    body = out.getvalue().splitlines(keepends=True)[:-1]
    journal2, store2 = open_store(places("copy"))
    try:
        with pytest.raises(InvalidItemError, match=why):
            journal2.import_(io.StringIO("".join(body) + end))
        assert state(store2) == {}
    finally:
        journal2.close()


def test_an_export_of_format_1_still_imports(
    pair: tuple[JournalBase, Store], places: Places
) -> None:
    """Exports written before the end line existed name format /1 and have none."""
    journal, store = pair
    item = store.upsert(note("old"))
    out = io.StringIO()
    journal.export(None, out)
    lines = out.getvalue().splitlines(keepends=True)[:-1]
    header = json.loads(lines[0])
    header["format"] = "memstore-journal-export/1"
    lines[0] = json.dumps(header) + "\n"
    journal2, store2 = open_store(places("copy"))
    try:
        assert journal2.import_(io.StringIO("".join(lines))) == 1
        assert [it.title for it in store2.items()] == ["old"]
        assert journal2.history(item.id) == journal.history(item.id)
    finally:
        journal2.close()


# ------------------------------------------------------------ bad files


def test_not_sqlite_is_refused_untouched(db: Path) -> None:
    db.write_bytes(b"this is a text file, not a database\n" * 10)
    before = db.read_bytes()
    with pytest.raises(JournalCorruptError, match="not an SQLite database"):
        SqliteJournal(db)
    assert db.read_bytes() == before


def test_foreign_sqlite_database_is_refused(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(JournalSchemaError, match="not a memstore journal"):
        SqliteJournal(db)


def test_truncated_file_fails_clearly(db: Path) -> None:
    journal, store = open_store(db)
    for i in range(400):
        store.upsert(note(f"note {i} " + "padding " * 40))
    journal.close()
    size = db.stat().st_size
    assert size > 64 * 1024
    with open(db, "r+b") as f:
        f.truncate(size // 2)
    damaged = db.read_bytes()
    with pytest.raises(JournalCorruptError):
        open_store(db)
    assert db.read_bytes() == damaged  # nothing written to a damaged file


def _damage_index(db: Path, index: str) -> None:
    """Overwrite the root page of ``index`` (one the restore's reads never use) with noise."""
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)).fetchone()
    conn.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page_size + 8)
        f.write(b"\xa5" * (page_size - 16))


def test_a_damaged_index_page_the_rows_do_not_show_fails_the_open(db: Path) -> None:
    # The live rows read fine (the restore's parse alone would not notice):
    # the page check at open must refuse the file, and write nothing to it.
    journal, store = open_store(db)
    for i in range(300):
        store.upsert(note(f"note {i} " + "padding " * 20))
    journal.close()
    _damage_index(db, "versions_partition")
    damaged = db.read_bytes()
    with pytest.raises(JournalCorruptError, match="damaged"):
        SqliteJournal(db)
    assert db.read_bytes() == damaged
    with SqliteJournal(db, readonly=True) as reader:  # a reader skips the check: rows intact
        assert len(list(reader.current())) == 300


def test_newer_schema_is_refused(place: Place) -> None:
    open_journal(place).close()
    set_schema_version(place, 99)
    with pytest.raises(JournalSchemaError, match="newer"):
        open_journal(place)


def test_missing_directory_and_directory_path(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="not a directory"):
        SqliteJournal(tmp_path / "nowhere" / "j.db")
    with pytest.raises(JournalError, match="is a directory"):
        SqliteJournal(tmp_path)


def test_read_only_directory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    # chmod stops ordinary users; root ignores it, so there the folder is made
    # immutable instead (ext4's chattr +i binds root too).
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
    try:
        assert not _can_create(folder / "probe")
        with pytest.raises(JournalError, match="cannot open journal"):
            SqliteJournal(folder / "j.db")
        assert list(folder.iterdir()) == []
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            folder.chmod(0o755)


def _can_create(path: Path) -> bool:
    try:
        path.touch()
    except OSError:
        return False
    path.unlink()
    return True


def test_read_only_file_refuses_writes_clearly(db: Path) -> None:
    journal, store = open_store(db)
    store.upsert(note("x"))
    journal.close()
    reader = SqliteJournal(db, readonly=True)
    assert [it.title for it in reader.current()] == ["x"]
    with pytest.raises(JournalError, match="read-only"):
        reader.attach(Store())
        reader._commit_rows([])
    reader.close()


def test_full_disk_rolls_back_and_keeps_everything(db: Path) -> None:
    journal, store = open_store(db, max_bytes=256 * 1024)
    written = []
    with pytest.raises(JournalFullError, match="full"):
        for i in range(10_000):
            written.append(store.upsert(note(f"note {i} " + "x" * 500)).id)
    assert len(written) > 10
    assert len(store) == len(written)  # the failed write is not in the store
    store._check()
    journal.close()
    journal, store2 = open_store(db)
    assert sorted(it.id for it in store2.items()) == sorted(written)
    journal.close()


@pytest.mark.parametrize("cap", ["10", -1, 0, 1.5, True])
def test_a_cap_that_is_not_a_positive_whole_number_is_refused(db: Path, cap: object) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        SqliteJournal(db, max_bytes=cap)  # type: ignore[arg-type]
    SqliteJournal(db).close()  # the refused journal holds no lock


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("node_id", "3"),
        ("node_id", True),  # not node 1
        ("node_id", -1),
        ("node_id", 65_536),
        ("node_id", 1.0),
        ("wall", "time"),
        ("readonly", "no"),  # not read-only because the string is truthy
        ("readonly", 1),
    ],
)
def test_an_option_of_the_wrong_type_is_refused_before_the_file_opens(
    tmp_path: Path, option: str, value: object
) -> None:
    db = tmp_path / "j.db"
    with pytest.raises(ValueError, match=f"^{option} must be"):
        SqliteJournal(db, **{option: value})  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []  # nothing created, no lock held


@pytest.mark.parametrize("path", [5, None, ["j.db"]])
def test_a_path_that_is_not_a_path_is_refused(path: object) -> None:
    with pytest.raises(ValueError, match=r"^path must be a file path"):
        SqliteJournal(path)  # type: ignore[arg-type]


# -------------------------------------------------------- single writer


def test_second_writer_in_this_process_is_refused(db: Path) -> None:
    journal = SqliteJournal(db)
    with pytest.raises(JournalLockedError, match="open for writing elsewhere"):
        SqliteJournal(db)
    reader = SqliteJournal(db, readonly=True)  # readers are welcome
    reader.close()
    journal.close()
    SqliteJournal(db).close()  # released on close


def test_second_writer_process_is_refused(db: Path) -> None:
    journal, store = open_store(db)
    store.upsert(note("held"))
    code = (
        "import sys\n"
        "from memstore.journal import SqliteJournal\n"
        "from memstore.errors import JournalLockedError\n"
        "try:\n"
        f"    SqliteJournal({str(db)!r})\n"
        "except JournalLockedError as e:\n"
        "    print('locked:', e); sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 3, done.stderr
    assert "open for writing elsewhere" in done.stdout
    journal.close()


def test_closed_journal_refuses_calls(place: Place) -> None:
    journal, store = open_store(place)
    journal.close()
    journal.close()  # twice is fine
    with pytest.raises(JournalClosedError):
        journal.head()
    store.upsert(note("the store goes on without a record"))
    with pytest.raises(JournalClosedError):
        journal.transaction()


# ------------------------------------------------------ vectors beside it


class CountingEmbedder(HashEmbedder):
    """A hash embedder that counts the texts it embedded."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed(texts)


def test_vectors_beside_the_journal_are_not_embedded_again(tmp_path: Path) -> None:
    def start() -> tuple[SqliteJournal, Store, CellStore, CountingEmbedder]:
        embedder = CountingEmbedder()
        journal = SqliteJournal(tmp_path / "journal.db")
        store = Store()
        journal.attach(store)  # restore first, then let the index catch up
        cells = CellStore(embedder, path=tmp_path)
        cells.attach(store)
        return journal, store, cells, embedder

    journal, store, cells, embedder = start()
    items = [store.upsert(note(f"incident {i}: the api timed out")) for i in range(50)]
    store.delete(items[0].id)
    assert embedder.texts == 50
    query = cells.search_vector(cells._embedder.embed(["incident 7: the api timed out"])[0], 1)
    cells.close()
    journal.close()

    journal, store, cells, embedder = start()
    assert embedder.texts == 0, "restart embedded again"
    assert cells.ids() == sorted(it.id for it in items[1:])
    again = cells.search_vector(cells._embedder.embed(["incident 7: the api timed out"])[0], 1)
    assert [h.id for h, _ in again] == [h.id for h, _ in query]
    cells.close()
    journal.close()


def test_index_catches_up_when_the_record_is_ahead(tmp_path: Path) -> None:
    """A crash after the journal committed but before the vector file was written."""
    journal = SqliteJournal(tmp_path / "journal.db")
    store = Store()
    journal.attach(store)
    cells = CellStore(CountingEmbedder(), path=tmp_path)
    cells.attach(store)
    a = store.upsert(note("kept in both"))
    cells.close()  # the index stops following
    b = store.upsert(note("only on record"))
    journal.close()

    journal = SqliteJournal(tmp_path / "journal.db")
    store = Store()
    journal.attach(store)
    embedder = CountingEmbedder()
    cells = CellStore(embedder, path=tmp_path)
    cells.attach(store)
    assert embedder.texts == 1 and cells.ids() == sorted([a.id, b.id])
    cells.close()
    journal.close()


def test_lsn_of_names_where_each_change_was_recorded(pair: tuple[SqliteJournal, Store]) -> None:
    journal, store = pair
    seen: list[object] = []
    store.add_change_listener(lambda changes: seen.extend(changes), before_commit=True)
    with store.batch():
        a = store.upsert(note("a"))
        store.upsert(note("b"))
    first, second = seen
    assert journal.lsn_of(first) == journal.history(a.id)[0].lsn  # type: ignore[arg-type]
    assert journal.lsn_of(second) == journal.last_lsn()  # type: ignore[arg-type]
    from memstore import Change

    assert journal.lsn_of(Change("delete", None, "x", "note")) is None


def test_no_embed_survives_restart_and_export(tmp_path: Path) -> None:
    journal, store = open_store(tmp_path / "a.db")
    keep_out = store.upsert(Item(kind="note", title="raw log line", no_embed=True))
    normal = store.upsert(note("an ordinary note"))
    out = io.StringIO()
    journal.export(None, out)
    journal.close()
    journal, store = open_store(tmp_path / "a.db")
    assert store.get(keep_out.id).no_embed and not store.get(normal.id).no_embed  # type: ignore[union-attr]
    journal.close()
    other, copy = open_store(tmp_path / "b.db")
    other.import_(io.StringIO(out.getvalue()))
    assert copy.get(keep_out.id).no_embed  # type: ignore[union-attr]
    other.close()


# ------------------------------------------------- found in review: regressions


def test_as_of_sees_a_group_wholly_or_not_at_all(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    wall = journal._wall
    assert isinstance(wall, Wall) or wall is None
    before = journal.head()
    with store.batch():
        ids = []
        for i in range(50):
            if isinstance(wall, Wall):
                wall.ms += 1  # the wall clock moves on during a large group
            ids.append(store.upsert(note(f"batch note {i}")).id)
    after = journal.head()
    assert {len(journal.as_of(at)) for at in (before, after)} == {0, 50}
    stamps = {journal.history(i)[0].valid_from for i in ids}
    assert len(stamps) == 1  # one group, one position


def test_an_id_born_and_removed_in_one_group_leaves_no_version(
    pair: tuple[JournalBase, Store],
) -> None:
    journal, store = pair
    with store.batch():
        temp = store.upsert(note("scratch"))
        store.delete(temp.id)
        kept = store.upsert(note("kept"))
    assert journal.history(temp.id) == []
    assert len(journal.history(kept.id)) == 1


def test_closing_waits_for_a_write_in_flight(tmp_path: Path) -> None:
    import threading
    import time

    journal, store = open_store(tmp_path / "j.db")
    entered = threading.Event()

    def slow(changes: object) -> None:  # an embedder taking its time
        entered.set()
        time.sleep(0.3)

    store.add_change_listener(slow, before_commit=True)
    result: list[Item] = []
    writer = threading.Thread(target=lambda: result.append(store.upsert(note("in flight"))))
    writer.start()
    entered.wait(5)
    journal.close()  # while the write is between its listeners and its record
    writer.join()
    assert result, "the write was acknowledged"
    journal2, store2 = open_store(tmp_path / "j.db")
    assert [it.id for it in store2.items()] == [result[0].id]  # so it is on disk
    journal2.close()


def test_paths_with_uri_characters(tmp_path: Path) -> None:
    for name in ("data#1", "what?x", "100%41"):
        folder = tmp_path / name
        folder.mkdir()
        journal, store = open_store(folder / "j.db")
        store.upsert(note(name))
        assert [it.title for it in journal.current()] == [name]
        journal.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["100%41", "data#1", "what?x"]


def test_a_reader_sees_the_writers_head_move(tmp_path: Path) -> None:
    journal, store = open_store(tmp_path / "j.db")
    store.upsert(note("one"))
    reader = SqliteJournal(tmp_path / "j.db", readonly=True)
    first = reader.head()
    store.upsert(note("two"))
    assert reader.head() > first and reader.head() == journal.head()
    assert sorted(it.title for it in reader.as_of(reader.head())) == ["one", "two"]
    reader.close()
    journal.close()


def test_positions_are_never_reused_after_a_purge(tmp_path: Path) -> None:
    wall = Wall(1_000_000)
    journal, store = open_store(tmp_path / "j.db", wall=wall)
    store.upsert(note("kept"))
    secret = store.upsert(note("secret"))
    erased = journal.history(secret.id)[0].lsn
    journal.purge([secret.id])
    journal.close()
    journal, store = open_store(tmp_path / "j.db", wall=wall)  # the clock did not move
    later = store.upsert(note("later"))
    assert journal.history(later.id)[0].lsn > erased
    journal.close()


def test_a_journal_with_history_never_adopts_another_store(tmp_path: Path) -> None:
    journal, store = open_store(tmp_path / "j.db")
    gone = store.upsert(note("deleted later"))
    store.delete(gone.id)
    journal.close()
    filled = Store()
    filled.upsert(note("from elsewhere"))
    journal = SqliteJournal(tmp_path / "j.db")
    with pytest.raises(JournalError, match="has a history"):
        journal.attach(filled)
    journal.close()


def test_export_of_a_partition_keeps_moved_items_whole(pair: tuple[JournalBase, Store]) -> None:
    journal, store = pair
    moved = store.upsert(note("was in a", tags=["tenant/a"]))
    store.upsert(Item(id=moved.id, kind="note", title="now in b", tags=["tenant/b"]))
    store.upsert(note("kept in a", tags=["tenant/a"]))
    out_a, out_b = io.StringIO(), io.StringIO()
    assert journal.export("a", out_a) == 1
    assert journal.export("b", out_b) == 1
    line = json.loads(out_b.getvalue().splitlines()[1])
    assert line["id"] == moved.id and len(line["versions"]) == 2


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@settings(max_examples=500, deadline=None)
@given(
    ms=st.integers(min_value=0, max_value=(1 << 43) - 1),
    extra_us=st.integers(min_value=0, max_value=999),
    offset_min=st.integers(min_value=-23 * 60, max_value=23 * 60),
)
def test_an_lsn_and_its_datetime_name_the_same_millisecond(
    ms: int, extra_us: int, offset_min: int
) -> None:
    # "As of" a moment includes every write of its millisecond, whatever the
    # date or the zone: computed in floats, some dates landed a millisecond
    # early (before a write made at that very moment) or read back a microsecond off.
    zone = dt.timezone(dt.timedelta(minutes=offset_min))
    moment = (_EPOCH + dt.timedelta(milliseconds=ms, microseconds=extra_us)).astimezone(zone)
    assert Lsn.from_datetime(moment) == Lsn(ms, MAX_COUNTER)
    assert Lsn(ms, 0).to_datetime() == _EPOCH + dt.timedelta(milliseconds=ms)
