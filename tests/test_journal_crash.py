"""Crash safety with real processes: SIGKILL a writer mid-stream, reopen, compare.

A child process (:mod:`tests.crash_writer`) writes single items and batches
(some aborted on purpose) and acknowledges each on a pipe. The parent kills it
with SIGKILL at a random moment, reopens the journal and checks: every
acknowledged operation is there, the one in flight is either wholly there or
wholly absent (a batch is never half-present), and the store's indexes agree
with its items.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from memstore import Store
from memstore.journal import SqliteJournal
from memstore_index import CellStore, HashEmbedder
from tests.crash_writer import Model, operations

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 24


def expected_states(seed: int, acked: int) -> tuple[Model, Model]:
    """The state after ``acked`` acknowledged operations, and after one more."""
    model: Model = {}
    ops = operations(seed)
    for op in itertools.islice(ops, acked):
        op.apply(model)
    with_next = dict(model)
    next(ops).apply(with_next)
    return model, with_next


def run_until_killed(path: Path, seed: int, rng: random.Random, vectors: Path | None) -> int:
    """Start a writer, let it acknowledge some operations, SIGKILL it; how many it acked."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    target = rng.randrange(1, 300)
    acked = 0
    with subprocess.Popen(
        [sys.executable, "-m", "tests.crash_writer", str(path), str(seed)]
        + ([str(vectors)] if vectors else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        try:
            for line in child.stdout:
                assert line.startswith("ack "), line
                acked = int(line.split()[1]) + 1
                if acked >= target:
                    break
            else:
                raise AssertionError(f"writer stopped early: {child.stderr.read()}")
            time.sleep(rng.random() * 0.01)  # land the kill anywhere in the next write
            child.send_signal(signal.SIGKILL)
            # Acknowledgements already in the pipe count too: they were acknowledged.
            for line in child.stdout:
                acked = int(line.split()[1]) + 1
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return acked


def test_sigkill_never_loses_an_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    outcomes = {"in flight absent": 0, "in flight present": 0}
    for trial in range(TRIALS):
        path = tmp_path / f"crash-{trial}.db"
        seed = rng.randrange(1 << 30)
        vectors = tmp_path / f"vectors-{trial}" if trial % 2 else None
        if vectors:
            vectors.mkdir()
        acked = run_until_killed(path, seed, rng, vectors)
        before, after = expected_states(seed, acked)

        journal = SqliteJournal(path)  # the lock died with the writer
        store = Store()
        journal.attach(store)
        got = {it.id: it.title for it in store.items()}
        assert got in (before, after), f"trial {trial}: seed {seed}, {acked} acknowledged"
        outcomes["in flight absent" if got == before else "in flight present"] += 1
        store._check()
        if vectors:  # the vector index catches up with the record, never the reverse
            cells = CellStore(HashEmbedder(dim=32), path=vectors)
            cells.attach(store)
            cells._check()
            assert sorted(cells.ids()) == sorted(got)
            cells.close()
        # the record itself is whole: each version chain ends once, in order
        for id in got:
            versions = journal.history(id)
            assert versions[-1].valid_to is None
            assert all(a.valid_to == b.valid_from for a, b in itertools.pairwise(versions))
        journal.close()
    assert outcomes["in flight absent"] > 0
