"""LangGraph's own store test-suite, run against MemstoreStore.

Ported from langchain-ai/langgraph, libs/checkpoint-sqlite/tests/test_store.py
(MIT licence), with its ``store`` fixture pointed at :class:`MemstoreStore`.
Left out: the tests of SQLite internals (``test_nonnull_migrations``, the
vector-table check of ``test_vector_store_initialization``,
``test_escape_glob_literal``, ``test_namespace_match_pattern``,
``test_list_namespaces_prefix_uses_indexable_condition``) and the ``l2`` /
``inner_product`` distance types (memstore scores by cosine, as the default
SQLite and PostgreSQL stores do). Adapted, each marked ``ADAPTED``:

- ``test_sql_injection_vulnerability``: memstore has no SQL to inject into, so
  any text is a valid filter key; the malicious key simply matches nothing.
- ``test_vector_search_pagination``: with the default hybrid ranking, scores
  (cosine, as LangGraph reports them) need not descend; the test runs with
  ``ranking="vector"`` (cosine order) and, for hybrid, checks that pages are
  disjoint slices of one ranking.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from memstore.integrations.langgraph import MemstoreStore, Ranking
from tests.integrations.conftest import CharacterEmbeddings

ConnType = Literal["memory", "file"]


@contextmanager
def create_vector_store(
    fake_embeddings: CharacterEmbeddings,
    text_fields: list[str] | None = None,
    conn_type: ConnType = "memory",
    tmp: Path | None = None,
    ranking: Ranking = "hybrid",
) -> Iterator[MemstoreStore]:
    index: dict[str, Any] = {"dims": fake_embeddings.dims, "embed": fake_embeddings}
    if text_fields is not None:
        index["fields"] = text_fields
    where = None
    if conn_type == "file":
        where = (tmp or Path("/nonexistent")) / uuid.uuid4().hex
    with MemstoreStore(where, index=index, ranking=ranking) as store:  # type: ignore[arg-type]
        yield store


def test_batch_order(store: MemstoreStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    ops = [
        GetOp(namespace=("test", "foo"), key="key1"),
        PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
        SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(namespace=("test",), key="key3"),
    ]
    results = store.batch(ops)
    assert len(results) == 5
    assert isinstance(results[0], Item)
    assert results[0].value == {"data": "value1"}
    assert results[0].key == "key1"
    assert results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert isinstance(results[2], list) and len(results[2]) == 1
    assert results[2][0].key == "key1"
    assert results[2][0].value == {"data": "value1"}
    assert isinstance(results[3], list)
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]
    assert results[4] is None

    reordered = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert len(reordered) == 5
    assert isinstance(reordered[0], list) and len(reordered[0]) >= 2
    assert isinstance(reordered[1], Item) and reordered[1].value == {"data": "value2"}
    assert reordered[1].namespace == ("test", "bar")
    assert isinstance(reordered[2], list) and len(reordered[2]) > 0
    assert reordered[3] is None
    assert isinstance(reordered[4], Item) and reordered[4].value == {"data": "value1"}
    item3 = store.get(("test",), "key3")
    assert item3 is not None and item3.value == {"data": "value3"}


def test_batch_get_ops(store: MemstoreStore) -> None:
    store.put(("test",), "key1", {"data": "value1"})
    store.put(("test",), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test",), key="key1"),
            GetOp(namespace=("test",), key="key2"),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 3
    assert results[0] is not None and results[0].key == "key1"  # type: ignore[union-attr]
    assert results[1] is not None and results[1].key == "key2"  # type: ignore[union-attr]
    assert results[2] is None


def test_batch_put_ops(store: MemstoreStore) -> None:
    results = store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),
        ]
    )
    assert results == [None, None, None]
    item1, item2 = store.get(("test",), "key1"), store.get(("test",), "key2")
    assert item1 and item1.value == {"data": "value1"}
    assert item2 and item2.value == {"data": "value2"}
    assert store.get(("test",), "key3") is None


def test_batch_search_ops(store: MemstoreStore) -> None:
    for ns, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(ns, key, value)
    results = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert len(results[0]) == 2  # type: ignore[arg-type]
    assert all(it.value["tag"] == "a" for it in results[0])  # type: ignore[union-attr]
    assert len(results[1]) == 2  # type: ignore[arg-type]
    assert len(results[2]) == 1  # type: ignore[arg-type]
    assert results[2][0].namespace == ("test", "foo")  # type: ignore[index]


def test_batch_list_namespaces_ops(store: MemstoreStore) -> None:
    data = [
        (("test", "documents", "public"), "doc1", {"content": "public doc"}),
        (("test", "documents", "private"), "doc2", {"content": "private doc"}),
        (("test", "images", "public"), "img1", {"content": "public image"}),
        (("prod", "documents", "public"), "doc3", {"content": "prod doc"}),
    ]
    for ns, key, value in data:
        store.put(ns, key, value)
    results = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),),
                max_depth=None,
                limit=10,
                offset=0,
            ),
        ]
    )
    assert len(results[0]) == len(data)  # type: ignore[arg-type]
    assert all(len(ns) <= 2 for ns in results[1])  # type: ignore[union-attr]
    assert all(ns[-1] == "public" for ns in results[2])  # type: ignore[union-attr, index]


def test_basic_store_ops(store: MemstoreStore) -> None:
    ns = ("test", "documents")
    store.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(ns, "doc1")
    assert item and item.namespace == ns and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    store.put(ns, "doc1", {"title": "Updated Document", "content": "Hello, Updated!"})
    updated = store.get(ns, "doc1")
    assert updated and updated.value == {"title": "Updated Document", "content": "Hello, Updated!"}
    assert updated.updated_at >= item.updated_at
    assert updated.created_at == item.created_at  # the engine keeps the creation time
    assert store.get(("test", "other_documents"), "doc1") is None
    store.delete(ns, "doc1")
    assert store.get(ns, "doc1") is None


def test_list_namespaces(store: MemstoreStore) -> None:
    namespaces = [
        ("test", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "images", "public"),
        ("test", "images", "private"),
        ("prod", "documents", "public"),
        ("prod", "documents", "private"),
    ]
    for ns in namespaces:
        store.put(ns, "dummy", {"content": "dummy"})
    assert len(store.list_namespaces()) == len(namespaces)
    test_ns = store.list_namespaces(prefix=["test"])  # type: ignore[arg-type]
    assert len(test_ns) == 4 and all(ns[0] == "test" for ns in test_ns)
    public = store.list_namespaces(suffix=["public"])  # type: ignore[arg-type]
    assert len(public) == 3 and all(ns[-1] == "public" for ns in public)
    assert all(len(ns) <= 2 for ns in store.list_namespaces(max_depth=2))
    assert len(store.list_namespaces(limit=3)) == 3
    for ns in namespaces:
        store.delete(ns, "dummy")
    assert store.list_namespaces() == []  # a namespace whose last item is gone is not listed


def test_search(store: MemstoreStore) -> None:
    data = [
        (
            ("test", "docs"),
            "doc1",
            {"title": "First Doc", "author": "Alice", "tags": ["important"]},
        ),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for ns, key, value in data:
        store.put(ns, key, value)
    assert len(store.search(["test"])) == 3  # type: ignore[arg-type]
    docs = store.search(["test", "docs"])  # type: ignore[arg-type]
    assert len(docs) == 2 and all(it.namespace == ("test", "docs") for it in docs)
    alice = store.search(["test"], filter={"author": "Alice"})  # type: ignore[arg-type]
    assert len(alice) == 2 and all(it.value["author"] == "Alice" for it in alice)
    assert len(store.search(["test"], limit=2)) == 2  # type: ignore[arg-type]
    assert len(store.search(["test"], offset=2)) == 1  # type: ignore[arg-type]
    for ns, key, _ in data:
        store.delete(ns, key)


def test_vector_store_initialization(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings) as store:
        assert store.index_config is not None
        assert store.embeddings == fake_embeddings
        assert store.index_config["dims"] == fake_embeddings.dims
        assert store.index_config.get("fields") is None
    with create_vector_store(fake_embeddings, text_fields=["content", "title"]) as store:
        assert store.index_config is not None
        assert store.index_config["fields"] == ["content", "title"]


@pytest.mark.parametrize("conn_type", ["memory", "file"])
def test_vector_insert_with_auto_embedding(
    fake_embeddings: CharacterEmbeddings, conn_type: ConnType, tmp_path: Path
) -> None:
    with create_vector_store(fake_embeddings, conn_type=conn_type, tmp=tmp_path) as store:
        for key, value in [
            ("doc1", {"text": "short text"}),
            ("doc2", {"text": "longer text document"}),
            ("doc3", {"text": "longest text document here"}),
            ("doc4", {"description": "text in description field"}),
            ("doc5", {"content": "text in content field"}),
            ("doc6", {"body": "text in body field"}),
        ]:
            store.put(("test",), key, value)
        order = [r.key for r in store.search(("test",), query="long text")]
        assert "doc2" in order and "doc3" in order


@pytest.mark.parametrize("conn_type", ["memory", "file"])
def test_vector_update_with_embedding(
    fake_embeddings: CharacterEmbeddings, conn_type: ConnType, tmp_path: Path
) -> None:
    with create_vector_store(fake_embeddings, conn_type=conn_type, tmp=tmp_path) as store:
        store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
        store.put(("test",), "doc2", {"text": "something about dogs"})
        store.put(("test",), "doc3", {"text": "text about birds"})
        initial = store.search(("test",), query="Zany Xerxes")
        assert initial[0].key == "doc1"
        initial_score = initial[0].score
        assert initial_score is not None
        store.put(("test",), "doc1", {"text": "new text about dogs"})
        after = store.search(("test",), query="Zany Xerxes")
        after_score = next((r.score for r in after if r.key == "doc1"), 0.0)
        assert after_score is not None and after_score < initial_score
        for r in store.search(("test",), query="new text about dogs"):
            if r.key == "doc1":
                assert r.score is not None and r.score > after_score
        store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
        results = store.search(("test",), query="new text about dogs", limit=3)
        assert not any(r.key == "doc4" for r in results)


def test_vector_search_with_filters(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings) as store:
        for key, value in [
            ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
            ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
            ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
            ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
        ]:
            store.put(("test",), key, value)
        results = store.search(("test",), query="apple", filter={"color": "red"})
        assert len(results) == 2 and results[0].key == "doc1"
        results = store.search(("test",), query="car", filter={"color": "red"})
        assert results[0].key == "doc2"
        results = store.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
        assert len(results) == 3
        assert results[0].key == "doc4"
        assert {"doc1", "doc3"} <= {r.key for r in results}
        results = store.search(
            ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
        )
        assert results[0].key == "doc3"


@pytest.mark.parametrize("ranking", ["vector", "hybrid"])
def test_vector_search_pagination(fake_embeddings: CharacterEmbeddings, ranking: Ranking) -> None:
    with create_vector_store(fake_embeddings, ranking=ranking) as store:
        for i in range(5):
            store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
        page1 = store.search(("test",), query="test", limit=2)
        page2 = store.search(("test",), query="test", limit=2, offset=2)
        assert len(page1) == 2 and len(page2) == 2
        assert {r.key for r in page1}.isdisjoint({r.key for r in page2})
        every = store.search(("test",), query="test", limit=10)
        assert len(every) == 5
        # ADAPTED: pages are slices of one ranking, whichever ranking it is.
        assert [r.key for r in page1 + page2] == [r.key for r in every[:4]]
        if ranking == "vector":  # LangGraph's own assertions: cosine order
            scores = [r.score for r in every]
            assert all(s is not None for s in scores)
            assert page1[0].score >= page1[1].score  # type: ignore[operator]
            assert page2[0].score >= page2[1].score  # type: ignore[operator]
            assert every[0].score >= every[2].score  # type: ignore[operator]


def test_vector_search_edge_cases(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings) as store:
        store.put(("test",), "doc1", {"text": "test document"})
        assert len(store.search(("test",), query="")) == 1
        assert len(store.search(("test",), query=None)) == 1
        assert len(store.search(("test",), query="test " * 100)) == 1
        assert len(store.search(("test",), query="test!@#$%^&*()")) == 1


def test_embed_with_path(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings, text_fields=["key0", "key1", "key3"]) as store:
        store.put(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
        store.put(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})
        results = store.search(("test",), query="xxx")
        assert len(results) == 2 and results[0].key != results[1].key
        assert results[0].score > 0.9 and results[1].score > 0.9  # type: ignore[operator]
        results = store.search(("test",), query="uuu")
        assert len(results) == 2 and results[0].key == "doc2"
        assert results[0].score > results[1].score  # type: ignore[operator]
        results = store.search(("test",), query="zzz")
        assert len(results) == 2 and results[0].key == "doc1"
        assert results[0].score > results[1].score  # type: ignore[operator]
        results = store.search(("test",), query="www")
        assert len(results) == 2 and results[0].key != results[1].key
        assert results[0].score < 0.9 and results[1].score < 0.9  # type: ignore[operator]


def test_embed_with_path_operation_config(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings, text_fields=["key17"]) as store:
        doc3 = {"key0": "aaa", "key1": "bbb", "key2": "ccc", "key3": "ddd"}
        doc4 = {"key0": "eee", "key1": "bbb", "key2": "fff", "key3": "ggg"}
        store.put(("test",), "doc3", doc3, index=["key0", "key1"])
        store.put(("test",), "doc4", doc4, index=["key1", "key3"])
        results = store.search(("test",), query="aaa")
        assert len(results) == 2 and results[0].key == "doc3"
        assert len({r.key for r in results}) == 2
        assert results[0].score > results[1].score  # type: ignore[operator]
        results = store.search(("test",), query="ggg")
        assert len(results) == 2 and results[0].key == "doc4"
        assert results[0].score > results[1].score  # type: ignore[operator]
        results = store.search(("test",), query="bbb")
        assert len(results) == 2 and results[0].key != results[1].key
        assert abs(results[0].score - results[1].score) < 0.1  # type: ignore[operator]
        results = store.search(("test",), query="ccc")
        assert len(results) == 2 and all(r.score < 0.9 for r in results)  # type: ignore[operator]
        store.put(("test",), "doc5", {"key0": "hhh", "key1": "iii"}, index=False)
        results = store.search(("test",))
        assert len(results) == 3 and any(r.key == "doc5" for r in results)


def _cosine(x: list[float], y: list[float]) -> float:
    dot = sum(a * b for a, b in zip(x, y, strict=True))
    nx, ny = math.sqrt(sum(a * a for a in x)), math.sqrt(sum(b * b for b in y))
    return dot / (nx * ny) if nx > 0 and ny > 0 else 0.0


@pytest.mark.parametrize("query", ["aaa", "bbb", "ccc", "abcd", "poisson"])
@pytest.mark.parametrize("conn_type", ["memory", "file"])
def test_scores(
    fake_embeddings: CharacterEmbeddings, query: str, conn_type: ConnType, tmp_path: Path
) -> None:
    with create_vector_store(
        fake_embeddings, text_fields=["key0"], conn_type=conn_type, tmp=tmp_path
    ) as store:
        store.put(("test",), "doc", {"key0": "aaa"}, index=["key0", "key1"])
        results = store.search((), query=query)
        expected = _cosine(fake_embeddings.embed_query(query), fake_embeddings.embed_query("aaa"))
        assert len(results) == 1
        assert results[0].score == pytest.approx(expected, abs=1e-3)


def test_basic_store_operations(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings, text_fields=["key0", "key1", "key3"]) as store:
        uid = uuid.uuid4().hex
        ns = (uid, "test", "documents")
        assert store.search((uid,)) == []
        store.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
        item = store.get(ns, "doc1")
        assert item is not None and item.namespace == ns and item.key == "doc1"
        assert item.created_at is not None and item.updated_at is not None
        store.put(ns, "doc1", {"title": "Updated Test Document", "content": "Hello, LangGraph!"})
        updated = store.get(ns, "doc1")
        assert updated is not None and updated.updated_at >= item.updated_at
        assert store.get((uid, "test", "other_documents"), "doc1") is None
        store.put(ns, "doc2", {"title": "Another Document", "content": "Greetings!"})
        items = store.search((uid, "test"), limit=10)
        assert len(items) == 2 and {it.key for it in items} == {"doc1", "doc2"}
        assert (uid, "test", "documents") in store.list_namespaces(prefix=(uid, "test"))
        store.delete(ns, "doc1")
        store.delete(ns, "doc2")
        assert store.get(ns, "doc1") is None and store.get(ns, "doc2") is None
        assert store.search((uid, "test"), limit=10) == []


def test_list_namespaces_operations(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings, text_fields=["key0", "key1", "key3"]) as store:
        p = str(uuid.uuid4())
        namespaces = [
            (p, "test", "documents", "public", p),
            (p, "test", "documents", "private", p),
            (p, "test", "images", "public", p),
            (p, "test", "images", "private", p),
            (p, "prod", "documents", "public", p),
            (p, "prod", "documents", "some", "nesting", "public", p),
            (p, "prod", "documents", "private", p),
        ]
        for ns in namespaces:
            store.put(ns, "dummy", {"content": "dummy"})
        res = store.list_namespaces(prefix=(p, "test"))
        assert len(res) == 4 and all(ns[1] == "test" for ns in res)
        res = store.list_namespaces(prefix=(p, "test", "documents"))
        assert len(res) == 2 and all(ns[1:3] == ("test", "documents") for ns in res)
        res = store.list_namespaces(suffix=("public", p))
        assert len(res) == 4 and all(ns[-2] == "public" for ns in res)
        res = store.list_namespaces(prefix=(p, "test"), suffix=("public", p))
        assert len(res) == 2
        res = store.list_namespaces(prefix=(p, "*", "documents"))
        assert len(res) == 5 and all(ns[2] == "documents" for ns in res)
        res = store.list_namespaces(suffix=("*", "public", p))
        assert len(res) == 4
        res = store.list_namespaces(suffix=("some", "*", "public", p))
        assert res == [(p, "prod", "documents", "some", "nesting", "public", p)]
        assert all(len(ns) <= 3 for ns in store.list_namespaces(max_depth=3))
        res = store.list_namespaces(max_depth=4, prefix=(p, "*", "documents"))
        assert len(set(res)) == len(res) == 5
        assert len(store.list_namespaces(prefix=(p,), limit=3)) == 3
        assert len(store.list_namespaces(prefix=(p,), offset=3)) == len(namespaces) - 3
        res = store.list_namespaces(prefix=(p,))
        assert set(res) == set(namespaces)
        for ns in namespaces:
            store.delete(ns, "dummy")


def test_search_items(fake_embeddings: CharacterEmbeddings) -> None:
    base = "test_search_items"
    namespaces = [
        (base, "documents", "user1"),
        (base, "documents", "user2"),
        (base, "reports", "department1"),
        (base, "reports", "department2"),
    ]
    values = [
        {"title": "Doc 1", "author": "John Doe", "tags": ["important"]},
        {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]},
        {"title": "Report A", "author": "John Doe", "tags": ["final"]},
        {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]},
    ]
    with create_vector_store(fake_embeddings, text_fields=["key0", "key1", "key3"]) as store:
        for ns, value in zip(namespaces, values, strict=True):
            store.put(ns, f"item_{ns[-1]}", value)
        docs = store.search((base, "documents"))
        assert len(docs) == 2 and all(it.namespace[1] == "documents" for it in docs)
        reports = store.search((base, "reports"))
        assert len(reports) == 2 and all(it.namespace[1] == "reports" for it in reports)
        first, second = store.search((base,), limit=2), store.search((base,), limit=2, offset=2)
        assert len(first) == 2 and len(second) == 2
        assert {it.key for it in first}.isdisjoint({it.key for it in second})
        assert len(store.search((base,))) == 4
        john = store.search((base,), filter={"author": "John Doe"})
        assert len(john) == 2 and all(it.value["author"] == "John Doe" for it in john)
        drafts = store.search((base,), filter={"tags": ["draft"]})
        assert len(drafts) == 2 and all("draft" in it.value["tags"] for it in drafts)


def test_sql_injection_vulnerability(store: MemstoreStore) -> None:
    store.put(("docs",), "public", {"access": "public", "data": "public info"})
    store.put(("docs",), "private", {"access": "private", "data": "secret", "password": "123"})
    normal = store.search(("docs",), filter={"access": "public"})
    assert len(normal) == 1 and normal[0].value["access"] == "public"
    # ADAPTED: no SQL, so no invalid key: the malicious text is a field that no item has.
    malicious_key = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    assert store.search(("docs",), filter={malicious_key: "dummy"}) == []


def test_sql_injection_filter_values(store: MemstoreStore) -> None:
    store.put(("docs",), "doc1", {"access": "public", "title": "Public Document"})
    store.put(("docs",), "doc2", {"access": "private", "title": "Private Document"})
    store.put(("docs",), "doc3", {"access": "secret", "title": "Secret Document"})
    for bad in [
        "public' OR '1'='1",
        "public'; --",
        "public' UNION SELECT * FROM store --",
        "public\x00' OR '1'='1",
        "''''",
        "public' OR 'א'='א",
    ]:
        assert store.search(("docs",), filter={"access": bad}) == []
    store.put(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    results = store.search(("docs",), filter={"title": "O'Brien's Document"})
    assert len(results) == 1 and results[0].value["title"] == "O'Brien's Document"


def test_numeric_filter_safety(store: MemstoreStore) -> None:
    store.put(("items",), "item1", {"price": 10, "quantity": 5})
    store.put(("items",), "item2", {"price": 20, "quantity": 3})
    store.put(("items",), "item3", {"price": 30, "quantity": 1})
    results = store.search(("items",), filter={"price": {"$gt": 15}})
    assert len(results) == 2 and all(r.value["price"] > 15 for r in results)
    assert len(store.search(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(store.search(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert store.search(("items",), filter={"price": {"$eq": float("nan")}}) == []
    assert len(store.search(("items",), filter={"price": {"$lt": 10**100}})) == 3
    store.put(("items",), "item4", {"price": -10, "quantity": 0})
    results = store.search(("items",), filter={"price": {"$lt": 0}})
    assert [r.key for r in results] == ["item4"]


def test_boolean_filter_safety(store: MemstoreStore) -> None:
    store.put(("flags",), "flag1", {"active": True, "name": "Feature A"})
    store.put(("flags",), "flag2", {"active": False, "name": "Feature B"})
    store.put(("flags",), "flag3", {"active": True, "name": "Feature C"})
    results = store.search(("flags",), filter={"active": True})
    assert len(results) == 2 and all(r.value["active"] is True for r in results)
    results = store.search(("flags",), filter={"active": False})
    assert len(results) == 1 and results[0].value["active"] is False


def test_filter_keys_with_hyphens_and_digits(store: MemstoreStore) -> None:
    store.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    assert [r.key for r in store.search(("docs",), filter={"access-level": "public"})] == ["hyphen"]
    assert [r.key for r in store.search(("docs",), filter={"user.access-level": "nested"})] == [
        "hyphen"
    ]
    assert [r.key for r in store.search(("docs",), filter={"123abc": "ok"})] == ["digit"]
    assert [r.key for r in store.search(("docs",), filter={"user.123abc": "ok2"})] == ["digit"]


def test_non_ascii(fake_embeddings: CharacterEmbeddings) -> None:
    with create_vector_store(fake_embeddings) as store:
        texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
        for n, text in enumerate(texts, 1):
            store.put(("user_123", "memories"), str(n), {"text": text})
        for n, text in enumerate(texts, 1):
            assert store.search(("user_123", "memories"), query=text)[0].key == str(n)


def _namespaces_of(store: MemstoreStore, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {it.namespace for it in store.search(prefix, limit=100)}


def test_search_namespace_segment_boundary(store: MemstoreStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
    ]:
        store.put(ns, "k", {"v": 1})
    store.put(("foo2",), "k", {"v": 1})
    assert _namespaces_of(store, ("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert _namespaces_of(store, ("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert _namespaces_of(store, ("foo2",)) == {("foo2",)}
    assert _namespaces_of(store, ("fo",)) == set()


def test_search_namespace_wildcard_chars_are_literal(store: MemstoreStore) -> None:
    for ns in [("user_1",), ("user_1", "child"), ("userX1",), ("a%b",), ("axxb",), ("star*",)]:
        store.put(ns, "k", {"v": 1})
    store.put(("starX",), "k", {"v": 1})
    assert _namespaces_of(store, ("user_1",)) == {("user_1",), ("user_1", "child")}
    assert _namespaces_of(store, ("a%b",)) == {("a%b",)}
    assert _namespaces_of(store, ("star*",)) == {("star*",)}


def test_search_namespace_is_case_sensitive(store: MemstoreStore) -> None:
    store.put(("Foo",), "k", {"v": "upper"})
    store.put(("foo",), "k", {"v": "lower"})
    assert _namespaces_of(store, ("foo",)) == {("foo",)}
    assert _namespaces_of(store, ("Foo",)) == {("Foo",)}


def test_list_namespaces_segment_boundary(store: MemstoreStore) -> None:
    for ns in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    ]:
        store.put(ns, "k", {"v": 1})

    def listed(**kw: Any) -> set[tuple[str, ...]]:
        return set(store.list_namespaces(limit=100, **kw))

    assert listed(prefix=["foo"]) == {("foo",), ("foo", "child")}
    assert listed(suffix=["alice"]) == {("uid", "users", "alice"), ("uid", "a", "b", "alice")}
    assert listed(prefix=["uid", "*", "alice"]) == {("uid", "users", "alice")}
    assert listed(prefix=["uid"]) == {
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    }


def test_search_empty_prefix_is_unconstrained(store: MemstoreStore) -> None:
    for ns in [("a",), ("b", "c"), ("d", "e", "f")]:
        store.put(ns, "k", {"v": 1})
    assert _namespaces_of(store, ()) == {("a",), ("b", "c"), ("d", "e", "f")}


def test_namespace_labels_with_trailing_newline(store: MemstoreStore) -> None:
    store.put(("users", "alice"), "k", {"v": 1})
    store.put(("users", "alice\n"), "k", {"v": 2})
    assert set(store.list_namespaces(suffix=["alice"], limit=100)) == {("users", "alice")}
    assert set(store.list_namespaces(prefix=["users", "alice"], limit=100)) == {("users", "alice")}


def test_list_namespaces_metacharacter_labels(store: MemstoreStore) -> None:
    pairs = [
        ("star*", "starX"),
        ("q?m", "qXm"),
        ("br[ack]et", "brXacXket"),
        ("user_1", "userX1"),
        ("a%b", "axxb"),
        ("plus+", "plusX"),
    ]
    for label, decoy in pairs:
        store.put((label,), "k", {"v": 1})
        store.put((decoy,), "k", {"v": 1})
        store.put((label, "child"), "k", {"v": 1})
    for label, decoy in pairs:
        found = set(store.list_namespaces(prefix=[label], limit=100))
        assert found == {(label,), (label, "child")}
        assert (decoy,) not in found
        assert set(store.list_namespaces(prefix=[label, "child"], limit=100)) == {(label, "child")}


class _FixedVectorEmbeddings(Embeddings):
    """Known texts to hand-picked vectors (stored values arrive JSON-encoded under "$")."""

    dims = 3
    vectors: ClassVar[dict[str, list[float]]] = {
        "a": [1.0, 0.0, 0.0],
        "b": [2.0, 0.1, 0.0],
        "c": [0.0, 0.0, 1.0],
    }

    def _embed_one(self, text: str) -> list[float]:
        import json

        key = json.loads(text)["text"] if text.startswith("{") else text.strip()
        return list(self.vectors[key])

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed_one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed_one(text)


def test_vector_search_ranks_closest_first() -> None:
    index: Any = {"dims": 3, "embed": _FixedVectorEmbeddings()}
    with MemstoreStore(index=index, ranking="vector") as store:
        for key in ("a", "b", "c"):
            store.put(("docs",), key, {"text": key})
        results = store.search(("docs",), query="a")
        expected = [("a", 1.0), ("b", 2.0 / math.sqrt(4.01)), ("c", 0.0)]
        assert [r.key for r in results] == [k for k, _ in expected]
        for r, (_, score) in zip(results, expected, strict=True):
            assert r.score == pytest.approx(score, abs=1e-5)
