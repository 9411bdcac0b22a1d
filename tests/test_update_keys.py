"""The update-time sort key is ``(updated_at.timestamp(), id)`` bit for bit, on every tzinfo.

``memstore._updatekey.update_key`` skips ``timestamp()`` for the two UTC
tzinfo objects (the stdlib's and the one pydantic-core's parser shares among
parsed datetimes); these tests hold it to ``timestamp()`` for datetimes built
directly, parsed from JSON (as a restore parses them), at any offset, in
zones whose offset changes, and at the ends of the datetime range.
"""

from __future__ import annotations

import datetime as _dt
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from memstore import Store
from memstore._updatekey import PARSED_UTC, ts, update_key
from memstore.item import Item

_offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: _dt.timezone(_dt.timedelta(minutes=m)))
_zones = st.sampled_from(
    [_dt.UTC, ZoneInfo("UTC"), ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")]
)
_aware = st.datetimes(
    min_value=_dt.datetime(1, 1, 2),
    max_value=_dt.datetime(9999, 12, 30),
    timezones=st.one_of(_zones, _offsets),
)


def _parsed(at: _dt.datetime) -> Item:
    """The item as a restore builds it: from the journal's JSON text."""
    return Item.model_validate_json(Item(id="x", updated_at=at).model_dump_json())


@given(_aware)
def test_key_is_the_timestamp_for_built_and_parsed_datetimes(at: _dt.datetime) -> None:
    built = Item(id="x", updated_at=at)
    parsed = _parsed(at)
    for it in (built, parsed):
        assert it.updated_at is not None
        assert update_key(it) == (it.updated_at.timestamp(), "x")
        assert ts(it.updated_at) == it.updated_at.timestamp()


@given(st.datetimes(timezones=st.just(_dt.UTC)))
def test_utc_datetimes_take_the_shortcut_and_agree(at: _dt.datetime) -> None:
    parsed = _parsed(at).updated_at
    assert parsed is not None
    if parsed.utcoffset() == _dt.timedelta(0):
        assert parsed.tzinfo is PARSED_UTC  # the shortcut's premise: one shared object
    assert ts(parsed) == ts(at) == at.timestamp()


def test_no_update_time_sorts_first() -> None:
    assert ts(None) == float("-inf")
    assert update_key(Item(id="a")) == (float("-inf"), "a")


@given(st.lists(st.one_of(st.none(), _aware), max_size=30))
def test_the_restore_fill_keys_every_item_by_its_timestamp(
    times: list[_dt.datetime | None],
) -> None:
    """The fill inlines the key: its list holds exactly the timestamps, sorted, checked."""
    items = [
        (_parsed(at) if at is not None and i % 2 else Item(id="x", updated_at=at)).clone(id=f"i{i}")
        for i, at in enumerate(times)
    ]
    store = Store()
    store._restore_owned(items)
    store._check()  # the update-time list's own invariants: each key is update_key(item)
    keys = [k for sub in store._by_update._keys for k in sub]  # type: ignore[attr-defined]
    assert keys == sorted(
        (it.updated_at.timestamp() if it.updated_at else float("-inf"), it.id) for it in items
    )
