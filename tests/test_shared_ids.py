"""A reopened folder's indexes hold the store's own id strings, not equal copies.

A search maps its hits' ids to the search snapshot's slots and reads items by
id: dictionary lookups whose keys are the items' id strings. An id read back
from the lexicon's snapshot file or the vector file is an equal copy, and each
lookup with it compares characters (a cache miss each, in a deep pool); the
same string object matches by identity. Opening a folder therefore hands both
indexes the items' own strings: the lexicon as it loads its snapshot
(:meth:`~memstore._lexindex.LexicalIndex.from_snapshot`), the vector index as
the store syncs it (an unchanged entry is kept as the store passed it).
"""

from __future__ import annotations

from pathlib import Path

from memstore import Memory
from memstore.item import Item


def test_reopened_indexes_hold_the_items_id_strings(tmp_path: Path) -> None:
    with Memory(tmp_path, embedder="hash") as memory:
        for n in range(40):
            memory.store.upsert(_note(n))
    with Memory(tmp_path, embedder="hash") as memory:
        store, cells = memory.store, memory.cells
        assert cells is not None
        items = store._items
        lexicon = store._lex.lexicon
        held = [id for id in lexicon._ids if id is not None]
        assert len(held) == 40
        assert all(items[id].id is id for id in held)
        assert all(items[id].id is id for id in lexicon._slot_of)
        entries = [e for e in cells._entries if e is not None]
        assert len(entries) == 40
        assert all(items[e.id].id is e.id for e in entries)
        # And the searches answer as before: the strings are equal, only shared.
        hits = memory.search("note number 7", limit=3)
        assert hits and hits[0].item.id == "n07"


def _note(n: int) -> Item:
    return Item(id=f"n{n:02d}", kind="note", title=f"note {n}", content=f"note number {n}")
