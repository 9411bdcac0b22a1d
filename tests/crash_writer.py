"""A writer process for the crash tests: writes, acknowledges each write on stdout.

``python -m tests.crash_writer PATH SEED [VECTORS]`` opens a journal at PATH
(and a vector index in the folder VECTORS, when given) and plays
the operations :func:`operations` derives from SEED, printing ``ack N`` (and
flushing) after operation N was acknowledged. The parent kills it with SIGKILL
at a moment of its choosing and then checks the journal against the same
operations replayed in memory.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass

Model = dict[str, str]
"""id -> title: what the store should hold."""


@dataclass(frozen=True)
class Op:
    """One operation: single writes, or a batch (``abort``: it raises and rolls back)."""

    writes: tuple[tuple[str, str | None], ...]
    """``(id, title)`` upserts and ``(id, None)`` deletes, in order."""
    batch: bool = False
    abort: bool = False

    def apply(self, model: Model) -> None:
        if not self.abort:
            apply_writes(model, self.writes)


def apply_writes(model: Model, writes: tuple[tuple[str, str | None], ...]) -> None:
    """Play ``(id, text)`` upserts and ``(id, None)`` deletes on ``model``, in order."""
    for id, text in writes:
        if text is None:
            model.pop(id, None)
        else:
            model[id] = text


def operations(seed: int) -> Iterator[Op]:
    """An endless, deterministic stream of operations over a growing set of ids."""
    rng = random.Random(seed)
    model: Model = {}
    n = 0

    def write() -> tuple[str, str | None]:
        nonlocal n
        n += 1
        roll = rng.random()
        if model and roll < 0.2:
            return rng.choice(sorted(model)), f"edit {n}"
        if model and roll < 0.3:
            return rng.choice(sorted(model)), None
        return f"c{n}", f"title {n} " + "word " * rng.randrange(1, 30)

    while True:
        if rng.random() < 0.25:
            size = rng.randrange(2, 40)
            writes: list[tuple[str, str | None]] = []
            shadow = dict(model)
            for _ in range(size):
                w = write()
                if w[1] is None and w[0] not in shadow:
                    continue
                writes.append(w)
                if w[1] is None:
                    shadow.pop(w[0], None)
                else:
                    shadow[w[0]] = w[1]
            op = Op(tuple(writes), batch=True, abort=rng.random() < 0.15)
        else:
            op = Op((write(),))
        op.apply(model)
        yield op


def main(path: str, seed: int, vectors: str = "") -> None:
    from memstore import Item, Store
    from memstore.journal import SqliteJournal

    journal = SqliteJournal(path)
    store = Store()
    journal.attach(store)
    if vectors:  # a vector index beside the journal, kept by the store's listeners
        from memstore_index import CellStore, HashEmbedder

        CellStore(HashEmbedder(dim=32), path=vectors).attach(store)
    out = sys.stdout
    for i, op in enumerate(operations(seed)):
        try:
            with store.batch():
                for id, title in op.writes:
                    if title is None:
                        store.delete(id)
                    else:
                        store.upsert(Item(id=id, kind="note", title=title, tags=[f"op/{i}"]))
                if op.abort:
                    raise _Abort
        except _Abort:
            pass
        out.write(f"ack {i}\n")
        out.flush()


class _Abort(Exception):
    pass


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), *sys.argv[3:])
