"""A process for the replication tests: a Memory on a shared PostgreSQL journal.

``python -m tests.replica_worker DSN SCHEMA SEED [--acks]`` opens a
:class:`~memstore.Memory` on the journal (hash embedder, vectors shared
through PostgreSQL), prints ``ready`` and writes random operations over a
small pool of ids, most of them shared with the other workers, until told to
stop. With ``--acks`` it prints ``ack N`` after each acknowledged operation
(the parent kills it at a moment of its choosing). Commands on stdin:

``stop``
    stop writing; answers ``stopped N``.
``dump OUT POSITIONS``
    wait until everything on record is in the store, then write to ``OUT``
    (JSON) the items, the ``as_of`` answers at each position listed in the
    JSON file ``POSITIONS``, the ids with vectors and the results of a fixed
    set of searches; answers ``dumped``.
``quit``
    close and exit.
"""

from __future__ import annotations

import json
import queue
import random
import sys
import threading
import time
from typing import Any

SHARED_IDS = [f"shared-{i}" for i in range(24)]
WORDS = "alpha beta gamma delta ledger pool timeout deploy friday payment api cache".split()
QUERIES = ["alpha beta", "ledger pool timeout", "deploy friday", "payment api", "gamma"]
PARTITIONS = [None, "a", "b"]


def one_op(mem: Any, rng: random.Random, me: str, n: int) -> None:
    """One random write: an upsert, an edit, a delete or a batch, mostly on shared ids."""
    from memstore import Item

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(2, 7)))

    def item(id: str) -> Item:
        part = rng.choice(["a", "b"])
        return Item(id=id, kind="note", title=f"{text()} {me} {n}", tags=[f"tenant/{part}"])

    ids = [*SHARED_IDS, *(f"{me}-{i}" for i in range(8))]
    roll = rng.random()
    if roll < 0.15:
        mem.store.delete(rng.choice(ids))
    elif roll < 0.3:
        with mem.store.batch():
            for id in rng.sample(ids, rng.randrange(2, 6)):
                if rng.random() < 0.2:
                    mem.store.delete(id)
                else:
                    mem.store.upsert(item(id))
    else:
        mem.store.upsert(item(rng.choice(ids)))


def dump(mem: Any, out: str, positions_file: str) -> None:
    from memstore.journal import Lsn

    journal = mem.journal
    assert journal.wait_for(journal.head(), 60.0), journal.feed_status()
    with open(positions_file) as f:
        positions = [Lsn.parse(p) for p in json.load(f)]
    with mem.store.lock:
        items = sorted(
            (it.model_dump(mode="json") for it in mem.store.items_locked()), key=lambda d: d["id"]
        )
    searches = {
        f"{q}|{p}": [[r.item.id, round(r.score, 6)] for r in mem.search(q, partition=p)]
        for q in QUERIES
        for p in PARTITIONS
    }
    as_of = {str(p): [it.model_dump(mode="json") for it in journal.as_of(p)] for p in positions}
    data = {
        "items": items,
        "as_of": as_of,
        "vectors": mem.cells.ids(),
        "searches": searches,
        "status": str(journal.feed_status()),
    }
    with open(out, "w") as f:
        json.dump(data, f)


def main(dsn: str, schema: str, seed: int, acks: bool) -> None:
    from memstore import Memory
    from memstore.journal import PostgresJournal
    from memstore_index import HashEmbedder

    journal = PostgresJournal(dsn, schema=schema, durability="off", poll_interval=0.5)
    mem = Memory(journal=journal, embedder=HashEmbedder(dim=64))
    me = f"w{seed}"
    commands: queue.Queue[str] = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            commands.put(line.strip())

    threading.Thread(target=read_commands, daemon=True).start()
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    rng = random.Random(seed)
    writing, n = True, 0
    while True:
        try:
            cmd = commands.get_nowait() if writing else commands.get()
        except queue.Empty:
            cmd = ""
        if cmd == "stop":
            writing = False
            out.write(f"stopped {n}\n")
        elif cmd.startswith("dump "):
            _, path, positions = cmd.split()
            dump(mem, path, positions)
            out.write("dumped\n")
        elif cmd == "quit":
            break
        elif writing:
            one_op(mem, rng, me, n)
            n += 1
            if acks:
                out.write(f"ack {n}\n")
            time.sleep(0.002)  # pacing: four writers share two cores with the test
        out.flush()
    mem.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), "--acks" in sys.argv[4:])
