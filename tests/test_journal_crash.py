"""Crash safety with real processes: SIGKILL a writer mid-stream, reopen, compare.

A child process (:mod:`tests.crash_writer`) writes single items and batches
(some aborted on purpose) and acknowledges each on a pipe (each trial's child
is forked from one process that imported memstore once: see
:mod:`tests.forker`). The parent kills it with SIGKILL at a random moment,
reopens the journal and checks: every acknowledged operation is there, the one
in flight is either wholly there or wholly absent (a batch is never
half-present), and the store's indexes agree with its items.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from memstore import Memory, Store
from memstore.journal import SqliteJournal
from memstore_index import CellStore, HashEmbedder
from tests.crash_bulk_writer import Op as BulkOp
from tests.crash_bulk_writer import operations as bulk_operations
from tests.crash_writer import Model, operations
from tests.forker import Forker, kill_writer

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


def run_until_killed(
    forker: Forker, path: Path, seed: int, rng: random.Random, vectors: Path | None
) -> int:
    """Start a writer, let it acknowledge some operations, SIGKILL it; how many it acked."""
    target = rng.randrange(1, 300)
    args: list[object] = [str(path), seed] + ([str(vectors)] if vectors else [])
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

    return kill_writer(forker, "crash_bulk_writer", [str(folder), seed], until, 0.05, rng)


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
