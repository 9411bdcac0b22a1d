"""Exact-duplicate vectors: one copy of each distinct vector in the HNSW graph.

Many entries can hold the very same vector: the same text stored again and
again ("ok", "thanks", a repeated log line) embeds to the same bytes, since a
model embeds a text the same whatever else is in its batch. hnswlib builds
its graph badly from them: every copy is at distance 0 from every other, so
the neighbour heuristic keeps them all and each insertion prunes full
neighbour lists, ~1 ms an insertion at 256 dimensions where a distinct
vector costs ~0.1-0.3 ms (measured in ``docs/vector.md``).

So only one label of each distinct vector, its *representative*, enters the
graph; the others are its *twins*, found through it: a graph search expands
each representative it returns into its twins, at the same score (the same
vector scores the same), and ties then order by id as everywhere else. The
exact scans never needed this: they score every label's row.

Groups are found by a hash of the vector's bytes, checked by comparing the
vectors (a hash collision keeps the second vector out of the table, in the
graph as its own representative: deduplication is only ever a saving). A
vector alone keeps a single integer in the table; a group object is made
only when a second copy arrives, and keeps its labels sorted by entry id so
that a search takes the first ``k`` of however many copies. Deleting a twin touches nothing else;
deleting a representative promotes one of its twins, which the caller then
inserts into the graph in its place (one insertion, what any write costs).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field

from memstore_index._centring import Vector
from memstore_index.entry import IndexEntry

__all__ = ["Group", "Twins"]


@dataclass(slots=True)
class Group:
    """The labels that hold one vector: ``rep`` in the graph, ``twins`` found through it."""

    rep: int
    twins: set[int] = field(default_factory=set)
    by_id: list[tuple[str, int]] = field(default_factory=list)
    """``(entry id, label)`` of every label of the group, sorted: a search takes the
    first ``k`` that pass, however many copies the group holds."""


class Twins:
    """Which labels share a vector, and which one of each stands for the rest in the graph.

    Cost: a hash of the row's bytes (~1 us at 256 dimensions) per placement
    and per removal; one comparison of two rows when the hash is already
    known. Memory: one dictionary slot per distinct vector, plus a small
    object and a slot per label for vectors held more than once.
    """

    __slots__ = ("_by_key", "count", "group_of")

    def __init__(self) -> None:
        # hash(row bytes) -> the representative's label, or its Group once it has twins.
        self._by_key: dict[int, int | Group] = {}
        self.group_of: dict[int, Group] = {}
        """Every label of a group that has twins (the representative included) -> the group."""
        self.count = 0
        """Labels that are twins: held here, not in the graph."""

    def add(self, label: int, vecs: Vector, entries: Sequence[IndexEntry | None]) -> bool:
        """Register ``label`` (its vector and entry already placed); ``True``: it is a twin.

        A twin stays out of the graph. Otherwise ``label`` is a representative
        (the first of its vector, or a hash collision's second vector).
        """
        key = hash(vecs[label].tobytes())
        got = self._by_key.get(key)
        if got is None:
            self._by_key[key] = label
            return False
        group = got if type(got) is Group else None
        rep = group.rep if group is not None else got
        assert type(rep) is int
        if not (vecs[rep] == vecs[label]).all():
            return False  # a hash collision: kept out of the table, in the graph
        if group is None:
            group = self._by_key[key] = self.group_of[rep] = Group(rep)
            group.by_id.append((_id(entries, rep), rep))
        group.twins.add(label)
        insort(group.by_id, (_id(entries, label), label))  # a bisection, a move in C
        self.group_of[label] = group
        self.count += 1
        return True

    def remove(self, label: int, vecs: Vector, entries: Sequence[IndexEntry | None]) -> int | None:
        """Unregister ``label`` (its vector and entry still in place).

        Returns the twin promoted to representative in its place, which the
        caller must insert into the graph; ``None`` when nothing was (``label``
        was a twin, or its vector's only holder).
        """
        group = self.group_of.pop(label, None)
        if group is None:  # alone with its vector (or a collision's own)
            key = hash(vecs[label].tobytes())
            if self._by_key.get(key) == label:
                del self._by_key[key]
            return None
        del group.by_id[bisect_left(group.by_id, (_id(entries, label), label))]
        if group.rep != label:
            group.twins.remove(label)
            self.count -= 1
            if not group.twins:
                self._alone(group, vecs)
            return None
        new = group.twins.pop()  # any will do (a loaded graph says which it holds: adopt)
        group.rep = new
        self.count -= 1
        if not group.twins:
            self._alone(group, vecs)
        return new

    def _alone(self, group: Group, vecs: Vector) -> None:
        """``group`` is down to its representative: the table keeps the bare label again."""
        del self.group_of[group.rep]
        self._by_key[hash(vecs[group.rep].tobytes())] = group.rep

    def adopt(self, label: int) -> None:
        """Make ``label`` its group's representative (the one a loaded graph holds)."""
        group = self.group_of[label]
        if group.rep != label:
            group.twins.remove(label)
            group.twins.add(group.rep)
            group.rep = label

    def groups(self) -> list[Group]:
        """Every group that has twins."""
        return [g for g in self._by_key.values() if type(g) is Group]

    def walk_filter(
        self, keep: Callable[[int], bool], pool: Set[int] | None
    ) -> Callable[[int], bool]:
        """A graph walk's filter for an entry filter ``keep``: a representative passes
        when any label of its vector does (``pool``: the set ``keep`` tests, if it is one).

        The walk meets only representatives, so a twin that passes behind one
        that does not must still let the walk take it; the hits are then
        filtered label by label.
        """
        group_of = self.group_of
        if pool is not None:

            def in_pool(label: int) -> bool:
                if label in pool:
                    return True
                group = group_of.get(label)
                return group is not None and not pool.isdisjoint(group.twins)

            return in_pool

        def passes(label: int) -> bool:
            if keep(label):
                return True
            group = group_of.get(label)
            return group is not None and any(map(keep, group.twins))

        return passes

    def is_twin(self, label: int) -> bool:
        group = self.group_of.get(label)
        return group is not None and group.rep != label


def _id(entries: Sequence[IndexEntry | None], label: int) -> str:
    entry = entries[label]
    assert entry is not None
    return entry.id
