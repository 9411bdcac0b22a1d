"""The reference memory server's knowledge graph, kept in memstore items.

``@modelcontextprotocol/server-memory`` keeps entities (a name, a type, a list
of observations) and relations (``from``, ``to``, ``relationType``) in a JSONL
file. Here an entity is one item of kind :data:`ENTITY_KIND`: its name is the
title (a blank name, left from before they were refused, quoted as JSON shows
it), its observations are the content (one per line, searchable) and, exactly,
a JSON list in ``data``; the relations starting at it are a JSON list in its
``data`` too, each mirrored by a link to the target's item so that spreading
activation follows them. An entity's id is
derived from its partition and name, so a name always finds its item without a
scan and two servers sharing one journal agree on it.

:class:`KnowledgeGraph` follows the reference's behaviour (``src/memory/index.ts``):
duplicates are ignored, a relation needs both entities, deleting an entity
deletes the relations that touch it, entities and relations come back in the
order they were created. Every mutation is one write group, journaled before
it returns; mutations are serialised, as the reference's queue does. Each one
reads entities and writes them whole, so it runs under
:meth:`~memstore.memory.Memory.atomically`: two servers sharing a PostgreSQL
journal that change one entity at the same moment both land, one after the
other, instead of the later overwriting the earlier.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from memstore.errors import InvalidItemError, MemstoreError
from memstore.item import MAX_MODEL_LINKS, Item, ThoughtLink
from memstore.listing import list_items
from memstore.memory import Memory
from memstore.search import default_visible
from memstore.tags import PARTITION_ALL

__all__ = [
    "ENTITY_KIND",
    "NOT_BLANK",
    "Entity",
    "EntityRefusedError",
    "GraphError",
    "KnowledgeGraph",
    "Relation",
    "blank",
    "entity_id",
]

ENTITY_KIND: Final = "entity"
"""The kind of the items that hold entities."""
ENTITY_ID_PREFIX: Final = "entity-"
_NAME, _TYPE, _OBS, _RELS, _SEQ = "kg.name", "kg.type", "kg.observations", "kg.relations", "kg.seq"
_T = TypeVar("_T")
_GRAPH_RELATION: Final = "correlates_with"
"""The link relation mirroring a graph relation (the relation's own type lives in data)."""


NOT_BLANK: Final = "must not be empty or only whitespace"
"""What a blank entity name or relation type is told (:func:`blank`)."""


class GraphError(MemstoreError, ValueError):
    """A graph operation the reference server refuses too (e.g. an unknown entity)."""


def blank(text: str) -> bool:
    """Whether ``text`` cannot name an entity or a relation type: empty or only whitespace.

    The reference server takes any text; memstore refuses a blank name (in
    every tool that names an entity, and in an import) since no client means
    one: it is a model's slip, and an entity named ``" "`` is one no one can
    tell from ``""`` or find by its words.

    >>> blank(""), blank("   "), blank(" Alice ")
    (True, True, False)
    """
    return not text.strip()


def _named(entities: Iterable[str], types: Iterable[str] = ()) -> None:
    """Refuse a blank entity name or relation type before a write (for a Python caller)."""
    for what, texts in (("entity name", entities), ("relation type", types)):
        for text in texts:
            if blank(text):
                raise GraphError(f"{what} {NOT_BLANK}, got {text!r:.40}")


@dataclass(frozen=True)
class Entity:
    """An entity as the reference server shows it."""

    name: str
    entityType: str
    observations: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "entityType": self.entityType,
            "observations": list(self.observations),
        }


@dataclass(frozen=True)
class Relation:
    """A relation as the reference server shows it."""

    source: str
    target: str
    relationType: str

    def to_json(self) -> dict[str, str]:
        return {"from": self.source, "to": self.target, "relationType": self.relationType}


def entity_id(name: str, partition: str | None) -> str:
    """The id of the item holding entity ``name`` in ``partition``.

    >>> entity_id("Alice", None) == entity_id("Alice", None) != entity_id("Alice", "acme")
    True
    """
    key = f"{partition or ''}\x00{name}".encode()
    return ENTITY_ID_PREFIX + hashlib.sha256(key).hexdigest()[:32]


@dataclass
class _Node:
    """An entity's item, decoded: what a mutation edits."""

    item: Item
    entity: Entity
    relations: list[tuple[str, str, int]]  # (to, relationType, seq)
    seq: int


class KnowledgeGraph:
    """Entities and relations over one :class:`Memory`, for one partition (``None``: all)."""

    def __init__(self, memory: Memory, partition: str | None = None) -> None:
        self.mem = memory
        self.partition = partition
        self._lock = threading.Lock()
        self._last_seq = 0

    # ------------------------------------------------------------ storage

    def _next_seq(self) -> int:
        """A creation stamp that orders entities and relations (monotonic here)."""
        self._last_seq = max(self._last_seq + 1, time.time_ns())
        return self._last_seq

    def _decode(self, item: Item) -> _Node:
        d = item.data
        try:
            obs = tuple(json.loads(d.get(_OBS, "[]")))
            rels = [(str(t), str(r), int(s)) for t, r, s in json.loads(d.get(_RELS, "[]"))]
            seq = int(d.get(_SEQ, "0"))
        except (ValueError, TypeError) as e:
            raise MemstoreError(f"entity item {item.id} holds damaged graph data: {e}") from None
        name = d.get(_NAME, item.title)
        return _Node(item, Entity(name, d.get(_TYPE, ""), obs), rels, seq)

    def _node(self, name: str) -> _Node | None:
        item = self.mem.get(entity_id(name, self.partition))
        if item is None or item.kind != ENTITY_KIND or not item.is_active():
            return None
        part = PARTITION_ALL if self.partition is None else self.partition
        if not default_visible(item, part):
            return None
        return self._decode(item)

    def _nodes(self) -> list[_Node]:
        items = list_items(self.mem, kind=ENTITY_KIND, partition=self.partition)
        nodes = [self._decode(it) for it in items]
        # Only this graph's own entities (not another partition's, nor untagged ones).
        nodes = [n for n in nodes if n.item.id == entity_id(n.entity.name, self.partition)]
        nodes.sort(key=lambda n: (n.seq, n.item.id))
        return nodes

    def _fields(
        self, entity: Entity, relations: Sequence[tuple[str, str, int]], seq: int
    ) -> dict[str, Any]:
        """The item fields that hold an entity and its outgoing relations."""
        links: dict[str, ThoughtLink] = {}
        for target, _, _ in relations:
            tid = entity_id(target, self.partition)
            if target != entity.name and tid not in links and len(links) < MAX_MODEL_LINKS:
                links[tid] = ThoughtLink(to_id=tid, relation=_GRAPH_RELATION)
        return {
            "title": _title(entity.name),
            "subject": entity.name,
            "content": "\n".join(entity.observations),
            "data": {
                _NAME: entity.name,
                _TYPE: entity.entityType,
                _OBS: json.dumps(list(entity.observations), ensure_ascii=False),
                _RELS: json.dumps([list(r) for r in relations], ensure_ascii=False),
                _SEQ: str(seq),
            },
            "links": list(links.values()),
        }

    def _create(self, entity: Entity) -> None:
        fields = self._fields(entity, [], self._next_seq())
        item = Item(id=entity_id(entity.name, self.partition), kind=ENTITY_KIND, **fields)
        with _refused_as(entity):
            self.mem.add(item, partition=self.partition, dedup=False)

    def _save(self, node: _Node, entity: Entity, relations: Sequence[tuple[str, str, int]]) -> None:
        with _refused_as(entity):
            self.mem.update(node.item.id, **self._fields(entity, relations, node.seq))

    # ------------------------------------------------------------ writes

    def _step(self, fn: Callable[[], _T]) -> _T:
        """Run one mutation (reads, then its writes) as one step on the current graph.

        :meth:`Memory.atomically` commits the writes together and, on a
        PostgreSQL journal another process wrote the same entities to meanwhile,
        runs ``fn`` again on the caught-up graph: ``fn`` must start from nothing
        but the graph itself each time.
        """
        with self._lock:
            return self.mem.atomically(fn)

    def create_entities(self, entities: Iterable[Entity]) -> list[Entity]:
        """Create entities whose names are new (existing and repeated names are ignored).

        :raises GraphError: a blank name (:func:`blank`); nothing is created.
        """
        wanted = list(entities)
        _named(e.name for e in wanted)

        def step() -> list[Entity]:
            created: list[Entity] = []
            seen: set[str] = set()
            for e in wanted:
                if e.name in seen or self._node(e.name) is not None:
                    continue
                seen.add(e.name)
                self._create(e)
                created.append(e)
            return created

        return self._step(step)

    def create_relations(self, relations: Iterable[Relation]) -> list[Relation]:
        """Add relations not already present; both ends must exist (else nothing changes).

        :raises GraphError: an unknown end, a blank name or type; nothing is added.
        """
        wanted = list(relations)
        _named((n for r in wanted for n in (r.source, r.target)), (r.relationType for r in wanted))

        def step() -> list[Relation]:
            nodes: dict[str, _Node] = {}
            for r in wanted:
                for name in (r.source, r.target):
                    if name not in nodes:
                        node = self._node(name)
                        if node is None:
                            raise GraphError(f"Entity with name {name} not found")
                        nodes[name] = node
            added: list[Relation] = []
            changed: dict[str, list[tuple[str, str, int]]] = {}
            for r in wanted:
                rels = changed.setdefault(r.source, list(nodes[r.source].relations))
                if any((t, k) == (r.target, r.relationType) for t, k, _ in rels):
                    continue
                rels.append((r.target, r.relationType, self._next_seq()))
                added.append(r)
            saved = {n for n, rels in changed.items() if rels != nodes[n].relations}
            for name in saved:
                self._save(nodes[name], nodes[name].entity, changed[name])
            # Write each target too, unchanged: a relation is kept on its source
            # alone, so without it a server deleting the target at this moment
            # would not conflict with this call, and the relation would outlive
            # its target (and come back if the name were created again).
            for name in dict.fromkeys(r.target for r in added):
                if name not in saved:
                    self._save(nodes[name], nodes[name].entity, nodes[name].relations)
            return added

        return self._step(step)

    def add_observations(
        self, additions: Iterable[tuple[str, Sequence[str]]]
    ) -> list[tuple[str, list[str]]]:
        """Append observations an entity lacks; an unknown entity fails the whole call.

        :raises GraphError: an unknown entity or a blank name; nothing is added.
        """
        wanted = [(name, list(contents)) for name, contents in additions]
        _named(name for name, _ in wanted)

        def step() -> list[tuple[str, list[str]]]:
            results: list[tuple[str, list[str]]] = []
            current: dict[str, tuple[_Node, list[str]]] = {}
            for name, contents in wanted:
                if name not in current:
                    node = self._node(name)
                    if node is None:
                        raise GraphError(f"Entity with name {name} not found")
                    current[name] = (node, list(node.entity.observations))
                obs = current[name][1]
                new = [c for c in contents if c not in obs]  # as the reference: per call
                obs.extend(new)
                results.append((name, new))
            for node, obs in current.values():
                if tuple(obs) != node.entity.observations:
                    entity = Entity(node.entity.name, node.entity.entityType, tuple(obs))
                    self._save(node, entity, node.relations)
            return results

        return self._step(step)

    def delete_entities(self, names: Sequence[str]) -> tuple[list[str], list[str]]:
        """Delete entities and every relation touching them: ``(deleted, not_found)``."""
        names = list(names)
        doomed = set(names)

        def step() -> tuple[list[str], list[str]]:
            nodes = self._nodes()
            present = {n.entity.name for n in nodes}
            deleted = [n for n in names if n in present]
            missing = [n for n in names if n not in present]
            for node in nodes:
                if node.entity.name in doomed:
                    self.mem.delete(node.item.id)
                    continue
                kept = [r for r in node.relations if r[0] not in doomed]
                if kept != node.relations:
                    self._save(node, node.entity, kept)
            return deleted, missing

        return self._step(step)

    def delete_observations(
        self, deletions: Iterable[tuple[str, Sequence[str]]]
    ) -> tuple[int, list[str]]:
        """Remove observations; unknown entities are reported: ``(deleted_count, missing)``."""
        wanted = [(name, set(observations)) for name, observations in deletions]

        def step() -> tuple[int, list[str]]:
            count = 0
            missing: list[str] = []
            current: dict[str, tuple[_Node, list[str]]] = {}
            for name, gone in wanted:
                if name not in current:
                    node = self._node(name)
                    if node is None:
                        missing.append(name)
                        continue
                    current[name] = (node, list(node.entity.observations))
                node, obs = current[name]
                kept = [o for o in obs if o not in gone]
                count += len(obs) - len(kept)
                current[name] = (node, kept)
            for node, obs in current.values():
                if tuple(obs) != node.entity.observations:
                    entity = Entity(node.entity.name, node.entity.entityType, tuple(obs))
                    self._save(node, entity, node.relations)
            return count, missing

        return self._step(step)

    def delete_relations(self, relations: Iterable[Relation]) -> int:
        """Remove relations (matched on all three fields); how many were removed."""
        by_source: dict[str, set[tuple[str, str]]] = {}
        for r in relations:
            by_source.setdefault(r.source, set()).add((r.target, r.relationType))

        def step() -> int:
            count = 0
            for source, gone in by_source.items():
                node = self._node(source)
                if node is None:
                    continue
                kept = [r for r in node.relations if (r[0], r[1]) not in gone]
                if len(kept) != len(node.relations):
                    count += len(node.relations) - len(kept)
                    self._save(node, node.entity, kept)
            return count

        return self._step(step)

    # ------------------------------------------------------------- reads

    def read(self) -> tuple[list[Entity], list[Relation]]:
        """The whole graph, entities and relations in creation order."""
        nodes = self._nodes()
        return [n.entity for n in nodes], _relations(nodes)

    def open(self, names: Sequence[str]) -> tuple[list[Entity], list[Relation]]:
        """The named entities (in graph order) and relations with at least one end among them."""
        wanted = set(names)
        nodes = self._nodes()
        picked = [n.entity for n in nodes if n.entity.name in wanted]
        return picked, _touching(_relations(nodes), {e.name for e in picked})

    def substring_matches(self, query: str) -> tuple[list[Entity], list[Relation]]:
        """The reference's search: a case-insensitive substring of name, type or an observation."""
        q = query.lower()
        nodes = self._nodes()
        found = [
            n.entity
            for n in nodes
            if q in n.entity.name.lower()
            or q in n.entity.entityType.lower()
            or any(q in o.lower() for o in n.entity.observations)
        ]
        return found, _relations(nodes)

    def relations_of(self, names: set[str]) -> list[Relation]:
        """Relations with at least one end among ``names``, in creation order."""
        return _touching(_relations(self._nodes()), names)

    def entity_of_item(self, item: Item) -> Entity | None:
        """The entity an item of :data:`ENTITY_KIND` holds (``None`` for other items)."""
        if item.kind != ENTITY_KIND:
            return None
        return self._decode(item).entity


_GRAPH_WORDS: Final = (
    ("title is ", "its name is "),
    ("subject is ", "its name is "),
    ("content is ", "its observations together are "),
    ("data holds ", "its name, type, observations and relations together hold "),
)
"""The item fields an engine refusal names, in the graph's words (see :meth:`_fields`)."""


class EntityRefusedError(InvalidItemError):
    """The engine refused the item that keeps one entity; nothing was written.

    The message names the entity and what is too long in the graph's words,
    which the graph tools answer: the engine names the item's fields ("title
    is 5000 characters; at most 1000"), where the client sent a name, a type
    and observations. ``reason`` stays the engine's rule, for a caller that
    names the entity its own way (the importer, with the file's line numbers).

    >>> str(EntityRefusedError("Ada", "content is 200010 characters; at most 100000"))
    "entity 'Ada' cannot be stored: its observations together are 200010 characters; at most 100000"
    """

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name

    def __str__(self) -> str:
        reason = self.reason
        for field, words in _GRAPH_WORDS:
            if reason.startswith(field):
                reason = words + reason[len(field) :]
                break
        return f"entity {self.name[:60]!r} cannot be stored: {reason}"


@contextlib.contextmanager
def _refused_as(entity: Entity) -> Iterator[None]:
    """An engine refusal of ``entity``'s item, raised as :class:`EntityRefusedError`."""
    try:
        yield
    except InvalidItemError as e:
        raise EntityRefusedError(entity.name, e.reason) from None


def _title(name: str) -> str:
    """The title of an entity's item: its name, or the name quoted if it is blank.

    The reference takes any text as a name, ``""`` and ``" "`` too, and so
    did memstore before it refused blank names (:func:`blank`): a graph may
    still hold such an entity, and an entity may have no observations (an
    item with no content). The engine refuses an item without title and
    content, so a blank name is titled as JSON shows it (``'""'``): the item
    is valid, and the quotes make no words for search. The name itself is
    kept, exactly, in ``data``.

    >>> _title("Alice"), _title(""), _title(" ")
    ('Alice', '""', '" "')
    """
    return name if name.strip() else json.dumps(name)


def _relations(nodes: Sequence[_Node]) -> list[Relation]:
    names = {n.entity.name for n in nodes}
    rows = [
        (seq, n.entity.name, Relation(n.entity.name, target, kind))
        for n in nodes
        for target, kind, seq in n.relations
        if target in names  # a relation whose target went elsewhere is not shown
    ]
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r for _, _, r in rows]


def _touching(relations: Sequence[Relation], names: set[str]) -> list[Relation]:
    return [r for r in relations if r.source in names or r.target in names]
