"""``--compat knowledge-graph``: a blank entity name or relation type is refused, nothing changes.

The reference server takes any text as a name; a model that sends ``""`` or
``" "`` has slipped, and the entity it made could not be told from another
blank one nor found by its words. Every tool argument naming an entity, and
every ``relationType``, is refused when empty or only whitespace, with a tool
error naming the argument; the graph is the same after the call as before,
the valid parts of the call included. The input schemas say ``minLength: 1``
for exactly those arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from memstore.mcp.graph import Entity, GraphError, KnowledgeGraph, Relation
from memstore.memory import Memory
from tests.mcp_harness import Client, http_client, http_server

KG = "knowledge-graph"
BLANKS = ("", " ", "\t\n", "\u3000")
"""Empty, a space, a tab and a line break, an ideographic space."""

ALICE = {"name": "Alice", "entityType": "person", "observations": ["likes tea"]}
ACME = {"name": "Acme", "entityType": "company", "observations": ["makes anvils"]}
WORKS = {"from": "Alice", "to": "Acme", "relationType": "works_at"}

Case = tuple[str, Callable[[str], dict[str, Any]], str]
CASES: tuple[Case, ...] = (
    (
        "create_entities",
        lambda b: {"entities": [{**ALICE, "name": "Bob"}, {**ALICE, "name": b}]},
        "entities.1.name",
    ),
    ("create_relations", lambda b: {"relations": [{**WORKS, "from": b}]}, "relations.0.from"),
    (
        "create_relations",
        lambda b: {"relations": [{**WORKS, "relationType": "knows"}, {**WORKS, "to": b}]},
        "relations.1.to",
    ),
    (
        "create_relations",
        lambda b: {"relations": [{**WORKS, "relationType": b}]},
        "relations.0.relationType",
    ),
    (
        "add_observations",
        lambda b: {
            "observations": [
                {"entityName": "Alice", "contents": ["new"]},
                {"entityName": b, "contents": ["x"]},
            ]
        },
        "observations.1.entityName",
    ),
    ("delete_entities", lambda b: {"entityNames": ["Alice", b]}, "entityNames.1"),
    (
        "delete_observations",
        lambda b: {
            "deletions": [
                {"entityName": "Alice", "observations": ["likes tea"]},
                {"entityName": b, "observations": ["x"]},
            ]
        },
        "deletions.1.entityName",
    ),
    (
        "delete_relations",
        lambda b: {"relations": [WORKS, {**WORKS, "from": b}]},
        "relations.1.from",
    ),
    ("delete_relations", lambda b: {"relations": [WORKS, {**WORKS, "to": b}]}, "relations.1.to"),
    (
        "delete_relations",
        lambda b: {"relations": [WORKS, {**WORKS, "relationType": b}]},
        "relations.1.relationType",
    ),
    ("open_nodes", lambda b: {"names": ["Alice", b]}, "names.1"),
)
"""Each tool, each argument naming an entity or a relation type, beside valid parts."""

NAME_ARGUMENTS = {"name", "from", "to", "relationType", "entityName", "entityNames", "names"}
"""The input-schema properties that name an entity or a relation type."""


def test_every_name_argument_is_covered() -> None:
    covered = {part for _, _, where in CASES for part in where.split(".")}
    assert covered & NAME_ARGUMENTS == NAME_ARGUMENTS


def test_blank_names_are_refused_over_http_and_change_nothing(tmp_path: Path) -> None:
    async def main(c: Client) -> None:
        await c.ok("create_entities", {"entities": [ALICE, ACME]})
        await c.ok("create_relations", {"relations": [WORKS]})
        before = await c.ok("read_graph")
        for tool, args, where in CASES:
            for b in BLANKS:
                msg = await c.fails(tool, args(b))
                assert msg.startswith(f"{where}: must not be empty or only whitespace"), (tool, msg)
                assert f"{tool} takes " in msg
                assert await c.ok("read_graph") == before, (tool, b)
        # The same calls with names that are not blank still work: the refusal is the name's.
        assert (await c.ok("open_nodes", {"names": [" Alice "]}))["entities"] == []
        got = await c.ok("delete_entities", {"entityNames": ["Acme"]})
        assert got["success"] is True
        assert (await c.ok("read_graph"))["relations"] == []

    with http_server(tmp_path / "data", "--compat", KG) as url:

        async def run() -> None:
            async with http_client(url) as c:
                await main(c)

        anyio.run(run)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    resolved: dict[str, Any] = schema["$defs"][ref.rsplit("/", 1)[-1]]
    return resolved


def _strings(schema: dict[str, Any], node: dict[str, Any], name: str = "") -> list[Any]:
    """``(property, string schema)`` of every string an input schema holds, lists' items too."""
    node = _resolve(schema, node)
    if node.get("type") == "string":
        return [(name, node)]
    if node.get("type") == "array":
        return _strings(schema, node["items"], name)
    out = []
    for key, prop in node.get("properties", {}).items():
        out += _strings(schema, prop, key)
    for alt in node.get("anyOf", ()):
        out += _strings(schema, alt, name)
    return out


def test_the_schemas_say_min_length_for_names_and_only_for_names(tmp_path: Path) -> None:
    async def main(c: Client) -> None:
        tools = (await c.session.list_tools()).tools
        seen: set[str] = set()
        for tool in tools:
            for prop, node in _strings(tool.inputSchema, tool.inputSchema):
                if prop in NAME_ARGUMENTS:
                    seen.add(prop)
                    assert node.get("minLength") == 1, (tool.name, prop, node)
                else:  # a type, an observation, a query: any text, as in the reference
                    assert "minLength" not in node, (tool.name, prop, node)
        assert seen == NAME_ARGUMENTS

    with http_server(tmp_path / "data", "--compat", KG) as url:

        async def run() -> None:
            async with http_client(url) as c:
                await main(c)

        anyio.run(run)


@pytest.mark.parametrize("b", BLANKS)
def test_the_python_graph_refuses_blank_names_too(b: str) -> None:
    with Memory(embedder=None) as mem:
        g = KnowledgeGraph(mem)
        g.create_entities([Entity("Alice", "person", ("likes tea",))])
        before = g.read()
        with pytest.raises(GraphError, match="entity name must not be empty or only whitespace"):
            g.create_entities([Entity("Bob", "person", ()), Entity(b, "thing", ())])
        with pytest.raises(GraphError, match="relation type must not be empty"):
            g.create_relations([Relation("Alice", "Alice", b)])
        with pytest.raises(GraphError, match="entity name must not be empty"):
            g.create_relations([Relation(b, "Alice", "knows")])
        with pytest.raises(GraphError, match="entity name must not be empty"):
            g.add_observations([("Alice", ["new"]), (b, ["x"])])
        assert g.read() == before


def test_a_blank_entity_left_by_an_earlier_version_can_still_be_deleted_in_python() -> None:
    """Before the refusal a tool could create ``""``: it reads back, and Python deletes it."""
    with Memory(embedder=None) as mem:
        g = KnowledgeGraph(mem)
        g._create(Entity("", "thing", ("one",)))  # as an earlier version wrote it
        assert g.read()[0] == [Entity("", "thing", ("one",))]
        assert g.delete_entities([""]) == ([""], [])
        assert g.read() == ([], [])
