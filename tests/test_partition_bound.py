"""A partition tag is bounded on every write, so every journal can hold what any other holds.

A PostgreSQL journal indexes each version by ``(partition, id, lsn)`` and a
btree refuses a row over 2,704 bytes: a ``tenant/`` tag of 12,000 characters
stored by ``Store.put`` on SQLite could never be imported into PostgreSQL,
and on PostgreSQL it failed late with a server error. Every write, those
taking an item as given included, now refuses a partition tag longer than
``MAX_PARTITION_TAG_CHARS``; a journal already holding one is still read.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import memstore.store as store_module
from memstore import InvalidItemError, Item, Store
from memstore.journal.base import JournalBase
from memstore.journal.sqlite import backup_file
from memstore.limits import MAX_ID_CHARS, MAX_PARTITION_TAG_CHARS
from memstore.tags import PARTITION_TAG_PREFIX
from memstore.validate import record_copy, record_rejection
from tests.journals import Place, open_journal

LONG = PARTITION_TAG_PREFIX + "x" * 12_000


def _wide(n: int, seed: int) -> str:
    """``n`` four-byte UTF-8 characters no compression shrinks: the widest key text."""
    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x10000, 0x3FFFF)) for _ in range(n))


@contextmanager
def _attached(place: Place) -> Iterator[tuple[Store, JournalBase]]:
    options = {} if isinstance(place, Path) else {"replicate": False}
    journal = open_journal(place, **options)
    store = Store()
    journal.attach(store)
    try:
        yield store, journal
    finally:
        journal.close()


@contextmanager
def _the_rule_before(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Writes held to the record rule alone, as before the bound: how old journals got one."""
    with monkeypatch.context() as m:
        m.setattr(
            store_module,
            "record_copy",
            lambda item, what, rule=None: record_copy(item, what, record_rejection),
        )
        yield


def _export(journal: JournalBase) -> str:
    out = io.StringIO()
    journal.export(None, out)
    return out.getvalue()


def test_the_widest_key_within_the_bounds_fits_postgresqls_index(place: Place) -> None:
    """A partition tag and an id at their bounds, each character 4 bytes of UTF-8."""
    tag = PARTITION_TAG_PREFIX + _wide(MAX_PARTITION_TAG_CHARS - len(PARTITION_TAG_PREFIX), 1)
    item = Item(id=_wide(MAX_ID_CHARS, 2), kind="note", title="wide", tags=[tag])
    with _attached(place) as (store, _):
        store.put(item)
    with _attached(place) as (store, _):
        assert store.get(item.id) is not None
        assert store.get(item.id).tags == [tag]  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["put", "mirror", "reflect"])
def test_a_partition_tag_over_the_bound_is_refused_and_changes_nothing(
    place: Place, how: str
) -> None:
    item = Item(id="a", kind="note", title="long", tags=["topic/x", LONG])
    with _attached(place) as (store, journal):
        head = journal.head()
        write = {
            "put": lambda: store.put(item),
            "mirror": lambda: store.mirror(item),
            "reflect": lambda: store.reflect("a", item),
        }[how]
        with pytest.raises(InvalidItemError) as caught:
            write()
        assert str(caught.value).startswith(f"{how}: partition tag 'tenant/xxxx") and str(
            caught.value
        ).endswith(f"is 12007 characters; at most {MAX_PARTITION_TAG_CHARS}")
        assert store.get("a") is None
        assert journal.head() == head
        store.put(item.clone(tags=["tenant/alpha"]))  # the journal still takes writes
        assert store.get("a") is not None


def test_a_journal_already_holding_one_still_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written under the rule before: reopening, and loading its record into a store, read it."""
    path = tmp_path / "journal.db"
    with _attached(path) as (store, journal):
        store.put(Item(id="a", kind="note", title="short", tags=["tenant/alpha"]))
        earlier = _export(journal)
    with _the_rule_before(monkeypatch), _attached(path) as (store, _):
        store.put(Item(id="a", kind="note", title="long", tags=[LONG]))
    with _attached(path) as (store, journal):
        held = store.get("a")
        assert held is not None and held.tags == [LONG]
        past = Store()
        past.restore(journal.as_of(journal.head()))  # a view of the past loads it as it is
        assert past.get("a") is not None
        store.put(Item(id="b", kind="note", title="new"))  # and it takes writes
        # An import of an older version keeps the newest, the one on record.
        assert journal.import_(io.StringIO(earlier)) == 0
        held = store.get("a")
        assert held is not None and held.tags == [LONG]
    copy = tmp_path / "copy.db"
    backup_file(path, copy)  # a backup of it opens too
    with _attached(copy) as (store, _):
        held = store.get("a")
        assert held is not None and held.tags == [LONG]


def test_an_import_of_an_export_holding_one_is_refused_naming_the_line(
    place: Place, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / "old.db"
    with _the_rule_before(monkeypatch), _attached(old) as (store, journal):
        store.put(Item(id="a", kind="note", title="fine", tags=["tenant/alpha"]))
        store.put(Item(id="b", kind="note", title="long", tags=[LONG]))
        exported = _export(journal)
    with _attached(place) as (store, journal):
        head = journal.head()
        with pytest.raises(InvalidItemError) as caught:
            journal.import_(io.StringIO(exported))
        assert str(caught.value).startswith("line 3: ")
        assert "'tenant/xxxx" in str(caught.value)
        assert "is 12007 characters; at most 256" in str(caught.value)
        assert store.get("a") is None and store.get("b") is None
        assert journal.head() == head


def test_a_write_names_no_partition_longer_than_a_read_can_name() -> None:
    """Memory.add took tenant/<129..249 characters>, under the 256 of a tag, but every
    partition read (partition=, at most MAX_NAME_CHARS) refused that name: search, recent
    and export of the item's own partition were impossible."""
    from memstore import Memory
    from memstore.limits import MAX_NAME_CHARS

    longest, over = "p" * MAX_NAME_CHARS, "p" * (MAX_NAME_CHARS + 1)
    with Memory(embedder=None) as mem:
        mem.add("the longest partition name", tags=[PARTITION_TAG_PREFIX + longest])
        assert [it.content for it in mem.recent(5, partition=longest)] == [
            "the longest partition name"
        ]
        with pytest.raises(InvalidItemError, match=f"partition of {MAX_NAME_CHARS + 1} char"):
            mem.add("one more", tags=[PARTITION_TAG_PREFIX + over])
        assert mem.stats().items == 1
