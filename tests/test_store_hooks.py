"""Observers and write groups: the change hook, listeners, batches, seams, the hit hook.

A write group commits or rolls back as a whole; observers hear about exactly
what was committed, once, in order.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from conftest import FakeClock, Recorder, StoreFactory
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Change, Config, InvalidItemError, Item, Store, ThoughtLink
from memstore.journal import SqliteJournal
from memstore_index import CellStore, HashEmbedder

HOUR = dt.timedelta(hours=1)
ITEM_A = ("a", "ledger latency", "ledger latency climbs at peak")
ITEM_B = ("b", "payment backlog", "payment queue backs up on fridays")


def _get(store: Store, id: str) -> Item:
    got = store.get(id)
    assert got is not None, id
    return got


def _ids(items: list[Item]) -> list[str]:
    return [it.id for it in items]


def _note(id: str, title: str, content: str = "", **kw: object) -> Item:
    return Item.model_validate({"id": id, "kind": "note", "title": title, "content": content, **kw})


def _private(id: str, title: str) -> Item:
    return _note(id, title, scope="private", tags=["user:u1"])


def _dump(store: Store) -> list[dict[str, object]]:
    store.lock.acquire()
    try:
        return [it.model_dump() for it in store.items_locked()]
    finally:
        store.lock.release()


def _seed(store: Store) -> None:
    store.upsert(_note(*ITEM_A))
    store.upsert(_note(*ITEM_B))


def _lock_free_elsewhere(store: Store) -> bool:
    """Whether another thread can take the store's lock right now."""
    result: list[bool] = []

    def probe() -> None:
        got = bool(store.lock.acquire(blocking=False))  # type: ignore[call-arg]
        if got:
            store.lock.release()
        result.append(got)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return result[0]


# -------------------------------------------------------------- change hook


def test_change_hook_reports_upserts_and_deletes(store: Store, recorder: Recorder) -> None:
    item = store.upsert(Item(kind="watch_item", title="ledger latency"))
    store.delete(item.id)

    assert [(op, id, kind) for op, _, id, kind in recorder.hook] == [
        ("upsert", item.id, "watch_item"),
        ("delete", item.id, "watch_item"),
    ]
    upserted, deleted = recorder.hook[0][1], recorder.hook[1][1]
    assert upserted is not None and upserted.model_dump() == item.model_dump()
    assert deleted is None
    assert recorder.published == 2


def test_change_hook_is_not_told_about_private_items(store: Store, recorder: Recorder) -> None:
    store.upsert(_private("p", "secret"))
    store.upsert(_private("p", "secret, edited"))
    store.expire("p")
    store.delete("p")

    assert recorder.hook == []
    assert recorder.published == 0
    assert recorder.listener_ops() == [("upsert", "p")] * 3 + [("delete", "p")]
    assert [c.published for g in recorder.groups for c in g] == [False] * 4


def test_change_hook_hears_an_item_made_private_as_its_delete(
    make_store: StoreFactory, recorder: Recorder
) -> None:
    # The hook is the bridge to a change stream of shared items: a consumer
    # keeps copies of what it was shown. Before, an item made private was never
    # heard of again, so the copy of it as it was shared stayed with every
    # consumer; now the hook hears the delete it is to them (no private content:
    # item None), and nothing more of the item while it stays private.
    store = make_store(quiet=lambda id: id == "heartbeat")
    records: list[Change] = []
    store.set_change_record_hook(records.append)

    store.upsert(_note("a", "ledger latency"))
    store.upsert(_private("a", "ledger latency, mine now"))
    store.upsert(_private("a", "ledger latency, edited in private"))
    store.delete("a")
    store.upsert(_note("b", "payment backlog"))
    store.upsert(_private("b", "payment backlog, mine"))
    store.upsert(_note("b", "payment backlog, shared again"))
    store.upsert(_note("heartbeat", "status"))
    store.upsert(_private("heartbeat", "status, mine"))  # a quiet id: never heard of
    with store.batch():
        store.upsert(_note("c", "tax deadline"))
        store.upsert(_private("c", "tax deadline, mine"))

    assert recorder.hook == [  # the stored objects, as the record hook got them
        ("upsert", records[0].item, "a", "note"),
        ("delete", None, "a", "note"),
        ("upsert", records[2].item, "b", "note"),
        ("delete", None, "b", "note"),
        ("upsert", records[4].item, "b", "note"),
        ("upsert", records[5].item, "c", "note"),
        ("delete", None, "c", "note"),
    ]
    # The record hook hears the same changes, each as it was made.
    assert [(c.op, c.id, c.published) for c in records] == [
        ("upsert", "a", True),
        ("upsert", "a", False),
        ("upsert", "b", True),
        ("upsert", "b", False),
        ("upsert", "b", True),
        ("upsert", "c", True),
        ("upsert", "c", False),
    ]
    assert recorder.published == 4  # Config.published: the published changes alone


def test_change_hook_is_not_told_about_link_only_edits(store: Store, recorder: Recorder) -> None:
    _seed(store)
    recorder.clear()

    assert store.add_link("a", ThoughtLink(to_id="b", relation="explains"))

    assert recorder.hook == []
    assert recorder.published == 0
    assert recorder.listener_ops() == [("upsert", "a")]
    assert [c.published for g in recorder.groups for c in g] == [False]


def test_change_hook_skips_quiet_ids_but_listeners_do_not(
    make_store: StoreFactory, recorder: Recorder
) -> None:
    asked: list[str] = []

    def quiet(id: str) -> bool:
        asked.append(id)
        return id == "heartbeat"

    store = make_store(quiet=quiet)
    store.upsert(_note("heartbeat", "status note"))
    store.upsert(_note("heartbeat", "status note, again"))
    store.upsert(_note("fact", "ledger latency"))

    assert recorder.hook_ops() == [("upsert", "fact")]
    assert recorder.published == 1
    assert recorder.listener_ops() == [
        ("upsert", "heartbeat"),
        ("upsert", "heartbeat"),
        ("upsert", "fact"),
    ]
    assert asked == ["heartbeat", "heartbeat", "fact"]


def test_change_record_hook_sees_what_the_change_hook_sees_with_the_previous_item(
    make_store: StoreFactory, recorder: Recorder
) -> None:
    store = make_store(quiet=lambda id: id == "heartbeat")
    records: list[Change] = []
    store.set_change_record_hook(records.append)

    first = store.upsert(_note("a", "ledger latency", tags=["tenant/alpha"]))
    second = store.upsert(_note("a", "ledger latency, edited", tags=["tenant/alpha"]))
    store.upsert(_private("p", "secret"))
    store.upsert(_note("heartbeat", "status note"))
    store.delete("p")
    store.delete("a")

    assert [(c.op, c.id) for c in records] == recorder.hook_ops()
    assert [(c.op, c.id) for c in records] == [("upsert", "a"), ("upsert", "a"), ("delete", "a")]
    created, updated, deleted = records
    assert created.previous is None
    assert updated.previous is not None and updated.previous.model_dump() == first.model_dump()
    assert deleted.item is None
    assert deleted.previous is not None and deleted.previous.model_dump() == second.model_dump()
    assert recorder.published == 3  # once per change, not once per hook

    store.set_change_record_hook(None)
    store.upsert(_note("b", "x"))
    assert len(records) == 3


def test_change_record_hook_alone_still_publishes(clock: FakeClock) -> None:
    published: list[int] = []
    store = Store(Config(clock=clock, published=lambda: published.append(1)))
    records: list[Change] = []
    store.set_change_record_hook(records.append)
    store.upsert(_note("a", "x"))
    store.delete("a")
    assert [(c.op, c.id) for c in records] == [("upsert", "a"), ("delete", "a")]
    assert len(published) == 2


def test_change_hook_can_be_cleared(store: Store, recorder: Recorder) -> None:
    store.set_change_hook(None)
    store.upsert(_note("n", "x"))
    assert recorder.hook == [] and recorder.published == 0
    assert recorder.listener_ops() == [("upsert", "n")]


def test_change_hook_and_listeners_run_with_the_lock_released(store: Store) -> None:
    free: list[bool] = []
    store.set_change_hook(lambda *_: free.append(_lock_free_elsewhere(store)))
    store.add_change_listener(lambda *_: free.append(_lock_free_elsewhere(store)))

    store.upsert(_note("n", "x"))

    assert free == [True, True]


def test_before_commit_listener_runs_with_the_lock_held(store: Store) -> None:
    free: list[bool] = []
    store.add_change_listener(
        lambda changes: free.append(_lock_free_elsewhere(store)), before_commit=True
    )
    store.upsert(_note("n", "x"))
    assert free == [False]


def test_a_listener_may_read_the_committed_item(store: Store) -> None:
    seen: list[str] = []

    def read_back(op: str, item: Item | None, id: str, kind: str) -> None:
        got = store.get(id)
        seen.append(got.title if got is not None else "")

    store.add_change_listener(read_back)
    store.upsert(_note("n", "ledger latency"))
    assert seen == ["ledger latency"]


# ---------------------------------------------------------------- listeners


def test_listeners_fire_in_registration_order_for_every_change(store: Store) -> None:
    calls: list[tuple[str, str, str]] = []

    def first(op: str, item: Item | None, id: str, kind: str) -> None:
        calls.append(("first", op, id))

    def second(op: str, item: Item | None, id: str, kind: str) -> None:
        calls.append(("second", op, id))

    store.add_change_listener(first)
    store.add_change_listener(second)

    store.upsert(_note("n", "x"))
    store.upsert(_private("p", "y"))
    store.delete("n")

    assert calls == [
        ("first", "upsert", "n"),
        ("second", "upsert", "n"),
        ("first", "upsert", "p"),
        ("second", "upsert", "p"),
        ("first", "delete", "n"),
        ("second", "delete", "n"),
    ]

    store.remove_change_listener(first)
    store.remove_change_listener(lambda *_: None)  # unknown: ignored
    calls.clear()
    store.upsert(_note("m", "z"))
    assert calls == [("second", "upsert", "m")]


# ------------------------------------------------------------------ batches


def test_batch_gives_before_commit_listeners_one_group(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("old", "to delete"))
    recorder.clear()

    with store.batch():
        a = store.upsert(Item(kind="watch_item", title="ledger latency"))
        store.upsert(_private("p", "mine"))
        store.delete("old")
        assert recorder.groups == [] and recorder.listener == [] and recorder.hook == []

    assert len(recorder.groups) == 1
    group = recorder.groups[0]
    assert all(isinstance(c, Change) for c in group)
    assert [(c.op, c.id, c.kind, c.published) for c in group] == [
        ("upsert", a.id, "watch_item", True),
        ("upsert", "p", "note", False),
        ("delete", "old", "note", True),
    ]
    assert group[0].item is not None and group[0].item.title == "ledger latency"
    assert group[2].item is None
    assert recorder.listener_ops() == [("upsert", a.id), ("upsert", "p"), ("delete", "old")]
    assert recorder.hook_ops() == [("upsert", a.id), ("delete", "old")]


def test_a_single_write_is_a_group_of_one(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("n", "x"))
    store.upsert(_note("m", "y"))
    assert [[c.id for c in g] for g in recorder.groups] == [["n"], ["m"]]


def test_an_empty_batch_tells_nobody(store: Store, recorder: Recorder) -> None:
    with store.batch():
        store.delete("missing")
    assert recorder.quiet


def test_before_commit_listener_sees_the_group_before_it_is_visible(store: Store) -> None:
    visible: list[bool] = []

    def check(changes: Sequence[Change]) -> None:
        # Another thread cannot observe the group yet: it waits for the lock.
        visible.append(_lock_free_elsewhere(store))

    store.add_change_listener(check, before_commit=True)
    with store.batch():
        store.upsert(_note("a", "x"))
        store.upsert(_note("b", "y"))
    assert visible == [False]


@pytest.mark.parametrize("write", ["create", "update", "delete", "batch"])
def test_a_raising_before_commit_listener_undoes_the_write(
    store: Store, recorder: Recorder, clock: FakeClock, write: str
) -> None:
    _seed(store)
    before = _dump(store)
    recorder.clear()

    def journal_down(changes: Sequence[Change]) -> None:
        raise OSError("journal unavailable")

    store.add_change_listener(journal_down, before_commit=True)
    clock.advance(HOUR)

    with pytest.raises(OSError, match="journal unavailable"):
        if write == "create":
            store.upsert(_note("c", "zebra crossing"))
        elif write == "update":
            store.upsert(_note("a", "zebra crossing"))
        elif write == "delete":
            store.delete("b")
        else:
            with store.batch():
                store.upsert(_note("c", "zebra crossing"))
                store.upsert(_note("a", "zebra crossing"))
                store.delete("b")

    assert _dump(store) == before
    store._check()
    assert store.keyword_search("zebra") == []
    assert _ids(store.keyword_search("ledger latency")) == ["a"]
    assert _ids(store.keyword_search("payment backlog")) == ["b"]
    assert store.exact_matches("payment backlog")[0].id == "b"
    assert recorder.hook == [] and recorder.listener == []
    assert recorder.published == recorder.dirty == recorder.signal == 0
    assert len(recorder.groups) == 1  # the recording listener ran before the raising one


def test_an_exception_inside_a_batch_undoes_every_change(
    store: Store, recorder: Recorder, clock: FakeClock
) -> None:
    _seed(store)
    store.add_link("a", ThoughtLink(to_id="b", relation="explains"))
    before = _dump(store)
    recorder.clear()
    clock.advance(HOUR)

    with pytest.raises(RuntimeError, match="boom"), store.batch():
        store.upsert(_note("a", "zebra crossing", "rewritten"))
        store.delete("b")
        store.upsert(_note("c", "zebra stripes"))
        store.supersede("c", _note("d", "zebra herd"))
        store.add_link("d", ThoughtLink(to_id="a", relation="explains"))
        store.expire("d")
        raise RuntimeError("boom")

    assert _dump(store) == before
    store._check()
    assert store.keyword_search("zebra") == []
    assert _ids(store.keyword_search("ledger latency")) == ["a"]
    assert _ids(store.keyword_search("payment backlog")) == ["b"]
    assert [s.item.id for s in store.traverse_scored(["a"])] == ["b"]
    assert store.get("c") is None and store.get("d") is None
    assert recorder.quiet


def test_an_invalid_write_caught_inside_a_batch_leaves_the_rest(
    store: Store, recorder: Recorder
) -> None:
    with store.batch():
        store.upsert(_note("a", "x"))
        with pytest.raises(InvalidItemError):
            store.upsert(Item(kind="", title="bad"))
        store.upsert(_note("b", "y"))

    assert sorted(it.id for it in store.items()) == ["a", "b"]
    assert [[c.id for c in g] for g in recorder.groups] == [["a", "b"]]


def test_a_nested_batch_is_a_savepoint(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("a", "ledger latency"))
    recorder.clear()

    with store.batch():
        store.upsert(_note("x", "outer before"))
        with pytest.raises(ValueError, match="inner"), store.batch():
            store.upsert(_note("y", "inner zebra"))
            store.upsert(_note("a", "inner zebra rewrite"))
            store.delete("x")
            raise ValueError("inner")
        store.upsert(_note("z", "outer after"))

    assert sorted(it.id for it in store.items()) == ["a", "x", "z"]
    assert _get(store, "a").title == "ledger latency"
    assert store.keyword_search("zebra") == []
    assert _ids(store.keyword_search("ledger latency")) == ["a"]
    assert [[(c.op, c.id) for c in g] for g in recorder.groups] == [
        [("upsert", "x"), ("upsert", "z")]
    ]
    assert recorder.hook_ops() == [("upsert", "x"), ("upsert", "z")]
    assert recorder.dirty == 2
    store._check()


def test_a_failing_outer_batch_undoes_a_committed_savepoint(
    store: Store, recorder: Recorder
) -> None:
    with pytest.raises(RuntimeError), store.batch():
        with store.batch():
            store.upsert(_note("inner", "x"))
        store.upsert(_note("outer", "y"))
        raise RuntimeError("outer")

    assert len(store) == 0
    assert recorder.quiet
    store._check()


def test_dirty_and_signal_fire_once_per_committed_change(store: Store, recorder: Recorder) -> None:
    store.upsert(_note("a", "x"))
    assert (recorder.dirty, recorder.signal) == (1, 1)

    recorder.clear()
    with store.batch():
        store.upsert(_note("b", "y"))
        store.upsert(_note("c", "z"))
        store.delete("a")
        assert (recorder.dirty, recorder.signal) == (0, 0)
    assert (recorder.dirty, recorder.signal) == (3, 3)

    recorder.clear()
    store.supersede("b", _note("d", "w"))
    assert (recorder.dirty, recorder.signal) == (2, 2)

    recorder.clear()
    store.add_link("c", ThoughtLink(to_id="d", relation="explains"))
    assert (recorder.dirty, recorder.signal) == (1, 1)

    recorder.clear()
    store.delete("missing")
    store.expire("missing")
    with pytest.raises(InvalidItemError):
        store.upsert(Item(kind="", title="bad"))
    assert (recorder.dirty, recorder.signal) == (0, 0)


def test_a_raising_seam_after_commit_neither_fails_the_write_nor_hides_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``dirty`` and ``signal`` run once the group is committed and recorded.

    Before, the exception reached the writer as if the write had failed, while
    the store and the journal held it; and the group was never queued for
    publication, so the change hook, every listener and the vector index
    (which indexes on publication) never heard of it.
    """
    calls = {"dirty": 0, "signal": 0}

    def seam(name: str) -> Callable[[], None]:
        def fire() -> None:
            calls[name] += 1
            raise RuntimeError(f"the host's {name} seam failed")

        return fire

    store = Store(Config(dirty=seam("dirty"), signal=seam("signal")))
    journal = SqliteJournal(tmp_path / "journal.db")
    journal.attach(store)
    cells = CellStore(HashEmbedder(dim=16))
    cells.attach(store)
    heard: list[tuple[str, str]] = []
    store.add_change_listener(lambda op, item, id, kind: heard.append((op, id)))
    with caplog.at_level("ERROR", logger="memstore"):
        store.upsert(_note("a", "ledger latency"))
        with store.batch():
            store.upsert(_note("b", "payment backlog"))
            store.delete("a")
    assert calls == {"dirty": 3, "signal": 3}  # each seam, once per committed change
    assert heard == [("upsert", "a"), ("upsert", "b"), ("delete", "a")]
    assert cells.ids() == ["b"]
    cells._check(store)
    assert "the dirty seam raised" in caplog.text and "the signal seam raised" in caplog.text
    journal.close()
    again = SqliteJournal(tmp_path / "journal.db")
    restored = Store()
    again.attach(restored)
    assert _ids(restored.items()) == ["b"]
    again.close()


def test_dirty_fires_with_the_lock_held(make_store: StoreFactory) -> None:
    free: list[bool] = []
    holder: list[Store] = []
    store = make_store(dirty=lambda: free.append(_lock_free_elsewhere(holder[0])))
    holder.append(store)
    store.upsert(_note("a", "x"))
    assert free == [False]


# -------------------------------------------------------------- seams


def test_read_seam_sees_every_read_but_not_internal_copies(make_store: StoreFactory) -> None:
    batches: list[list[str]] = []

    def read(items: list[Item]) -> None:
        batches.append([it.id for it in items])

    store = make_store(read=read)
    store.upsert(_note("a", "ledger latency"))
    store.upsert(_note("b", "payment backlog"))
    batches.clear()

    store.get("a")
    store.items()
    store.keyword_search("latency")
    store.traverse(["a"])  # nothing linked: no items, no call

    assert batches == [["a"], ["b", "a"], ["a"]]


# ------------------------------------------------------------------ hit hook


def test_notify_hit_forwards_copies(store: Store) -> None:
    calls: list[tuple[list[str], str, str, list[str] | None]] = []
    store.set_hit_hook(lambda ids, q, kind, kinds: calls.append((ids, q, kind, kinds)))
    ids = ["a", "b"]
    kinds = ["note", "watch_item"]

    store.notify_hit(ids, "ledger latency", "note", kinds)
    ids.append("c")
    kinds.append("event")

    assert calls == [(["a", "b"], "ledger latency", "note", ["note", "watch_item"])]
    assert calls[0][0] is not ids and calls[0][3] is not kinds


def test_notify_hit_drops_misaligned_kinds_and_empty_hits(store: Store) -> None:
    calls: list[tuple[list[str], str, str, list[str] | None]] = []
    store.set_hit_hook(lambda ids, q, kind, kinds: calls.append((ids, q, kind, kinds)))

    store.notify_hit([], "q", "")
    store.notify_hit(["a", "b"], "q", "", ["note"])
    store.notify_hit(["a"], "q", "")

    assert calls == [(["a", "b"], "q", "", None), (["a"], "q", "", None)]

    store.set_hit_hook(None)
    store.notify_hit(["a"], "q", "")
    assert len(calls) == 2


# ------------------------------------------------- rollback, for any group

_IDS = st.sampled_from(["a", "b", "c", "d"])
_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("upsert"),
            _IDS,
            st.sampled_from(["zebra crossing", "ledger latency", "Payment API"]),
            st.sampled_from(["public", "private"]),
        ),
        st.tuples(st.just("delete"), _IDS, st.just(""), st.just("")),
        st.tuples(st.just("expire"), _IDS, st.just(""), st.just("")),
        st.tuples(st.just("link"), _IDS, _IDS, st.just("")),
        st.tuples(st.just("supersede"), _IDS, _IDS, st.just("")),
        st.tuples(st.just("refute"), _IDS, st.just(""), st.just("")),
    ),
    max_size=8,
)


def _apply(store: Store, op: tuple[str, str, str, str]) -> None:
    name, id, arg, scope = op
    if name == "upsert":
        tags = ["user:u1"] if scope == "private" else ["service/ledger"]
        # Refused, changing nothing, when the item keeps a supersedes that would now
        # loop its chain (b superseded a, then a superseded b: an upsert of a).
        with contextlib.suppress(InvalidItemError):
            store.upsert(_note(id, arg, "written in the group", scope=scope, tags=tags))
    elif name == "delete":
        store.delete(id)
    elif name == "expire":
        store.expire(id)
    elif name == "link":
        store.add_link(id, ThoughtLink(to_id=arg, relation="explains"))
    elif name == "supersede":
        if id != arg and store.get(id) is not None:
            with contextlib.suppress(InvalidItemError):  # another item supersedes it already
                store.supersede(id, _note(arg, "zebra herd"))
    else:
        store.refute(id, "wrong")


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_any_group_that_raises_leaves_no_trace(ops: list[tuple[str, str, str, str]]) -> None:
    clock = FakeClock()
    store = Store(Config(clock=clock))
    recorder = Recorder()
    store.upsert(_note("a", "ledger latency", "climbs at peak", tags=["service/ledger"]))
    store.upsert(_note("b", "payment backlog", evidence_refs=["a"]))
    store.upsert(_note("c", "mine", scope="private", tags=["user:u1"]))
    store.add_link("b", ThoughtLink(to_id="a", relation="caused_by"))
    recorder.attach(store)
    before = _dump(store)
    searches = [
        _ids(store.keyword_search("ledger latency")),
        _ids(store.keyword_search_own("u1", "mine")),
        _ids(store.exact_matches("ledger")),
        [s.item.id for s in store.traverse_scored(["a"])],
    ]
    clock.advance(HOUR)

    with pytest.raises(RuntimeError, match="abort"), store.batch():
        for op in ops:
            _apply(store, op)
        raise RuntimeError("abort")

    store._check()
    assert _dump(store) == before
    assert searches == [
        _ids(store.keyword_search("ledger latency")),
        _ids(store.keyword_search_own("u1", "mine")),
        _ids(store.exact_matches("ledger")),
        [s.item.id for s in store.traverse_scored(["a"])],
    ]
    assert store.keyword_search("zebra") == []
    assert recorder.quiet


def test_a_recorded_change_is_the_frozen_dataclass_a_listener_can_copy(store: Store) -> None:
    # Changes are built on the write path without the dataclass's __init__:
    # what a listener receives still compares, refuses assignment and copies
    # with dataclasses.replace as a Change built by hand does.
    import dataclasses

    groups: list[Sequence[Change]] = []
    store.add_change_listener(groups.append, before_commit=True)
    old = store.upsert(_note("x", "first"))
    new = store.upsert(_note("x", "second"))
    change = groups[-1][0]
    stored = store._items["x"]
    assert change == Change("upsert", stored, "x", "note", False, True, previous=change.previous)
    assert change.previous is not None and change.previous.title == old.title == "first"
    assert stored.title == new.title == "second"
    assert dataclasses.replace(change) == change
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.id = "y"  # type: ignore[misc]
