"""The knowledge-graph tools racing in separate processes on one PostgreSQL journal.

Two ``--compat knowledge-graph`` servers on one PostgreSQL journal each read
their own store, which follows the other's writes a few milliseconds late.
Every graph tool reads an entity, then writes it whole (its observations and
relations are one item), so two processes changing one entity at the same
moment must not overwrite each other: both additions land, and of two
processes creating one name exactly one is told it created it. Real
processes (``spawn``), in lockstep at a barrier, round after round.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
from typing import Any

from tests.pgtest import PgPlace

ROUNDS = 8


def _worker(
    dsn: str,
    schema: str,
    me: str,
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.queues.Queue[Any],
) -> None:
    """One process: per round, add an observation to one shared entity and create one name."""
    from memstore import Memory
    from memstore.journal import PostgresJournal
    from memstore.mcp.graph import Entity, KnowledgeGraph

    journal = PostgresJournal(dsn, schema=schema, durability="off")
    with Memory(journal=journal, embedder=None) as mem:
        graph = KnowledgeGraph(mem)
        created: list[int] = []
        for n in range(ROUNDS):
            barrier.wait(30)
            graph.add_observations([("shared", [f"{me} {n}"])])
            barrier.wait(30)
            made = graph.create_entities([Entity(f"new {n}", "thing", (f"by {me}",))])
            created.append(len(made))
        barrier.wait(30)
        assert journal.wait_for(journal.head(), 30), journal.feed_status()
        entities, _ = graph.read()
        out.put((me, created, [e.to_json() for e in entities]))


def _race(place: PgPlace) -> list[tuple[str, list[int], list[dict[str, Any]]]]:
    from memstore import Memory
    from memstore.journal import PostgresJournal
    from memstore.mcp.graph import Entity, KnowledgeGraph

    with Memory(journal=PostgresJournal(place.dsn, schema=place.schema), embedder=None) as mem:
        KnowledgeGraph(mem).create_entities([Entity("shared", "thing", ())])
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    out: Any = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(place.dsn, place.schema, me, barrier, out))
        for me in ("a", "b")
    ]
    for p in procs:
        p.start()
    try:
        got = [out.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():  # pragma: no cover - reported by the asserts
                p.kill()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return sorted(got)


def test_two_processes_changing_one_entity_lose_nothing(pg_place: PgPlace) -> None:
    (_, created_a, seen_a), (_, created_b, seen_b) = _race(pg_place)
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
