"""The front door: Memory and AsyncMemory, the same cases run both ways."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import (
    AsyncMemory,
    Config,
    InvalidItemError,
    Item,
    ItemNotFoundError,
    Memory,
    MemstoreError,
)
from tests.conftest import FakeClock


class SyncFacade:
    """An AsyncMemory driven from synchronous test code: each call runs on one loop."""

    def __init__(self, runner: asyncio.Runner, memory: AsyncMemory) -> None:
        self._runner = runner
        self._async = memory
        self.memory = memory.memory

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._async, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._runner.run(attr(*args, **kwargs))

        return call


Opener = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def open_memory(request: pytest.FixtureRequest) -> Iterator[Opener]:
    """Opens a Memory (or an AsyncMemory behind a synchronous facade); closes them all."""
    opened: list[Any] = []
    runner = asyncio.Runner()

    def opener(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("embedder", "hash")
        if request.param == "sync":
            mem: Any = Memory(*args, **kwargs)
        else:
            mem = SyncFacade(runner, runner.run(AsyncMemory.open(*args, **kwargs)))
        opened.append(mem)
        return mem

    yield opener
    for mem in opened:
        mem.close()
    runner.close()


def core(mem: Any) -> Memory:
    """The Memory behind either kind of handle."""
    return mem if isinstance(mem, Memory) else mem.memory  # type: ignore[no-any-return]


def titles(hits: list[Any]) -> list[str]:
    return [h.item.title or h.item.content for h in hits]


# ------------------------------------------------------------------ writes


def test_add_and_search_within_a_partition(open_memory: Opener) -> None:
    mem = open_memory()
    a = mem.add("The user is vegetarian.", kind="stable_fact", confidence="high", partition="alice")
    mem.add(
        "The user eats fish on Fridays.", kind="stable_fact", confidence="high", partition="bob"
    )
    assert a.tags == ["tenant/alice"] and a.kind == "stable_fact" and a.id
    assert titles(mem.search("vegetarian", partition="alice")) == ["The user is vegetarian."]
    assert "The user is vegetarian." not in titles(mem.search("vegetarian", partition="bob"))
    assert len(mem.search("user", partition="*")) == 2
    assert mem.get(a.id).content == "The user is vegetarian."


def test_a_search_without_a_partition_sees_no_partitions_items(open_memory: Opener) -> None:
    # Memory.search's docstring and concepts.md: None is no partition, not every partition
    # (recent(), unlike a search, lists every partition's items with None).
    mem = open_memory()
    mem.add("acme deploys on Tuesdays", partition="acme")
    mem.add("everyone deploys on Fridays")
    mem.add("the shared deploy calendar", tags=["shared"])
    assert sorted(titles(mem.search("deploys"))) == [
        "everyone deploys on Fridays",
        "the shared deploy calendar",
    ]
    assert "acme deploys on Tuesdays" in titles(mem.search("deploys", partition="acme"))
    assert len(mem.recent()) == 3


def test_plain_text_is_a_note(open_memory: Opener) -> None:
    mem = open_memory()
    it = mem.add("remember to rotate the staging keys")
    assert it.kind == "note" and it.content == "remember to rotate the staging keys"


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (lambda m: m.add(""), "needs text"),
        (lambda m: m.add("x", colour="red"), "unknown field"),
        (lambda m: m.add("x", confidence="certain"), "confidence"),
        (lambda m: m.add("x", kind="stable_fact", confidence="low"), "needs confidence"),
        (lambda m: m.add("x", partition=""), "partition"),
        (lambda m: m.add("x", partition="*"), "partition"),
        (lambda m: m.add("x", private_to="a,b"), "private_to"),
        (lambda m: m.add(42), "text or an Item"),
        (lambda m: m.search("x", limit=0), "limit"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    open_memory: Opener, call: Callable[[Any], Any], why: str
) -> None:
    mem = open_memory()
    mem.add("already here")
    with pytest.raises(InvalidItemError, match=why):
        call(mem)
    assert [it.content for it in core(mem).store.items()] == ["already here"]


def test_add_many_is_all_or_nothing(open_memory: Opener, tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "data")
    head = mem.stats().head
    with pytest.raises(InvalidItemError, match="entry 2"):
        mem.add_many(["one", {"text": "two", "kind": "note"}, {"text": "three", "bogus": 1}])
    with pytest.raises(InvalidItemError, match="entry 1: kind 'event' needs an event_date"):
        mem.add_many(["one", {"text": "two", "kind": "event"}])
    assert mem.stats().items == 0 and mem.stats().head == head
    out = mem.add_many(
        [
            "one",
            {"text": "two", "kind": "event", "event_date": "2025-01-02", "partition": "p"},
            Item(kind="note", title="3"),
        ],
        partition="q",
    )
    assert [it.tags for it in out] == [["tenant/q"], ["tenant/p"], ["tenant/q"]]
    assert mem.stats().vectors == 3 and len(mem.history(out[0].id)) == 1


def test_add_many_progress_bar(open_memory: Opener, capsys: pytest.CaptureFixture[str]) -> None:
    mem = open_memory()
    mem.add_many([f"note {i}" for i in range(40)], progress=True)
    err = capsys.readouterr().err
    assert "40/40" in err and err.rstrip().endswith("done")


def test_update_changes_fields_and_refuses_bad_ones(open_memory: Opener) -> None:
    mem = open_memory()
    it = mem.add("the api is slow", kind="hypothesis", confidence="low", partition="ops")
    up = mem.update(it.id, confidence="medium", content="the api is slow at peak")
    assert (up.id, up.confidence, up.content) == (it.id, "medium", "the api is slow at peak")
    with pytest.raises(ItemNotFoundError):
        mem.update("nope", confidence="high")
    with pytest.raises(InvalidItemError, match="unknown field"):
        mem.update(it.id, colour="red")
    with pytest.raises(InvalidItemError, match="id"):
        mem.update(it.id, id="other")
    assert mem.get(it.id).content == "the api is slow at peak"


def test_restatements_merge_into_one_fact(open_memory: Opener) -> None:
    mem = open_memory()
    a = mem.add(
        "The payments service stores card tokens in the vault cluster in eu-west-1.",
        kind="stable_fact",
        confidence="high",
        partition="ops",
    )
    b = mem.add(
        "The payments service stores its card tokens in the vault cluster in eu-west-1!",
        kind="stable_fact",
        confidence="high",
        partition="ops",
    )
    assert b.id == a.id and mem.stats().items == 1
    c = mem.add(
        "The payments service stores card tokens in the vault cluster in eu-west-1.",
        kind="stable_fact",
        confidence="high",
        partition="ops",
        dedup=False,
    )
    assert c.id != a.id


def test_private_notes_are_their_owners_alone(open_memory: Opener) -> None:
    mem = open_memory()
    mem.add("Alice's dentist appointment is on Tuesday", private_to="alice")
    mem.add("Bob's dentist appointment is on Friday", private_to="bob")
    mem.add("The dentist office moved to Main Street")
    assert titles(mem.search("dentist appointment")) == ["The dentist office moved to Main Street"]
    mine = titles(mem.search("dentist appointment", user="alice"))
    assert "Alice's dentist appointment is on Tuesday" in mine
    assert not any("Bob" in t for t in mine)


def test_supersede_refute_link_and_context(open_memory: Opener) -> None:
    mem = open_memory()
    obs = mem.add(
        "payment-api returned 502 for 40 minutes",
        kind="event",
        origin="observed",
        event_date="2025-03-05",
    )
    guess = mem.add(
        "the ledger pool is too small",
        kind="hypothesis",
        confidence="medium",
        evidence_refs=[obs.id],
    )
    derived = mem.add(
        "raise the ledger pool before the sale",
        kind="operational_pattern",
        confidence="medium",
        evidence_refs=[guess.id],
    )
    with pytest.raises(InvalidItemError, match="relation 'related' is not one of"):
        mem.link(obs.id, guess.id, "related")
    with pytest.raises(InvalidItemError, match="weight"):
        mem.link(obs.id, guess.id, "explains", 7.0)
    assert mem.link(obs.id, guess.id, "caused_by", 0.8)
    anchors, spread = mem.context(obs.id)
    assert [a.id for a in anchors] == [obs.id] and guess.id in [s.item.id for s in spread]
    cascaded = mem.refute(guess.id, "the pool never ran dry in the metrics")
    assert cascaded == [derived.id]
    assert mem.get(guess.id).status == "stale" and mem.get(derived.id).status == "stale"
    new = mem.supersede(obs.id, "payment-api returned 502 for 45 minutes")
    assert new.kind == "event" and obs.id in new.supersedes
    assert mem.get(obs.id).status == "superseded"
    with pytest.raises(ItemNotFoundError):
        mem.refute("missing", "no")
    with pytest.raises(ItemNotFoundError):
        mem.link(obs.id, "missing")
    with pytest.raises(InvalidItemError):
        mem.refute(new.id, "  ")


def test_expiry_follows_the_injected_clock(open_memory: Opener) -> None:
    clock = FakeClock()
    mem = open_memory(config=Config(clock=clock))
    it = mem.add("deploy freeze until noon", stale_after=clock() + dt.timedelta(hours=2))
    assert titles(mem.search("deploy freeze")) == ["deploy freeze until noon"]
    clock.advance(dt.timedelta(hours=3))
    assert mem.search("deploy freeze") == []
    assert mem.get(it.id).status == "stale"
    assert mem.expire(it.id) and not mem.expire("missing")


def test_recent_respects_partitions(open_memory: Opener) -> None:
    clock = FakeClock()
    mem = open_memory(config=Config(clock=clock))
    for i, p in enumerate(["a", "b", "a"]):
        clock.advance(dt.timedelta(minutes=1))
        mem.add(f"note {i}", partition=p)
    assert [it.content for it in mem.recent(partition="a")] == ["note 2", "note 0"]
    assert len(mem.recent()) == 3


# ------------------------------------------------------------- durability


def test_restart_gives_identical_search_results(open_memory: Opener, tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "data")
    for i in range(30):
        mem.add(f"incident {i}: the {['api', 'db', 'cache'][i % 3]} timed out", partition="ops")
    doomed = mem.add("incident x: the queue overflowed", partition="ops")
    before_delete = mem.stats().head
    mem.delete(doomed.id)
    queries = ["api timed out", "database trouble", "cache incident 7", "queue"]
    before = [[(h.item.id, h.score) for h in mem.search(q, partition="ops")] for q in queries]
    mem.close()

    mem = open_memory(tmp_path / "data")
    after = [[(h.item.id, h.score) for h in mem.search(q, partition="ops")] for q in queries]
    assert after == before
    assert doomed.id in [it.id for it in mem.as_of(before_delete, partition="ops")]
    assert [v.op for v in mem.history(doomed.id)] == ["upsert", "delete"]


def test_export_import_between_memories(open_memory: Opener, tmp_path: Path) -> None:
    src = open_memory(tmp_path / "a")
    src.add("kept for export", partition="acme")
    src.add("someone else's", partition="globex")
    buf = io.StringIO()
    assert src.export(buf, partition="acme") == 1
    dst = open_memory(tmp_path / "b")
    assert dst.import_(io.StringIO(buf.getvalue())) == 1
    assert titles(dst.search("export", partition="acme")) == ["kept for export"]


def test_history_needs_a_journal(open_memory: Opener) -> None:
    mem = open_memory()
    with pytest.raises(MemstoreError, match="give it a folder"):
        mem.history("x")


def test_purge_erases_history(open_memory: Opener, tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "d")
    it = mem.add("password is hunter2")
    assert mem.purge([it.id]) == [it.id]
    assert mem.get(it.id) is None and mem.history(it.id) == []


# --------------------------------------------------------------- opening


def test_opening_errors_say_what_to_do(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(MemstoreError, match="takes a folder"):
        Memory(f)
    with pytest.raises(MemstoreError, match="use 'auto'"):
        Memory(embedder="magic")
    with pytest.raises(MemstoreError, match="unknown search option"):
        Memory(search={"fast": True})
    with pytest.raises(MemstoreError, match="DSN"):
        Memory(journal="sqlite:///x.db")
    mem = Memory(tmp_path / "ok", embedder=None)
    with pytest.raises(MemstoreError, match="open for writing elsewhere"):
        Memory(tmp_path / "ok", embedder=None)
    mem.close()
    mem.close()
    with pytest.raises(MemstoreError, match="closed"):
        mem.add("x")


def test_lexical_only_memory(open_memory: Opener) -> None:
    mem = open_memory(embedder=None)
    mem.add("lexical only works")
    assert titles(mem.search("lexical")) == ["lexical only works"]
    assert mem.stats().vectors == 0


def test_search_options_pass_through(open_memory: Opener) -> None:
    mem = open_memory(search={"always_fuse": True})
    mem.add("fused always")
    assert core(mem).searcher.config.always_fuse
    assert titles(mem.search("fused")) == ["fused always"]
    assert mem.stats().search["search.total"] >= 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_purged_and_imported_changes_carry_their_journal_position(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A hard delete (purge) and an import are commits too: their events say where."""
    if backend == "postgres":
        from memstore.journal import PostgresJournal

        place = request.getfixturevalue("pg_place")
        mem = Memory(journal=PostgresJournal(place.dsn, schema=place.schema), hub=True)
    else:
        mem = Memory(tmp_path / "d", embedder=None, hub=True)
    with mem:
        kept, gone = mem.add("kept around"), mem.add("erased for good")
        exported = io.StringIO()
        mem.export(exported)
        sub = mem.subscribe()
        mem.purge([gone.id])
        (erased,) = iter(sub.get_nowait, None)
        assert (erased.op, erased.id) == ("delete", gone.id)
        assert erased.lsn is not None and erased.lsn >= mem.history(kept.id)[-1].lsn
        exported.seek(0)
        assert mem.import_(exported) == 1  # the erased item's versions come back
        imported = list(iter(sub.get_nowait, None))
        assert ("upsert", gone.id) in [(e.op, e.id) for e in imported]
        assert all(e.lsn is not None and e.lsn >= erased.lsn for e in imported)


def test_subscribe_streams_changes_with_their_journal_position(
    open_memory: Opener, tmp_path: Path
) -> None:
    mem = open_memory(tmp_path / "d", hub=True)
    sub = mem.subscribe(partition="ops")
    it = mem.add("the queue is backing up", partition="ops")
    mem.add("someone else's", partition="sales")
    event = sub.get(timeout=5)
    assert (event.op, event.id, event.partition) == ("upsert", it.id, "ops")
    assert event.lsn == mem.history(it.id)[0].lsn
    assert sub.get_nowait() is None
    assert mem.stats().hub.subscribers == 1
    sub.close()
    hits = mem.subscribe(topics=["hit"], partition="ops")
    mem.search("queue backing up", partition="ops")
    hit = hits.get(timeout=5)
    assert hit.item_ids[0] == it.id and hit.query == "queue backing up"
    hits.close()


def test_close_ends_the_subscriptions_of_the_memorys_own_hub(tmp_path: Path) -> None:
    """A reader blocked on ``Memory(hub=True)``'s stream (thread or coroutine)
    reads what was queued, then stops, when the memory closes; before, the
    hub was only detached and the readers waited for ever."""
    import threading

    from memstore_hub import Hub

    mem = Memory(tmp_path / "d", embedder=None, hub=True)
    in_thread, in_loop = mem.subscribe(), mem.subscribe()
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(e.id for e in in_thread), daemon=True)
    reader.start()

    async def follow() -> list[str]:
        return [e.id async for e in in_loop]

    async def close_while_waiting() -> list[str]:
        task = asyncio.ensure_future(follow())
        await asyncio.sleep(0)  # the coroutine is waiting on the stream
        it = await asyncio.to_thread(mem.add, "last words")
        await asyncio.to_thread(mem.close)
        got = await asyncio.wait_for(task, 30)  # a hang guard, not a threshold
        assert got == [it.id]
        return got

    ids = asyncio.run(close_while_waiting())
    reader.join(30)
    assert not reader.is_alive(), "the thread reader still waits after close"
    assert seen == ids and in_thread.closed and in_loop.closed

    mine = Hub()  # a hub the caller passed in is the caller's: detached, left open
    with Memory(embedder=None, hub=mine) as other:
        other.add("x")
    assert not mine.closed and mine.seq == 1


@pytest.mark.parametrize("bad", ["a,b", "ops\n", "ops\x00", "   ", "p" * 5000, b"ops", 7])
def test_subscribe_refuses_a_partition_search_refuses(bad: object) -> None:
    """A partition no item can be in would subscribe to silence; it is the
    error a search with it gets, and no subscription is made."""
    with Memory(embedder=None, hub=True) as mem:
        with pytest.raises(InvalidItemError) as refused:
            mem.search("q", partition=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidItemError) as refused_too:
            mem.subscribe(partition=bad)
        assert str(refused_too.value) == str(refused.value)
        assert mem.stats().hub.subscribers == 0


def test_subscribe_takes_every_partition_name_search_takes() -> None:
    with Memory(embedder=None, hub=True) as mem:
        ops, everyone, shared_only = (mem.subscribe(partition=p) for p in ("ops", "*", ""))
        mine = mem.add("the queue is backing up", partition="ops")
        common = mem.add("office closed friday")
        assert [e.id for e in iter(ops.get_nowait, None)] == [mine.id, common.id]
        assert [e.id for e in iter(everyone.get_nowait, None)] == [mine.id, common.id]
        assert [e.id for e in iter(shared_only.get_nowait, None)] == [common.id]


def test_subscribe_without_a_hub_says_how(open_memory: Opener) -> None:
    with pytest.raises(MemstoreError, match="hub=True"):
        open_memory().subscribe()


def test_threads_share_one_memory(tmp_path: Path) -> None:
    import threading

    mem = Memory(tmp_path / "d", embedder="hash")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(40):
                it = mem.add(f"worker {n} note {i} about the cache", partition=f"p{n % 2}")
                if i % 5 == 0:
                    mem.search("cache note", partition=f"p{n % 2}")
                if i % 7 == 0:
                    mem.update(it.id, content=f"worker {n} note {i} revised")
                if i % 11 == 0:
                    mem.delete(it.id)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    live = {it.id: it.content for it in mem.store.items()}
    assert len(live) == 4 * (40 - 4)  # i = 0, 11, 22, 33 deleted per worker
    mem.store._check()
    mem.close()
    again = Memory(tmp_path / "d", embedder="hash")
    assert {it.id: it.content for it in again.store.items()} == live
    assert again.stats().vectors == len(live)
    again.close()


def test_no_embed_items_stay_out_of_the_vector_index_after_restart(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "d", embedder="hash")
    mem.add("raw log: GET /health 200", no_embed=True)
    mem.add("the health check is green")
    assert mem.stats().vectors == 1
    mem.close()
    mem = Memory(tmp_path / "d", embedder="hash")
    assert mem.stats().vectors == 1
    mem.close()


# ------------------------------------------------- found in review: regressions


def test_purge_refuses_one_bare_id(open_memory: Opener, tmp_path: Path) -> None:
    mem = open_memory(tmp_path / "d")
    it = mem.add("api key sk-123")
    with pytest.raises(InvalidItemError, match="list of ids"):
        mem.purge(it.id)
    assert mem.purge([it.id]) == [it.id] and mem.history(it.id) == []


def test_a_private_notes_replacement_stays_private(open_memory: Opener) -> None:
    mem = open_memory()
    p = mem.add("bob's secret plan", private_to="bob")
    new = mem.supersede(p.id, "bob's revised secret plan")
    assert new.scope == "private" and "user:bob" in new.tags
    assert "bob's revised secret plan" not in titles(mem.search("secret plan"))
    assert titles(mem.search("secret plan", user="bob"))[0] == "bob's revised secret plan"


def test_update_keeps_no_embed(open_memory: Opener) -> None:
    mem = open_memory()
    it = mem.add("raw log line", no_embed=True)
    assert mem.update(it.id, title="raw log").no_embed
    assert mem.stats().vectors == 0


def test_cells_is_not_a_search_option(tmp_path: Path) -> None:
    with pytest.raises(MemstoreError, match="unknown search option"):
        Memory(tmp_path / "d", search={"cells": None})
    Memory(tmp_path / "d", embedder=None).close()  # nothing was left open


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ({"lexical_weight": "a"}, "lexical_weight 'a' is not in [0, 1]"),
        ({"fanout": "x"}, "fanout 'x' is not a whole number >= 0"),
        ({"fanout": -1}, "fanout -1 is not a whole number >= 0"),
        ({"semantic_gap": "x"}, "semantic_gap 'x' is not a number >= 0"),
        ({"always_fuse": "yes"}, "always_fuse must be True or False, got 'yes'"),
        ({"spread_relations": "precedes"}, "spread_relations 'precedes' is not a tuple"),
    ],
)
def test_a_search_option_of_the_wrong_type_is_refused_before_anything_opens(
    tmp_path: Path, option: dict[str, object], words: str
) -> None:
    # Refused at the door, not by a TypeError at the first search that fuses.
    with pytest.raises(MemstoreError, match=re.escape(words)):
        Memory(tmp_path / "d", embedder=None, search=option)
    assert not (tmp_path / "d").exists()


def test_concurrent_updates_of_different_fields_both_land(tmp_path: Path) -> None:
    import sys
    import threading

    mem = Memory(embedder=None)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(30):
            it = mem.add("the cache", kind="hypothesis", confidence="low")
            a = threading.Thread(target=mem.update, args=(it.id,), kwargs={"confidence": "medium"})
            b = threading.Thread(target=mem.update, args=(it.id,), kwargs={"subject": "cache"})
            a.start()
            b.start()
            a.join()
            b.join()
            got = mem.get(it.id)
            assert got is not None and (got.confidence, got.subject) == ("medium", "cache")
    finally:
        sys.setswitchinterval(old)
        mem.close()
