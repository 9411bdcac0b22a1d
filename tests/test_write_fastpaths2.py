"""More write-path shortcuts, each held to exactly what the code it replaces gives.

* The journal writes a plain ``Item``'s row through pydantic-core's serializer
  directly instead of ``model_dump_json``, and an item whose datetimes are in
  UTC or whole minutes off it through a serializer of the same fields without
  the model's per-datetime callback: the same text, for any item (hypothesis:
  any text, datetimes at any offset, links, data; plain and shared containers).
* ``new_ulid`` keeps the first 8 characters of the time for 1,024 ms and
  takes the last two from a table: the same characters as encoding every
  millisecond anew, and as ``python-ulid``, for any run of milliseconds.
* The store knows the ids it minted are ULIDs, whose words are not indexed,
  without matching the ULID pattern: every flag is what the pattern gives.
* A write with no host hook keeps a ``stored_copy`` of its own item and hands
  that item back, instead of keeping the item and handing back a clone of it:
  the same items stored and returned (fields and fields set) as a store that
  clones, over any run of writes, and the item handed back shares nothing
  with the store.
"""

from __future__ import annotations

import datetime as _dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from memstore import Config, Item, Store, ThoughtLink
from memstore._shared import share_containers
from memstore._ulid import _ALPHABET, _time_part
from memstore.journal.version import _item_text, _plain_stamps

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
offsets = st.one_of(
    st.integers(-86_399, 86_399),  # mostly with seconds: written in UTC
    st.integers(-1439, 1439).map(lambda m: 60 * m),  # whole minutes: written as they are
).map(lambda s: _dt.timezone(_dt.timedelta(seconds=s)))
stamps = st.one_of(
    st.none(),
    st.builds(
        lambda at, tz: at.replace(tzinfo=tz),
        st.datetimes(_dt.datetime(2, 1, 1), _dt.datetime(9998, 12, 31)),
        st.one_of(st.just(_dt.UTC), offsets),
    ),
)
links = st.builds(
    ThoughtLink,
    to_id=st.text("abc", min_size=1, max_size=3),
    relation=st.sampled_from(["explains", "triggers"]),
    weight=st.floats(0.0001, 1.0),
)
items = st.builds(
    Item,
    id=texts,
    kind=st.sampled_from(["note", "observation", "stable_fact"]),
    title=texts,
    content=texts,
    subject=texts,
    confidence=st.sampled_from(["", "high", "low"]),
    tags=st.lists(texts, max_size=3),
    links=st.lists(links, max_size=2),
    supersedes=st.lists(texts, max_size=2),
    evidence_refs=st.lists(texts, max_size=2),
    stale_after=stamps,
    created_at=stamps,
    updated_at=stamps,
    event_date=texts,
    data=st.dictionaries(texts, texts, max_size=2),
    no_embed=st.booleans(),
)


def _item_text_before(item: Item) -> str:
    """``_item_text`` as it was: through ``model_dump_json``."""
    text = item.model_dump_json()
    return text[:-1] + ',"no_embed":true}' if item.no_embed else text


@settings(max_examples=300, deadline=None)
@given(items)
def test_a_row_s_json_is_what_model_dump_json_wrote(item: Item) -> None:
    assert _item_text(item) == _item_text_before(item)
    stored = item.clone()
    share_containers(stored)  # what the journal is given: the store's own item
    assert _item_text(stored) == _item_text_before(item)


def test_a_restored_item_s_utc_is_pydantic_s_and_takes_the_plain_path() -> None:
    at = '"2026-01-02T03:04:05.123456Z"'
    item = Item.model_validate_json(f'{{"kind":"note","title":"x","updated_at":{at}}}')
    assert _plain_stamps(item.__dict__)
    assert _item_text(item) == _item_text_before(item)
    east = _dt.timezone(_dt.timedelta(seconds=561))
    assert not _plain_stamps(Item(kind="n", title="x", created_at=_dt.datetime.now(east)).__dict__)


def test_a_subclass_keeps_its_own_model_dump_json() -> None:
    class Loud(Item):
        def model_dump_json(self, **_: object) -> str:
            return '{"loud":true}'

    assert _item_text(Loud(kind="note", title="x")) == '{"loud":true}'


def _time_part_before(ms: int) -> str:
    """``_time_part`` as it was: every character from the millisecond count."""
    return "".join([_ALPHABET[(ms >> shift) & 31] for shift in range(45, -1, -5)])


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**48 - 1),
    st.lists(st.integers(-3000, 3000), max_size=40),
)
def test_the_time_part_is_the_millisecond_count_encoded(start: int, steps: list[int]) -> None:
    ms = start
    for step in [0, *steps]:
        ms = min(max(ms + step, 0), 2**48 - 1)
        text = _time_part(ms)
        assert text == _time_part_before(ms)
        assert text == str(ULID.from_bytes(ms.to_bytes(6, "big") + bytes(10)))[:10]


@pytest.mark.parametrize(
    "config",
    [
        Config(),
        Config(id_prefix="mem-"),
        Config(skip_id_text=lambda id: id.startswith("x")),
        Config(new_id=iter(f"n{i}" for i in range(100)).__next__),
    ],
    ids=["plain", "prefix", "skip_id_text", "new_id"],
)
def test_minted_ids_are_flagged_as_the_ulid_pattern_flags_them(config: Config) -> None:
    store = Store(config)
    given = [store.upsert(Item(id=id, kind="note", title="t")).id for id in ("a", "x1", "0" * 26)]
    minted = [store.upsert(Item(kind="note", title=f"t {i}")).id for i in range(20)]
    judge = Store(config)  # has minted nothing: every id takes the pattern
    for id in given + minted:
        assert store._index_id[id] == judge._index_id_text(id), id
    assert not any(store._index_id[id] for id in minted) or config.skip_id_text or config.new_id
    store._check()


class _CloningStore(Store):
    """The store as it was: it keeps the write's item and hands back a clone of it."""

    def _store_locked(self, it: Item) -> Item:
        if self._config.before is not None:
            it = self._amended(it)
        self._write(it.id, it)
        return it.clone()


def _config() -> Config:
    ticks = iter(range(10**6))
    ids = iter(range(10**6))
    start = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)
    return Config(
        clock=lambda: start + _dt.timedelta(seconds=next(ticks)),
        new_id=lambda: f"m{next(ids)}",
    )


def _state(it: Item) -> tuple[dict[str, object], set[str]]:
    d = dict(it.__dict__)
    d["links"] = [link.model_dump() for link in it.links]
    d["tags"], d["supersedes"], d["evidence_refs"] = (
        list(it.tags),
        list(it.supersedes),
        list(it.evidence_refs),
    )
    d["data"] = dict(it.data)
    return d, set(it.model_fields_set)


writes = st.lists(
    st.tuples(st.sampled_from(["", "a", "b", "c"]), items, st.booleans()), max_size=12
)


@settings(max_examples=150, deadline=None)
@given(writes)
def test_the_item_handed_back_is_what_a_clone_of_the_stored_one_was(
    runs: list[tuple[str, Item, bool]],
) -> None:
    new, old = Store(_config()), _CloningStore(_config())
    for id, item, many in runs:
        item = item.clone(id=id, supersedes=[], links=[], created_at=None, updated_at=None)
        got: list[Item | Exception] = []
        for store in (new, old):
            try:
                if many:
                    got.append(store.upsert_many([item])[0])
                else:
                    got.append(store.upsert(item))
            except Exception as e:  # the same refusal from both
                got.append(e)
        a, b = got
        if isinstance(a, Exception) or isinstance(b, Exception):
            assert type(a) is type(b) and str(a) == str(b)
            continue
        assert _state(a) == _state(b)
        assert type(a.tags) is list and type(a.data) is dict
        assert _state(new._items[a.id]) == _state(old._items[b.id])
        kept = _state(new._items[a.id])
        a.tags.append("mine")  # the writer's own item: the store does not see it change
        a.data["k"] = "v"
        a.title = "changed"
        assert _state(new._items[a.id]) == kept
    assert {k: _state(v) for k, v in new._items.items()} == {
        k: _state(v) for k, v in old._items.items()
    }
    new._check()


def test_a_link_handed_back_is_not_the_stored_one() -> None:
    store = Store()
    target = store.upsert(Item(kind="note", title="target"))
    link = ThoughtLink(to_id=target.id, relation="explains", weight=0.5)
    got = store.upsert(Item(kind="note", title="x", links=[link]))
    got.links[0].weight = 0.25  # the writer's copy is its own to change
    assert store.get(got.id).links[0].weight == 0.5  # type: ignore[union-attr]
    store._check()


def test_with_a_host_hook_the_store_keeps_the_item_the_hook_saw() -> None:
    seen: list[Item] = []
    store = Store(Config(before=seen.append))
    got = store.upsert(Item(kind="note", title="x"))
    assert store._items[got.id] is seen[0] and got is not seen[0]
