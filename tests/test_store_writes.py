"""Writes: validation, upsert stamping, deadlines, privacy and the plain readers.

Every rejected write must raise :class:`InvalidItemError` naming the rule and
leave the store exactly as it was: items, indexes, search results, observers.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest
import regex
from conftest import T0, FakeClock, Recorder, StoreFactory

from memstore import (
    DEFAULT_HYPOTHESIS_STALE_AFTER,
    DEFAULT_UNKNOWN_STALE_AFTER,
    Config,
    InvalidItemError,
    Item,
    Memory,
    MemstoreError,
    Store,
    ThoughtLink,
    Vocabulary,
    validate_base,
)
from memstore.store import RECENT_WINDOW

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
SEED_ID = "fact-ledger"
SEED_QUERY = "ledger timeout"


def _get(store: Store, id: str) -> Item:
    got = store.get(id)
    assert got is not None, id
    return got


def _seed(store: Store) -> Item:
    return store.upsert(
        Item(
            id=SEED_ID,
            kind="stable_fact",
            confidence="high",
            title="Ledger timeout",
            content="ledger calls time out after 30 seconds under load",
            tags=["service/ledger"],
        )
    )


Snapshot = tuple[int, list[dict[str, Any]], list[str], list[str]]


def _snapshot(store: Store) -> Snapshot:
    """Everything a rejected write must leave alone (and the index invariant)."""
    store._check()
    store.lock.acquire()
    try:
        dumps = [it.model_dump() for it in store.items_locked()]
    finally:
        store.lock.release()
    return (
        len(store),
        dumps,
        [it.id for it in store.keyword_search(SEED_QUERY)],
        [it.id for it in store.exact_matches("ledger timeout")],
    )


# ------------------------------------------------------------- validation

REJECTIONS: list[tuple[str, Item, str]] = [
    ("kind missing", Item(title="a note"), "kind is required"),
    ("kind with a space", Item(kind="stable fact", title="x"), "kind 'stable fact'"),
    ("kind too long", Item(kind="k" * 65, title="x"), "1-64"),
    ("id with a space", Item(id="has space", kind="note", title="x"), "holds a space"),
    # It said "must be at most 256 characters with no spaces" of this 3-character id.
    ("id with a control char", Item(id="a\x00b", kind="note", title="x"), "control character"),
    ("id with a tab", Item(id="a\tb", kind="note", title="x"), "holds whitespace"),
    ("id too long", Item(id="i" * 257, kind="note", title="x"), "at most 256"),
    ("title and content blank", Item(kind="note", title="  ", content="\n\t"), "both empty"),
    ("title too long", Item(kind="note", title="t" * 1001), "title is 1001 characters"),
    (
        "content too long",
        Item(kind="note", title="x", content="c" * 100_001),
        "content is 100001 characters",
    ),
    (
        "stable fact with low confidence",
        Item(kind="stable_fact", title="x", confidence="low"),
        "kind 'stable_fact' needs confidence 'high', got 'low'",
    ),
    (
        "stable fact without confidence",
        Item(kind="stable_fact", title="x"),
        "needs confidence 'high', got ''",
    ),
    ("event without a date", Item(kind="event", title="deploy"), "needs an event_date"),
    (
        "event with prose date",
        Item(kind="event", title="deploy", event_date="last tuesday"),
        "event_date 'last tuesday'",
    ),
    (
        "event date without offset",
        Item(kind="event", title="deploy", event_date="2024-03-01T10:00:00"),
        "neither YYYY-MM-DD nor RFC 3339",
    ),
    (
        "impossible date on a non-event",
        Item(kind="note", title="x", event_date="2024-13-01"),
        "event_date '2024-13-01'",
    ),
    (
        "private without owner",
        Item(kind="note", title="x", scope="private"),
        "owner's tag (user:<hash>)",
    ),
    (
        "private with empty owner",
        Item(kind="note", title="x", scope="private", tags=["user:"]),
        "owner's tag",
    ),
    (
        "two partition tags",
        Item(kind="note", title="x", tags=["tenant/a", "tenant/b"]),
        "at most one partition tag (tenant/...), got 2",
    ),
    # Before, these were stored: 'tenant/*' put an item in a partition no
    # search can name ('*' reads every partition), 'tenant/' in none.
    (
        "partition tag of every partition",
        Item(kind="note", title="x", tags=["tenant/*"]),
        "tag 'tenant/*' names no partition",
    ),
    ("empty partition tag", Item(kind="note", title="x", tags=["tenant/"]), "names no partition"),
    (
        "too many tags",
        Item(kind="note", title="x", tags=[f"t{i}" for i in range(65)]),
        "65 tags; at most 64",
    ),
    ("empty tag", Item(kind="note", title="x", tags=[""]), "is empty, padded"),
    ("padded tag", Item(kind="note", title="x", tags=[" ops"]), "tag ' ops'"),
    ("tag with comma", Item(kind="note", title="x", tags=["a,b"]), "tag 'a,b'"),
    ("tag with newline", Item(kind="note", title="x", tags=["a\nb"]), "comma or newline"),
    (
        "link with empty target",
        Item(kind="note", title="x", links=[ThoughtLink(to_id="", relation="explains")]),
        "link target (to_id) is empty",
    ),
    (
        "link with unknown relation",
        Item(kind="note", title="x", links=[ThoughtLink(to_id="y", relation="likes")]),
        "link relation 'likes' is not one of: triggers, caused_by",
    ),
    (
        "self link",
        Item(id="n1", kind="note", title="x", links=[ThoughtLink(to_id="n1", relation="explains")]),
        "cannot link to itself (n1)",
    ),
    ("empty data key", Item(kind="note", title="x", data={"": "v"}), "data keys must be non-empty"),
]


@pytest.mark.parametrize(
    ("item", "reason"), [(i, r) for _, i, r in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_invalid_upsert_raises_and_changes_nothing(
    store: Store, recorder: Recorder, item: Item, reason: str
) -> None:
    _seed(store)
    before = _snapshot(store)
    recorder.clear()

    with pytest.raises(InvalidItemError) as err:
        store.upsert(item)

    assert reason in err.value.reason
    assert reason in str(err.value)
    assert _snapshot(store) == before
    assert recorder.quiet


@pytest.mark.parametrize(
    ("item", "reason"), [(i, r) for _, i, r in REJECTIONS], ids=[n for n, _, _ in REJECTIONS]
)
def test_validate_base_reports_the_same_reason_without_a_store(item: Item, reason: str) -> None:
    assert reason in validate_base(Vocabulary(), item)


def test_invalid_update_of_existing_item_keeps_its_content(
    store: Store, recorder: Recorder
) -> None:
    _seed(store)
    before = _snapshot(store)
    recorder.clear()

    with pytest.raises(InvalidItemError, match="needs confidence 'high', got 'low'"):
        store.upsert(Item(id=SEED_ID, kind="stable_fact", title="Ledger is fine", confidence="low"))

    assert _snapshot(store) == before
    assert _get(store, SEED_ID).title == "Ledger timeout"
    assert recorder.quiet


def test_invalid_item_error_is_a_value_error(store: Store) -> None:
    with pytest.raises(ValueError, match="kind is required"):
        store.upsert(Item(title="no kind"))


def test_a_non_item_is_rejected(store: Store) -> None:
    with pytest.raises(InvalidItemError, match="expected an Item, got dict"):
        store.upsert({"kind": "note", "title": "x"})  # type: ignore[arg-type]
    assert len(store) == 0


def test_every_writer_names_a_wrong_type_and_changes_nothing(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(Item(id="a", kind="note", title="a"))
    before = store.items_locked()
    recorder.clear()
    calls = {
        "put": lambda: store.put("x"),  # type: ignore[arg-type]
        "mirror": lambda: store.mirror(None),  # type: ignore[arg-type]
        "reflect": lambda: store.reflect("a", {"id": "a"}),  # type: ignore[arg-type]
        "restore": lambda: store.restore([Item(id="b", kind="note", title="b"), "c"]),  # type: ignore[list-item]
        "link": lambda: store.add_link("a", {"to_id": "b", "relation": "explains"}),  # type: ignore[arg-type]
        "anchor_ids": lambda: store.traverse("a"),
    }
    for what, call in calls.items():
        with pytest.raises(InvalidItemError, match=r"expected an?|list of ids|must be a") as e:
            call()
        assert what in str(e.value), what
    assert store.items_locked() == before
    assert recorder.quiet


def test_valid_edge_values_are_accepted(store: Store) -> None:
    ok = [
        Item(id="i" * 256, kind="note", title="longest id"),
        Item(kind="k" * 64, title="longest kind"),
        Item(kind="café:ops/x.y-z_1", title="unicode kind"),
        Item(kind="note", title="t" * 1000, content="c" * 100_000),
        Item(kind="note", title="", content="only content"),
        Item(kind="note", title="many tags", tags=[f"t{i}" for i in range(64)]),
        Item(kind="event", title="day", event_date="2024-03-01"),
        Item(kind="event", title="instant", event_date="2024-03-01T10:00:00+02:00"),
        Item(kind="note", title="one partition", tags=["tenant/a", "service/x"]),
        Item(kind="note", title="mine", scope="private", tags=["user:u1"]),
    ]
    for item in ok:
        store.upsert(item)
    assert len(store) == len(ok)
    store._check()


def test_hypothesis_and_unknown_need_a_deadline_under_the_base_rules() -> None:
    for kind in ("hypothesis", "unknown"):
        why = validate_base(Vocabulary(), Item(kind=kind, title="x"))
        assert why == f"kind {kind!r} needs a deadline (stale_after)"
        assert validate_base(Vocabulary(), Item(kind=kind, title="x", stale_after=T0)) == ""


def test_upsert_stamps_the_default_deadline_on_hypothesis_and_unknown(store: Store) -> None:
    hyp = store.upsert(Item(kind="hypothesis", title="ledger pool too small"))
    unk = store.upsert(Item(kind="unknown", title="why does the ledger stall?"))

    assert hyp.stale_after == T0 + DEFAULT_HYPOTHESIS_STALE_AFTER == T0 + 24 * HOUR
    assert unk.stale_after == T0 + DEFAULT_UNKNOWN_STALE_AFTER == T0 + 7 * DAY


def test_stable_fact_confidence_is_optional_when_the_vocabulary_says_so(
    make_store: StoreFactory,
) -> None:
    store = make_store(vocabulary=Vocabulary(fact_confidence_optional=True))
    item = store.upsert(Item(kind="stable_fact", title="probably true", confidence="low"))
    assert _get(store, item.id).confidence == "low"


def test_host_validate_rejects_with_its_reason_and_changes_nothing(
    make_store: StoreFactory, recorder: Recorder
) -> None:
    def no_shouting(item: Item) -> str:
        return "titles must not shout" if item.title.isupper() else ""

    store = make_store(validate=no_shouting)
    _seed(store)
    before = _snapshot(store)
    recorder.clear()

    with pytest.raises(InvalidItemError, match="titles must not shout"):
        store.upsert(Item(kind="note", title="LEDGER IS DOWN"))

    assert _snapshot(store) == before
    assert recorder.quiet
    store.upsert(Item(kind="note", title="ledger is down"))
    assert len(store) == 2


def test_host_validate_is_not_asked_about_items_the_base_rules_reject(
    make_store: StoreFactory,
) -> None:
    seen: list[Item] = []

    def record(item: Item) -> str:
        seen.append(item)
        return ""

    store = make_store(validate=record)
    with pytest.raises(InvalidItemError):
        store.upsert(Item(kind="", title="x"))
    assert seen == []


def test_coerce_rewrites_the_kind_before_stamping_and_validation(
    make_store: StoreFactory,
) -> None:
    def demote(item: Item) -> None:
        if item.kind == "episodic":
            item.kind = "hypothesis"

    host_saw: list[str] = []

    def host(item: Item) -> str:
        host_saw.append(item.kind)
        return ""

    store = make_store(vocabulary=Vocabulary(coerce=demote), validate=host)
    incoming = Item(kind="episodic", title="the ledger pool might be too small")

    stored = store.upsert(incoming)

    assert stored.kind == "hypothesis"
    # Coerced before stamping: it got the hypothesis deadline, so it passed validation.
    assert stored.stale_after == T0 + DEFAULT_HYPOTHESIS_STALE_AFTER
    assert host_saw == ["hypothesis"]
    assert incoming.kind == "episodic"


def test_coerce_into_an_invalid_item_is_rejected(make_store: StoreFactory) -> None:
    def promote(item: Item) -> None:
        item.kind = "stable_fact"

    store = make_store(vocabulary=Vocabulary(coerce=promote))
    with pytest.raises(InvalidItemError, match="needs confidence 'high'"):
        store.upsert(Item(kind="note", title="x", confidence="low"))
    assert len(store) == 0


@pytest.mark.parametrize("field", ["stale_after", "created_at", "updated_at"])
def test_the_model_rejects_naive_datetimes(field: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        Item(kind="note", title="x", **{field: dt.datetime(2030, 1, 1)})


def test_the_model_rejects_unknown_scope_status_confidence_and_origin() -> None:
    for field, value in [
        ("scope", "team"),
        ("status", "deleted"),
        ("confidence", "certain"),
        ("origin", "model"),
    ]:
        with pytest.raises(pydantic.ValidationError):
            Item(kind="note", title="x", **{field: value})


@pytest.mark.parametrize("weight", [0.0, -0.5, 1.5])
def test_the_model_rejects_link_weights_outside_zero_to_one(weight: float) -> None:
    with pytest.raises(pydantic.ValidationError):
        ThoughtLink(to_id="x", relation="explains", weight=weight)


def test_naive_deadline_assigned_after_construction_is_rejected(
    store: Store, recorder: Recorder
) -> None:
    # Attribute assignment skips pydantic's validation, so the store is the
    # last gate: a naive deadline stored here makes every later read raise.
    _seed(store)
    before = _snapshot(store)
    recorder.clear()
    item = Item(kind="watch_item", title="ledger latency creeping up")
    item.stale_after = dt.datetime(2030, 1, 1)

    with pytest.raises(InvalidItemError) as err:
        store.upsert(item)

    assert "stale_after" in err.value.reason
    assert _snapshot(store) == before
    assert recorder.quiet


def test_rejected_supersede_and_dedup_writes_change_nothing(
    store: Store, recorder: Recorder
) -> None:
    _seed(store)
    before = _snapshot(store)
    recorder.clear()

    with pytest.raises(InvalidItemError, match="needs confidence"):
        store.supersede(SEED_ID, Item(kind="stable_fact", title="new", confidence="low"))
    with pytest.raises(InvalidItemError, match="needs confidence"):
        store.upsert_dedup(Item(kind="stable_fact", title="Ledger timeout", confidence="medium"))

    assert _snapshot(store) == before
    assert recorder.quiet


# --------------------------------------------------------- upsert stamping

MINTED = regex.compile(r"memory-[0-9A-HJKMNP-TV-Z]{26}")


def test_an_item_without_id_gets_a_minted_ulid_id(store: Store) -> None:
    a = store.upsert(Item(kind="note", title="a"))
    b = store.upsert(Item(kind="note", title="b"))

    assert MINTED.fullmatch(a.id), a.id
    assert MINTED.fullmatch(b.id), b.id
    assert a.id != b.id
    assert _get(store, a.id).title == "a"


def test_id_prefix_starts_minted_ids(make_store: StoreFactory) -> None:
    store = make_store(id_prefix="note-")
    item = store.upsert(Item(kind="note", title="a"))
    assert regex.fullmatch(r"note-[0-9A-HJKMNP-TV-Z]{26}", item.id), item.id


def test_new_id_supplies_ids(make_store: StoreFactory) -> None:
    ids = iter(["n-1", "n-2"])
    store = make_store(new_id=lambda: next(ids))

    assert store.upsert(Item(kind="note", title="a")).id == "n-1"
    assert store.upsert(Item(kind="note", title="b")).id == "n-2"
    assert store.upsert(Item(id="chosen", kind="note", title="c")).id == "chosen"


def test_a_chosen_id_is_searchable_but_a_minted_one_is_not(store: Store) -> None:
    minted = store.upsert(Item(kind="note", title="alpha"))
    chosen = store.upsert(Item(id="runbook-zebra", kind="note", title="beta"))

    assert [it.id for it in store.keyword_search("zebra")] == [chosen.id]
    assert store.keyword_search(minted.id.removeprefix("memory-").lower()) == []


def test_created_at_is_kept_and_updated_at_follows_the_clock(
    store: Store, clock: FakeClock
) -> None:
    first = store.upsert(Item(id="n", kind="note", title="v1"))
    assert first.created_at == first.updated_at == T0

    later = clock.advance(3 * HOUR)
    second = store.upsert(Item(id="n", kind="note", title="v2", created_at=T0 + DAY))

    assert second.created_at == T0
    assert second.updated_at == later
    assert _get(store, "n").created_at == T0
    assert _get(store, "n").title == "v2"


def test_a_new_item_keeps_a_created_at_it_brings(store: Store) -> None:
    then = T0 - 30 * DAY
    item = store.upsert(Item(kind="note", title="imported", created_at=then))
    assert item.created_at == then
    assert item.updated_at == T0


def test_update_keeps_links_unless_links_set(store: Store) -> None:
    store.upsert(Item(id="cause", kind="note", title="cause"))
    store.upsert(Item(id="effect", kind="note", title="effect"))
    assert store.add_link("effect", ThoughtLink(to_id="cause", relation="caused_by"))

    store.upsert(Item(id="effect", kind="note", title="effect, edited"))
    assert [lk.to_id for lk in _get(store, "effect").links] == ["cause"]

    stored = store.upsert(Item(id="effect", kind="note", title="effect", links_set=True))
    assert stored.links == []
    assert _get(store, "effect").links == []
    assert _get(store, "effect").links_set is False
    assert store.traverse(["cause"]) == []
    store._check()


def test_update_with_new_links_replaces_the_old_ones(store: Store) -> None:
    for id in ("a", "b", "c"):
        store.upsert(Item(id=id, kind="note", title=id))
    store.add_link("a", ThoughtLink(to_id="b", relation="explains"))

    store.upsert(
        Item(id="a", kind="note", title="a", links=[ThoughtLink(to_id="c", relation="precedes")])
    )

    assert [(lk.to_id, lk.relation) for lk in _get(store, "a").links] == [("c", "precedes")]
    store._check()


def test_update_keeps_supersedes_when_it_brings_none(store: Store) -> None:
    store.upsert(Item(id="n", kind="note", title="v1", supersedes=["old"]))
    store.upsert(Item(id="n", kind="note", title="v2"))
    assert _get(store, "n").supersedes == ["old"]


def test_origin_defaults_to_derived(store: Store) -> None:
    assert store.upsert(Item(kind="note", title="x")).origin == "derived"


def test_origin_defaults_to_human_with_an_author_tag(store: Store) -> None:
    assert store.upsert(Item(kind="note", title="x", tags=["author/ana"])).origin == "human"


def test_origin_given_is_kept(store: Store) -> None:
    assert store.upsert(Item(kind="note", title="x", origin="observed")).origin == "observed"


def test_update_without_origin_keeps_the_stored_one(store: Store) -> None:
    store.upsert(Item(id="n", kind="note", title="measured", origin="observed"))
    assert store.upsert(Item(id="n", kind="note", title="edited")).origin == "observed"
    assert store.upsert(Item(id="n", kind="note", title="x", origin="verified")).origin == (
        "verified"
    )


def test_private_item_gets_the_instance_subject(make_store: StoreFactory) -> None:
    store = make_store(subject="node-1")
    mine = store.upsert(Item(kind="note", title="x", scope="private", tags=["user:u1"]))
    public = store.upsert(Item(kind="note", title="y"))
    assert mine.subject == "node-1"
    assert public.subject == ""


def test_mutating_the_returned_item_does_not_change_the_store(store: Store) -> None:
    store.upsert(Item(id="cause", kind="note", title="cause"))
    returned = store.upsert(
        Item(
            id="n",
            kind="note",
            title="original",
            tags=["t1"],
            data={"k": "v"},
            links=[ThoughtLink(to_id="cause", relation="caused_by", weight=0.5)],
        )
    )

    returned.title = "hacked"
    returned.tags.append("t2")
    returned.data["k"] = "changed"
    returned.links[0].weight = 0.9
    returned.links.clear()

    stored = _get(store, "n")
    assert stored.title == "original"
    assert stored.tags == ["t1"]
    assert stored.data == {"k": "v"}
    assert [(lk.to_id, lk.weight) for lk in stored.links] == [("cause", 0.5)]
    assert [it.id for it in store.keyword_search("original")] == ["n"]
    store._check()


def test_mutating_an_item_read_back_does_not_change_the_store(store: Store) -> None:
    store.upsert(Item(id="n", kind="note", title="original", tags=["t1"]))
    got = _get(store, "n")
    got.tags.append("t2")
    got.title = "hacked"
    for it in store.items():
        it.tags.clear()
    assert _get(store, "n").tags == ["t1"]
    assert _get(store, "n").title == "original"


def test_empty_fields_of_items_read_back_are_plain_and_their_own(store: Store) -> None:
    # The store keeps one shared empty list/dict for every stored item's empty
    # links, supersedes, evidence and data, and one list of the same tags:
    # what a caller gets is its own.
    first = store.upsert(Item(id="a", kind="note", title="first", tags=["tenant/ops"]))
    store.upsert(Item(id="b", kind="note", title="second", tags=["tenant/ops"]))
    got = _get(store, "b")
    for it in (first, got, *store.items()):
        assert type(it.links) is list and type(it.data) is dict and type(it.tags) is list
        assert type(it.supersedes) is list and type(it.evidence_refs) is list
    first.supersedes.append("x")
    first.tags.append("shared")
    got.evidence_refs.append("cell:a")
    got.data["k"] = "v"
    got.links.append(ThoughtLink(to_id="a", relation="correlates_with", weight=0.5))
    got.title = "renamed"  # a field set of its own, too
    for id in ("a", "b"):
        stored = _get(store, id)
        assert (stored.supersedes, stored.evidence_refs, stored.data, stored.links) == (
            [],
            [],
            {},
            [],
        )
    # Written back, the caller's copy is stored as given, and the other item not touched.
    store.upsert(got)
    assert _get(store, "b").data == {"k": "v"} and _get(store, "a").data == {}
    assert [lk.to_id for lk in _get(store, "b").links] == ["a"]
    assert _get(store, "a").links == [] and _get(store, "a").evidence_refs == []
    assert _get(store, "a").tags == ["tenant/ops"] == _get(store, "b").tags
    store._check()


def test_a_listener_cannot_change_the_stored_items_empty_fields(store: Store) -> None:
    # A listener gets the stored object itself; changing it in place is refused
    # loudly (it would change every item sharing the empty container), and the
    # write it observed still stands.
    seen: list[Item] = []
    store.add_change_listener(lambda op, item, id, kind: seen.append(item))
    store.upsert(Item(id="a", kind="note", title="first"))
    store.upsert(Item(id="b", kind="note", title="second"))
    with pytest.raises(TypeError, match="never changed in place"):
        seen[0].links.append(ThoughtLink(to_id="b", relation="correlates_with", weight=0.5))
    with pytest.raises(TypeError, match="never changed in place"):
        seen[0].data["k"] = "v"
    with pytest.raises(TypeError, match="never changed in place"):
        seen[0].tags.append("t")
    assert _get(store, "b").links == [] and _get(store, "b").data == {}
    assert [it.id for it in store.keyword_search("second")] == ["b"]


def test_the_callers_item_is_not_mutated(store: Store, clock: FakeClock) -> None:
    incoming = Item(kind="hypothesis", title="pool too small", tags=["author/ana"])
    snapshot = incoming.model_dump()

    stored = store.upsert(incoming)

    assert incoming.model_dump() == snapshot
    assert incoming.id == "" and incoming.stale_after is None and incoming.origin == ""
    incoming.tags.append("later")
    incoming.title = "changed after the write"
    assert _get(store, stored.id).tags == ["author/ana"]
    assert _get(store, stored.id).title == "pool too small"


def test_before_seam_amends_the_stored_item(make_store: StoreFactory) -> None:
    def stamp(item: Item) -> None:
        item.tags.append("seen-by-host")

    store = make_store(before=stamp)
    item = store.upsert(Item(kind="note", title="x"))
    assert item.tags == ["seen-by-host"]
    assert _get(store, item.id).tags == ["seen-by-host"]


# ------------------------------------------------------------- deadlines


def test_default_ttl_stamps_a_created_item_without_a_deadline(make_store: StoreFactory) -> None:
    store = make_store(default_ttl={"watch_item": 3 * DAY, "hypothesis": 2 * HOUR})

    watch = store.upsert(Item(kind="watch_item", title="ledger latency"))
    hyp = store.upsert(Item(kind="hypothesis", title="pool too small"))
    note = store.upsert(Item(kind="note", title="no ttl for notes"))
    explicit = store.upsert(Item(kind="watch_item", title="x", stale_after=T0 + 9 * DAY))

    assert watch.stale_after == T0 + 3 * DAY
    assert hyp.stale_after == T0 + 2 * HOUR
    assert note.stale_after is None
    assert explicit.stale_after == T0 + 9 * DAY


def test_default_ttl_update_without_deadline_keeps_the_stored_one(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store(default_ttl={"watch_item": 3 * DAY})
    store.upsert(Item(id="w", kind="watch_item", title="ledger latency"))

    clock.advance(2 * DAY)
    updated = store.upsert(Item(id="w", kind="watch_item", title="ledger latency, worse"))
    assert updated.stale_after == T0 + 3 * DAY

    renewed = store.upsert(
        Item(id="w", kind="watch_item", title="renewed", stale_after=T0 + 10 * DAY)
    )
    assert renewed.stale_after == T0 + 10 * DAY


def test_default_ttl_map_keeps_a_hypothesis_deadline_on_update(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store(default_ttl={"watch_item": 3 * DAY})
    store.upsert(Item(id="h", kind="hypothesis", title="pool too small"))
    clock.advance(5 * HOUR)
    assert store.upsert(
        Item(id="h", kind="hypothesis", title="pool way too small")
    ).stale_after == (T0 + DEFAULT_HYPOTHESIS_STALE_AFTER)


def test_without_default_ttl_every_hypothesis_write_is_stamped_afresh(
    store: Store, clock: FakeClock
) -> None:
    store.upsert(Item(id="h", kind="hypothesis", title="pool too small"))
    store.upsert(Item(id="u", kind="unknown", title="why the stall?"))

    later = clock.advance(5 * HOUR)
    h = store.upsert(Item(id="h", kind="hypothesis", title="pool way too small"))
    u = store.upsert(Item(id="u", kind="unknown", title="why the long stall?"))

    assert h.stale_after == later + 24 * HOUR
    assert u.stale_after == later + 7 * DAY


def test_retention_stamps_knowledge_kinds_by_partition(make_store: StoreFactory) -> None:
    days = {"alpha": 30, "beta": 0}
    asked: list[str] = []

    def retention(partition: str) -> int:
        asked.append(partition)
        return days.get(partition, 7)

    store = make_store(retention=retention)

    alpha = store.upsert(
        Item(kind="stable_fact", confidence="high", title="a", tags=["tenant/alpha"])
    )
    beta = store.upsert(
        Item(kind="stable_fact", confidence="high", title="b", tags=["tenant/beta"])
    )
    untagged = store.upsert(Item(kind="stable_fact", confidence="high", title="c"))
    pattern = store.upsert(Item(kind="operational_pattern", title="d", tags=["tenant/alpha"]))
    watch = store.upsert(Item(kind="watch_item", title="e", tags=["tenant/alpha"]))
    explicit = store.upsert(
        Item(
            kind="stable_fact",
            confidence="high",
            title="f",
            tags=["tenant/alpha"],
            stale_after=T0 + DAY,
        )
    )

    assert alpha.stale_after == T0 + 30 * DAY
    assert beta.stale_after is None
    assert untagged.stale_after == T0 + 7 * DAY
    assert pattern.stale_after == T0 + 30 * DAY
    assert watch.stale_after is None
    assert explicit.stale_after == T0 + DAY
    assert asked == ["alpha", "beta", "", "alpha"]


# ------------------------------------------------------------------ privacy

OWNER = "u-ana"
OTHER = "u-bob"


def _private_and_public(store: Store) -> tuple[Item, Item, Item]:
    mine = store.upsert(
        Item(
            id="secret-ana",
            kind="note",
            title="Ledger password rotation",
            content="ana rotates the ledger password through her keyring",
            scope="private",
            tags=[f"user:{OWNER}", "service/ledger"],
        )
    )
    theirs = store.upsert(
        Item(
            id="secret-bob",
            kind="note",
            title="Ledger password vault",
            content="bob keeps the ledger password in the vault",
            scope="private",
            tags=[f"user:{OTHER}", "service/ledger"],
        )
    )
    public = store.upsert(
        Item(
            id="public-ledger",
            kind="note",
            title="Ledger password policy",
            content="the ledger password changes every 90 days",
            tags=["service/ledger"],
        )
    )
    return mine, theirs, public


def test_private_items_never_reach_shared_readers(store: Store) -> None:
    _private_and_public(store)
    public = ["public-ledger"]

    assert [it.id for it in store.items()] == public
    assert [it.id for it in store.filtered()] == public
    assert [it.id for it in store.filtered(scope="private")] == []
    assert [it.id for it in store.filtered(subject="ledger")] == public
    assert [it.id for it in store.keyword_search("ledger password")] == public
    assert [it.id for it in store.keyword_search("keyring")] == []
    assert [it.id for it in store.keyword_search_per_kind("ledger password")] == public
    assert [it.id for it in store.recent()] == public
    assert [it.id for it in store.exact_matches("ledger")] == public
    assert [it.id for it in store.exact_matches("Ledger password rotation")] == []
    assert store.resolve_anchors("Ledger password rotation") == []
    assert not store.indexed("secret-ana")
    assert store.count_active() == 3


def test_for_user_returns_private_items_only_to_their_owner(store: Store) -> None:
    _private_and_public(store)

    assert sorted(it.id for it in store.for_user(OWNER)) == ["public-ledger", "secret-ana"]
    assert sorted(it.id for it in store.for_user(OTHER)) == ["public-ledger", "secret-bob"]
    assert [it.id for it in store.for_user("u-nobody")] == ["public-ledger"]
    assert [it.id for it in store.for_user("")] == ["public-ledger"]
    assert [it.id for it in store.for_user(OWNER, scope="private")] == ["secret-ana"]


def test_keyword_search_for_user_adds_only_the_callers_private_items(store: Store) -> None:
    _private_and_public(store)

    mine = [it.id for it in store.keyword_search_for_user(OWNER, "ledger password")]
    theirs = [it.id for it in store.keyword_search_for_user(OTHER, "ledger password")]

    assert sorted(mine) == ["public-ledger", "secret-ana"]
    assert sorted(theirs) == ["public-ledger", "secret-bob"]
    assert [it.id for it in store.keyword_search_for_user(OWNER, "keyring")] == ["secret-ana"]
    assert [it.id for it in store.keyword_search_for_user("", "ledger password")] == [
        "public-ledger"
    ]


def test_keyword_search_own_searches_only_the_callers_private_items(store: Store) -> None:
    _private_and_public(store)

    assert [it.id for it in store.keyword_search_own(OWNER, "ledger password")] == ["secret-ana"]
    assert [it.id for it in store.keyword_search_own(OTHER, "ledger password")] == ["secret-bob"]
    assert store.keyword_search_own("", "ledger password") == []
    assert store.keyword_search_own("u-nobody", "ledger password") == []


def test_a_private_item_made_public_becomes_searchable(store: Store) -> None:
    _private_and_public(store)
    store.upsert(
        Item(id="secret-ana", kind="note", title="Ledger password rotation", tags=["user:x"])
    )
    assert "secret-ana" in [it.id for it in store.keyword_search("ledger password rotation")]
    assert "secret-ana" not in [it.id for it in store.for_user(OWNER, scope="private")]
    store._check()


def test_expired_private_item_is_not_returned_to_its_owner_search(
    store: Store, clock: FakeClock
) -> None:
    store.upsert(
        Item(
            id="p",
            kind="note",
            title="zebra crossing",
            scope="private",
            tags=["user:u1"],
            stale_after=T0 + HOUR,
        )
    )
    assert [it.id for it in store.keyword_search_own("u1", "zebra")] == ["p"]
    clock.advance(2 * HOUR)
    assert store.keyword_search_own("u1", "zebra") == []
    assert store.keyword_search_for_user("u1", "zebra") == []


# -------------------------------------------------------------------- reads


def test_recent_orders_by_creation_newest_first(store: Store, clock: FakeClock) -> None:
    store.upsert(Item(id="a", kind="note", title="a"))
    clock.advance(HOUR)
    store.upsert(Item(id="b", kind="note", title="b"))
    clock.advance(HOUR)
    store.upsert(Item(id="c", kind="note", title="c"))
    clock.advance(HOUR)
    store.upsert(Item(id="a", kind="note", title="a, edited"))  # update does not move it

    assert [it.id for it in store.recent()] == ["c", "b", "a"]
    assert [it.id for it in store.recent(limit=2)] == ["c", "b"]
    assert [it.id for it in store.recent(skip=lambda it: it.id == "c")] == ["b", "a"]


def test_filtered_skips_before_it_counts_the_limit(store: Store, clock: FakeClock) -> None:
    for id in "abcd":
        store.upsert(Item(id=id, kind="note", title=id))
        clock.advance(HOUR)
    store.supersede("a", Item(id="e", kind="note", title="e"))
    odd = {"b", "d"}
    assert [it.id for it in store.filtered(skip=lambda it: it.id in odd)] == ["e", "a", "c"]
    assert [it.id for it in store.filtered(limit=2, skip=lambda it: it.id in odd)] == ["e", "a"]


def test_recent_breaks_creation_ties_by_update_time(store: Store, clock: FakeClock) -> None:
    store.upsert(Item(id="a", kind="note", title="a"))
    store.upsert(Item(id="b", kind="note", title="b"))
    clock.advance(HOUR)
    store.upsert(Item(id="a", kind="note", title="a again"))

    assert [it.id for it in store.recent()] == ["a", "b"]


def test_recent_gives_a_limit_past_its_window_in_full() -> None:
    # Memory.recent takes a limit up to MAX_RESULTS (1000); before, any limit
    # past RECENT_WINDOW (500) silently got 500 items.
    ticks = iter(range(10**6))

    def clock() -> dt.datetime:  # a second per stamp: creation order is the order written
        return T0 + dt.timedelta(seconds=next(ticks))

    with Memory(embedder=None, config=Config(clock=clock)) as mem:
        mem.add_many([f"note number {i}" for i in range(RECENT_WINDOW + 100)])
        newest = mem.recent(limit=RECENT_WINDOW + 50)
        assert len(newest) == RECENT_WINDOW + 50
        assert newest[0].content == f"note number {RECENT_WINDOW + 99}"
        assert [it.id for it in mem.recent(limit=20)] == [it.id for it in newest[:20]]
        assert len(mem.store.recent(limit=0)) == RECENT_WINDOW  # 0: the window, as before


def test_recent_filters_and_leaves_out_inactive_items(store: Store, clock: FakeClock) -> None:
    store.upsert(Item(id="n", kind="note", title="n", subject="ledger"))
    store.upsert(Item(id="w", kind="watch_item", title="w", tags=["service/ledger"]))
    store.upsert(Item(id="gone", kind="note", title="g"))
    store.upsert(Item(id="soon", kind="note", title="s", stale_after=T0 + HOUR))
    store.expire("gone")
    clock.advance(2 * HOUR)

    assert sorted(it.id for it in store.recent()) == ["n", "w"]
    assert [it.id for it in store.recent(kind="watch_item")] == ["w"]
    assert sorted(it.id for it in store.recent(subject="ledger")) == ["n", "w"]


def test_exact_matches_whole_title_or_service_tag_normalised(
    store: Store, clock: FakeClock
) -> None:
    store.upsert(Item(id="title", kind="note", title="Payment-API"))
    clock.advance(HOUR)
    store.upsert(Item(id="svc", kind="note", title="timeouts", tags=["service/payment-api"]))
    store.upsert(Item(id="partial", kind="note", title="payment api timeouts"))

    assert [it.id for it in store.exact_matches("payment api")] == ["svc", "title"]
    assert [it.id for it in store.exact_matches("PaymentAPI")] == ["svc", "title"]
    assert [it.id for it in store.exact_matches("payment api", kind="zzz")] == []
    assert store.exact_matches("payment") == []
    assert store.exact_matches("  ") == []


def test_exact_matches_leaves_out_retired_and_expired_items(store: Store, clock: FakeClock) -> None:
    store.upsert(Item(id="live", kind="note", title="ledger"))
    store.upsert(Item(id="stale", kind="note", title="ledger"))
    store.upsert(Item(id="expiring", kind="note", title="ledger", stale_after=T0 + HOUR))
    store.expire("stale")
    assert sorted(it.id for it in store.exact_matches("ledger")) == ["expiring", "live"]
    clock.advance(2 * HOUR)
    assert [it.id for it in store.exact_matches("ledger")] == ["live"]


def test_filtered_subject_matches_subject_or_service_tag(store: Store) -> None:
    store.upsert(Item(id="by-subject", kind="note", title="a", subject="auth"))
    store.upsert(Item(id="by-tag", kind="note", title="b", tags=["service/auth"]))
    store.upsert(Item(id="other", kind="note", title="c", subject="billing"))

    assert sorted(it.id for it in store.filtered(subject="auth")) == ["by-subject", "by-tag"]


def test_filtered_combines_filters_newest_first_with_limit(store: Store, clock: FakeClock) -> None:
    store.upsert(Item(id="f1", kind="stable_fact", title="a", confidence="high"))
    clock.advance(HOUR)
    store.upsert(Item(id="n1", kind="note", title="b", confidence="low"))
    clock.advance(HOUR)
    store.upsert(Item(id="n2", kind="note", title="c", confidence="high"))

    assert [it.id for it in store.filtered()] == ["n2", "n1", "f1"]
    assert [it.id for it in store.filtered(kind="note")] == ["n2", "n1"]
    assert [it.id for it in store.filtered(confidence="high")] == ["n2", "f1"]
    assert [it.id for it in store.filtered(limit=1)] == ["n2"]
    assert [it.id for it in store.items()] == ["n2", "n1", "f1"]


def test_get_fold_finds_another_casing_only_when_asked(store: Store) -> None:
    store.upsert(Item(id="Runbook-Ledger", kind="note", title="x"))

    assert store.get("runbook-ledger") is None
    assert store.get_fold("runbook-ledger", False) is None
    folded = store.get_fold("RUNBOOK-LEDGER", True)
    assert folded is not None and folded.id == "Runbook-Ledger"
    assert store.get_fold("missing", True) is None


def test_read_seam_amends_what_readers_return(make_store: StoreFactory) -> None:
    def annotate(items: list[Item]) -> None:
        for it in items:
            it.data["seen"] = "yes"

    store = make_store(read=annotate)
    store.upsert(Item(id="n", kind="note", title="ledger latency"))

    assert _get(store, "n").data == {"seen": "yes"}
    assert [it.data for it in store.items()] == [{"seen": "yes"}]
    assert [it.data for it in store.filtered()] == [{"seen": "yes"}]
    assert [it.data for it in store.keyword_search("ledger")] == [{"seen": "yes"}]
    assert [it.data for it in store.recent()] == [{"seen": "yes"}]
    assert [it.data for it in store.exact_matches("ledger latency")] == [{"seen": "yes"}]
    # The seam amends the copies handed out, never the stored item.
    store.lock.acquire()
    try:
        assert [it.data for it in store.items_locked()] == [{}]
    finally:
        store.lock.release()


def test_readers_survive_restored_items_without_timestamps(store: Store) -> None:
    # Cells persisted by older writers may carry no created_at / updated_at;
    # restore and put store them as given, and every reader must still work.
    store.restore(
        [
            Item(id="legacy", kind="note", title="ledger"),
            Item(id="fresh", kind="note", title="ledger", created_at=T0, updated_at=T0),
        ]
    )

    assert sorted(it.id for it in store.recent()) == ["fresh", "legacy"]
    assert sorted(it.id for it in store.exact_matches("ledger")) == ["fresh", "legacy"]


# ------------------------------------------------- arguments of the wrong type

_WRONG_ARGUMENTS: list[tuple[str, Callable[[Store], object], str]] = [
    ("get list", lambda s: s.get([SEED_ID]), "id must be text"),
    ("get int", lambda s: s.get(5), "id must be text"),  # refused, not "not found"
    ("indexed dict", lambda s: s.indexed({}), "id must be text"),
    ("delete list", lambda s: s.delete([SEED_ID]), "id must be text"),
    ("delete None", lambda s: s.delete(None), "id must be text"),
    ("expire bytes", lambda s: s.expire(SEED_ID.encode()), "id must be text"),
    ("mark_superseded", lambda s: s.mark_superseded(SEED_ID, 5), "by_id must be text"),
    ("supersede old_id", lambda s: s.supersede([SEED_ID], Item(kind="note")), "old_id"),
    ("upsert_many int", lambda s: s.upsert_many(5), "items must be a list of Items"),
    ("upsert_many Item", lambda s: s.upsert_many(Item(kind="note", title="x")), "items must"),
    ("keyword query None", lambda s: s.keyword_search(None), "query must be text"),
    ("keyword query list", lambda s: s.keyword_search(["ledger"]), "query must be text"),
    ("keyword limit str", lambda s: s.keyword_search(SEED_QUERY, limit="5"), "limit must be"),
    ("keyword limit bool", lambda s: s.keyword_search(SEED_QUERY, limit=True), "limit must be"),
    ("keyword kind None", lambda s: s.keyword_search(SEED_QUERY, kind=None), "kind must be"),
    ("ranked partition", lambda s: s.keyword_ranked(SEED_QUERY, partition=5), "partition must"),
    ("hits own_only", lambda s: s.keyword_hits(SEED_QUERY, own_only="yes"), "own_only must"),
    ("per_kind", lambda s: s.keyword_search_per_kind(SEED_QUERY, per_kind="2"), "per_kind must"),
    ("named_subjects", lambda s: s.named_subjects(None), "query must be text"),
    ("exact_matches", lambda s: s.exact_matches(None), "query must be text"),
    ("filtered kind None", lambda s: s.filtered(kind=None), "kind must be text"),
    ("filtered limit str", lambda s: s.filtered(limit="3"), "limit must be"),
    ("filtered limit float", lambda s: s.filtered(limit=2.5), "limit must be"),
    ("for_user list", lambda s: s.for_user(["u"]), "user_hash must be text"),
    ("recent limit nan", lambda s: s.recent(limit=float("nan")), "limit must be"),
    ("recent skip", lambda s: s.recent(skip="stale"), "skip must be"),
    ("filtered skip", lambda s: s.filtered(skip="stale"), "skip must be"),
    ("traverse text", lambda s: s.traverse(SEED_ID), "anchor_ids must be a list"),
    ("traverse depth", lambda s: s.traverse([SEED_ID], max_depth="2"), "max_depth must be"),
    ("traverse decay", lambda s: s.traverse([SEED_ID], decay=True), "decay must be"),
    ("neighbours text", lambda s: s.neighbours(SEED_ID, ["explains"]), "ids must be a list"),
    ("neighbours rel", lambda s: s.neighbours([SEED_ID], "explains"), "relations must be"),
    ("traverse dict", lambda s: s.traverse({SEED_ID: 1.0}), "anchor_ids must be a list"),
    ("search_read text", lambda s: s.search_read(SEED_ID), "ids must be a list"),
    ("search_read dict", lambda s: s.search_read({SEED_ID: 1}), "ids must be a list"),
    ("own user None", lambda s: s.keyword_search_own(None, "ledger"), "user_hash must be text"),
    ("own query None", lambda s: s.keyword_search_own("u1", None), "query must be"),
    ("resolve_anchors", lambda s: s.resolve_anchors(None), "anchor must be text"),
    ("context depth", lambda s: s.context("ledger", max_depth=True), "max_depth must be"),
    ("upsert_dedup None", lambda s: s.upsert_dedup(None), "expected an Item, got None"),
    ("validate_base None", lambda s: s.validate_base(None), "expected an Item, got None"),
    ("mutate list id", lambda s: s.mutate([SEED_ID], lambda it: True), "id must be text"),
    ("mutate fn", lambda s: s.mutate(SEED_ID, 5), "fn must be a function"),
    ("forget_locked", lambda s: s.forget_locked(None), "match must be a function"),
    ("publish_removed None", lambda s: s.publish_removed(None), "gone must be a list"),
    ("publish_removed ids", lambda s: s.publish_removed([SEED_ID]), "gone must be a list"),
]


@pytest.mark.parametrize(
    ("call", "words"), [w[1:] for w in _WRONG_ARGUMENTS], ids=[w[0] for w in _WRONG_ARGUMENTS]
)
def test_an_argument_of_the_wrong_type_is_refused_and_changes_nothing(
    store: Store, recorder: Recorder, call: Callable[[Store], object], words: str
) -> None:
    _seed(store)
    before = _snapshot(store)
    recorder.clear()
    with pytest.raises(InvalidItemError, match=re.escape(words)):
        call(store)
    assert _snapshot(store) == before
    assert recorder.quiet


def test_a_store_or_its_clone_refuses_a_lock_or_config_of_the_wrong_type(store: Store) -> None:
    _seed(store)
    # Before, each was taken and failed later: at the first write (Store(lock=5))
    # or inside the clone (AttributeError: 'int' object has no attribute 'vocabulary').
    with pytest.raises(MemstoreError, match="lock must have acquire"):
        Store(lock=5)  # type: ignore[arg-type]
    with pytest.raises(MemstoreError, match="lock must have acquire"):
        store.clone_into(5)  # type: ignore[arg-type]
    with pytest.raises(MemstoreError, match="config must be a memstore"):
        store.clone_into(None, 5)  # type: ignore[arg-type]
    assert [it.id for it in store.clone_into(None).items()] == [SEED_ID]


def test_an_id_new_id_gives_never_replaces_a_stored_item_nor_breaks_the_id_rule(
    tmp_path: Path,
) -> None:
    # Before, a new_id that gave an id already stored replaced that item
    # silently (the second add() overwrote the first note), and one that gave
    # "has space" stored an id no export could be imported with.
    with Memory(tmp_path, embedder=None, config=Config(new_id=lambda: "fixed")) as mem:
        first = mem.add("the first note")
        before = io.StringIO()
        mem.export(before)
        with pytest.raises(MemstoreError, match="'fixed', the id of an item already stored"):
            mem.add("the second note")
        after = io.StringIO()
        mem.export(after)
        assert after.getvalue() == before.getvalue()
        assert mem.get("fixed") == first
        assert mem.add("the second note", id="chosen").id == "chosen"  # a chosen id is not minted
    for bad in ("has space", "", 5):
        store = Store(Config(new_id=lambda bad=bad: bad))  # type: ignore[misc]
        with pytest.raises(MemstoreError, match=r"Config\.new_id gave no usable id"):
            store.upsert(Item(kind="note", title="x"))
        assert len(store) == 0


@pytest.mark.parametrize("prefix", ["my notes ", "x" * 300, "tab\t"])
def test_an_id_prefix_that_mints_unusable_ids_is_refused_at_once(prefix: str) -> None:
    with pytest.raises(MemstoreError, match=r"Config\.id_prefix .* mints no usable id"):
        Store(Config(id_prefix=prefix))


@pytest.mark.parametrize("subject", ["s" * 1001, "agent-\ud800", 5])
def test_a_config_subject_no_item_may_hold_is_refused_at_once(subject: Any) -> None:
    # Before, Config(subject="s" * 2000) was taken and stamped on every private
    # item written without a subject: that item could not be updated again, nor
    # an export holding it imported ("subject is 2000 characters").
    with pytest.raises(MemstoreError, match=r"Config\.subject"):
        Store(Config(subject=subject))
    assert (
        Store(Config(subject="s" * 1000))
        .upsert(Item(kind="note", title="x", scope="private", tags=["user:u1"]))
        .subject
        == "s" * 1000
    )


def test_a_deadline_config_past_the_calendar_is_a_clear_error() -> None:
    # Before, both raised a bare OverflowError ("date value out of range") from
    # inside the write (default_ttl) or its stamping (retention).
    with pytest.raises(MemstoreError, match=r"Config\.default_ttl\['note'\] must be a timedelta"):
        Store(Config(default_ttl={"note": dt.timedelta(days=999_999_999)}))
    with pytest.raises(MemstoreError, match=r"Config\.default_ttl\['note'\]"):
        Store(Config(default_ttl={"note": 30}))  # type: ignore[dict-item]
    store = Store(Config(retention=lambda partition: 10**7))
    with pytest.raises(MemstoreError, match=r"Config\.retention gave 10000000 days"):
        store.upsert(Item(kind="stable_fact", title="x", confidence="high"))
    assert len(store) == 0
    fine = Store(Config(retention=lambda partition: 30, clock=lambda: T0))
    assert fine.upsert(Item(kind="stable_fact", title="x", confidence="high")).stale_after == (
        T0 + dt.timedelta(days=30)
    )


@pytest.mark.parametrize(
    ("item", "words"),
    [
        (Item(id="two words", kind="note", title="x"), "holds a space"),
        (Item(id="nul\x00id", kind="note", title="x"), "holds a control character"),
        (Item(id="x", kind="note", title="x", tags=["team\x00a"]), "NUL"),
    ],
    ids=["space in id", "NUL in id", "NUL in tag"],
)
def test_put_refuses_an_id_or_tag_no_journal_can_keep(
    tmp_path: Path, item: Item, words: str
) -> None:
    # concepts.md (Limits): an id holds no whitespace or control character, and no id
    # or tag a NUL; "a write holding one is refused". put skips validation, but what
    # it took went into the journal, and an export of it was refused whole by import.
    with Memory(tmp_path, embedder=None) as mem:
        mem.add("kept", id="kept")
        head = mem.journal.head()
        with pytest.raises(InvalidItemError, match=words):
            mem.store.put(item)
        assert [it.id for it in mem.store.items()] == ["kept"]
        assert mem.journal.head() == head
        buffer = io.StringIO()
        mem.export(buffer)
    with Memory(tmp_path / "copy", embedder=None) as copy:
        assert copy.import_(io.StringIO(buffer.getvalue())) == 1
