"""Read-then-write operations racing in separate processes on one PostgreSQL journal.

Each process reads its own store, which follows the others' writes a few
milliseconds late. Two processes (real ones, started with ``spawn``) run
their operation on the same item at the same moment, round after round, and
what a single process promises must hold across them: of two deletes of one
item exactly one is told it deleted it, two updates of one item both land,
and an update racing a delete never brings the item back. Every process
ends with the same items as the record.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from memstore import Item, Memory
from memstore.journal import PostgresJournal
from tests import pg_race_worker
from tests.pgtest import PgPlace, run_together

ROUNDS = 12


def _seed(place: PgPlace, ids: list[str]) -> None:
    with Memory(journal=PostgresJournal(place.dsn, schema=place.schema), embedder=None) as mem:
        first = [
            Item(id=id, kind="note", title="as first written", confidence="high") for id in ids
        ]
        mem.add_many(first, partition="alice")


def _race(place: PgPlace, ops: tuple[str, str], ids: list[str]) -> list[tuple[str, list[Any], Any]]:
    """Run the two operations on each id at once, in two processes; what each reported."""
    where = (place.dsn, place.schema)
    got = run_together(pg_race_worker.race, [(*where, op, ids) for op in ops])
    assert got[0][3] == got[1][3], "the processes' vector indexes differ"
    return sorted((g[:3] for g in got), key=lambda g: ops.index(g[0]))


def _on_record(place: PgPlace) -> list[dict[str, Any]]:
    reader = PostgresJournal(place.dsn, schema=place.schema, replicate=False)
    try:
        items = [it.model_dump(mode="json") for it in reader.current()]
    finally:
        reader.close()
    return sorted(items, key=lambda d: d["id"])


def test_of_two_processes_deleting_one_item_exactly_one_deletes_it(pg_place: PgPlace) -> None:
    ids = [f"item-{n}" for n in range(ROUNDS)]
    _seed(pg_place, ids)
    (_, first, items_a), (_, second, items_b) = _race(pg_place, ("delete", "delete"), ids)
    answers = list(zip(first, second, strict=True))
    assert all(sorted(pair) == [False, True] for pair in answers), answers
    assert items_a == items_b == _on_record(pg_place) == []
    # One deletion on record per item, not one per process that believed it deleted it.
    rows = pg_place.sql("SELECT id, count(*) FROM {s}.versions WHERE op = 'delete' GROUP BY id")
    assert sorted(rows) == [(id, 1) for id in sorted(ids)]


def test_two_processes_updating_one_item_both_land(pg_place: PgPlace) -> None:
    ids = [f"item-{n}" for n in range(ROUNDS)]
    _seed(pg_place, ids)
    (_, titles, items_a), (_, confidences, items_b) = _race(
        pg_place, ("set_title", "set_confidence"), ids
    )
    assert titles == [f"title of {id}" for id in ids]
    assert confidences == ["low"] * ROUNDS
    assert items_a == items_b == _on_record(pg_place)
    assert [(it["title"], it["confidence"]) for it in items_a] == [
        (f"title of {id}", "low") for id in sorted(ids)
    ]


def test_an_update_run_again_after_a_conflict_keeps_the_item_in_its_partition(
    pg_place: PgPlace,
) -> None:
    ids = [f"item-{n}" for n in range(ROUNDS)]
    _seed(pg_place, ids)
    (_, tags, items_a), (_, _, items_b) = _race(pg_place, ("set_tags", "set_confidence"), ids)
    assert tags == [["reviewed", "tenant/alice"]] * ROUNDS
    assert items_a == items_b == _on_record(pg_place)
    assert [(it["tags"], it["confidence"]) for it in items_a] == [
        (["reviewed", "tenant/alice"], "low")
    ] * ROUNDS


def test_of_two_processes_claiming_one_item_exactly_one_gets_it(pg_place: PgPlace) -> None:
    """A compare-and-set under ``Memory.atomically``: one winner, whom both processes see."""
    ids = [f"item-{n}" for n in range(ROUNDS)]
    _seed(pg_place, ids)
    (_, first, items_a), (_, second, items_b) = _race(pg_place, ("claim-a", "claim-b"), ids)
    answers = list(zip(first, second, strict=True))
    assert all(sorted(pair) == [False, True] for pair in answers), answers
    owners = {it["id"]: it["data"]["owner"] for it in items_a}
    winners = ["claim-a" if won else "claim-b" for won in first]
    assert owners == dict(zip(ids, winners, strict=True))
    assert items_a == items_b == _on_record(pg_place)


def test_an_update_racing_a_delete_never_brings_the_item_back(pg_place: PgPlace) -> None:
    ids = [f"item-{n}" for n in range(ROUNDS)]
    _seed(pg_place, ids)
    (_, deleted, items_a), (_, renamed, items_b) = _race(pg_place, ("delete", "rename"), ids)
    assert deleted == [True] * ROUNDS
    # Each update either landed before the delete or found the item gone.
    assert set(renamed) <= {"ItemNotFoundError", *(f"renamed {id}" for id in ids)}
    assert items_a == items_b == _on_record(pg_place) == []


def test_an_update_racing_a_hard_delete_never_brings_the_item_back(pg_place: PgPlace) -> None:
    """A purged item stays erased: a process that had not seen the purge cannot write it back."""
    ids = [f"item-{n}" for n in range(ROUNDS)]
    _seed(pg_place, ids)
    (_, purged, items_a), (_, renamed, items_b) = _race(pg_place, ("purge", "rename"), ids)
    assert purged == [True] * ROUNDS
    assert set(renamed) <= {"ItemNotFoundError", *(f"renamed {id}" for id in ids)}
    assert items_a == items_b == _on_record(pg_place) == []
    assert pg_place.sql("SELECT id FROM {s}.versions") == []


def test_processes_incrementing_one_counter_lose_no_increment(pg_place: PgPlace) -> None:
    """Read-modify-write at full speed from three processes: every increment made counts.

    Under such contention an increment may run out of retries and be refused
    (``WriteConflictError``, nothing written); every other one is in the counter.
    """
    with Memory(journal=PostgresJournal(pg_place.dsn, schema=pg_place.schema)) as mem:
        mem.add(Item(id="counter", kind="note", title="0"), dedup=False)
    ctx = multiprocessing.get_context("spawn")
    out: Any = ctx.Queue()
    each = 25
    procs = [
        ctx.Process(
            target=pg_race_worker.increment, args=(pg_place.dsn, pg_place.schema, each, out)
        )
        for _ in range(3)
    ]
    for p in procs:
        p.start()
    try:
        refused = sum(out.get(timeout=120) for _ in procs)
    finally:
        for p in procs:
            p.join(30)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    (counter,) = [it for it in _on_record(pg_place) if it["id"] == "counter"]
    assert int(counter["title"]) == 3 * each - refused
    assert refused < each  # most of them land
