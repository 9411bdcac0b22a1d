"""MemstoreStore under the code that uses a LangGraph store: LangMem's tools and a graph."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from memstore.integrations.langgraph import MemstoreStore
from tests.integrations.conftest import CharacterEmbeddings

langmem = pytest.importorskip("langmem", reason="langmem is in the dev extra")


def test_langmem_manage_and_search_tools() -> None:
    emb = CharacterEmbeddings(dims=64)
    with MemstoreStore(index={"dims": 64, "embed": emb}) as store:
        ns = ("memories", "alice")
        manage = langmem.create_manage_memory_tool(namespace=ns, store=store)
        search = langmem.create_search_memory_tool(namespace=ns, store=store)
        created = manage.invoke({"content": "Alice is allergic to peanuts", "action": "create"})
        assert created.startswith("created memory ")
        memory_id = created.removeprefix("created memory ")
        manage.invoke({"content": "Alice prefers window seats", "action": "create"})

        found = json.loads(search.invoke({"query": "peanut allergy"}))
        assert found[0]["key"] == memory_id
        assert found[0]["value"] == {"content": "Alice is allergic to peanuts"}
        assert found[0]["namespace"] == list(ns)
        assert isinstance(found[0]["score"], float)

        updated = manage.invoke(
            {
                "content": "Alice is allergic to peanuts and shellfish",
                "action": "update",
                "id": memory_id,
            }
        )
        assert updated == f"updated memory {memory_id}"
        item = store.get(ns, memory_id)
        assert item is not None
        assert item.value == {"content": "Alice is allergic to peanuts and shellfish"}

        filtered = json.loads(
            search.invoke({"query": "seat", "filter": {"content": "Alice prefers window seats"}})
        )
        assert [m["value"]["content"] for m in filtered] == ["Alice prefers window seats"]

        assert manage.invoke({"action": "delete", "id": memory_id}) == f"Deleted memory {memory_id}"
        assert store.get(ns, memory_id) is None
        assert len(json.loads(search.invoke({"query": "peanut"}))) == 1


class State(TypedDict):
    user: str
    message: str
    reply: str


def test_compiled_graph_reads_and_writes_through_the_injected_store() -> None:
    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        ns = ("users", state["user"], "notes")
        if state["message"].startswith("remember "):
            fact = state["message"].removeprefix("remember ")
            count = len(store.search(ns, limit=100))
            store.put(ns, f"note-{count}", {"text": fact})
            return {"reply": "noted"}
        hits = store.search(ns, query=state["message"], limit=1)
        return {"reply": hits[0].value["text"] if hits else "I don't know"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with MemstoreStore() as store:
        graph = builder.compile(store=store)
        run = lambda user, msg: graph.invoke({"user": user, "message": msg, "reply": ""})  # noqa: E731
        assert run("ada", "remember the wifi password is hunter2")["reply"] == "noted"
        assert run("ada", "remember the standup is at 9:30")["reply"] == "noted"
        assert run("ada", "when is the standup?")["reply"] == "the standup is at 9:30"
        assert run("bob", "when is the standup?")["reply"] == "I don't know"  # his own namespace
        assert store.list_namespaces() == [("users", "ada", "notes")]
