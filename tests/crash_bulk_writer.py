"""A writer process for the bulk crash tests: imports, purges, batches; acknowledges each.

``python -m tests.crash_bulk_writer FOLDER SEED`` opens a :class:`~memstore.Memory`
in FOLDER (a SQLite journal and a vector file beside it) and plays the
operations :func:`operations` derives from SEED, printing ``ack N`` (and
flushing) after operation N was acknowledged. Unlike :mod:`tests.crash_writer`
(single writes and store batches), every operation here is one large
transaction of its own kind: an ``import_`` of an export of many items, a
``purge`` of many ids, an ``add_many``, and a ``transaction`` mixing updates
and deletes. The parent kills it with SIGKILL and checks the folder against
the same operations replayed in memory.
"""

from __future__ import annotations

import io
import random
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.crash_writer import Model, apply_writes

BULK = 150
"""Items an import or an add_many brings, ids a purge erases (at most)."""


@dataclass(frozen=True)
class Op:
    """One operation: ``kind`` and what it writes (``None`` content: removed)."""

    kind: str  # "import", "purge", "add_many", "transaction"
    writes: tuple[tuple[str, str | None], ...]

    def apply(self, model: Model) -> None:
        apply_writes(model, self.writes)


def operations(seed: int) -> Iterator[Op]:
    """An endless, deterministic stream of bulk operations."""
    rng = random.Random(seed)
    model: Model = {}
    n = 0

    def fresh(prefix: str) -> tuple[tuple[str, str | None], ...]:
        nonlocal n
        out = []
        for _ in range(rng.randrange(BULK // 2, BULK)):
            n += 1
            out.append((f"{prefix}{n}", f"{prefix} note {n} " + "word " * rng.randrange(1, 20)))
        return tuple(out)

    while True:
        roll = rng.random()
        if model and roll < 0.25:
            ids = rng.sample(sorted(model), min(len(model), rng.randrange(1, BULK)))
            op = Op("purge", tuple((id, None) for id in sorted(ids)))
        elif model and roll < 0.45:
            ids = rng.sample(sorted(model), min(len(model), 40))
            op = Op(
                "transaction",
                tuple((id, None if i % 3 == 0 else f"edited {id} {i}") for i, id in enumerate(ids)),
            )
        elif roll < 0.75:
            op = Op("import", fresh("imp"))
        else:
            op = Op("add_many", fresh("add"))
        op.apply(model)
        yield op


def export_of(writes: tuple[tuple[str, str | None], ...], scratch: Path) -> str:
    """An export holding exactly ``writes`` (new items), made by a journal of its own."""
    from memstore import Memory

    with tempfile.TemporaryDirectory(dir=scratch) as folder, Memory(folder, embedder=None) as src:
        src.add_many([{"text": content, "id": id} for id, content in writes if content])
        out = io.StringIO()
        src.export(out)
        return out.getvalue()


def main(folder: str, seed: int) -> None:
    from memstore import Memory
    from memstore.transaction import transaction
    from memstore_index import HashEmbedder

    scratch = Path(folder).parent
    mem = Memory(folder, embedder=HashEmbedder(dim=32))
    out = sys.stdout
    for i, op in enumerate(operations(seed)):
        if op.kind == "import":
            text = export_of(op.writes, scratch)  # made before: only the import is in flight
            out.write(f"import {i}\n")
            out.flush()
            mem.import_(io.StringIO(text))
        elif op.kind == "purge":
            mem.purge([id for id, _ in op.writes])
        elif op.kind == "add_many":
            mem.add_many([{"text": content, "id": id} for id, content in op.writes])
        else:
            with transaction(mem):
                for id, content in op.writes:
                    if content is None:
                        mem.delete(id)
                    else:
                        mem.update(id, content=content)
        out.write(f"ack {i}\n")
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
