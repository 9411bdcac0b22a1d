"""The item counts of the inspector and of ``Memory.stats`` against a count by hand.

The inspector's view (:func:`memstore.ui.views.stats`) answers from the
store's tally (:meth:`~memstore.store.Store.tally`), and ``Memory.stats()``'s
``active`` from the same tally's count of every scope
(:meth:`~memstore.store.Store.count_active`), kept as items change rather than
counted on each request. Each test makes writes of every kind (adds, moves
between tenants, private items, updates, deletes, supersessions, deadlines
passing, a batch undone, a restart) and checks after each that both say what
a walk over every item says.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memstore import Config, Item, Memory
from memstore.errors import InvalidItemError
from memstore.tags import partition_from_tags
from memstore.ui.views import stats

TENANTS = ("acme", "beta")
ALL = (*TENANTS, "other")
KINDS = ("note", "fact", "episode")


class Clock:
    """The store's clock, moved by the test (deadlines pass when it says)."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now


def by_hand(mem: Memory, partitions: tuple[str, ...]) -> dict[str, Any]:
    """The counts as a walk over every public item finds them (its status as readers see it)."""
    parts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    for it in mem.store.items():  # public items, lazily stale ones reported stale
        p = partition_from_tags(it.tags)
        if p not in partitions:
            continue
        statuses[it.status] += 1
        if it.status == "active":
            parts[p] += 1
            kinds[it.kind] += 1
    return {
        "partitions": {p: parts.get(p, 0) for p in partitions},
        "kinds": dict(sorted(kinds.items())),
        "statuses": dict(sorted(statuses.items())),
    }


def counts(mem: Memory, partitions: tuple[str, ...]) -> dict[str, Any]:
    s = stats(mem, partitions)
    return {k: s[k] for k in ("partitions", "kinds", "statuses")}


def active_by_hand(mem: Memory) -> int:
    """The active items, private ones included, as a walk over every stored item finds them."""
    return len(mem.store.all_items())  # every item walked, each asked is_active(now)


def check(mem: Memory) -> None:
    assert mem.stats().active == active_by_hand(mem)
    for partitions in (TENANTS, ("acme",), ("beta",), ("other", "acme")):
        assert counts(mem, partitions) == by_hand(mem, partitions)
    stats = mem.stats()
    assert (stats.active, stats.items) == (active_by_hand(mem), len(mem.store))


def random_writes(mem: Memory, clock: Clock, rng: random.Random, steps: int) -> None:
    """``steps`` writes of every kind, the counts checked after each."""
    ids: list[str] = []
    for _ in range(steps):
        op = rng.choice(["add", "add", "move", "private", "update", "delete", "supersede", "time"])
        if op == "add" or not ids:
            deadline = None
            if rng.random() < 0.4:
                deadline = clock.now + dt.timedelta(hours=rng.randint(1, 48))
            it = mem.add(
                Item(kind=rng.choice(KINDS), content=f"note {len(ids)}", stale_after=deadline),
                partition=rng.choice(ALL),
                dedup=False,
            )
            ids.append(it.id)
        elif op == "move":  # a trusted writer re-adds the id elsewhere
            id = rng.choice(ids)
            mem.store.upsert(
                Item(
                    id=id,
                    kind=rng.choice(KINDS),
                    content="moved",
                    tags=[f"tenant/{rng.choice(ALL)}"],
                )
            )
        elif op == "private":
            id = rng.choice(ids)
            tags = [f"tenant/{rng.choice(ALL)}", "user:u1"]
            how: dict[str, Any] = rng.choice(
                [
                    {},
                    {"status": "stale"},
                    {"stale_after": clock.now + dt.timedelta(hours=rng.randint(1, 48))},
                ]
            )
            mem.store.upsert(
                Item(id=id, kind="note", content="mine", scope="private", tags=tags, **how)
            )
        elif op == "update":
            id = rng.choice(ids)
            if mem.get(id) is not None:
                mem.update(id, kind=rng.choice(KINDS))
        elif op == "delete":
            mem.delete(rng.choice(ids))
        elif op == "supersede":
            id = rng.choice(ids)
            old = mem.get(id)
            if old is not None and old.scope != "private" and old.status == "active":
                with contextlib.suppress(InvalidItemError):  # superseded before, revived since
                    ids.append(mem.supersede(id, f"replaces {id}").id)
        else:  # deadlines pass: items turn stale with no write at all
            clock.now += dt.timedelta(hours=rng.randint(1, 24))
        check(mem)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_counts_match_a_walk_over_every_item(tmp_path: Path, seed: int) -> None:
    clock = Clock()
    rng = random.Random(seed)
    with Memory(tmp_path, embedder=None, config=Config(clock=clock)) as mem:
        check(mem)  # asked first while empty: the tally is then kept through every write
        random_writes(mem, clock, rng, 150)
    with Memory(tmp_path, embedder=None, config=Config(clock=clock)) as mem:
        check(mem)  # after a restart: the store was filled from the journal
        random_writes(mem, clock, rng, 50)


def test_a_batch_undone_leaves_the_counts_as_they_were(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        kept = mem.add("a kept note", partition="acme")
        check(mem)
        with pytest.raises(RuntimeError), mem.store.batch():
            mem.store.upsert(Item(kind="fact", content="undone", tags=["tenant/acme"]))
            mem.store.upsert(Item(id=kept.id, kind="fact", content="moved", tags=["tenant/beta"]))
            mem.store.delete(kept.id)
            raise RuntimeError("the group fails")
        assert counts(mem, TENANTS)["partitions"] == {"acme": 1, "beta": 0}
        check(mem)


def test_a_store_restored_in_place_is_counted_again(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder=None) as mem:
        mem.add("one", partition="acme")
        check(mem)
        mem.store.restore(
            [
                Item(id=f"r{n}", kind="fact", content="restored", tags=["tenant/beta"])
                for n in range(3)
            ]
        )
        assert counts(mem, TENANTS)["partitions"] == {"acme": 0, "beta": 3}
        check(mem)
