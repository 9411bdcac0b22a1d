"""Crash safety with real processes: SIGKILL a writer mid-stream, reopen, compare.

A child process (:mod:`tests.crash_writer`) writes single items and batches
(some aborted on purpose) and acknowledges each on a pipe (each trial's child
is forked from one process that imported memstore once: see :func:`forker`). The parent kills it
with SIGKILL at a random moment, reopens the journal and checks: every
acknowledged operation is there, the one in flight is either wholly there or
wholly absent (a batch is never half-present), and the store's indexes agree
with its items.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memstore import Memory, Store
from memstore.journal import SqliteJournal
from memstore_index import CellStore, HashEmbedder
from tests.crash_bulk_writer import Op as BulkOp
from tests.crash_bulk_writer import operations as bulk_operations
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


_FORKER = """
import json, os, sys, traceback
import tests.crash_bulk_writer, tests.crash_writer
from memstore import Item, Memory, Store  # what the writers import: loaded once, here
from memstore.journal import SqliteJournal
from memstore.transaction import transaction
from memstore_index import CellStore, HashEmbedder

for line in sys.stdin:
    module, args = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            print("pid", os.getpid(), flush=True)
            getattr(tests, module).main(args[0], int(args[1]), *args[2:])
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("exit", os.waitstatus_to_exitcode(status), flush=True)
"""


@dataclass
class Forker:
    """The process forking the writers, and the file its (and their) stderr goes to."""

    proc: subprocess.Popen[str]
    err: Path


@pytest.fixture
def forker(tmp_path: Path) -> Iterator[Forker]:
    """A process that has imported the writers and memstore, forking one writer per line read.

    Each writer is a process of its own, forked before it opens anything and
    killed on its own: only its start (importing memstore, about a second) is
    paid once instead of once a trial. It prints ``pid N`` before anything
    else; when it has ended, the forker prints ``exit STATUS`` after whatever
    it wrote (its stderr goes to ``forker.err`` in ``tmp_path``).
    """
    err_path = tmp_path / "forker.err"
    err = err_path.open("w")
    forker = subprocess.Popen(
        [sys.executable, "-c", _FORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    try:
        yield Forker(forker, err_path)
    finally:
        assert forker.stdin is not None and forker.stdout is not None
        forker.stdin.close()
        try:
            forker.wait(timeout=60)
        finally:
            forker.kill()
            forker.wait()
            forker.stdout.close()
            err.close()


def kill_writer(
    forker: Forker,
    module: str,
    args: list[str],
    until: Callable[[str, int], bool],
    pause: float,
    rng: random.Random,
) -> int:
    """Run ``tests.MODULE.main(*ARGS)`` in a process of its own, SIGKILL it; how many
    operations it acknowledged.

    The writer, forked by ``forker`` (the :func:`forker` fixture), prints ``ack N`` as each
    operation is acknowledged. Once ``until(line, acked)`` holds, it is killed
    after a random pause of up to ``pause`` seconds (to land the kill anywhere
    in what it does next); the acknowledgements already in the pipe then count
    too: they were acknowledged.
    """
    proc = forker.proc
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps([module, args]) + "\n")
    proc.stdin.flush()
    first = proc.stdout.readline()
    assert first.startswith("pid "), (first, forker.err.read_text())
    pid = int(first.split()[1])
    acked = 0
    status: int | None = None
    try:
        for line in proc.stdout:
            if line.startswith("exit "):
                status = int(line.split()[1])
                raise AssertionError(f"writer stopped early: {forker.err.read_text()}")
            if line.startswith("ack "):
                acked = int(line.split()[1]) + 1
            if until(line, acked):
                break
        else:
            raise AssertionError(f"the forker stopped: {forker.err.read_text()}")
        time.sleep(rng.random() * pause)
        os.kill(pid, signal.SIGKILL)
        for line in proc.stdout:
            if line.startswith("exit "):
                status = int(line.split()[1])
                break
            if line.startswith("ack "):
                acked = int(line.split()[1]) + 1
    finally:
        if status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert status == -signal.SIGKILL
    return acked


def run_until_killed(
    forker: Forker, path: Path, seed: int, rng: random.Random, vectors: Path | None
) -> int:
    """Start a writer, let it acknowledge some operations, SIGKILL it; how many it acked."""
    target = rng.randrange(1, 300)
    args = [str(path), str(seed)] + ([str(vectors)] if vectors else [])
    return kill_writer(forker, "crash_writer", args, lambda _, acked: acked >= target, 0.01, rng)


def test_sigkill_never_loses_an_acknowledged_write(tmp_path: Path, forker: Forker) -> None:
    rng = random.Random(20261130)
    outcomes = {"in flight absent": 0, "in flight present": 0}
    for trial in range(TRIALS):
        path = tmp_path / f"crash-{trial}.db"
        seed = rng.randrange(1 << 30)
        vectors = tmp_path / f"vectors-{trial}" if trial % 2 else None
        if vectors:
            vectors.mkdir()
        acked = run_until_killed(forker, path, seed, rng, vectors)
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


def bulk_states(seed: int, acked: int) -> tuple[Model, Model, BulkOp]:
    """The state after ``acked`` acknowledged bulk operations, after one more, and that one."""
    model: Model = {}
    ops = bulk_operations(seed)
    for op in itertools.islice(ops, acked):
        op.apply(model)
    nxt = next(ops)
    with_next = dict(model)
    nxt.apply(with_next)
    return model, with_next, nxt


def run_bulk_until_killed(forker: Forker, folder: Path, seed: int, rng: random.Random) -> int:
    """Start a bulk writer, SIGKILL it during an operation; how many it acknowledged.

    Every other trial waits for an import to start and kills it inside; the
    others kill at any moment of any operation.
    """
    target = rng.randrange(1, 12)
    in_import = rng.random() < 0.5

    def until(line: str, acked: int) -> bool:
        return acked >= target and (not in_import or line.startswith("import "))

    return kill_writer(forker, "crash_bulk_writer", [str(folder), str(seed)], until, 0.05, rng)


def test_sigkill_mid_import_purge_or_batch_keeps_each_whole(tmp_path: Path, forker: Forker) -> None:
    """An import, a purge, an add_many or a transaction in flight is all there or not at all.

    A Memory (journal and vector file) in a child process imports exports of
    many items, purges many ids, adds many items and runs mixed transactions,
    acknowledging each; SIGKILL lands during one of them (often an import).
    Reopened: the acknowledged state, or that plus the operation in flight,
    whole; a purge that landed left no version of its ids; the vectors
    catch up with the record.
    """
    rng = random.Random(20261203)
    outcomes: dict[tuple[str, bool], int] = {}
    for trial in range(8):
        folder = tmp_path / f"bulk-{trial}"
        seed = rng.randrange(1 << 30)
        acked = run_bulk_until_killed(forker, folder, seed, rng)
        before, after, in_flight = bulk_states(seed, acked)
        with Memory(folder, embedder=HashEmbedder(dim=32)) as mem:
            got = {it.id: it.content for it in mem.store.items()}
            assert got in (before, after), f"trial {trial}: seed {seed}, {acked} acknowledged"
            landed = got == after and before != after
            outcomes[in_flight.kind, landed] = outcomes.get((in_flight.kind, landed), 0) + 1
            mem.store._check()
            assert mem.cells is not None
            mem.cells._check(mem.store)
            for id in set(before) | set(after):
                versions = mem.history(id)
                if id in got:
                    assert versions and versions[-1].valid_to is None, id
                    assert all(
                        a.valid_to == b.valid_from for a, b in itertools.pairwise(versions)
                    ), id
                elif in_flight.kind == "purge" and landed:
                    assert versions == [], f"{id} was purged, yet has versions"
    assert any(kind == "import" for kind, _ in outcomes), outcomes
