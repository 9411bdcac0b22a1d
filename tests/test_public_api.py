"""The names users import from ``memstore`` exist and carry the documented values."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

import memstore

REQUIRED = """
Store Config Item MemoryCellSpec ThoughtLink Vocabulary Lexicon Removed ScoredItem RefutedRecord
MemstoreError InvalidItemError base_vocabulary KIND_STABLE_FACT KIND_OPERATIONAL_PATTERN
KIND_WATCH_ITEM KIND_HYPOTHESIS KIND_UNKNOWN KIND_EVENT ORIGIN_OBSERVED ORIGIN_DERIVED
ORIGIN_HUMAN ORIGIN_VERIFIED SCOPE_PUBLIC SCOPE_PRIVATE PARTITION_ALL PARTITION_TAG_PREFIX
AUTHOR_TAG_PREFIX PRIVATE_OWNER_TAG_PREFIX SERVICE_TAG_PREFIX TOPIC_TAG_PREFIX SHARED_TAG
REFUTED_DATA_KEY MEMORY_NEAR_DUP_THRESHOLD NEAR_DUP_MIN_TOKENS MAX_MODEL_LINKS
EXACT_ID_MATCH_SCORE VALID_THOUGHT_LINK_RELATIONS DEFAULT_HYPOTHESIS_STALE_AFTER
DEFAULT_UNKNOWN_STALE_AFTER normalize_query kw_tokens dedup_tokens token_grams
near_duplicate_memory dedup_comparable find_near_duplicate cluster_near_duplicates
better_routing_fact partition_from_tags private_owner visible_to_user filter_visible_to_user
is_private_item is_shared_item has_shared_tag author_tag_value stamp_author_tag strip_author_tags
service_tag_value sanitize_tag_value stamp_knowledge_retention restored_origin rerank_base_score
thought_link_rejection validate_base event_time_annotation parse_event_date valid_event_date
""".split()


def test_every_documented_name_is_exported() -> None:
    missing = [name for name in REQUIRED if not hasattr(memstore, name)]
    assert not missing
    assert set(REQUIRED) <= set(memstore.__all__)
    assert all(hasattr(memstore, name) for name in memstore.__all__)


def test_constants_keep_the_seed_values() -> None:
    assert memstore.KIND_STABLE_FACT == "stable_fact"
    assert memstore.PARTITION_ALL == "*"
    assert memstore.PARTITION_TAG_PREFIX == "tenant/"
    assert memstore.AUTHOR_TAG_PREFIX == "author/"
    assert memstore.PRIVATE_OWNER_TAG_PREFIX == "user:"
    assert memstore.SERVICE_TAG_PREFIX == "service/"
    assert memstore.TOPIC_TAG_PREFIX == "topic/"
    assert memstore.SHARED_TAG == "shared"
    assert memstore.REFUTED_DATA_KEY == "refuted"
    assert memstore.MEMORY_NEAR_DUP_THRESHOLD == 0.3
    assert memstore.NEAR_DUP_MIN_TOKENS == 8
    assert memstore.MAX_MODEL_LINKS == 12
    assert memstore.EXACT_ID_MATCH_SCORE == 100.0
    assert dt.timedelta(hours=24) == memstore.DEFAULT_HYPOTHESIS_STALE_AFTER
    assert dt.timedelta(days=7) == memstore.DEFAULT_UNKNOWN_STALE_AFTER
    assert memstore.VALID_THOUGHT_LINK_RELATIONS == (
        "triggers",
        "caused_by",
        "correlates_with",
        "precedes",
        "explains",
        "contradicts",
    )


def test_errors_are_also_builtins() -> None:
    assert issubclass(memstore.InvalidItemError, ValueError)
    assert issubclass(memstore.InvalidItemError, memstore.MemstoreError)
    assert issubclass(memstore.ItemNotFoundError, KeyError)


def test_item_shape_and_exact_json_round_trip() -> None:
    item = memstore.Item(
        kind="stable_fact",
        title="t",
        content="c",
        confidence="high",
        tags=["tenant/a"],
        links=[memstore.ThoughtLink(to_id="x", relation="explains", weight=0.5)],
        stale_after=dt.datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC),
        data={"k": "v"},
        no_embed=True,
        cell_originated=True,
        links_set=True,
    )
    dumped = item.model_dump()
    assert not {"no_embed", "cell_originated", "links_set"} & set(dumped)
    spec = memstore.MemoryCellSpec.model_validate_json(item.model_dump_json())
    assert spec == item.spec()
    assert memstore.MemoryCellSpec.model_validate_json(spec.model_dump_json()) == spec
    assert isinstance(item, memstore.MemoryCellSpec)


_SECONDS_OFFSETS = st.integers(-(23 * 3600 + 3599), 23 * 3600 + 3599).map(
    lambda s: dt.timezone(dt.timedelta(seconds=s))
)


@given(
    st.datetimes(
        min_value=dt.datetime(2, 1, 1),
        max_value=dt.datetime(9998, 12, 31),
        timezones=st.one_of(
            st.sampled_from([dt.UTC, ZoneInfo("Europe/Paris"), ZoneInfo("Asia/Kolkata")]),
            _SECONDS_OFFSETS,
        ),
    )
)
def test_every_datetime_survives_a_json_round_trip_as_the_same_instant(at: dt.datetime) -> None:
    # Paris kept local mean time (+00:09:21) until 1911: JSON writes offsets in
    # whole minutes, so such a datetime must be written in UTC to come back exact.
    item = memstore.Item(kind="note", content="c", stale_after=at, created_at=at, updated_at=at)
    back = memstore.Item.model_validate_json(item.model_dump_json())
    for name in ("stale_after", "created_at", "updated_at"):
        got = getattr(back, name)  # (== is False across zones in a DST gap: PEP 495)
        assert got.timestamp() == at.timestamp()
    offset = at.utcoffset()
    assert offset is not None
    if not (offset.seconds % 60 or offset.microseconds):  # whole minutes: kept as written
        assert back.stale_after is not None and back.stale_after.utcoffset() == offset
