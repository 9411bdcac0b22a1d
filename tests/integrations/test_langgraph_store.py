"""MemstoreStore beyond LangGraph's suite: durability, TTL, async, hybrid search, extras."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

from memstore import Config, Memory, MemstoreError
from memstore.errors import InvalidItemError, OutOfRangeError, ReadOnlyError
from memstore.integrations.langgraph import MemstoreStore
from tests.conftest import FakeClock
from tests.integrations.conftest import CharacterEmbeddings
from tests.pgtest import PgPlace

VALUE = {
    "text": 'ünïcode ✓ and "quotes"',
    "n": 3,
    "x": 2.5,
    "big": 10**30,
    "nested": {"a": [1, None, True, {"b": "c"}], "empty": {}},
    "list": [],
}


def _index(emb: CharacterEmbeddings, fields: list[str] | None = None) -> Any:
    cfg: dict[str, Any] = {"dims": emb.dims, "embed": emb}
    if fields is not None:
        cfg["fields"] = fields
    return cfg


def test_values_round_trip_exactly_and_survive_reopen(tmp_path: Path) -> None:
    emb = CharacterEmbeddings(dims=32)
    with MemstoreStore(tmp_path / "m", index=_index(emb, ["text"])) as store:
        store.put(("users", "alice"), "profile", VALUE)
        store.put(("users", "bob"), "gone", {"text": "bye"})
        store.delete(("users", "bob"), "gone")
        before = store.get(("users", "alice"), "profile")
        assert before is not None and before.value == VALUE
        scores = [h.score for h in store.search(("users",), query="unicode quotes")]
    calls = emb.calls
    with MemstoreStore(tmp_path / "m", index=_index(emb, ["text"])) as store:
        again = store.get(("users", "alice"), "profile")
        assert again is not None
        assert json.dumps(again.value) == json.dumps(VALUE)  # same keys, order and types
        assert (again.created_at, again.updated_at) == (before.created_at, before.updated_at)
        assert store.get(("users", "bob"), "gone") is None
        assert store.list_namespaces() == [("users", "alice")]
        assert [h.score for h in store.search(("users",), query="unicode quotes")] == scores
    assert emb.calls == calls  # the field vectors were journaled: no re-embedding on reopen


def test_created_at_is_kept_and_updated_at_moves() -> None:
    clock = FakeClock()
    with MemstoreStore(Memory(embedder=None, config=Config(clock=clock))) as store:
        store.put(("a",), "k", {"v": 1})
        first = store.get(("a",), "k")
        clock.advance(dt.timedelta(minutes=5))
        store.put(("a",), "k", {"v": 2})
        second = store.get(("a",), "k")
        assert first is not None and second is not None
        assert second.created_at == first.created_at
        assert second.updated_at - first.updated_at == dt.timedelta(minutes=5)


def test_search_without_query_is_newest_first_and_pages_are_slices() -> None:
    clock = FakeClock()
    with MemstoreStore(Memory(embedder=None, config=Config(clock=clock))) as store:
        for key in ["b", "a", "c", "d"]:
            store.put(("ns",), key, {"v": key})
            clock.advance(dt.timedelta(seconds=1))
        store.put(("ns", "sub"), "z", {"v": "z"})  # same instant as no one else
        store.put(("ns",), "a", {"v": "a2"})  # an update moves to the front
        order = [(h.namespace, h.key) for h in store.search(("ns",), limit=100)]
        assert order == [
            (("ns",), "a"),
            (("ns", "sub"), "z"),
            (("ns",), "d"),
            (("ns",), "c"),
            (("ns",), "b"),
        ]  # ties: namespace, then key
        pages = [store.search(("ns",), limit=2, offset=o) for o in (0, 2, 4)]
        assert [(h.namespace, h.key) for p in pages for h in p] == order


_WORDS = ["deploy", "note", "number", "budget", "gateway", "kiwi", "friday", "room"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8).map(" ".join),
        min_size=1,
        max_size=24,
    ),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join),
    page=st.integers(min_value=1, max_value=7),
    indexed=st.booleans(),
    ranking=st.sampled_from(["hybrid", "vector"]),
)
@example(  # the report: ten notes, pages of one repeated two items and skipped eight
    texts=[f"deploy note number {i}" + " deploy" * (i % 3) for i in range(10)],
    query="deploy",
    page=1,
    indexed=False,
    ranking="hybrid",
)
def test_query_pages_are_slices_of_one_list(
    texts: list[str], query: str, page: int, indexed: bool, ranking: Any
) -> None:
    """Paging through a query's hits meets every matching item exactly once, in one order."""
    clock = FakeClock()
    index = _index(CharacterEmbeddings(dims=16)) if indexed else None
    memory = Memory(embedder=None, config=Config(clock=clock))
    with MemstoreStore(memory, index=index, ranking=ranking) as store:
        for n, text in enumerate(texts):
            store.put(("docs",), f"k{n}", {"text": text})
            clock.advance(dt.timedelta(seconds=n % 3))  # some puts share an instant
        whole = [h.key for h in store.search(("docs",), query=query, limit=len(texts) + 5)]
        paged = [
            h.key
            for offset in range(0, len(texts) + page, page)
            for h in store.search(("docs",), query=query, limit=page, offset=offset)
        ]
        assert paged == whole
        assert sorted(whole) == sorted(f"k{n}" for n in range(len(texts)))
    memory.close()


def test_hybrid_search_finds_what_vector_ranking_misses() -> None:
    emb = CharacterEmbeddings(dims=64)
    docs = {
        "invoice": "the invoice for march has the reference ZX-4471-Q and is paid",
        "noise1": "Q 4 Z X 7 1",
        "noise2": "4471 ZQX",
        "noise3": "XZ-7144-Q",
    }
    found = {}
    for ranking in ("hybrid", "vector"):
        with MemstoreStore(index=_index(emb), ranking=ranking) as store:  # type: ignore[arg-type]
            for key, text in docs.items():
                store.put(("docs",), key, {"text": text})
            hits = store.search(("docs",), query="ZX-4471-Q")
            found[ranking] = [h.key for h in hits]
            scores = {h.key: h.score for h in hits}
            assert all(isinstance(s, float) for s in scores.values())
            found[ranking + "_scores"] = scores  # type: ignore[assignment]
    assert found["hybrid"][0] == "invoice"
    assert found["vector"][0] != "invoice"
    assert found["hybrid_scores"] == found["vector_scores"]  # cosine either way


def test_search_without_index_is_lexical_and_unscored() -> None:
    with MemstoreStore() as store:
        store.put(("n",), "3", {"text": "friday deploys need approval"}, index=False)
        store.put(("n",), "1", {"text": "deploys freeze on fridays", "meta": {"team": "infra"}})
        store.put(("n",), "2", {"text": "lunch is at noon"})
        hits = store.search(("n",), query="friday deploy")
        assert hits[0].key == "1"
        assert {h.key for h in hits} == {"1", "2", "3"}  # every candidate, the ranked first
        assert all(h.score is None for h in hits)
        # index=False: the item matches the words but is never a ranked hit
        # (it is the oldest, so it comes last in the unranked rest)
        assert store.search(("n",), query="approval")[-1].key == "3"
        assert store.search(("n",), query="infra")[0].key == "1"


def test_memstore_embedder_by_default(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "m", embedder="hash")
    with MemstoreStore(memory, index={"dims": memory.cells.dim, "fields": ["text"]}) as store:  # type: ignore[union-attr]
        store.put(("a",), "k", {"text": "hello world"})
        (hit,) = store.search(("a",), query="hello world")
        assert hit.score == pytest.approx(1.0, abs=1e-5)
    assert memory.stats().items == 1  # the given Memory stays open (stats refuses a closed one)
    memory.close()


def test_index_fields_given_as_one_text_is_refused(tmp_path: Path) -> None:
    """``fields="text"`` once read as the paths t, e, x, t: nothing indexed, no word said."""
    emb = CharacterEmbeddings(dims=8)
    with pytest.raises(MemstoreError, match=r"write \['text'\]"):
        MemstoreStore(tmp_path / "m", index={"dims": 8, "embed": emb, "fields": "text"})  # type: ignore[typeddict-item]
    assert not (tmp_path / "m").exists()  # refused before the memory opened


def test_index_fields_paths_and_per_put_fields() -> None:
    emb = CharacterEmbeddings(dims=64)
    with MemstoreStore(index=_index(emb, ["a.b[*].c"]), ranking="vector") as store:
        store.put(("x",), "1", {"a": {"b": [{"c": "zzzz"}, {"c": "qqqq"}]}, "d": "wwww"})
        store.put(("x",), "2", {"d": "zzzz"}, index=["d"])
        store.put(("x",), "3", {"a": {"b": [{"c": "zzzz"}]}}, index=False)
        hits = {h.key: h.score for h in store.search(("x",), query="qqqq")}
        assert hits["1"] == pytest.approx(1.0, abs=1e-5)  # the best of the two fields
        assert hits["3"] is None  # not indexed: returned last, without a score
        hits = {h.key: h.score for h in store.search(("x",), query="zzzz")}
        assert hits["1"] == pytest.approx(1.0, abs=1e-5)
        assert hits["2"] == pytest.approx(1.0, abs=1e-5)
    with MemstoreStore(index=_index(emb, ["$"]), ranking="vector") as store:
        store.put(("x",), "1", {"t": "abc"})
        (hit,) = store.search(("x",), query='{"t": "abc"}')
        assert hit.score == pytest.approx(1.0, abs=1e-5)  # "$" embeds the whole value as JSON


def test_ttl_expiry_refresh_and_sweep() -> None:
    clock = FakeClock()
    memory = Memory(embedder=None, config=Config(clock=clock))
    with MemstoreStore(memory, ttl={"default_ttl": 10, "refresh_on_read": True}) as store:
        assert store.supports_ttl
        store.put(("t",), "short", {"v": 1}, ttl=1)
        store.put(("t",), "default", {"v": 2})
        store.put(("t",), "forever", {"v": 3}, ttl=None)
        clock.advance(dt.timedelta(seconds=50))
        assert store.get(("t",), "short") is not None  # a read refreshes the deadline
        clock.advance(dt.timedelta(seconds=50))
        assert store.get(("t",), "short", refresh_ttl=False) is not None
        clock.advance(dt.timedelta(seconds=15))
        assert store.get(("t",), "short") is None  # past its deadline: gone before a sweep
        assert [h.key for h in store.search(("t",), limit=10)] == ["default", "forever"]
        clock.advance(dt.timedelta(minutes=10))
        assert store.list_namespaces() == [("t",)]
        assert store.sweep_ttl() == 2
        assert store.sweep_ttl() == 0
        assert [h.key for h in store.search(("t",))] == ["forever"]
        item = store.get(("t",), "forever")
        assert item is not None and item.value == {"v": 3}
    memory.close()


def test_ttl_refresh_keeps_updated_at_and_is_durable(tmp_path: Path) -> None:
    clock = FakeClock()
    with MemstoreStore(Memory(tmp_path / "m", embedder=None, config=Config(clock=clock))) as s:
        s.put(("t",), "k", {"v": 1}, ttl=2)
        first = s.get(("t",), "k")
        clock.advance(dt.timedelta(minutes=1))
        again = s.get(("t",), "k")
        assert first is not None and again is not None and again.updated_at == first.updated_at
        s.memory.close()
    clock.advance(dt.timedelta(minutes=2, seconds=30))  # 3.5 min after the put, 2.5 after the read
    memory = Memory(tmp_path / "m", embedder=None, config=Config(clock=clock))
    with MemstoreStore(memory) as s:
        assert s.get(("t",), "k") is None  # the refreshed deadline (3 min) came and went
    memory.close()


def test_a_read_only_memory_serves_reads_without_refreshing(tmp_path: Path) -> None:
    clock = FakeClock()
    folder = tmp_path / "m"
    writer = Memory(folder, embedder=None, config=Config(clock=clock))
    with MemstoreStore(writer) as w:
        w.put(("t",), "k", {"v": 1}, ttl=2)
        w.put(("t",), "plain", {"v": 2}, ttl=None)
    head = writer.stats().head
    clock.advance(dt.timedelta(minutes=1))  # a refresh is due: the deadline would move
    reader = Memory(folder, embedder=None, readonly=True, config=Config(clock=clock))
    ttl: Any = {"refresh_on_read": True, "sweep_interval_minutes": 1}
    with MemstoreStore(reader, ttl=ttl) as r:
        got = r.get(("t",), "k")
        assert got is not None and got.value == {"v": 1}
        assert [h.key for h in r.search(("t",), limit=10)] == ["k", "plain"]
        assert [h.key for h in r.search(("t",), filter={"v": 1}, refresh_ttl=True)] == ["k"]
        with pytest.raises(ReadOnlyError, match="read-only"):
            r.start_ttl_sweeper()
        with pytest.raises(ReadOnlyError):
            r.put(("t",), "new", {"v": 3})
        clock.advance(dt.timedelta(minutes=1, seconds=30))  # past the deadline never moved
        assert r.get(("t",), "k") is None
        with pytest.raises(ReadOnlyError):
            r.sweep_ttl()
        assert [h.key for h in r.search(("t",))] == ["plain"]
    reader.close()
    assert writer.stats().head == head  # the reads wrote nothing to the journal
    with MemstoreStore(writer) as w:
        assert w.get(("t",), "k") is None and w.sweep_ttl() == 1
    writer.close()


def test_background_sweeper_starts_and_stops() -> None:
    with MemstoreStore(ttl={"sweep_interval_minutes": 60}) as store:
        future = store.start_ttl_sweeper()
        assert store.start_ttl_sweeper() is future
        assert not future.done()
        assert store.stop_ttl_sweeper(timeout=5)
        future.result(timeout=5)
    with MemstoreStore() as store:
        assert store.stop_ttl_sweeper()  # never started


def test_ttl_refused_values() -> None:
    with MemstoreStore() as store:
        for bad in (0, -1, "5", float("nan")):
            with pytest.raises(InvalidItemError):
                store.put(("t",), "k", {"v": 1}, ttl=bad)  # type: ignore[arg-type]
        assert store.get(("t",), "k") is None


@pytest.mark.parametrize("minutes", [10**12, 1e300])
def test_a_ttl_past_the_calendar_is_refused_and_the_batch_changes_nothing(minutes: float) -> None:
    """A TTL whose deadline no date can hold is a clear InvalidItemError, not an OverflowError."""
    with MemstoreStore() as store:
        with pytest.raises(InvalidItemError, match="past the year 9999"):
            store.batch(
                [PutOp(("t",), "first", {"v": 1}), PutOp(("t",), "k", {"v": 2}, ttl=minutes)]
            )
        assert store.search(("t",)) == []
    with MemstoreStore(ttl={"default_ttl": minutes}) as store:
        with pytest.raises(InvalidItemError, match="past the year 9999"):
            store.put(("t",), "k", {"v": 3})
        assert store.get(("t",), "k") is None


@pytest.mark.parametrize("dsn", ["postgresql://me@db/agents", "postgres://me@db/agents"])
def test_a_dsn_given_as_the_folder_is_refused_and_creates_nothing(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DSN is not a folder: it once opened a local folder named after it, unshared."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MemstoreError, match="Memory\\(journal="):
        MemstoreStore(dsn)
    assert list(tmp_path.iterdir()) == []


def test_namespace_rules_use_langgraph_errors() -> None:
    with MemstoreStore() as store:
        for ns in [(), ("a.b",), ("",), ("a", 1), ("langgraph", "x")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(ns, "k", {"v": 1})  # type: ignore[arg-type]
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("a.b",), "k", {"v": 1})])
        with pytest.raises(InvalidNamespaceError):
            store.batch([GetOp((), "k")])
        with pytest.raises(InvalidNamespaceError):
            store.search(("a.b",))
        assert store.get(("ok",), "k") is None  # the bad batch changed nothing
        store.put(("*", "a b", "%", "日本"), "k", {"v": 1})
        assert store.list_namespaces() == [("*", "a b", "%", "日本")]


def test_bad_values_and_filters_change_nothing() -> None:
    with MemstoreStore() as store:
        with pytest.raises(InvalidItemError):
            store.batch([PutOp(("a",), "k1", {"v": 1}), PutOp(("a",), "k2", {"v": object()})])
        with pytest.raises(InvalidItemError):
            store.put(("a",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(MemstoreError, match="unknown filter operator"):
            store.batch([PutOp(("a",), "k1", {"v": 1}), SearchOp(("a",), {"v": {"$in": [1]}})])
        with pytest.raises(MemstoreError, match="mixes operators"):
            store.search(("a",), filter={"v": {"$gt": 1, "w": 2}})
        assert store.search(()) == []


def test_a_value_nested_deeper_than_json_encodes_is_refused_and_changes_nothing() -> None:
    """JSON encoding cannot nest a few thousand levels: a clear error, not RecursionError."""
    deep: dict[str, Any] = {"leaf": 1}
    for _ in range(5000):
        deep = {"a": deep}
    with MemstoreStore() as store:
        with pytest.raises(InvalidItemError, match="nests too deep"):
            store.batch([PutOp(("a",), "k1", {"v": 1}), PutOp(("a",), "k2", deep)])
        assert store.search(()) == []


def test_async_paths() -> None:
    async def run(store: MemstoreStore) -> None:
        await store.aput(("a", "b"), "k", {"text": "async hello"})
        await store.aput(("a", "c"), "k2", {"text": "other"})
        item = await store.aget(("a", "b"), "k")
        assert item is not None and item.value == {"text": "async hello"}
        hits = await store.asearch(("a",), query="hello")
        assert hits[0].key == "k"
        assert await store.alist_namespaces(prefix=("a",)) == [("a", "b"), ("a", "c")]
        await store.adelete(("a", "b"), "k")
        assert await store.aget(("a", "b"), "k") is None
        results = await store.abatch([GetOp(("a", "c"), "k2"), SearchOp(("a",))])
        assert results[0] is not None and len(results[1]) == 1  # type: ignore[arg-type]

    with MemstoreStore(index=_index(CharacterEmbeddings(dims=16))) as store:
        asyncio.run(run(store))


def test_as_of_and_history(tmp_path: Path) -> None:
    with MemstoreStore(tmp_path / "m") as s:
        s.put(("u",), "diet", {"text": "vegetarian"})
        assert s.memory.journal is not None
        mid = s.memory.journal.head()  # a journal position (an aware datetime works too)
        assert mid is not None
        s.put(("u",), "diet", {"text": "vegan"})
        s.put(("u", "x"), "other", {"text": "later"})
        s.delete(("u",), "diet")
        assert s.get(("u",), "diet") is None
        then = s.as_of(mid, ("u",))
        assert [(i.namespace, i.key, i.value) for i in then] == [
            (("u",), "diet", {"text": "vegetarian"})
        ]
        now = s.memory.journal.head()
        assert [i.key for i in s.as_of(now)] == ["other"]
        assert [i.key for i in s.as_of(now, ("u", "x"), filter={"text": "nope"})] == []
        versions = s.history(("u",), "diet")
        assert [v.value if v else None for v in versions] == [
            {"text": "vegetarian"},
            {"text": "vegan"},
            None,
        ]


def test_as_of_needs_a_journal() -> None:
    with MemstoreStore() as store, pytest.raises(MemstoreError, match="journal"):
        store.as_of(dt.datetime.now(dt.UTC))


def test_other_writers_are_followed() -> None:
    """A second store on the same Memory sees the first one's writes and deletes."""
    memory = Memory(embedder=None)
    with MemstoreStore(memory) as one, MemstoreStore(memory) as two:
        one.put(("shared",), "k", {"v": 1})
        assert two.list_namespaces() == [("shared",)]
        assert [h.key for h in two.search(("shared",))] == ["k"]
        one.delete(("shared",), "k")
        assert two.list_namespaces() == []
    memory.add("an ordinary memstore note")  # not a LangGraph item: never listed
    memory.add(  # the store's kind written by hand, with no partition: left alone
        "forged", kind="langgraph.item", data={"langgraph.key": "k", "langgraph.value": "{}"}
    )
    memory.add(
        "forged",
        kind="langgraph.item",
        partition="a b",
        dedup=False,
        data={"langgraph.key": "k", "langgraph.value": "{}"},
    )
    with MemstoreStore(memory) as three:
        assert three.search(()) == [] and three.list_namespaces() == []
    memory.close()


@pytest.mark.parametrize("page", [{"limit": "3"}, {"offset": "1"}, {"limit": 2.5}, {"limit": True}])
def test_a_page_that_is_not_a_whole_number_is_refused(page: dict[str, object]) -> None:
    with MemstoreStore() as store:
        store.put(("a",), "k", {"v": 1})
        with pytest.raises(InvalidItemError, match="a whole number"):
            store.search(("a",), **page)  # type: ignore[arg-type]
        with pytest.raises(InvalidItemError, match="a whole number"):
            store.list_namespaces(**page)  # type: ignore[arg-type]
        assert [it.key for it in store.search(("a",), limit=1)] == ["k"]


def test_closed_store_refuses_work() -> None:
    store = MemstoreStore()
    store.close()
    store.close()
    with pytest.raises(MemstoreError, match="closed"):
        store.get(("a",), "k")


def test_two_processes_share_one_postgresql_journal(pg_place: PgPlace) -> None:
    """Two Memories on one PostgreSQL journal: one store's writes reach the other's reads."""
    from memstore.journal.postgres import PostgresJournal

    def open_memory() -> Memory:
        journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, poll_interval=0.05)
        return Memory(embedder=None, journal=journal)

    first, second = open_memory(), open_memory()
    try:
        with MemstoreStore(first) as one, MemstoreStore(second) as two:
            one.put(("team", "infra"), "oncall", {"who": "ada", "week": 49})
            one.put(("team", "docs"), "runbook", {"text": "restart the queue first"})
            assert isinstance(second.journal, PostgresJournal)
            assert second.journal.wait_for(first.journal.head(), timeout=30)  # type: ignore[union-attr]
            item = two.get(("team", "infra"), "oncall")
            assert item is not None and item.value == {"who": "ada", "week": 49}
            assert two.list_namespaces() == [("team", "docs"), ("team", "infra")]
            assert [h.key for h in two.search(("team",), filter={"week": {"$gt": 48}})] == [
                "oncall"
            ]
            one.delete(("team", "infra"), "oncall")
            assert second.journal.wait_for(first.journal.head(), timeout=30)  # type: ignore[union-attr]
            assert two.get(("team", "infra"), "oncall") is None
            assert two.list_namespaces() == [("team", "docs")]
        with MemstoreStore(open_memory()) as three:  # a later process finds the record
            assert [h.key for h in three.search((), query="queue restart")] == ["runbook"]
            three.memory.close()
    finally:
        first.close()
        second.close()


def test_one_embedding_call_per_put() -> None:
    """The engine's vector index reuses the rows the put just computed."""
    emb = CharacterEmbeddings(dims=16)
    with MemstoreStore(index=_index(emb, ["text"])) as store:
        store.put(("a",), "k", {"text": "only one text to embed"})
        assert emb.calls == 1
        assert store.memory.stats().vectors == 1  # and the engine's index has it
        store.put(("a",), "two", {"text": "first"}, index=["text", "text"])
        assert emb.calls == 2  # two fields and the joined text the index embeds: one call
        assert store.memory.stats().vectors == 2


def test_a_batch_embeds_once_and_an_embedding_failure_writes_nothing() -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        if "poison" in texts:
            raise RuntimeError("the embedding service is down")
        return [[float(len(t)), 1.0] for t in texts]

    with MemstoreStore(index={"dims": 2, "embed": embed, "fields": ["t"]}) as store:
        store.batch([PutOp(("a",), "1", {"t": "one"}), PutOp(("a",), "2", {"t": "three"})])
        assert calls == [["one", "three"]]  # one call for the batch's puts
        with pytest.raises(RuntimeError, match="down"):
            store.batch([PutOp(("a",), "3", {"t": "fine"}), PutOp(("a",), "4", {"t": "poison"})])
        assert store.get(("a",), "3") is None and store.get(("a",), "4") is None
        assert {h.key for h in store.search(("a",))} == {"1", "2"}


def _wide(dims: int) -> Any:
    """An index of ``dims``-wide vectors, one per element of ``paras``."""
    return {
        "dims": dims,
        "embed": lambda texts: [[1.0] * dims for _ in texts],
        "fields": ["paras[*]"],
    }


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (PutOp(("a",), "big", {"text": "x" * 120_000}), "data holds"),
        (PutOp(("n" * 300,), "k", {"text": "ok"}), "partition is 300 characters"),
        (PutOp(("a",), "odd", {"text": "bad \ud800"}), "lone surrogate"),
        (PutOp(("a",), "many", {"paras": [f"p{i}" for i in range(20)]}), "data holds"),
    ],
    ids=["value too large", "namespace too long", "lone surrogate", "too many vectors"],
)
def test_a_refused_put_leaves_the_whole_batch_unwritten(
    tmp_path: Path, bad: PutOp, says: str
) -> None:
    """Whatever the engine refuses, a batch is written whole or not at all (journal too)."""
    with MemstoreStore(tmp_path / "m", index=_wide(1536)) as store:
        store.put(("a",), "kept", {"paras": ["here before"]})
        store.put(("a",), "doomed", {"paras": ["deleted in the batch"]})
        before = store.memory.stats().items
        ops = [
            PutOp(("a",), "new", {"paras": ["written first"]}),
            PutOp(("a",), "kept", {"paras": ["changed"]}),
            PutOp(("a",), "doomed", None),
            GetOp(("a",), "new"),
            bad,
        ]
        with pytest.raises(InvalidItemError, match=says):
            store.batch(ops)
        assert store.memory.stats().items == before
        assert store.get(("a",), "new") is None
        assert store.get(("a",), "kept").value == {"paras": ["here before"]}  # type: ignore[union-attr]
        assert store.get(("a",), "doomed") is not None
        assert {h.key for h in store.search(("a",), query="written first")} == {"kept", "doomed"}
    with MemstoreStore(tmp_path / "m", index=_wide(1536)) as store:  # the journal agrees
        assert sorted(h.key for h in store.search(("a",))) == ["doomed", "kept"]


@pytest.mark.parametrize(
    "ttl",
    [
        {"sweep_interval_minutes": "5"},
        {"sweep_interval_minutes": -1},
        {"sweep_interval_minutes": float("nan")},
        {"sweep_interval_minutes": float("inf")},
        {"default_ttl": "30"},
        {"default_ttl": -1},
        {"refresh_on_read": "no"},
    ],
)
def test_bad_ttl_config_is_refused_and_leaves_the_folder_free(
    tmp_path: Path, ttl: dict[str, Any]
) -> None:
    folder = tmp_path / "m"
    with pytest.raises(InvalidItemError):
        MemstoreStore(folder, ttl=ttl)  # type: ignore[arg-type]
    with MemstoreStore(folder) as store:  # the refused store did not keep the journal's lock
        store.put(("t",), "k", {"v": 1})


@pytest.mark.parametrize("minutes", [-1, "5", float("nan"), float("inf"), True])
def test_start_ttl_sweeper_refuses_an_interval_that_is_not_a_positive_number(
    minutes: Any,
) -> None:
    with MemstoreStore() as store:
        with pytest.raises(InvalidItemError):
            store.start_ttl_sweeper(minutes)
        assert store._sweeper is None  # no thread spinning on a zero or negative wait


@pytest.mark.parametrize(
    "op",
    [
        SearchOp(("a",), limit=-1),
        SearchOp(("a",), offset=-1),
        ListNamespacesOp(limit=-1),
        ListNamespacesOp(offset=-3),
    ],
    ids=["search-limit", "search-offset", "namespaces-limit", "namespaces-offset"],
)
def test_a_negative_limit_or_offset_is_refused_and_the_batch_changes_nothing(op: Any) -> None:
    """LangGraph's own stores refuse these with a ValueError; a negative one never reads as 0."""
    with MemstoreStore() as store:
        with pytest.raises(ValueError, match=r"must be at least 0, got -\d") as got:
            store.batch([PutOp(("a",), "k", {"v": 1}), op])
        assert isinstance(got.value, OutOfRangeError)
        assert got.value.code == "arguments.out_of_range"
        assert store.get(("a",), "k") is None  # the put before it did not happen
        with pytest.raises(ValueError, match="at least 0"):
            asyncio.run(store.abatch([op]))
