"""MemstoreStore's async side against LangGraph's: async embedding functions, cancellation.

LangGraph's ``IndexConfig.embed`` may be an async function (``AEmbeddingsFunc``):
its stores call it from ``abatch`` (``aput``, ``asearch``...) and refuse it in
the synchronous ``batch``. MemstoreStore must do the same, its engine index
included (which embeds in a worker thread, where an async function cannot be
called). And a cancelled ``abatch`` must have settled when the caller sees the
cancellation, as a batch that runs on the event loop has.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from memstore import Config, InvalidItemError, Item, Memory, MemstoreError
from memstore.integrations.langgraph import MemstoreStore
from tests.integrations.conftest import CharacterEmbeddings

DIMS = 24


class AsyncOnly:
    """An async embedding function (LangGraph's ``AEmbeddingsFunc``), counting its calls."""

    def __init__(self) -> None:
        self.model = CharacterEmbeddings(dims=DIMS)
        self.calls: list[list[str]] = []

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        await asyncio.sleep(0)
        return self.model.embed_documents(list(texts))


def _index(embed: Any, fields: list[str] | None = None) -> Any:
    out: dict[str, Any] = {"dims": DIMS, "embed": embed}
    if fields is not None:
        out["fields"] = fields
    return out


DOCS = [
    (("docs",), "1", {"text": "banana bread recipe", "tags": ["baking", "fruit"]}),
    (("docs",), "2", {"text": "egg noodles with garlic", "tags": ["pasta"]}),
    (("docs", "old"), "3", {"text": "a banana split", "tags": []}),
    (("other",), "4", {"text": "kiwi and lemon sorbet", "tags": ["fruit", "cold"]}),
]


async def _fill(store: BaseStore) -> None:
    for ns, key, value in DOCS:
        await store.aput(ns, key, value)


def test_an_async_embedding_function_works_as_in_langgraphs_store() -> None:
    """aput, asearch and abatch embed with it; scores are InMemoryStore's."""
    embed = AsyncOnly()
    fields = ["text", "tags[*]"]

    async def run() -> None:
        ref = InMemoryStore(index=_index(embed, fields))
        await _fill(ref)
        with MemstoreStore(index=_index(embed, fields), ranking="vector") as ours:
            await _fill(ours)
            for query in ("banana", "fruit sorbet", "garlic pasta"):
                mine = await ours.asearch(("docs",), query=query, limit=10)
                theirs = await ref.asearch(("docs",), query=query, limit=10)
                assert [(h.key, round(h.score or 0, 5)) for h in mine] == [
                    (h.key, round(h.score or 0, 5)) for h in theirs
                ]
            got, hits = await ours.abatch(
                [GetOp(("docs",), "2"), SearchOp(("docs",), query="noodles", limit=1)]
            )
            assert got is not None and got.value["text"] == "egg noodles with garlic"
            assert [h.key for h in hits] == ["2"]  # type: ignore[union-attr]
            assert ours.memory.stats().vectors == len(DOCS)  # the engine's index has them all

    asyncio.run(run())


def test_the_synchronous_batch_refuses_an_async_embedding_function_and_writes_nothing() -> None:
    embed = AsyncOnly()
    ref = InMemoryStore(index=_index(embed))
    with pytest.raises(ValueError, match="async function") as theirs:
        ref.put(("a",), "k", {"text": "hello"})
    with MemstoreStore(index=_index(embed)) as ours:
        with pytest.raises(ValueError, match="async function") as mine:
            ours.batch([PutOp(("a",), "ok", {"n": 1}, index=False), PutOp(("a",), "k", {"t": "x"})])
        assert type(mine.value) is type(theirs.value)
        assert ours.search(("a",)) == []
        ours.put(("a",), "plain", {"text": "not indexed"}, index=False)  # nothing to embed
        with pytest.raises(ValueError, match="async function"):
            ours.search(("a",), query="indexed")
        assert [h.key for h in ours.search(("a",))] == ["plain"]


def test_a_large_async_batch_embeds_once_and_the_engine_calls_no_model() -> None:
    """Field texts and the engine's joined text in one call, however many puts."""
    embed = AsyncOnly()
    puts = [
        PutOp(("bulk",), f"k{i}", {"text": f"item {i} of the bulk", "tags": [f"t{i}", "all"]})
        for i in range(300)
    ]

    async def run(store: MemstoreStore) -> None:
        await store.abatch(puts)
        assert len(embed.calls) == 1
        hits = await store.asearch(("bulk",), query="item 42 of the bulk", limit=3)
        assert hits[0].key == "k42" and hits[0].score is not None
        assert len(embed.calls) == 2  # the query

    with MemstoreStore(index=_index(embed, ["text", "tags[*]"])) as store:
        asyncio.run(run(store))
        assert store.memory.stats().vectors == 300
        assert store.memory.stats().vectors_pending == 0


def test_an_async_indexed_store_inside_a_compiled_graph() -> None:
    class State(TypedDict):
        user: str
        question: str
        answer: str

    async def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        await store.aput(("users", state["user"]), "room", {"text": "standup is in Kepler"})
        return {}

    async def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        hits = await store.asearch(("users", state["user"]), query=state["question"], limit=1)
        return {"answer": hits[0].value["text"] if hits else "no idea"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    with MemstoreStore(index=_index(AsyncOnly())) as store:
        graph = builder.compile(store=store)
        out = asyncio.run(graph.ainvoke({"user": "ada", "question": "where?", "answer": ""}))
        assert out["answer"] == "standup is in Kepler"


class _Held:
    """A ``Config(before=...)`` hook that holds each write for a while."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.entered = threading.Event()
        self.finished = threading.Event()

    def __call__(self, item: Item) -> None:
        self.entered.set()
        threading.Event().wait(self.hold)
        self.finished.set()


def test_a_cancelled_abatch_has_settled_when_the_caller_sees_the_cancellation(
    tmp_path: Path,
) -> None:
    hook = _Held(0.3)
    memory = Memory(tmp_path / "m", embedder=None, config=Config(before=hook))

    async def run(store: MemstoreStore) -> bool:
        task = asyncio.ensure_future(
            store.abatch([PutOp(("a",), f"k{i}", {"n": i}) for i in range(3)])
        )
        while not hook.entered.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return hook.finished.is_set()

    try:
        with MemstoreStore(memory) as store:
            assert asyncio.run(run(store)), "CancelledError came back mid-batch"
            written = {h.key for h in store.search(("a",))}
            assert written in (set(), {"k0", "k1", "k2"})  # a batch is whole or nothing
    finally:
        memory.close()


@pytest.mark.parametrize(
    "bad",
    [
        ListNamespacesOp(max_depth="1"),  # type: ignore[arg-type]
        ListNamespacesOp(max_depth=2.0),  # type: ignore[arg-type]
        ListNamespacesOp(max_depth=True),  # type: ignore[arg-type]
        ListNamespacesOp((MatchCondition("middle", ("a",)),)),  # type: ignore[arg-type]
        "not an op",
    ],
    ids=["depth text", "depth float", "depth bool", "match type", "op type"],
)
def test_a_malformed_op_is_a_value_error_before_anything_runs(bad: Any) -> None:
    """LangGraph's stores raise ValueError for an unknown op or match type; so does memstore,
    as an InvalidItemError, before the batch's other ops run."""
    with MemstoreStore() as store:
        with pytest.raises(InvalidItemError):
            store.batch([PutOp(("a",), "k", {"v": 1}), bad])
        assert store.get(("a",), "k") is None


@pytest.mark.parametrize("use_async", [False, True])
def test_an_embedder_returning_too_few_vectors_is_refused_and_writes_nothing(
    use_async: bool,
) -> None:
    """One vector per text, or the batch fails whole (InMemoryStore raises ValueError too)."""

    def short(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0]]  # one vector, whatever was asked

    async def ashort(texts: Sequence[str]) -> list[list[float]]:
        return short(texts)

    index = {"dims": 2, "embed": ashort if use_async else short, "fields": ["x", "y"]}
    with MemstoreStore(index=index) as store:  # type: ignore[arg-type]
        with pytest.raises(MemstoreError, match="one vector per text"):
            if use_async:
                asyncio.run(store.aput(("a",), "k", {"x": "first", "y": "second"}))
            else:
                store.put(("a",), "k", {"x": "first", "y": "second"})
        assert store.search(("a",)) == []
