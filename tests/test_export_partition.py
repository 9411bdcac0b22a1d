"""Exporting one partition exports that partition's own items only.

An item belongs to the partition its newest version is in (a delete's too),
and goes out with its whole history. Untagged items and other partitions'
``shared`` items, which a search in the partition also returns, are not in
its export: an export of every partition holds each item once.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from memstore import Item, Memory, Store
from memstore.journal import JournalBase, SqliteJournal
from tests.journals import Place, open_journal


def exported(journal: JournalBase, partition: str | None) -> dict[str, list[str]]:
    """The ids an export holds, each with its versions' ops."""
    buf = io.StringIO()
    journal.export(partition, buf)
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert lines[0]["partition"] == partition
    return {obj["id"]: [v["op"] for v in obj["versions"]] for obj in lines[1:-1]}


def test_a_partitions_export_holds_its_own_items_with_their_whole_history(place: Place) -> None:
    store = Store()
    journal = SqliteJournal(place) if isinstance(place, Path) else open_journal(place)
    journal.attach(store)
    try:
        for id, tags in [
            ("alpha-own", ["tenant/alpha"]),
            ("alpha-shared", ["tenant/alpha", "shared"]),
            ("alpha-gone", ["tenant/alpha"]),
            ("untagged", []),
            ("beta-shared", ["tenant/beta", "shared"]),
            ("beta-own", ["tenant/beta"]),
            ("moved", ["tenant/alpha"]),
        ]:
            store.upsert(Item(id=id, kind="note", title=id, tags=tags))
        store.delete("alpha-gone")
        store.upsert(Item(id="moved", kind="note", title="moved", tags=["tenant/beta"]))

        alpha = exported(journal, "alpha")
        assert alpha == {
            "alpha-gone": ["upsert", "delete"],
            "alpha-own": ["upsert"],
            "alpha-shared": ["upsert"],
        }
        beta = exported(journal, "beta")
        assert beta == {"beta-own": ["upsert"], "beta-shared": ["upsert"], "moved": ["upsert"] * 2}
        everything = exported(journal, None)
        assert set(everything) == set(alpha) | set(beta) | {"untagged"}
    finally:
        journal.close()


def test_memory_export_of_a_partition_leaves_out_what_every_partition_sees(
    tmp_path: Path,
) -> None:
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add("alpha's own", partition="alpha")
        mem.add("for everyone", tags=["shared"])
        mem.add("untagged")
        buf = io.StringIO()
        assert mem.export(buf, partition="alpha") == 1
        assert len(mem.search("everyone", partition="alpha")) == 1  # a search sees it
