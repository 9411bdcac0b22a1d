"""An item's neighbourhood as it was at a moment: what the inspector's "as of" view reads.

The item view of a past moment shows the links into the item and what it
activated then (spreading activation, :data:`HOPS` hops). Both depend only on
the items a few links away, so that is all :func:`past_neighbourhood` reads
from the journal: the item's state at the moment, then, hop by hop, the
states of the items it linked to and of those linking to it, never the whole
partition. The cost grows with the neighbourhood (at most
:data:`MAX_NEIGHBOURS` items, and :data:`READS_PER_NEIGHBOUR` history reads
for each), not with the store; each read goes back from an item's newest
version only as far as the moment (:func:`~memstore.ui.tails.state_at`), not
through its whole history.

Who links to an item is answered by the store's reverse-link index
(:meth:`~memstore.store.Store.linker_ids`), which knows the links held now:
an item that linked to it at the moment but has since been deleted or no
longer links to it is not found (its own view, as of that moment, still
shows its links out).

>>> import tempfile
>>> from memstore import Memory
>>> from memstore.item import Item, ThoughtLink
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
...     a = mem.add(Item(id="a", kind="note", content="alpha"), partition="acme")
...     b = mem.add(Item(id="b", kind="note", content="beta",
...                      links=[ThoughtLink(to_id="a", relation="explains")]), partition="acme")
...     hood = past_neighbourhood(mem, "acme", "a", mem.journal.head())
...     sorted(hood.items), hood.complete
(['a', 'b'], True)
"""

from __future__ import annotations

import dataclasses
from typing import Final

from memstore.item import SCOPE_PRIVATE, Item
from memstore.journal import Lsn
from memstore.memory import Memory
from memstore.tags import partition_from_tags
from memstore.ui.tails import state_at

__all__ = [
    "HOPS",
    "MAX_NEIGHBOURS",
    "READS_PER_NEIGHBOUR",
    "Neighbourhood",
    "owned",
    "past_neighbourhood",
]

HOPS: Final = 3
"""How many links away the neighbourhood reaches (the related items' spreading depth)."""
MAX_NEIGHBOURS: Final = 200
"""The most items one neighbourhood holds, the item included; nearer ones first."""
READS_PER_NEIGHBOUR: Final = 4
"""History reads allowed per item held: ``cap`` times this at most, candidates refused included.

An item linked to by many items of other partitions (or linking to many) is
not a reason to read them all: past the budget the neighbourhood stops, and
says it is incomplete."""


@dataclasses.dataclass(frozen=True, slots=True)
class Neighbourhood:
    """The items within :data:`HOPS` links of one item at a moment, by id.

    ``complete`` is ``False`` when :data:`MAX_NEIGHBOURS` (or the budget of
    history reads, :data:`READS_PER_NEIGHBOUR`) cut it short: the farthest
    items are the ones left out.
    """

    items: dict[str, Item]
    complete: bool


def owned(item: Item, partition: str) -> bool:
    """Whether ``item`` is shown to ``partition``: its partition tag, and not private."""
    return item.scope != SCOPE_PRIVATE and partition_from_tags(item.tags) == partition


def past_neighbourhood(
    memory: Memory,
    partition: str,
    id: str,
    when: Lsn,
    *,
    hops: int = HOPS,
    cap: int = MAX_NEIGHBOURS,
) -> Neighbourhood:
    """The ``partition``'s items within ``hops`` links of ``id``, as they were at ``when``.

    A link counts both ways (as spreading activation follows it), and only
    through items that were ``partition``'s then (not private), as the item
    view shows only those. Empty when ``id`` itself was not the partition's.
    """
    states: dict[str, Item | None] = {}

    def state(i: str) -> Item | None:
        if i not in states:
            item = state_at(memory, i, when)
            states[i] = item if item is not None and owned(item, partition) else None
        return states[i]

    start = state(id)
    if start is None:
        return Neighbourhood({}, True)
    found: dict[str, Item] = {id: start}
    frontier = [id]
    for _ in range(hops):
        following: list[str] = []
        for node in frontier:
            out = [link.to_id for link in found[node].links]
            for other in [*out, *memory.store.linker_ids(node)]:
                if other in found:
                    continue
                if other not in states and len(states) >= cap * READS_PER_NEIGHBOUR:
                    return Neighbourhood(found, False)
                item = state(other)
                if item is None or (
                    other not in out and not any(link.to_id == node for link in item.links)
                ):
                    continue  # not the partition's then, or it did not link to node then
                if len(found) >= cap:
                    return Neighbourhood(found, False)
                found[other] = item
                following.append(other)
        frontier = following
    return Neighbourhood(found, True)
