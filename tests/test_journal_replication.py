"""Replication with real processes on one PostgreSQL journal.

Three worker processes (:mod:`tests.replica_worker`) write concurrently,
mostly to the same ids, while a fourth, writing too, is killed with SIGKILL
at random moments and started again (it restores from the record and loads
its vectors from it). Once every worker stopped writing, each one's items,
``as_of`` answers at positions spread over the history, vector ids and the
results of a fixed set of searches are identical, and equal to the record.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.pgtest import PgPlace

ROOT = Path(__file__).resolve().parents[1]
KILLS = 3


class Worker:
    """One worker process and its line protocol."""

    def __init__(self, place: PgPlace, seed: int, *, acks: bool = False, wait: bool = True) -> None:
        """Start the worker; with ``wait``, wait for its ``ready`` (else :meth:`ready` does)."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = [sys.executable, "-m", "tests.replica_worker", place.dsn, place.schema, str(seed)]
        self.proc = subprocess.Popen(
            [*args, *(["--acks"] if acks else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until the worker has opened its memory and starts writing."""
        self.expect("ready")

    def line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            assert self.proc.stderr is not None
            raise AssertionError(f"worker exited: {self.proc.stderr.read()[-3000:]}")
        return line.strip()

    def expect(self, prefix: str) -> str:
        """The next line starting with ``prefix`` (acknowledgements in between skipped)."""
        while True:
            line = self.line()
            if line.startswith(prefix):
                return line
            assert line.startswith("ack "), line

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate()
        assert self.proc.returncode == -signal.SIGKILL

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
            try:
                self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:  # pragma: no cover - reported by the asserts
                self.proc.kill()
                self.proc.communicate()


def test_concurrent_writers_and_a_killed_replica_converge(
    pg_place: PgPlace, tmp_path: Path
) -> None:
    rng = random.Random(20261201)
    workers: list[Worker] = []
    try:
        # All four start at once (their imports and restores overlap), then write together.
        workers = [Worker(pg_place, seed, wait=False) for seed in (1, 2, 3)]
        victim = Worker(pg_place, 4, acks=True, wait=False)
        for w in [*workers, victim]:
            w.ready()
        for kill in range(KILLS):
            target = rng.randrange(20, 120)
            while int(victim.expect("ack ").split()[1]) < target:
                pass
            time.sleep(rng.random() * 0.005)  # land the kill anywhere in the next write
            victim.kill()
            victim = Worker(pg_place, 10 + kill, acks=True)  # restores, then writes again
        while int(victim.expect("ack ").split()[1]) < 50:  # the last one writes too
            pass
        workers.append(victim)
        for w in workers:
            w.send("stop")
        written = [int(w.expect("stopped").split()[1]) for w in workers]
        assert all(n > 0 for n in written), written

        # Positions spread over the history, and the record's own answers.
        commits = pg_place.sql("SELECT lsn FROM {s}.commits ORDER BY seq")
        assert len(commits) > 200
        from memstore.journal import Lsn, PostgresJournal

        picks = [commits[i][0] for i in range(0, len(commits), len(commits) // 8)]
        positions = [str(Lsn.unpack(p)) for p in [*picks, commits[-1][0]]]
        (tmp_path / "positions.json").write_text(json.dumps(positions))
        dumps: list[dict[str, Any]] = []
        for n, w in enumerate(workers):
            out = tmp_path / f"dump-{n}.json"
            w.send(f"dump {out} {tmp_path / 'positions.json'}")
            w.expect("dumped")
            dumps.append(json.loads(out.read_text()))
        reader = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
        on_record = sorted(
            (it.model_dump(mode="json") for it in reader.current()), key=lambda d: d["id"]
        )
        reader.close()
    finally:
        for w in workers:
            w.close()

    first = dumps[0]
    assert first["items"] == on_record and len(on_record) > 10
    assert any(it["id"].startswith("shared-") for it in on_record)
    for other in dumps[1:]:
        assert other["items"] == first["items"]
        assert other["as_of"] == first["as_of"]
        assert other["vectors"] == first["vectors"]
        assert other["searches"] == first["searches"]
    assert any(hits for hits in first["searches"].values())
    assert len({json.dumps(v) for v in first["as_of"].values()}) > 3  # the history moved


def test_a_subscriber_sees_every_change_another_process_makes(pg_place: PgPlace) -> None:
    """Changes written by another process reach this one's subscription, and add up to its state.

    Folding the ``ItemChanged`` events in order gives exactly the items the
    store holds, which are the record's; each event carries the position of
    the commit that made it, which this process has reached.
    """
    from memstore import Memory
    from memstore.journal import PostgresJournal

    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    with Memory(journal=journal, embedder=None, hub=True) as mem:
        sub = mem.subscribe(topics=["change"])
        writer = Worker(pg_place, 7, acks=True)
        try:
            while int(writer.expect("ack ").split()[1]) < 80:
                pass
            writer.send("stop")
            writer.expect("stopped")
        finally:
            writer.close()
        assert journal.wait_for(journal.head(), 30)
        folded: dict[str, Any] = {}
        positions = []
        while (event := sub.get_nowait()) is not None:
            assert event.dropped == 0
            if event.op == "delete":
                folded.pop(event.id, None)
            else:
                folded[event.id] = event.item.model_dump(mode="json")
            positions.append(event.lsn)
        with mem.store.lock:
            held = {it.id: it.model_dump(mode="json") for it in mem.store.items_locked()}
        on_record = {it.id: it.model_dump(mode="json") for it in journal.current()}
    assert len(positions) >= 80 and None not in positions
    assert max(positions) == journal_head(pg_place)
    assert folded == held
    assert on_record == held


def journal_head(place: PgPlace) -> Any:
    from memstore.journal import Lsn

    return Lsn.unpack(place.sql("SELECT lsn FROM {s}.head")[0][0])


WRITE_IN_ORDER = """
import sys
from memstore import Item, Memory
from memstore.journal import PostgresJournal

dsn, schema = sys.argv[1:3]
with Memory(journal=PostgresJournal(dsn, schema=schema), embedder=None) as mem:
    for n in range(30):  # ids that sort against the commit order
        mem.store.upsert(Item(id=f"id-{99 - n:02d}", kind="note", title=f"write {n}"))
    with mem.store.batch():  # one commit of three ids, in this order
        for id in ("id-95", "id-50", "id-90"):
            mem.store.upsert(Item(id=id, kind="note", title="batch"))
    mem.store.delete("id-99")
"""


def test_another_process_changes_reach_subscribers_in_commit_order(pg_place: PgPlace) -> None:
    """A follower that reads several commits at once publishes them in commit order.

    This process holds its store's lock while the other one writes, so its
    follower falls behind and then takes the commits in one batch; the events
    still come in the order the other process committed them, each position
    at or after the one before, each id once (its newest state).
    """
    from memstore import Memory
    from memstore.journal import PostgresJournal

    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    with Memory(journal=journal, embedder=None, hub=True) as mem:
        sub = mem.subscribe(topics=["change"])
        with mem.store.lock:  # the follower cannot apply anything meanwhile
            subprocess.run(
                [sys.executable, "-c", WRITE_IN_ORDER, pg_place.dsn, pg_place.schema],
                check=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                cwd=ROOT,
                timeout=120,
            )
        assert journal.wait_for(journal_head(pg_place), 30)
        events = list(iter(sub.get_nowait, None))
    seen = [(e.op, e.id) for e in events]
    late = [("upsert", "id-95"), ("upsert", "id-50"), ("upsert", "id-90"), ("delete", "id-99")]
    assert seen[-len(late) :] == late  # the batch's ids in its order, then the delete
    # Before them, one upsert per id in the order written: the ids fall as they were written.
    upserts = [id for op, id in seen[: -len(late)]]
    assert upserts == sorted(upserts, reverse=True) and len(upserts) >= 26, upserts
    positions = [e.lsn for e in events]
    assert None not in positions and positions == sorted(positions)
