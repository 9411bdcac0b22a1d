"""Two more bulk-write shortcuts, each held to exactly what the code it replaces gives.

* ``Memory.add_many`` (and ``add``) builds an ``Item`` entry's copy once
  (``_placed_copy``) instead of cloning it and then replacing the clone's tags
  and fields set: the same item (fields, fields set, type), sharing no
  container with the caller's, and the same refusal; and the same journal
  rows and stored state through a real store and SQLite journal.
* A write's stored copy gets its frozen fields set when it is made
  (``stored_copy``), and the shared set is looked up by comparing with the
  one given last before building a ``frozenset`` key (``_shared_fields``):
  the same shared object as ``share_containers`` used to point it at, and,
  past the cap, a frozen copy that is not shared.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_write_fastpaths2 import _state, items

import memstore._memory_build as build
import memstore._shared as shared
from memstore import Config, Item, Store
from memstore._memory_build import _BUILT_FIELDS, build_entries, build_item, placed_tags
from memstore.errors import InvalidItemError
from memstore.item import SCOPE_PRIVATE
from memstore.journal import SqliteJournal

partitions = st.one_of(st.none(), st.sampled_from(["ops", "billing", "", "*", "a b", "x" * 300]))
owners = st.one_of(st.none(), st.sampled_from(["alice", "bob", "", "a\nb"]))


def _placed_copy_before(
    source: Item, partition: str | None, private_to: str | None, *, plain: bool = False
) -> Item:
    """``build_item``'s ``Item`` path as it was: a clone, then its tags and fields set replaced
    (``plain``, which lets the new one skip checks, changes nothing here)."""
    item = source.clone(cell_originated=False)
    object.__setattr__(item, "__pydantic_fields_set__", set(_BUILT_FIELDS))
    item.__dict__["tags"] = placed_tags(item.tags, partition, private_to)
    if private_to is not None:
        item.__dict__["scope"] = SCOPE_PRIVATE
    return item


def _built(item: Item, partition: str | None, private_to: str | None) -> Item | Exception:
    try:
        return build_item(item, partition, private_to, {})
    except InvalidItemError as e:
        return e


@settings(max_examples=400, deadline=None)
@given(items, partitions, owners, st.booleans())
def test_an_item_entry_is_built_as_the_clone_was(
    item: Item, partition: str | None, private_to: str | None, extra_flags: bool
) -> None:
    if extra_flags:  # in-process flags set after construction are copied too
        item.__dict__["cell_originated"] = True
        item.__dict__["links_set"] = True
    new = _built(item, partition, private_to)
    now = build._placed_copy
    build._placed_copy = _placed_copy_before
    try:
        old = _built(item, partition, private_to)
    finally:
        build._placed_copy = now
    if isinstance(new, Exception) or isinstance(old, Exception):
        assert type(new) is type(old) and str(new) == str(old)
        return
    assert type(new) is Item and type(old) is Item
    assert _state(new) == _state(old)
    assert new.__dict__ == old.__dict__ and list(new.__dict__) == list(old.__dict__)
    assert type(new.__pydantic_fields_set__) is set
    assert new.__pydantic_extra__ is None and new.__pydantic_private__ is None
    # The caller's item and the built one share no container.
    for name in ("tags", "links", "supersedes", "evidence_refs", "data"):
        assert new.__dict__[name] is not item.__dict__[name], name
    for mine, theirs in zip(new.links, item.links, strict=True):
        assert mine is not theirs
    assert new.__pydantic_fields_set__ is not item.__pydantic_fields_set__


def test_an_item_subclass_entry_is_built_as_a_plain_item() -> None:
    class Note(Item):
        pass

    got = build_item(Note(kind="note", title="x"), "ops", None, {})
    assert type(got) is Item and got.tags == ["tenant/ops"]


def test_a_mapping_entry_beside_item_entries_is_still_read_as_fields() -> None:
    built = build_entries(
        [Item(kind="note", title="a"), {"text": "b", "partition": "ops"}, "c"], "home"
    )
    assert [(b.title, b.content, b.tags) for b in built] == [
        ("a", "", ["tenant/home"]),
        ("", "b", ["tenant/ops"]),
        ("", "c", ["tenant/home"]),
    ]


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT * FROM versions ORDER BY rowid").fetchall()


def _write_all(folder: Path, batches: list[list[Item]], partition: str | None) -> Store:
    """``Memory.add_many``'s path: entries built, then one owned group each, journalled."""
    ticks = iter(range(10**6))
    start = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
    ids = iter(range(10**6))  # minted ids alike on both sides (a ULID's random part is not)
    store = Store(
        Config(
            clock=lambda: start + _dt.timedelta(seconds=next(ticks)),
            new_id=lambda: f"m{next(ids)}",
        )
    )
    walls = iter(range(1_750_000_000_000, 1_750_000_000_000 + 10**6))
    journal = SqliteJournal(folder / "j.db", wall=lambda: next(walls))
    journal.attach(store)
    for batch in batches:
        try:
            built = build_entries([it.clone() for it in batch], partition)
            store._upsert_many(built, owned=True)
        except InvalidItemError:
            pass  # refused by both alike (compared through the rows and state)
    journal.close()
    return store


words = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
storable = st.builds(  # mostly items the rules take, so that most groups are written
    Item,
    id=st.sampled_from(["", "", "a", "b", "c"]),
    kind=st.sampled_from(["note", "observation"]),
    title=words,
    content=st.one_of(st.just(""), words),
    tags=st.lists(st.sampled_from(["x", "tenant/ops", "shared", "service/api"]), max_size=2),
    data=st.dictionaries(st.sampled_from(["k", "j"]), words, max_size=1),
    no_embed=st.booleans(),
)
batches = st.lists(
    st.lists(
        st.one_of(storable, items.map(lambda it: it.clone(supersedes=[], links=[]))),
        min_size=1,
        max_size=5,
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches, st.one_of(st.none(), st.sampled_from(["ops", "billing"]), partitions))
def test_add_many_s_rows_and_state_are_what_they_were(
    tmp_path_factory: pytest.TempPathFactory, runs: list[list[Item]], partition: str | None
) -> None:
    new_dir, old_dir = tmp_path_factory.mktemp("new"), tmp_path_factory.mktemp("old")
    new = _write_all(new_dir, runs, partition)
    now = build._placed_copy
    build._placed_copy = _placed_copy_before
    try:
        old = _write_all(old_dir, runs, partition)
    finally:
        build._placed_copy = now
    event(f"rows: {min(len(_rows(new_dir / 'j.db')), 3)}")
    assert _rows(new_dir / "j.db") == _rows(old_dir / "j.db")
    assert {k: _state(v) for k, v in new._items.items()} == {
        k: _state(v) for k, v in old._items.items()
    }
    for id, it in new._items.items():  # the same shared, frozen fields set object
        assert it.__pydantic_fields_set__ is old._items[id].__pydantic_fields_set__
    new._check()


names = st.sets(st.sampled_from(sorted(Item.model_fields)))


@settings(max_examples=200, deadline=None)
@given(st.lists(names, min_size=1, max_size=30))
def test_the_shared_fields_set_is_the_one_registered_for_those_names(
    runs: list[set[str]],
) -> None:
    for fields in runs:
        got = shared._shared_fields(set(fields))
        assert type(got) is shared._FieldsSet and got == fields
        assert got is shared._FIELDS_SETS[frozenset(fields)]
        assert shared._last_fields[0] is got


def test_past_the_cap_a_new_fields_set_is_frozen_and_not_shared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = shared._shared_fields({"kind", "title"})
    monkeypatch.setattr(shared, "_MAX_FIELDS_SETS", len(shared._FIELDS_SETS))
    odd = {"kind", "title", "content", "subject", "event_date", "confidence", "origin"}
    assert frozenset(odd) not in shared._FIELDS_SETS
    first, second = shared._shared_fields(set(odd)), shared._shared_fields(set(odd))
    assert type(first) is shared._FieldsSet and first == odd and first is not second
    assert frozenset(odd) not in shared._FIELDS_SETS
    assert shared._last_fields[0] is known  # an unshared set is never the one given last
    assert shared._shared_fields({"kind", "title"}) is known


def test_a_stored_copy_refuses_changes_and_the_writer_s_item_does_not() -> None:
    store = Store()
    got = store.upsert(Item(kind="note", title="x"))
    kept = store._items[got.id]
    assert type(kept.__pydantic_fields_set__) is shared._FieldsSet
    with pytest.raises(TypeError):
        kept.title = "y"
    got.title = "y"  # the writer's own
    assert store.get(got.id).title == "x"  # type: ignore[union-attr]
    store._check()
