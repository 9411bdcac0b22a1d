"""``--compat knowledge-graph`` against a scripted session of the reference server.

Each expected answer is what ``@modelcontextprotocol/server-memory``
(``src/memory/index.ts``) returns for the same call: duplicates ignored, a
relation needs both ends, an unknown entity fails ``add_observations`` whole,
deleting an entity deletes its relations, the messages of the delete tools,
creation order. Then the documented extensions: hybrid matches after the
substring ones in ``search_nodes``, and ``offset``/``limit`` pages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from memstore.memory import Memory
from tests.mcp_harness import Client, http_server, in_process, names, stdio

KG = "knowledge-graph"


def _e(name: str, etype: str, *obs: str) -> dict[str, Any]:
    return {"name": name, "entityType": etype, "observations": list(obs)}


def _r(src: str, dst: str, rtype: str) -> dict[str, str]:
    return {"from": src, "to": dst, "relationType": rtype}


ALICE = _e("Alice", "person", "likes tea", "plays chess on Sundays")
ACME = _e("Acme", "company", "makes anvils")
BOB = _e("Bob", "person", "works remotely")


async def _script(c: Client) -> None:
    # create_entities: new ones come back; names already there or repeated are ignored.
    reply = await c.call(
        "create_entities", {"entities": [ALICE, ACME, {**ALICE, "entityType": "x"}]}
    )
    assert reply.data == {"entities": [ALICE, ACME]}
    assert json.loads(reply.text) == [ALICE, ACME]  # the text is JSON.stringify(result)
    assert await c.ok("create_entities", {"entities": [ALICE, BOB]}) == {"entities": [BOB]}

    # create_relations: duplicates ignored; an unknown end fails the call and changes nothing.
    works = [_r("Alice", "Acme", "works_at"), _r("Bob", "Acme", "works_at")]
    got = await c.ok("create_relations", {"relations": [*works, works[0]]})
    assert got == {"relations": works}
    assert await c.ok("create_relations", {"relations": [works[1]]}) == {"relations": []}
    msg = await c.fails(
        "create_relations", {"relations": [_r("Alice", "Bob", "knows"), _r("Alice", "Zed", "x")]}
    )
    assert msg == "Entity with name Zed not found"

    # add_observations: only what is new; an unknown entity fails the whole call.
    got = await c.ok(
        "add_observations",
        {"observations": [{"entityName": "Alice", "contents": ["likes tea", "speaks Finnish"]}]},
    )
    assert got == {"results": [{"entityName": "Alice", "addedObservations": ["speaks Finnish"]}]}
    msg = await c.fails(
        "add_observations",
        {
            "observations": [
                {"entityName": "Bob", "contents": ["not kept"]},
                {"entityName": "Nobody", "contents": ["x"]},
            ]
        },
    )
    assert msg == "Entity with name Nobody not found"

    alice = {**ALICE, "observations": [*ALICE["observations"], "speaks Finnish"]}
    graph = await c.ok("read_graph")
    assert graph == {"entities": [alice, ACME, BOB], "relations": works}
    assert json.loads((await c.call("read_graph")).text) == graph

    # search_nodes: the reference's case-insensitive substring rule first.
    found = await c.ok("search_nodes", {"query": "ACME"})
    assert found["entities"][0] == ACME
    assert found["relations"] == works  # relations touching any returned entity
    found = await c.ok("search_nodes", {"query": "person"})  # entityType matches too
    assert names(found["entities"])[:2] == ["Alice", "Bob"]
    # ... then what the substring rule misses: a typo.
    found = await c.ok("search_nodes", {"query": "chesss"})
    assert "Alice" in names(found["entities"])

    # open_nodes: the named entities, relations with at least one end among them.
    got = await c.ok("open_nodes", {"names": ["Bob", "Nobody"]})
    assert got == {"entities": [BOB], "relations": [works[1]]}

    # deletes answer with the reference's messages.
    got = await c.ok(
        "delete_observations",
        {
            "deletions": [
                {"entityName": "Alice", "observations": ["likes tea", "never said"]},
                {"entityName": "Nobody", "observations": ["x"]},
            ]
        },
    )
    assert got == {
        "success": True,
        "message": "Deleted 1 of 3 observations. Entities not found: Nobody",
    }
    got = await c.ok(
        "delete_observations",
        {"deletions": [{"entityName": "Alice", "observations": ["speaks Finnish"]}]},
    )
    assert got["message"] == "Observations deleted successfully"
    got = await c.ok("delete_relations", {"relations": [works[1], _r("Bob", "Acme", "owns")]})
    assert got["message"] == "Deleted 1 of 2 relations. The rest matched nothing."
    got = await c.ok("delete_entities", {"entityNames": ["Acme", "Ghost"]})
    assert got == {"success": True, "message": "Deleted 1 of 2 entities. Not found: Ghost"}
    graph = await c.ok("read_graph")
    assert graph == {
        "entities": [_e("Alice", "person", "plays chess on Sundays"), BOB],
        "relations": [],  # Alice works_at Acme went with Acme
    }
    got = await c.ok("delete_entities", {"entityNames": ["Bob"]})
    assert got["message"] == "Entities deleted successfully"


def test_scripted_session_answers_as_the_reference() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem, compat=KG) as c:
                await _script(c)

    anyio.run(main)


def test_hybrid_matches_follow_substring_matches() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem, compat=KG) as c:
                await c.ok(
                    "create_entities",
                    {
                        "entities": [
                            _e("Dana", "person", "owns a golden retriever"),
                            _e("Eve", "person", "her retriever is called Max"),
                            _e("Fay", "person", "drives a blue car"),
                        ]
                    },
                )
                # substring: only Eve holds "retriever is"; the hybrid search adds Dana.
                found = names((await c.ok("search_nodes", {"query": "retriever is"}))["entities"])
                assert found[0] == "Eve" and "Dana" in found[1:]
                assert found.count("Eve") == 1

    anyio.run(main)


def test_pages_of_read_graph_and_search_nodes() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem, compat=KG) as c:
                people = [_e(f"P{i}", "person", f"person number {i}") for i in range(5)]
                await c.ok("create_entities", {"entities": people})
                chain = [_r(f"P{i}", f"P{i + 1}", "knows") for i in range(4)]
                await c.ok("create_relations", {"relations": chain})
                whole = await c.ok("read_graph")
                assert set(whole) == {"entities", "relations"}  # no extension fields
                seen: list[str] = []
                rels: list[dict[str, str]] = []
                offset: int | None = 0
                while offset is not None:
                    page = await c.ok("read_graph", {"offset": offset, "limit": 2})
                    assert page["total"] == 5 and len(page["entities"]) <= 2
                    seen += names(page["entities"])
                    rels += page["relations"]
                    offset = page["nextOffset"]
                assert seen == [f"P{i}" for i in range(5)]
                assert rels == chain  # each relation on exactly one page
                page = await c.ok("search_nodes", {"query": "person", "offset": 1, "limit": 2})
                assert names(page["entities"]) == ["P1", "P2"] and page["nextOffset"] == 3

    anyio.run(main)


def test_pages_of_search_nodes_are_slices_of_the_unpaged_answer() -> None:
    """Paging meets the entities of the unpaged answer, each once, under one ``total``.

    The hybrid extras are a fixed number (:data:`SEARCH_EXTRAS`) whatever page is
    asked for: a page far down once deepened the hybrid search, so its ``total``
    grew page by page and paging returned entities the unpaged answer lacks.
    """

    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem, compat=KG) as c:
                people = [_e(f"Person {i}", "person", f"likes tea number {i}") for i in range(40)]
                await c.ok("create_entities", {"entities": people})
                whole = names((await c.ok("search_nodes", {"query": "tee"}))["entities"])
                assert whole  # typo matches, from the hybrid search only
                seen: list[str] = []
                totals: set[int] = set()
                offset: int | None = 0
                while offset is not None:
                    page = await c.ok(
                        "search_nodes", {"query": "tee", "offset": offset, "limit": 3}
                    )
                    seen += names(page["entities"])
                    totals.add(page["total"])
                    offset = page["nextOffset"]
                assert seen == whole and totals == {len(whole)}
                far = await c.ok("search_nodes", {"query": "tee", "offset": 10**12, "limit": 5})
                assert far["entities"] == [] and far["total"] == len(whole)
                assert far["nextOffset"] is None

    anyio.run(main)


def test_partitions_keep_separate_graphs() -> None:
    async def main() -> None:
        with Memory(embedder="hash") as mem:
            async with in_process(mem, compat=KG, partition="a") as a:
                await a.ok("create_entities", {"entities": [ALICE]})
            async with in_process(mem, compat=KG, partition="b") as b:
                assert await b.ok("read_graph") == {"entities": [], "relations": []}
                assert await b.ok("create_entities", {"entities": [ALICE]}) == {"entities": [ALICE]}

    anyio.run(main)


def test_an_entity_past_the_engine_limits_is_refused_in_the_graphs_words(tmp_path: Path) -> None:
    """The engine's limits, told as the entity's name, type or observations, and no write.

    Before: "title is 5000 characters; at most 1000" for a long name, "content is
    ..." for observations: fields the graph tools never showed their client.
    """
    long_name = {"name": "N" * 5000, "entityType": "person", "observations": []}
    many = {"name": "Ada", "entityType": "person", "observations": ["o" * 60_000] * 2}

    async def main() -> None:
        with Memory(tmp_path / "m", embedder="hash") as mem:
            async with in_process(mem, compat=KG) as c:
                await c.ok("create_entities", {"entities": [ALICE]})
                before = await c.ok("read_graph")
                msg = await c.fails("create_entities", {"entities": [BOB, long_name]})
                assert "entity 'NNN" in msg and "its name is 5000 characters" in msg
                msg = await c.fails("create_entities", {"entities": [many]})
                assert "entity 'Ada' cannot be stored: its observations together are" in msg
                more = {"entityName": ALICE["name"], "contents": ["z" * 100_001]}
                msg = await c.fails("add_observations", {"observations": [more]})
                assert f"entity {ALICE['name']!r}" in msg and "its observations" in msg
                assert await c.ok("read_graph") == before

    anyio.run(main)


def test_graph_survives_restart_and_is_a_resource(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio(tmp_path, "--compat", KG) as c:
            await c.ok("create_entities", {"entities": [ALICE, ACME]})
            await c.ok("create_relations", {"relations": [_r("Alice", "Acme", "works_at")]})
        with Memory(tmp_path, embedder="hash") as mem:  # the journal, reopened
            async with in_process(mem, compat=KG) as c:
                expected = {
                    "entities": [ALICE, ACME],
                    "relations": [_r("Alice", "Acme", "works_at")],
                }
                assert await c.ok("read_graph") == expected
                assert await c.resource("memory://knowledge-graph") == expected

    anyio.run(main)


def test_search_nodes_finds_paraphrases_with_the_local_model() -> None:
    from memstore_index import onnx_embedder

    if not onnx_embedder.AVAILABLE:
        pytest.skip(f"the local model is not installed: {onnx_embedder.INSTALL_HINT}")

    async def main() -> None:
        with Memory(embedder="local") as mem:
            async with in_process(mem, compat=KG) as c:
                await c.ok(
                    "create_entities",
                    {
                        "entities": [
                            _e("Dana", "person", "owns a golden retriever"),
                            _e("Fay", "person", "works as a pilot for an airline"),
                            _e("Gus", "person", "is allergic to peanuts"),
                        ]
                    },
                )
                # The reference's substring rule finds nothing for these words.
                for query, who in [("dog", "Dana"), ("flies planes", "Fay")]:
                    found = names((await c.ok("search_nodes", {"query": query}))["entities"])
                    assert found[0] == who, (query, found)

    anyio.run(main)


LONE = '"a\\udce9"'
"""A JSON string holding a lone surrogate: legal JSON, text no store can keep or echo."""
SURROGATE_CALLS = [
    (
        "create_entities",
        f'{{"entities": [{{"name": {LONE}, "entityType": "p", "observations": []}}]}}',
    ),
    ("create_relations", f'{{"relations": [{{"from": {LONE}, "to": "b", "relationType": "r"}}]}}'),
    ("add_observations", f'{{"observations": [{{"entityName": {LONE}, "contents": ["x"]}}]}}'),
    ("delete_entities", f'{{"entityNames": [{LONE}]}}'),
    ("delete_observations", f'{{"deletions": [{{"entityName": {LONE}, "observations": []}}]}}'),
    ("delete_relations", f'{{"relations": [{{"from": "a", "to": {LONE}, "relationType": "r"}}]}}'),
    ("open_nodes", f'{{"names": [{LONE}]}}'),
]


def test_a_name_holding_a_lone_surrogate_is_a_tool_error_naming_it(tmp_path: Path) -> None:
    """Over HTTP, raw JSON (an SDK client cannot even send such a string).

    Before: most of these answered with Python's own ``'utf-8' codec can't encode
    character`` as the tool error, and ``delete_entities`` echoed the name in its
    message, which the SDK could not serialise: a 200 with an empty body, no answer.
    """
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}},
    }  # fmt: skip
    with http_server(tmp_path / "data", "--compat", KG) as url:
        r = httpx.post(url, json=init, headers=headers)
        headers["mcp-session-id"] = r.headers["mcp-session-id"]
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert httpx.post(url, json=done, headers=headers).status_code == 202
        for n, (tool, arguments) in enumerate(SURROGATE_CALLS):
            body = (
                f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call",'
                f' "params": {{"name": "{tool}", "arguments": {arguments}}}}}'
            )
            r = httpx.post(url, content=body.encode(), headers=headers)
            assert r.status_code == 200, (tool, r.text)
            data = [line for line in r.text.splitlines() if line.startswith("data: ")]
            assert data, f"{tool}: no answer at all ({r.text!r})"
            result = json.loads(data[0][len("data: ") :])["result"]
            text = result["content"][0]["text"]
            assert result["isError"] is True, (tool, result)
            assert "not valid Unicode text (it holds a lone surrogate)" in text, (tool, text)
            assert "codec" not in text, (tool, text)
