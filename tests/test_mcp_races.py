"""MCP tools racing in separate processes on one PostgreSQL journal.

Two ``memstore mcp`` servers on one PostgreSQL journal each read their own
store, which follows the other's writes a few milliseconds late. Every graph
tool reads an entity, then writes it whole (its observations and relations
are one item), and ``update_memory`` reads a memory's placement before it
writes; two processes changing one item at the same moment must not
overwrite each other: both changes land, and of two processes creating one
name exactly one is told it created it. Real processes (``spawn``), in
lockstep at a barrier, round after round.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
from typing import Any

from tests.pgtest import PgPlace, run_together

ROUNDS = 8


def _graph_rounds(mem: Any, me: str, barrier: multiprocessing.synchronize.Barrier) -> Any:
    """Per round, add an observation to one shared entity and create one name; the graph."""
    from memstore.mcp.graph import Entity, KnowledgeGraph

    graph = KnowledgeGraph(mem)
    created: list[int] = []
    for n in range(ROUNDS):
        barrier.wait(30)
        graph.add_observations([("shared", [f"{me} {n}"])])
        barrier.wait(30)
        made = graph.create_entities([Entity(f"new {n}", "thing", (f"by {me}",))])
        created.append(len(made))
    return created, lambda: [e.to_json() for e in graph.read()[0]]


def _update_rounds(mem: Any, me: str, barrier: multiprocessing.synchronize.Barrier) -> Any:
    """Per round, ``update_memory`` one field of that round's memory (a: title, b: tags)."""
    from memstore.mcp.native import native_tools
    from memstore.mcp.toolkit import Caller

    (tool,) = [t for t in native_tools(mem) if t.name == "update_memory"]
    caller = Caller(partition="alice")
    answers = []
    for n in range(ROUNDS):
        change = {"title": f"title {n}"} if me == "a" else {"tags": ["reviewed"]}
        barrier.wait(30)
        answers.append(tool.run(tool.args.model_validate({"id": f"m{n}", **change}), caller))
    items = lambda: [mem.get(f"m{n}").model_dump(mode="json") for n in range(ROUNDS)]  # noqa: E731
    return [a.items[0].id for a in answers], items


def _forget_rounds(mem: Any, me: str, barrier: multiprocessing.synchronize.Barrier) -> Any:
    """Per round, both processes ``forget`` that round's memory; what each answered."""
    from memstore.mcp.native import native_tools
    from memstore.mcp.toolkit import Caller

    (tool,) = [t for t in native_tools(mem) if t.name == "forget"]
    answers = []
    for n in range(ROUNDS):
        barrier.wait(30)
        got = tool.run(tool.args.model_validate({"ids": [f"m{n}"]}), Caller())
        answers.append((got.forgotten, got.missing))
    return answers, lambda: [mem.get(f"m{n}") for n in range(ROUNDS)]


def _unlink_rounds(mem: Any, me: str, barrier: multiprocessing.synchronize.Barrier) -> Any:
    """a deletes that round's hub while b relates a spoke to it; then a creates it anew."""
    from memstore.errors import MemstoreError
    from memstore.mcp.graph import Entity, KnowledgeGraph, Relation

    graph = KnowledgeGraph(mem)
    answers = []
    for n in range(ROUNDS):
        barrier.wait(30)
        if me == "a":
            answers.append(graph.delete_entities([f"hub {n}"]))
        else:
            try:
                answers.append(graph.create_relations([Relation(f"spoke {n}", f"hub {n}", "uses")]))
            except MemstoreError as e:
                answers.append(str(e))
        barrier.wait(30)
        assert mem.journal.wait_for(mem.journal.head(), 30)
        barrier.wait(30)
        if me == "a":
            graph.create_entities([Entity(f"hub {n}", "thing", ("anew",))])
    return answers, lambda: [r.to_json() for r in graph.read()[1]]


_SCENARIOS = {
    "graph": _graph_rounds,
    "update": _update_rounds,
    "forget": _forget_rounds,
    "unlink": _unlink_rounds,
}


def _worker(
    dsn: str,
    schema: str,
    scenario: str,
    me: str,
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.queues.Queue[Any],
) -> None:
    """One process: run its side of ``scenario``, catch up with the record, report."""
    from memstore import Memory
    from memstore.journal import PostgresJournal

    journal = PostgresJournal(dsn, schema=schema, durability="off")
    with Memory(journal=journal, embedder=None) as mem:
        answers, seen = _SCENARIOS[scenario](mem, me, barrier)
        barrier.wait(30)
        assert journal.wait_for(journal.head(), 30), journal.feed_status()
        out.put((me, answers, seen()))


def _race(place: PgPlace, scenario: str) -> list[tuple[str, list[Any], list[dict[str, Any]]]]:
    """Run ``scenario`` in two processes at once; what each answered and saw at the end."""
    where = (place.dsn, place.schema, scenario)
    got = run_together(_worker, [(*where, me) for me in ("a", "b")])
    return sorted(got)


def _memory(place: PgPlace) -> Any:
    from memstore import Memory
    from memstore.journal import PostgresJournal

    return Memory(journal=PostgresJournal(place.dsn, schema=place.schema), embedder=None)


def test_two_processes_changing_one_entity_lose_nothing(pg_place: PgPlace) -> None:
    from memstore.mcp.graph import Entity, KnowledgeGraph

    with _memory(pg_place) as mem:
        KnowledgeGraph(mem).create_entities([Entity("shared", "thing", ())])
    (_, created_a, seen_a), (_, created_b, seen_b) = _race(pg_place, "graph")
    assert seen_a == seen_b
    shared = next(e for e in seen_a if e["name"] == "shared")
    wanted = {f"{me} {n}" for me in ("a", "b") for n in range(ROUNDS)}
    assert set(shared["observations"]) == wanted
    assert len(shared["observations"]) == 2 * ROUNDS
    # Of two processes creating one name, exactly one created it; its observation stands.
    assert [a + b for a, b in zip(created_a, created_b, strict=True)] == [1] * ROUNDS
    for n in range(ROUNDS):
        (made,) = [e for e in seen_a if e["name"] == f"new {n}"]
        winner = "a" if created_a[n] else "b"
        assert made["observations"] == [f"by {winner}"]


def test_two_processes_updating_one_memory_both_land(pg_place: PgPlace) -> None:
    """``update_memory`` of the title in one server and of the tags in another: both kept."""
    with _memory(pg_place) as mem:
        for n in range(ROUNDS):
            mem.add(f"memory {n}", id=f"m{n}", partition="alice", title="first")
    (_, _, seen_a), (_, _, seen_b) = _race(pg_place, "update")
    assert seen_a == seen_b
    assert [(it["title"], it["tags"]) for it in seen_a] == [
        (f"title {n}", ["reviewed", "tenant/alice"]) for n in range(ROUNDS)
    ]


def test_of_two_processes_forgetting_one_memory_each_accounts_for_it(pg_place: PgPlace) -> None:
    """Exactly one forgot it; the other says it was missing (it never drops the id)."""
    with _memory(pg_place) as mem:
        for n in range(ROUNDS):
            mem.add(f"memory {n}", id=f"m{n}", title="first")
    (_, first, seen_a), (_, second, seen_b) = _race(pg_place, "forget")
    for n, (a, b) in enumerate(zip(first, second, strict=True)):
        assert sorted([a, b]) == [([], [f"m{n}"]), ([f"m{n}"], [])], (a, b)
    assert seen_a == seen_b == [None] * ROUNDS


def test_a_relation_racing_the_deletion_of_its_target_does_not_outlive_it(
    pg_place: PgPlace,
) -> None:
    """Deleting an entity deletes the relations to it: one made at the same moment too.

    Recreating the entity must not bring back a relation made to its former self.
    """
    from memstore.mcp.graph import Entity, KnowledgeGraph, Relation

    with _memory(pg_place) as mem:
        KnowledgeGraph(mem).create_entities(
            [Entity(f"{role} {n}", "thing", ()) for n in range(ROUNDS) for role in ("hub", "spoke")]
        )
    (_, _, seen_a), (_, related, seen_b) = _race(pg_place, "unlink")
    assert seen_a == seen_b == [], related
    for n, answer in enumerate(related):  # made before the delete, or refused after it
        assert answer in (
            [Relation(f"spoke {n}", f"hub {n}", "uses")],
            f"Entity with name hub {n} not found",
        )
