"""Lifecycle: staleness, expiry, supersession, refutation, mirroring, loading and dedup.

Time is a :class:`FakeClock`; nothing sleeps. After every state change the
index invariant (``store._check()``) must hold.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import re
import threading
from pathlib import Path

import pytest
from conftest import T0, FakeClock, Recorder, StoreFactory

from memstore import (
    REFUTED_DATA_KEY,
    Change,
    Config,
    InvalidItemError,
    Item,
    ItemNotFoundError,
    Memory,
    MemstoreError,
    RefutedRecord,
    Removed,
    Store,
    ThoughtLink,
    Vocabulary,
)
from memstore.journal import SqliteJournal
from memstore.limits import MAX_DATA_KEYS, MAX_REFS

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)

# One fact, a paraphrase of it, and a distinct fact about the same subject.
FACT = (
    "payment api timeout",
    "payment api calls to the ledger time out after 30 seconds under load",
)
RESTATED = (
    "payment api timeouts",
    "under heavy load, ledger calls from the payment api time out after 30s",
)
DISTINCT = (
    "payment api retry policy",
    "failed ledger writes from the payment api are retried three times with exponential backoff",
)


def _get(store: Store, id: str) -> Item:
    got = store.get(id)
    assert got is not None, id
    return got


def _ids(items: list[Item]) -> list[str]:
    return [it.id for it in items]


def _all(store: Store) -> list[Item]:
    store.lock.acquire()
    try:
        return store.items_locked()
    finally:
        store.lock.release()


def _dump(store: Store) -> list[dict[str, object]]:
    return [it.model_dump() for it in _all(store)]


def _note(id: str, title: str, **kw: object) -> Item:
    return Item.model_validate({"id": id, "kind": "note", "title": title, **kw})


# ---------------------------------------------------------------- staleness


def test_item_past_its_deadline_reads_stale_before_any_sweep(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    store.upsert(_note("w", "ledger latency", stale_after=T0 + HOUR))
    store.upsert(_note("keep", "payment backlog"))
    assert _ids(store.keyword_search("ledger latency")) == ["w"]
    assert store.count_active() == 2
    recorder.clear()

    clock.advance(2 * HOUR)

    assert _get(store, "w").status == "stale"
    assert store.keyword_search("ledger latency") == []
    assert store.exact_matches("ledger latency") == []
    assert store.count_active() == 1
    assert _ids(store.filtered(status="stale")) == ["w"]
    assert "w" not in _ids(store.filtered(status="active"))
    assert "w" not in _ids(store.all_items())
    assert [it.status for it in store.items() if it.id == "w"] == ["stale"]
    assert recorder.quiet  # reading staleness is not a change


def test_deadline_is_inclusive(store: Store, clock: FakeClock) -> None:
    store.upsert(_note("w", "ledger latency", stale_after=T0 + HOUR))
    clock.advance(HOUR - dt.timedelta(microseconds=1))
    assert _get(store, "w").status == "active"
    clock.advance(dt.timedelta(microseconds=1))
    assert _get(store, "w").status == "stale"


def test_sweep_expired_writes_the_staleness_and_tells_listeners(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    store.upsert(_note("a", "ledger latency", stale_after=T0 + HOUR))
    store.upsert(_note("b", "ledger backlog", stale_after=T0 + 3 * HOUR))
    store.upsert(_note("c", "ledger retries"))
    recorder.clear()
    later = clock.advance(2 * HOUR)

    assert store.sweep_expired() == ["a"]

    assert recorder.listener_ops() == [("upsert", "a")]
    swept = recorder.listener[0][1]
    assert swept is not None and swept.status == "stale" and swept.updated_at == later
    assert recorder.hook_ops() == [("upsert", "a")]
    assert not store.indexed("a") and store.indexed("b")
    store._check()
    recorder.clear()
    assert store.sweep_expired() == []
    assert recorder.quiet


def test_expire_marks_stale_and_drops_out_of_search(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    store.upsert(_note("n", "ledger latency"))
    recorder.clear()
    later = clock.advance(HOUR)

    assert store.expire("n") is True

    got = _get(store, "n")
    assert got.status == "stale" and got.updated_at == later
    assert store.keyword_search("ledger latency") == []
    assert store.exact_matches("ledger latency") == []
    assert store.count_active() == 0
    assert recorder.listener_ops() == [("upsert", "n")]
    store._check()

    recorder.clear()
    assert store.expire("n") is True  # already stale: exists, nothing to write
    assert recorder.quiet
    assert store.expire("missing") is False
    assert recorder.quiet


# ---------------------------------------------------------------- supersede


def test_supersede_retires_the_old_item_and_links_the_new(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    store.upsert(_note("old", "ledger timeout is 30s"))
    recorder.clear()
    later = clock.advance(HOUR)

    new = store.supersede("old", _note("", "ledger timeout is 45s"))

    assert new.supersedes == ["old"]
    assert _get(store, new.id).supersedes == ["old"]
    old = _get(store, "old")
    assert old.status == "superseded" and old.updated_at == later
    assert _ids(store.keyword_search("ledger timeout")) == [new.id]
    assert len(recorder.groups) == 1
    assert [(c.op, c.id) for c in recorder.groups[0]] == [("upsert", "old"), ("upsert", new.id)]
    store._check()


def test_supersede_keeps_supersedes_the_new_item_brings(store: Store) -> None:
    store.upsert(_note("old", "v2"))
    new = store.supersede("old", _note("new", "v3", supersedes=["older"]))
    assert new.supersedes == ["older", "old"]


def test_supersede_unknown_old_id_raises_and_changes_nothing(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("n", "ledger timeout"))
    before = _dump(store)
    recorder.clear()

    with pytest.raises(ItemNotFoundError) as err:
        store.supersede("missing", _note("new", "ledger timeout again"))

    assert err.value.item_id == "missing"
    assert isinstance(err.value, KeyError)
    assert _dump(store) == before
    assert store.get("new") is None
    assert recorder.quiet
    store._check()


def test_supersede_cannot_reuse_the_old_id(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("n", "v1"))
    before = _dump(store)
    recorder.clear()
    with pytest.raises(InvalidItemError, match="cannot reuse the id 'n'"):
        store.supersede("n", _note("n", "v2"))
    assert _dump(store) == before
    assert recorder.quiet


def test_mark_superseded_retires_in_place_and_records_on_the_keeper(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("dup", "ledger timeout"))
    store.upsert(_note("keeper", "ledger timeouts"))
    recorder.clear()

    assert store.mark_superseded("dup", "keeper") is True

    assert _get(store, "dup").status == "superseded"
    assert _get(store, "keeper").supersedes == ["dup"]
    assert _ids(store.keyword_search("ledger")) == ["keeper"]
    assert len(store) == 2
    assert len(recorder.groups) == 1
    store._check()


def test_mark_superseded_keeps_the_most_recent_max_refs_on_the_keeper(store: Store) -> None:
    n = MAX_REFS + 5
    store.upsert(_note("keeper", "ledger timeouts"))
    store.upsert_many([_note(f"dup{i:03d}", "ledger timeout") for i in range(n)])

    for i in range(n):
        assert store.mark_superseded(f"dup{i:03d}", "keeper") is True

    keeper = _get(store, "keeper")
    assert keeper.supersedes == [f"dup{i:03d}" for i in range(5, n)]
    assert all(_get(store, f"dup{i:03d}").status == "superseded" for i in range(n))
    # Still writable: an update and a re-supersede of an id already listed.
    store.upsert(keeper.clone(title="ledger timeouts (confirmed)"))
    assert store.mark_superseded(f"dup{n - 1:03d}", "keeper") is True
    assert len(_get(store, "keeper").supersedes) == MAX_REFS
    store._check()


@pytest.mark.parametrize(
    ("id", "by_id"),
    [("", "keeper"), ("dup", ""), ("dup", "dup"), ("missing", "keeper"), ("dup", "missing")],
)
def test_mark_superseded_false_cases_write_nothing(
    store: Store, recorder: Recorder, id: str, by_id: str
) -> None:
    store.upsert(_note("dup", "ledger timeout"))
    store.upsert(_note("keeper", "ledger timeouts"))
    before = _dump(store)
    recorder.clear()

    assert store.mark_superseded(id, by_id) is False

    assert _dump(store) == before
    assert recorder.quiet


# ------------------------------------------------------------------- refute


def _refute_world(store: Store) -> None:
    store.upsert(_note("root", "ledger pool exhausted"))
    store.upsert(_note("by-ref", "pool too small", evidence_refs=["root"]))
    store.upsert(_note("by-cell-ref", "raise pool size", evidence_refs=["cell:root"]))
    store.upsert(
        _note("by-link", "outage", links=[ThoughtLink(to_id="root", relation="caused_by")])
    )
    store.upsert(_note("observed", "pool at 20", evidence_refs=["root"], origin="observed"))
    store.upsert(_note("human", "ana agrees", evidence_refs=["root"], origin="human"))
    store.upsert(_note("verified", "checked", evidence_refs=["root"], origin="verified"))
    store.put(_note("no-origin", "legacy cell", evidence_refs=["cell:root"], created_at=T0))
    # Stored as given, no origin but an author tag: a person's note (restored_origin).
    store.put(_note("authored", "ana's note", evidence_refs=["root"], tags=["author/ana"]))
    store.upsert(_note("two-hop", "deploy freeze", evidence_refs=["by-ref"]))
    store.upsert(_note("retired", "old claim", evidence_refs=["root"]))
    store.expire("retired")
    store.upsert(_note("unrelated", "ledger backlog"))
    store.add_link("root", ThoughtLink(to_id="downstream", relation="explains"))
    store.upsert(_note("downstream", "pool alarm"))


def test_refute_expires_the_cell_and_its_derived_citers_one_hop(
    store: Store, recorder: Recorder
) -> None:
    _refute_world(store)
    recorder.clear()

    existed, cascaded = store.refute("root", "pool was fine", ["metrics:pool-usage"])

    assert existed is True
    assert sorted(cascaded) == ["by-cell-ref", "by-link", "by-ref", "no-origin"]
    status = {it.id: it.status for it in _all(store)}
    assert status["root"] == "stale"
    for id in cascaded:
        assert status[id] == "stale", id
    for id in ("observed", "human", "verified", "authored", "two-hop", "unrelated", "downstream"):
        assert status[id] == "active", id
    assert len(recorder.groups) == 1  # one group: the refutation and its cascade
    assert sorted(c.id for c in recorder.groups[0]) == sorted(["root", *cascaded])
    store._check()


def test_refute_records_a_decodable_refuted_record(store: Store, clock: FakeClock) -> None:
    store.upsert(_note("root", "ledger pool exhausted", data={"source": "model"}))
    clock.advance(HOUR)

    store.refute("root", "pool was fine", ["metrics:pool-usage", "log:42"])

    data = _get(store, "root").data
    assert data["source"] == "model"
    record = RefutedRecord.model_validate_json(base64.b64decode(data[REFUTED_DATA_KEY]))
    assert record == RefutedRecord(
        reason="pool was fine", evidence=["metrics:pool-usage", "log:42"], at="2025-01-06T10:00:00Z"
    )
    raw = json.loads(base64.b64decode(data[REFUTED_DATA_KEY]))
    assert set(raw) == {"reason", "evidence", "at"}


def test_refute_uses_the_time_given(store: Store) -> None:
    store.upsert(_note("root", "claim"))
    when = T0 + 5 * DAY
    store.refute("root", "wrong", now=when)
    raw = base64.b64decode(_get(store, "root").data[REFUTED_DATA_KEY])
    assert RefutedRecord.model_validate_json(raw).at == "2025-01-11T09:00:00Z"


def test_refute_records_the_time_in_utc_and_refuses_a_naive_one(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("root", "claim"))
    store.upsert(_note("other", "claim"))
    paris = dt.timezone(dt.timedelta(hours=1))
    store.refute("root", "wrong", now=dt.datetime(2025, 1, 11, 10, tzinfo=paris))
    raw = base64.b64decode(_get(store, "root").data[REFUTED_DATA_KEY])
    assert RefutedRecord.model_validate_json(raw).at == "2025-01-11T09:00:00Z"
    before = _dump(store)
    recorder.clear()
    with pytest.raises(InvalidItemError, match=r"timezone-aware|an aware datetime"):
        store.refute("other", "wrong", now=dt.datetime(2025, 1, 11, 9))
    assert _dump(store) == before
    assert recorder.quiet


def test_refute_takes_the_refuted_cell_out_of_search(store: Store) -> None:
    store.upsert(_note("root", "ledger pool exhausted"))
    store.refute("root", "wrong")
    assert store.keyword_search("ledger pool exhausted") == []


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        (("root", "wrong", "log:42"), {}, "evidence"),  # one ref, not its letters
        (("root", "wrong", {"log:42": 1}), {}, "evidence"),
        (("root", "wrong", [42]), {}, "evidence[0]"),
        (("root", "wrong", None), {}, "evidence"),
        (("root", b"wrong"), {}, "reason"),
        (("root", None), {}, "reason"),
        (("root", "x" * 1_001), {}, "reason"),
        ((["root"], "wrong"), {}, "id"),
        ((None, "wrong"), {}, "id"),
        (("root", "wrong"), {"now": "2025-01-01"}, "now"),
        (("root", "wrong"), {"now": dt.datetime(2025, 1, 1)}, "now"),  # naive
    ],
)
def test_refute_refuses_arguments_of_the_wrong_type_and_changes_nothing(
    store: Store,
    recorder: Recorder,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    named: str,
) -> None:
    store.upsert(_note("root", "ledger pool exhausted"))
    before = _dump(store)
    recorder.clear()
    with pytest.raises(InvalidItemError, match="^" + re.escape(named)):
        store.refute(*args, **kwargs)  # type: ignore[arg-type]
    assert _dump(store) == before
    assert recorder.quiet


def test_refute_unknown_id_changes_nothing(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("n", "claim"))
    before = _dump(store)
    recorder.clear()
    assert store.refute("missing", "wrong") == (False, [])
    assert _dump(store) == before
    assert recorder.quiet


def test_refute_reports_only_what_it_expired(store: Store, clock: FakeClock) -> None:
    # Before, a derived citer already past its deadline (stale by the clock)
    # was returned as expired by the cascade, and written stale again.
    store.upsert(_note("claim", "the cache is the culprit"))
    store.upsert(_note("plan", "flush the cache", evidence_refs=["claim"]))
    store.upsert(_note("lapsed", "watch the cache", evidence_refs=["claim"], stale_after=T0 + HOUR))
    clock.advance(2 * HOUR)
    lapsed = _get(store, "lapsed")

    assert store.refute("claim", "it was the database") == (True, ["plan"])

    assert _get(store, "lapsed") == lapsed  # read stale before, and left as it was
    assert _get(store, "plan").status == "stale"
    store._check()


def test_refute_never_gives_an_item_more_data_keys_than_it_may_hold(tmp_path: Path) -> None:
    # Before, refuting an item with MAX_DATA_KEYS keys stored one key more:
    # the item could no longer be updated, and an export of the memory could
    # not be imported anywhere ("data has 257 keys").
    full = {f"k{i}": "v" for i in range(MAX_DATA_KEYS)}
    with Memory(tmp_path, embedder=None) as mem:
        mem.add("the cache is the culprit", id="h1", data=full)
        before = io.StringIO()
        mem.export(before)
        with pytest.raises(InvalidItemError, match=f"257 keys; at most {MAX_DATA_KEYS}"):
            mem.refute("h1", "wrong")
        after = io.StringIO()
        mem.export(after)
        assert after.getvalue() == before.getvalue()
        # Room made for the record, the refutation goes through, and a second
        # one (the key is there already) too.
        mem.update("h1", data={k: v for k, v in full.items() if k != "k0"})
        mem.refute("h1", "wrong")
        mem.refute("h1", "still wrong")
        assert len(mem.get("h1").data) == MAX_DATA_KEYS  # type: ignore[union-attr]
        mem.export(exported := io.StringIO())
    with Memory(tmp_path / "copy", embedder=None) as copy:
        assert copy.import_(io.StringIO(exported.getvalue())) == 1
        assert copy.get("h1").status == "stale"  # type: ignore[union-attr]


# ------------------------------------------------------------------- mirror


def test_mirror_stores_a_new_cell_as_given_without_stamping(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    then = T0 - DAY
    clock.advance(HOUR)
    cell = _note("m", "ledger latency", created_at=then, updated_at=then, origin="")

    assert store.mirror(cell) is True

    got = _get(store, "m")
    assert got.updated_at == then and got.created_at == then
    assert got.origin == ""  # not stamped either
    assert _ids(store.keyword_search("ledger latency")) == ["m"]
    assert recorder.hook_ops() == [("upsert", "m")]
    assert recorder.listener_ops() == [("upsert", "m")]
    assert [c.mirrored for g in recorder.groups for c in g] == [True]
    store._check()


def test_identical_mirror_returns_false_and_fires_nothing(store: Store, recorder: Recorder) -> None:
    stored = store.upsert(_note("m", "ledger latency"))
    recorder.clear()

    assert store.mirror(stored) is False

    assert recorder.quiet


def test_mirror_older_than_the_stored_item_never_clobbers_it(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    clock.advance(HOUR)
    store.upsert(_note("m", "pending local change"))
    recorder.clear()

    older = _note("m", "stale remote copy", updated_at=T0)
    assert store.mirror(older) is False

    assert _get(store, "m").title == "pending local change"
    assert recorder.quiet


def test_changed_mirror_replaces_and_is_marked_mirrored(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    store.upsert(_note("m", "ledger latency"))
    recorder.clear()
    newer = _get(store, "m").clone(title="ledger backlog", updated_at=T0 + HOUR)

    assert store.mirror(newer) is True

    assert _get(store, "m").title == "ledger backlog"
    assert _get(store, "m").updated_at == T0 + HOUR
    assert _ids(store.keyword_search("backlog")) == ["m"]
    assert store.keyword_search("latency") == []
    assert len(recorder.groups) == 1
    (change,) = recorder.groups[0]
    assert change.mirrored is True and change.op == "upsert" and change.id == "m"
    assert recorder.hook_ops() == [("upsert", "m")]
    store._check()


def test_mirror_keeps_cell_originated(store: Store) -> None:
    store.restore([_note("m", "v1", updated_at=T0)])
    store.mirror(_note("m", "v2", updated_at=T0 + HOUR))
    store.prune_except(set())
    assert store.get("m") is None  # still cell-originated, so prunable


def test_mirror_needs_an_id(store: Store) -> None:
    with pytest.raises(InvalidItemError, match="mirror needs an item with an id"):
        store.mirror(_note("", "x"))


# ------------------------------------------------------------------ reflect


def test_reflect_takes_the_record_even_when_older(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    clock.advance(HOUR)
    store.upsert(_note("m", "local write that lost"))
    recorder.clear()
    winner = _note("m", "the record's winner", updated_at=T0)  # older clock, still the winner

    assert store.reflect("m", winner) is True

    got = _get(store, "m")
    assert got.title == "the record's winner" and got.updated_at == T0
    assert got.cell_originated
    assert [(c.op, c.mirrored) for g in recorder.groups for c in g] == [("upsert", True)]
    assert recorder.hook_ops() == [("upsert", "m")]
    store._check()


def test_reflect_of_the_same_state_fires_nothing(store: Store, recorder: Recorder) -> None:
    stored = store.upsert(_note("m", "ledger latency"))
    recorder.clear()
    assert store.reflect("m", stored.clone()) is False
    assert store.reflect("gone", None) is False
    assert recorder.quiet


def test_reflect_none_deletes_as_mirrored(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("m", "ledger latency"))
    recorder.clear()
    assert store.reflect("m", None) is True
    assert store.get("m") is None and store.keyword_search("ledger") == []
    assert [(c.op, c.mirrored) for g in recorder.groups for c in g] == [("delete", True)]
    store._check()


def test_reflect_checks_the_id(store: Store) -> None:
    with pytest.raises(InvalidItemError, match="was given item"):
        store.reflect("a", _note("b", "x"))


# ------------------------------------------------------------------ restore


def test_restore_replaces_everything_silently(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("a", "ledger latency"))
    store.upsert(_note("b", "ledger backlog"))
    recorder.clear()

    store.restore(
        [
            _note("c", "payment retries", updated_at=T0),
            _note("d", "payment timeouts", updated_at=T0, scope="private", tags=["user:u1"]),
        ]
    )

    assert sorted(it.id for it in _all(store)) == ["c", "d"]
    assert all(it.cell_originated for it in _all(store))
    assert store.keyword_search("ledger") == []
    assert _ids(store.keyword_search("payment")) == ["c"]
    assert _ids(store.keyword_search_own("u1", "payment")) == ["d"]
    assert recorder.quiet
    store._check()


def test_restore_inside_a_batch_is_refused(store: Store) -> None:
    store.upsert(_note("a", "x"))
    with pytest.raises(MemstoreError, match="restore cannot run inside a batch"), store.batch():
        store.restore([_note("b", "y")])
    assert _ids(_all(store)) == ["a"]


def test_restore_with_an_id_less_item_changes_nothing(store: Store) -> None:
    store.upsert(_note("a", "ledger latency"))
    before = _dump(store)

    with pytest.raises(InvalidItemError, match="restore needs items with ids"):
        store.restore([_note("b", "payment retries"), _note("", "no id")])

    assert _dump(store) == before
    assert _ids(store.keyword_search("ledger latency")) == ["a"]
    store._check()


# -------------------------------------------------------------- prune_except


def test_prune_except_drops_retired_and_cell_originated_items_not_kept(
    store: Store, recorder: Recorder
) -> None:
    store.restore(
        [
            _note("cell-keep", "a", updated_at=T0),
            _note("cell-gone", "b", updated_at=T0),
            _note("cell-edited", "c", updated_at=T0),
        ]
    )
    store.upsert(_note("cell-edited", "c, edited locally"))  # still cell-originated
    store.upsert(_note("mem-old", "d"))
    store.supersede("mem-old", _note("mem-new", "e"))
    store.upsert(_note("mem-stale", "f"))
    store.upsert(_note("mem-stale-kept", "g"))
    store.expire("mem-stale")
    store.expire("mem-stale-kept")
    store.upsert(_note("authored", "h"))
    recorder.clear()

    pruned = store.prune_except({"cell-keep", "mem-stale-kept"})

    assert pruned == 4
    assert sorted(it.id for it in _all(store)) == [
        "authored",
        "cell-keep",
        "mem-new",
        "mem-stale-kept",
    ]
    assert recorder.quiet
    store._check()


def test_prune_except_never_touches_active_items_authored_in_memory(store: Store) -> None:
    store.upsert(_note("a", "x"))
    store.upsert(_note("b", "y"))
    assert store.prune_except(()) == 0
    assert len(store) == 2


def test_prune_except_inside_a_batch_is_refused(store: Store) -> None:
    with pytest.raises(MemstoreError, match="cannot run inside a batch"), store.batch():
        store.prune_except(())


def test_prune_except_on_a_journalled_store_is_refused(store: Store, tmp_path: Path) -> None:
    """Before: the items left the store but not the journal, and came back on the next open."""
    journal = SqliteJournal(tmp_path / "j.db")
    journal.attach(store)
    try:
        store.upsert(_note("old", "x"))
        store.expire("old")
        before, head = _dump(store), journal.head()
        with pytest.raises(MemstoreError, match="has a journal"):
            store.prune_except(())
        assert _dump(store) == before and journal.head() == head
    finally:
        journal.close()


@pytest.mark.parametrize(
    "keep",
    ["mem-stale-kept", b"mem-stale-kept", None, (i for i in ["mem-stale"]), {"mem-stale": "x"}],
    ids=["text", "bytes", "None", "generator", "mapping"],
)
def test_prune_except_refuses_what_is_not_a_collection_of_ids(store: Store, keep: object) -> None:
    store.upsert(_note("mem-stale", "f"))  # "mem-stale" is part of "mem-stale-kept"
    store.upsert(_note("mem-stale-kept", "g"))
    store.expire("mem-stale")
    store.expire("mem-stale-kept")
    before = _dump(store)
    with pytest.raises(InvalidItemError, match=r"^keep must be a collection of ids"):
        store.prune_except(keep)  # type: ignore[arg-type]
    assert _dump(store) == before


@pytest.mark.parametrize("config", ["strict", 5, {"vocabulary": None}])
def test_a_config_that_is_not_a_config_is_refused(config: object) -> None:
    with pytest.raises(MemstoreError, match=r"^config must be a memstore\.Config"):
        Store(config)  # type: ignore[arg-type]


# --------------------------------------------------------------- clone_into


def test_clone_into_is_an_independent_copy(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("a", "ledger latency", tags=["t"]))
    store.upsert(_note("b", "ledger backlog", scope="private", tags=["user:u1"]))
    lock = threading.RLock()

    copy = store.clone_into(lock)

    assert copy.lock is lock
    assert _dump(copy) == _dump(store)
    assert _ids(copy.keyword_search("ledger")) == ["a"]
    assert _ids(copy.keyword_search_own("u1", "ledger")) == ["b"]
    copy._check()

    recorder.clear()
    copy.upsert(_note("a", "ledger latency, copy edit"))
    copy.delete("b")
    copy.upsert(_note("c", "copy only"))
    assert recorder.quiet  # the copy has none of the source's observers
    assert _get(store, "a").title == "ledger latency"
    assert store.get("b") is not None and store.get("c") is None

    store.upsert(_note("a", "ledger latency, source edit", tags=["t", "u"]))
    assert _get(copy, "a").title == "ledger latency, copy edit"
    store._check()
    copy._check()


def test_clone_into_inherits_the_vocabulary(make_store: StoreFactory) -> None:
    vocab = Vocabulary(non_searchable=("prompt",))
    store = make_store(vocabulary=vocab)
    store.upsert(Item(id="p", kind="prompt", title="ledger prompt"))
    store.upsert(_note("n", "ledger note"))

    copy = store.clone_into(None, Config())

    assert copy.vocabulary() == vocab
    assert _ids(copy.keyword_search("ledger")) == ["n"]
    assert _ids(copy.keyword_search("ledger", kind="prompt")) == ["p"]

    own = store.clone_into(None, Config(vocabulary=Vocabulary()))
    assert sorted(_ids(own.keyword_search("ledger"))) == ["n", "p"]


def test_clone_into_leaves_the_callers_config_alone(make_store: StoreFactory) -> None:
    store = make_store(vocabulary=Vocabulary(non_searchable=("prompt",)))
    cfg = Config()

    copy = store.clone_into(None, cfg)

    assert copy.vocabulary() == store.vocabulary()
    assert cfg.vocabulary is None  # a config reused for another store must not carry it


# ---------------------------------------------------- forget / publish_removed


def test_forget_locked_defers_publication_to_publish_removed(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("a", "ledger latency", subject="ana"))
    store.upsert(Item(id="b", kind="watch_item", title="ledger backlog", subject="ana"))
    store.upsert(_note("c", "ledger retries", subject="bob"))
    recorder.clear()

    store.lock.acquire()
    try:
        gone = store.forget_locked(lambda it: it.subject == "ana")
        assert recorder.hook == [] and recorder.listener == []
    finally:
        store.lock.release()

    assert gone == [Removed(id="a", kind="note"), Removed(id="b", kind="watch_item")]
    assert _ids(_all(store)) == ["c"]
    assert _ids(store.keyword_search("ledger")) == ["c"]
    assert [[(c.op, c.id) for c in g] for g in recorder.groups] == [
        [("delete", "a"), ("delete", "b")]
    ]
    assert recorder.hook == [] and recorder.listener == []
    store._check()

    store.publish_removed(gone)

    assert recorder.hook == [("delete", None, "a", "note"), ("delete", None, "b", "watch_item")]
    assert recorder.listener_ops() == [("delete", "a"), ("delete", "b")]
    assert recorder.published == 2


def test_publish_removed_keeps_private_deletions_off_the_change_hook(
    store: Store, recorder: Recorder
) -> None:
    store.upsert(_note("p", "secret", scope="private", tags=["user:u1"]))
    store.delete("p")
    assert recorder.hook == []  # an ordinary delete of a private item is not published
    store.upsert(_note("q", "secret too", scope="private", tags=["user:u1"]))
    recorder.clear()

    store.lock.acquire()
    try:
        gone = store.forget_locked(lambda it: True)
    finally:
        store.lock.release()
    store.publish_removed(gone)

    assert recorder.hook == []
    assert recorder.listener_ops() == [("delete", "q")]


# -------------------------------------------------------------- upsert_dedup


def _fact(text: tuple[str, str], **kw: object) -> Item:
    return Item.model_validate(
        {"kind": "stable_fact", "confidence": "high", "title": text[0], "content": text[1], **kw}
    )


def test_upsert_dedup_merges_a_restatement_into_the_existing_cell(
    store: Store, clock: FakeClock, recorder: Recorder
) -> None:
    store.upsert(_note("other", "ledger"))
    first, merged_into = store.upsert_dedup(_fact(FACT, tags=["t1", "service/payments"]))
    assert merged_into is None
    store.add_link(first.id, ThoughtLink(to_id="other", relation="correlates_with"))
    recorder.clear()
    later = clock.advance(HOUR)

    merged, merged_into = store.upsert_dedup(_fact(RESTATED, id="fresh-id", tags=["t2", "t1"]))

    assert merged_into == first.id
    assert merged.id == first.id
    assert merged.created_at == T0 and merged.updated_at == later
    assert (merged.title, merged.content) == RESTATED
    assert merged.tags == ["t1", "service/payments", "t2"]
    assert [lk.to_id for lk in merged.links] == ["other"]
    assert store.get("fresh-id") is None
    assert _get(store, first.id).model_dump() == merged.model_dump()
    assert len(store) == 2
    assert _ids(store.keyword_search("heavy load 30s")) == [first.id]
    assert recorder.hook_ops() == [("upsert", first.id)]
    store._check()


def test_upsert_dedup_keeps_distinct_facts_apart(store: Store) -> None:
    first, _ = store.upsert_dedup(_fact(FACT))
    second, merged_into = store.upsert_dedup(_fact(DISTINCT))
    assert merged_into is None and second.id != first.id
    assert len(store) == 2


def test_upsert_dedup_of_an_ineligible_kind_is_a_plain_upsert(store: Store) -> None:
    a, ma = store.upsert_dedup(_note("", FACT[0], content=FACT[1]))
    b, mb = store.upsert_dedup(_note("", FACT[0], content=FACT[1]))
    assert ma is None and mb is None and a.id != b.id
    assert len(store) == 2


def test_upsert_dedup_with_an_existing_id_just_upserts_it(store: Store) -> None:
    store.upsert_dedup(_fact(FACT, id="x"))
    store.upsert_dedup(_fact(DISTINCT, id="y"))

    updated, merged_into = store.upsert_dedup(_fact(RESTATED, id="y"))

    assert merged_into is None and updated.id == "y"
    assert (_get(store, "y").title, _get(store, "x").title) == (RESTATED[0], FACT[0])


def test_upsert_dedup_does_not_merge_into_an_inactive_cell(store: Store) -> None:
    first, _ = store.upsert_dedup(_fact(FACT))
    store.expire(first.id)
    second, merged_into = store.upsert_dedup(_fact(RESTATED))
    assert merged_into is None and second.id != first.id


@pytest.mark.parametrize(
    ("existing", "incoming"),
    [
        pytest.param({}, {"kind": "watch_item", "confidence": ""}, id="different kinds"),
        pytest.param({"tags": ["tenant/a"]}, {"tags": ["tenant/b"]}, id="different partitions"),
        pytest.param({"tags": ["tenant/a"]}, {}, id="partition vs none"),
        pytest.param(
            {"tags": ["service/payments"]}, {"tags": ["service/billing"]}, id="service tags"
        ),
        pytest.param({"subject": "payments"}, {"subject": "billing"}, id="subjects"),
        pytest.param({"origin": "human"}, {}, id="derived into human"),
        pytest.param({"origin": "human"}, {"origin": "derived"}, id="explicit derived into human"),
        pytest.param({"tags": ["shared"]}, {"tags": ["shared"]}, id="into a shared cell"),
        pytest.param(
            {"origin": "human", "tags": ["author/ana"]},
            {"origin": "human", "tags": ["author/bob"]},
            id="different authors",
        ),
        pytest.param(
            {"origin": "human", "tags": ["author/ana"]}, {"origin": "human"}, id="author vs none"
        ),
        pytest.param(
            {"scope": "private", "tags": ["user:u1"]},
            {"scope": "private", "tags": ["user:u2"]},
            id="different private owners",
        ),
        pytest.param({"scope": "private", "tags": ["user:u1"]}, {}, id="private vs public"),
    ],
)
def test_upsert_dedup_never_merges_incomparable_items(
    store: Store, existing: dict[str, object], incoming: dict[str, object]
) -> None:
    first, _ = store.upsert_dedup(_fact(FACT, **existing))
    second, merged_into = store.upsert_dedup(_fact(RESTATED, **incoming))

    assert merged_into is None
    assert second.id != first.id
    assert _get(store, first.id).title == FACT[0]
    assert len(store) == 2


@pytest.mark.parametrize(
    ("existing", "incoming"),
    [
        pytest.param({"tags": ["service/payments"]}, {}, id="service tag on one side"),
        pytest.param({"subject": "Payments"}, {"subject": "payments"}, id="subject casing"),
        pytest.param({"tags": ["tenant/a"]}, {"tags": ["tenant/a"]}, id="same partition"),
        pytest.param(
            {"origin": "human", "tags": ["author/ana"]},
            {"origin": "human", "tags": ["author/ana"]},
            id="same author",
        ),
        pytest.param({"origin": "observed"}, {}, id="derived into observed"),
        pytest.param(
            {"scope": "private", "tags": ["user:u1"]},
            {"scope": "private", "tags": ["user:u1"]},
            id="same private owner",
        ),
    ],
)
def test_upsert_dedup_merges_comparable_items(
    store: Store, existing: dict[str, object], incoming: dict[str, object]
) -> None:
    first, _ = store.upsert_dedup(_fact(FACT, **existing))
    second, merged_into = store.upsert_dedup(_fact(RESTATED, **incoming))
    assert merged_into == first.id == second.id
    assert len(store) == 1


def test_upsert_dedup_merges_an_authors_own_restatement(store: Store) -> None:
    # The origin an author-tagged write is stored with is human; a restatement
    # by the same author must fold into the author's own cell.
    first, _ = store.upsert_dedup(_fact(FACT, tags=["author/ana"]))
    assert first.origin == "human"

    _, merged_into = store.upsert_dedup(_fact(RESTATED, tags=["author/ana"]))

    assert merged_into == first.id
    assert len(store) == 1


def test_upsert_dedup_merges_a_private_restatement_when_the_store_has_a_subject(
    make_store: StoreFactory,
) -> None:
    store = make_store(subject="node-1")
    first, _ = store.upsert_dedup(_fact(FACT, scope="private", tags=["user:u1"]))
    assert first.subject == "node-1"

    _, merged_into = store.upsert_dedup(_fact(RESTATED, scope="private", tags=["user:u1"]))

    assert merged_into == first.id
    assert len(store) == 1


def test_upsert_dedup_merges_an_exact_restatement_of_plural_words(store: Store) -> None:
    first, _ = store.upsert_dedup(Item(kind="watch_item", title="Stuck batches"))
    _, merged_into = store.upsert_dedup(Item(kind="watch_item", title="Stuck batches"))
    assert merged_into == first.id  # control: "stuck" is looked up as written

    plural, _ = store.upsert_dedup(Item(kind="watch_item", title="Batches"))
    _, merged_into = store.upsert_dedup(Item(kind="watch_item", title="Batches"))

    assert merged_into == plural.id
    assert len(store) == 2


@pytest.mark.parametrize("renew", [False, True])
def test_upsert_dedup_renews_a_default_ttl_deadline_only_when_asked(
    make_store: StoreFactory, clock: FakeClock, renew: bool
) -> None:
    store = make_store(default_ttl={"hypothesis": 2 * HOUR}, renew_on_merge=renew)
    first, _ = store.upsert_dedup(Item(kind="hypothesis", title=FACT[0], content=FACT[1]))
    assert first.stale_after == T0 + 2 * HOUR
    later = clock.advance(HOUR)

    merged, merged_into = store.upsert_dedup(
        Item(kind="hypothesis", title=RESTATED[0], content=RESTATED[1])
    )

    assert merged_into == first.id
    expected = later + 2 * HOUR if renew else T0 + 2 * HOUR
    assert merged.stale_after == expected
    assert _get(store, first.id).stale_after == expected


def test_upsert_dedup_merge_with_an_explicit_deadline_takes_it(make_store: StoreFactory) -> None:
    store = make_store(default_ttl={"hypothesis": 2 * HOUR})
    first, _ = store.upsert_dedup(Item(kind="hypothesis", title=FACT[0], content=FACT[1]))
    merged, _ = store.upsert_dedup(
        Item(kind="hypothesis", title=RESTATED[0], content=RESTATED[1], stale_after=T0 + DAY)
    )
    assert merged.id == first.id and merged.stale_after == T0 + DAY


def test_upsert_dedup_merge_keeps_the_stored_deadline_of_a_kind_without_ttl(
    make_store: StoreFactory,
) -> None:
    # With a default_ttl map, an update that carries no deadline keeps the
    # stored one, whatever the kind (as upsert does); a merge is an update.
    store = make_store(default_ttl={"hypothesis": 2 * HOUR})
    first, _ = store.upsert_dedup(_fact(FACT, stale_after=T0 + 10 * DAY))
    upserted = store.upsert(_fact(FACT, id=first.id))
    assert upserted.stale_after == T0 + 10 * DAY

    merged, merged_into = store.upsert_dedup(_fact(RESTATED))

    assert merged_into == first.id
    assert merged.stale_after == T0 + 10 * DAY


def test_upsert_dedup_change_is_a_single_group(store: Store, recorder: Recorder) -> None:
    store.upsert_dedup(_fact(FACT))
    recorder.clear()
    store.upsert_dedup(_fact(RESTATED))
    assert len(recorder.groups) == 1
    (change,) = recorder.groups[0]
    assert isinstance(change, Change) and change.op == "upsert"
    assert recorder.dirty == 1


def test_clear_search_caches_changes_no_result() -> None:
    store = Store()
    for i, text in enumerate(["payment api timeout", "payment retries", "deploy window"]):
        store.upsert(Item(id=f"n{i}", kind="note", title=f"t{i}", content=text))
    warm = [it.id for it in store.keyword_search("payment timeot", limit=5)]
    assert warm and store._plans  # the query's plan is cached
    store.clear_search_caches()
    assert store._plans is None
    assert [it.id for it in store.keyword_search("payment timeot", limit=5)] == warm
