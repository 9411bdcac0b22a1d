"""The write path's shortcuts give exactly what the checked, slow path gives.

``Memory._build`` copies a well-typed ``Item`` (or a plain text note) instead of
dumping and re-validating it; ``new_ulid`` writes ULIDs without ``python-ulid``;
the exact-title index is filled when first read. Each is compared here with
the path it replaces.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pytest
from ulid import ULID

from memstore import Item, Memory, Store
from memstore._memory_build import build_item, placed_tags
from memstore._memory_build import validated as _validated
from memstore._ulid import new_ulid
from memstore.errors import InvalidItemError
from memstore.item import ThoughtLink, well_typed

AWARE = _dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_dt.UTC)

ITEMS = [
    Item(kind="note", title="plain"),
    Item(
        id="x-1",
        kind="stable_fact",
        title="t",
        content="c",
        subject="s",
        confidence="high",
        origin="human",
        tags=["tenant/a", "service/api", "user:bob"],
        links=[ThoughtLink(to_id="y", relation="explains", weight=0.5)],
        supersedes=["old"],
        evidence_refs=["cell:z"],
        stale_after=AWARE,
        event_date="2024-03-01",
        data={"k": "v"},
        created_at=AWARE,
        updated_at=AWARE,
        no_embed=True,
        links_set=True,
        cell_originated=True,
    ),
]


def _slow(item: Item, partition: str | None, owner: str | None) -> Item:
    """What ``build_item`` did before its shortcut: dump, place tags, re-validate."""
    data: dict[str, Any] = item.model_dump()
    for flag in ("no_embed", "links_set"):
        data[flag] = getattr(item, flag)
    data["tags"] = placed_tags(data["tags"], partition, owner)
    if owner is not None:
        data["scope"] = "private"
    return _validated(data)


def _same(a: Item, b: Item) -> None:
    assert a.__dict__ == b.__dict__
    assert a.model_fields_set == b.model_fields_set
    assert a.links is not b.links and a.tags is not b.tags


@pytest.mark.parametrize("item", ITEMS)
@pytest.mark.parametrize(("partition", "owner"), [(None, None), ("p", None), (None, "ann")])
def test_a_well_typed_item_is_copied_as_validation_would_build_it(
    item: Item, partition: str | None, owner: str | None
) -> None:
    assert well_typed(item)
    fast = build_item(item, partition, owner, {})
    _same(fast, _slow(item, partition, owner))
    assert all(a is not b for a, b in zip(fast.links, item.links, strict=True))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tags", ("a",)),
        ("title", 5),
        ("scope", "secret"),
        ("data", {"k": 1}),
        ("stale_after", _dt.datetime(2026, 1, 1)),  # naive
        ("links", [{"to_id": "y", "relation": "explains"}]),
        ("no_embed", 1),
    ],
)
def test_an_item_with_a_field_assigned_the_wrong_type_takes_the_checked_path(
    field: str, value: object
) -> None:
    item = Item(kind="note", title="x")
    item.__dict__[field] = value
    assert not well_typed(item)


def test_a_link_weight_mutated_out_of_range_is_refused_as_before() -> None:
    item = Item(kind="note", title="x", links=[ThoughtLink(to_id="y", relation="explains")])
    item.links[0].__dict__["weight"] = 2.0
    assert not well_typed(item)
    with Memory(embedder=None) as mem:
        with pytest.raises(InvalidItemError, match=r"entry 1:.*weight"):
            mem.add_many(["fine", item])
        assert mem.stats().items == 0


@pytest.mark.parametrize(("partition", "owner"), [(None, None), ("p", None), (None, "ann")])
def test_a_text_note_is_built_as_validation_would_build_it(
    partition: str | None, owner: str | None
) -> None:
    fast = build_item("some text", partition, owner, {})
    data: dict[str, Any] = {"kind": "note", "content": "some text"}
    data["tags"] = placed_tags(None, partition, owner)
    if owner is not None:
        data["scope"] = "private"
    _same(fast, _validated(data))


def test_new_ulid_is_a_ulid_of_now() -> None:
    before = _dt.datetime.now(_dt.UTC).timestamp() * 1000
    ids = [new_ulid() for _ in range(2000)]
    after = _dt.datetime.now(_dt.UTC).timestamp() * 1000
    assert len(set(ids)) == len(ids)
    for u in ids:
        parsed = ULID.from_str(u)
        assert str(parsed) == u
        assert before - 1 <= parsed.milliseconds <= after + 1


def test_the_exact_title_index_follows_writes_made_before_its_first_read() -> None:
    store = Store()
    a = store.upsert(Item(kind="note", title="Ledger Latency"))
    b = store.upsert(Item(kind="note", title="ledger-latency", tags=["service/ledger"]))
    store.upsert(a.clone(title="renamed"))
    with pytest.raises(RuntimeError), store.batch():
        store.upsert(Item(kind="note", title="ledger latency"))
        raise RuntimeError("undone")
    assert [it.id for it in store.exact_matches("ledger latency")] == [b.id]
    assert [it.id for it in store.exact_matches("ledger")] == [b.id]
    store.delete(b.id)
    store.upsert(Item(kind="note", title="Renamed", id="c"))
    assert sorted(it.id for it in store.exact_matches("renamed")) == sorted([a.id, "c"])
    store._check()


def test_upsert_many_is_all_or_nothing_and_leaves_the_collector_as_it_was() -> None:
    import gc

    from memstore import Config

    def before(it: Item) -> None:
        if it.title == "third":
            raise RuntimeError("refused by the host")

    store = Store(Config(before=before))
    kept = store.upsert(Item(kind="note", title="kept"))
    with pytest.raises(InvalidItemError, match="entry 1: "):
        store.upsert_many([Item(kind="note", title="a"), Item(kind="stable_fact", title="b")])
    with pytest.raises(RuntimeError, match="refused"):
        store.upsert_many(
            [Item(kind="note", title=t) for t in ("first", "second", "third", "fourth")]
        )
    assert [it.id for it in store.items()] == [kept.id]
    assert gc.isenabled()
    store._check()
    out = store.upsert_many([Item(kind="note", title="x"), Item(kind="note", title="y")])
    assert [it.title for it in out] == ["x", "y"]
    assert len(store) == 3
    store._check()


def test_item_clone_copies_links_as_model_copy_does() -> None:
    """Item.clone's link copies equal ``model_copy()``'s (fields and fields set) and are
    new objects: changing a copy leaves the original alone."""
    link = ThoughtLink(to_id="b", relation="precedes")
    item = Item(
        id="a", content="x", links=[link, ThoughtLink(to_id="c", relation="precedes", weight=0.5)]
    )
    copy = item.clone()
    for mine, theirs in zip(copy.links, item.links, strict=True):
        ref = theirs.model_copy()
        assert mine is not theirs
        assert mine == ref and mine.__pydantic_fields_set__ == ref.__pydantic_fields_set__
        assert mine.model_dump() == theirs.model_dump()
    object.__setattr__(copy.links[0], "weight", 0.25)
    assert item.links[0].weight == 1.0


@pytest.mark.parametrize("item", ITEMS, ids=range(len(ITEMS)))
def test_item_clone_is_a_deep_copy_sharing_no_container(item: Item) -> None:
    """Item.clone gives what ``model_copy(deep=True)`` gives (fields, fields set, extra,
    private), with no list, dict or link shared, and ``update`` laid over it."""
    ref = item.model_copy(deep=True)
    copy = item.clone()
    assert type(copy) is Item
    assert copy.__dict__ == ref.__dict__ and list(copy.__dict__) == list(ref.__dict__)
    assert copy.__pydantic_fields_set__ == ref.__pydantic_fields_set__
    assert copy.__pydantic_fields_set__ is not item.__pydantic_fields_set__
    assert copy.__pydantic_extra__ is None and copy.__pydantic_private__ is None
    for name in ("tags", "links", "supersedes", "evidence_refs", "data"):
        assert getattr(copy, name) is not getattr(item, name)
    for mine, theirs in zip(copy.links, item.links, strict=True):
        assert mine is not theirs
    updated = item.clone(title="changed", tags=["t"])
    assert updated.title == "changed" and updated.tags == ["t"]
