"""A recall in mode ``graph`` walks at most ``CONTEXT_REACH`` items and says whether it stopped.

Under the bound the chunks it adds are those the unbounded walk
(``Store.traverse_scored``) reaches, in its order, and every hit says
``graph_complete: true``; past it (a chunk thousands of the tenant's other
items link to) every hit says ``false``; another tenant's items are never
walked. In mode semantic the field is ``null``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from memstore import Item, Memory, ThoughtLink
from memstore.limits import CONTEXT_REACH
from memstore.protocol import TokenTable
from memstore.protocol.app import create_app
from memstore.protocol.mapping import KIND_CHUNK
from memstore.protocol.verbs import GRAPH_DEPTH

TOKENS = TokenTable.from_json(
    '{"reach": {"tenant": "acme", "scopes": ["ingest", "recall", "forget"]}}'
)
AUTH = {"Authorization": "Bearer reach"}
DOC = (
    "".join(f"# part {n}\nthe heron part {n} wades in the shallows.\n\n" for n in range(6))
    + "# last\nnothing about birds here.\n"
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Memory, Any]]:
    from fastapi.testclient import TestClient

    with Memory(tmp_path, embedder="hash") as memory:
        client = TestClient(create_app(memory, tokens=TOKENS))
        r = client.post("/v1/ingest", headers=AUTH, json={"source": "s", "content": DOC})
        assert r.status_code == 200, r.text
        yield memory, client


def _recall(client: Any, **body: Any) -> list[dict[str, Any]]:
    r = client.post("/v1/recall", headers=AUTH, json=body)
    assert r.status_code == 200, r.text
    hits: list[dict[str, Any]] = r.json()
    return hits


def _id(hit: dict[str, Any]) -> str:
    return f"ch:acme:{ULID.from_bytes(bytes(hit['id']))}"


def test_a_graph_recall_under_the_bound_adds_what_the_whole_walk_reaches(
    served: tuple[Memory, Any],
) -> None:
    memory, client = served
    for k in (1, 3, 5, 7, 10):
        semantic = _recall(client, query="heron wades", k=k)
        graph = _recall(client, query="heron wades", k=k, mode="graph")
        assert all(h["graph_complete"] is None for h in semantic)
        assert graph and all(h["graph_complete"] is True for h in graph)
        anchors = [_id(h) for h in semantic]
        assert [_id(h) for h in graph[: len(anchors)]] == anchors
        reached = [
            s.item.id
            for s in memory.store.traverse_scored(anchors, GRAPH_DEPTH)
            if s.item.kind == KIND_CHUNK and s.item.id not in anchors
        ]
        assert [_id(h) for h in graph[len(anchors) :]] == reached[: k - len(anchors)]


def test_a_graph_recall_past_the_bound_says_so_on_every_hit(served: tuple[Memory, Any]) -> None:
    memory, client = served
    (first, *_) = _recall(client, query="heron wades", k=1)
    hub = _id(first)
    near = len(memory.store.traverse_scored([hub], GRAPH_DEPTH))  # the other chunks, the episode
    memory.add_many(
        [
            Item(
                id=f"spoke-{n:05d}",
                kind="note",
                content=f"a note on the heron, number {n}",
                links=[ThoughtLink(to_id=hub, relation="explains")],
            )
            for n in range(CONTEXT_REACH - near)
        ],
        partition="acme",  # the tenant's own: another partition's items are never walked
    )
    # Exactly the bound's worth of items within reach: still whole.
    graph = _recall(client, query="heron wades", k=1, mode="graph")
    assert [h["graph_complete"] for h in graph] == [True]
    memory.add(
        Item(
            id="spoke-extra",
            kind="note",
            content="one more",
            links=[ThoughtLink(to_id=hub, relation="explains")],
        ),
        partition="acme",
    )
    assert len(memory.store.traverse_scored([hub], GRAPH_DEPTH)) == CONTEXT_REACH + 1
    graph = _recall(client, query="heron wades", k=1, mode="graph")
    assert [(_id(h), h["graph_complete"]) for h in graph] == [(hub, False)]
    assert [h["graph_complete"] for h in _recall(client, query="heron wades", k=1)] == [None]
