"""``--compat knowledge-graph``: a drop-in for ``@modelcontextprotocol/server-memory``.

The reference server's nine tools, with its names, argument shapes, result
shapes and messages (``src/memory/index.ts`` of ``modelcontextprotocol/servers``),
over :class:`~memstore.mcp.graph.KnowledgeGraph`. Two documented differences:

- ``search_nodes`` returns every entity the reference's substring rule finds
  (in graph order, as the reference does), then the hybrid search's matches
  the substring misses (paraphrases, typos), best first;
- ``read_graph`` and ``search_nodes`` accept ``offset`` and ``limit``; with
  either, the answer is a page of entities with ``total`` and ``nextOffset``
  (``read_graph``'s page carries the relations starting at its entities, so
  each relation is on exactly one page). Without them the answer is the
  reference's.

Unknown argument fields are ignored, as the reference's schemas strip them.
One difference on purpose: an entity name (``name``, ``from``, ``to``,
``entityName``, ``entityNames``, ``names``) or a ``relationType`` that is
empty or only whitespace is refused with a tool error naming the argument,
and the call changes nothing (the reference takes any text); the input
schemas say ``minLength: 1`` for each of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memstore.arguments import has_lone_surrogate
from memstore.bounded import check
from memstore.limits import MAX_RESULTS
from memstore.memory import Memory
from memstore.tags import PARTITION_ALL

from .arguments import Whole
from .graph import ENTITY_KIND, NOT_BLANK, Entity, KnowledgeGraph, Relation, blank
from .toolkit import SCOPE_FORGET, SCOPE_WRITE, Caller, ToolSpec

__all__ = ["GRAPH_RESOURCE", "SEARCH_EXTRAS", "SEARCH_QUERY_MAX_LENGTH", "compat_tools"]

SEARCH_QUERY_MAX_LENGTH: Final = 2048
"""The reference's bound on a ``search_nodes`` query."""
SEARCH_EXTRAS: Final = 10
"""How many hybrid-only matches ``search_nodes`` adds after the substring matches."""
GRAPH_RESOURCE: Final = "memory://knowledge-graph"
"""The reference's resource: the whole graph as JSON."""


class _In(BaseModel):
    """Unknown keys ignored, as the reference's schemas strip them; types strict, as it checks them.

    The reference refuses a number where text goes and text where a number goes;
    so does memstore, where pydantic's lax mode would read ``"5"`` or ``true``
    as the ``limit`` 5 or 1.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True, strict=True)


def _unicode(text: str) -> str:
    """``text``, refused when it holds a lone surrogate.

    JSON can carry one (``"\\udce9"``), but no entity can be stored under it, and
    an answer echoing it cannot be written as UTF-8 (the SDK then sends nothing).

    >>> _unicode("Alice")
    'Alice'
    """
    if has_lone_surrogate(text):
        raise ValueError("not valid Unicode text (it holds a lone surrogate)")
    return text


def _named(text: str) -> str:
    """``text``, refused when it is empty or only whitespace (:func:`~memstore.mcp.graph.blank`).

    >>> _named("Alice")
    'Alice'
    """
    if blank(text):
        raise ValueError(NOT_BLANK)
    return text


_Text = Annotated[str, AfterValidator(_unicode)]
"""An entity type or an observation of the graph: any string of valid Unicode."""
_Name = Annotated[
    str, AfterValidator(_unicode), AfterValidator(_named), Field(json_schema_extra={"minLength": 1})
]
"""An entity name or a relation type: valid Unicode, not empty, not only whitespace.

One message for ``""`` and ``" "`` alike (the validator's, not pydantic's
``min_length``), while the schema says ``minLength: 1`` to a client."""


class EntityIn(_In):
    name: _Name = Field(description="The name of the entity")
    entityType: _Text = Field(description="The type of the entity")
    observations: list[_Text] = Field(
        description="An array of observation contents associated with the entity"
    )


class RelationIn(_In):
    source: _Name = Field(
        alias="from", description="The name of the entity where the relation starts"
    )
    target: _Name = Field(alias="to", description="The name of the entity where the relation ends")
    relationType: _Name = Field(description="The type of the relation")


class EntityOut(BaseModel):
    name: str
    entityType: str
    observations: list[str]


class RelationOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    relationType: str


class CreateEntitiesArgs(_In):
    entities: list[EntityIn]


class CreateRelationsArgs(_In):
    relations: list[RelationIn]


class ObservationsIn(_In):
    entityName: _Name = Field(description="The name of the entity to add the observations to")
    contents: list[_Text] = Field(description="An array of observation contents to add")


class AddObservationsArgs(_In):
    observations: list[ObservationsIn]


class DeleteEntitiesArgs(_In):
    entityNames: list[_Name] = Field(description="An array of entity names to delete")


class DeletionIn(_In):
    entityName: _Name = Field(description="The name of the entity containing the observations")
    observations: list[_Text] = Field(description="An array of observations to delete")


class DeleteObservationsArgs(_In):
    deletions: list[DeletionIn]


class DeleteRelationsArgs(_In):
    relations: list[RelationIn] = Field(description="An array of relations to delete")


_Offset = Annotated[
    Whole, AfterValidator(check("offset", 0)), Field(json_schema_extra={"minimum": 0})
]
_Limit = Annotated[
    Whole,
    AfterValidator(check("limit", 1, MAX_RESULTS)),
    Field(json_schema_extra={"minimum": 1, "maximum": MAX_RESULTS}),
]
"""A page of ``read_graph`` or ``search_nodes``: the engine's rule (:mod:`memstore.bounded`)."""


class _Page(_In):
    offset: _Offset | None = Field(
        default=None, description="Extension: skip this many entities (pagination)."
    )
    limit: _Limit | None = Field(
        default=None,
        description=f"Extension: at most this many entities (1 to {MAX_RESULTS}).",
    )


class ReadGraphArgs(_Page):
    pass


class SearchNodesArgs(_Page):
    query: str = Field(
        max_length=SEARCH_QUERY_MAX_LENGTH,
        description=(
            "The search query to match against entity names, types, and observation content"
        ),
    )


class OpenNodesArgs(_In):
    names: list[_Name] = Field(description="An array of entity names to retrieve")


class EntitiesOut(BaseModel):
    entities: list[EntityOut]


class RelationsOut(BaseModel):
    relations: list[RelationOut]


class AddedOut(BaseModel):
    entityName: str
    addedObservations: list[str]


class ResultsOut(BaseModel):
    results: list[AddedOut]


class MessageOut(BaseModel):
    success: bool
    message: str


class GraphOut(BaseModel):
    entities: list[EntityOut]
    relations: list[RelationOut]
    total: int | None = Field(default=None, description="Extension: entities in all pages.")
    nextOffset: int | None = Field(
        default=None, description="Extension: the offset of the next page, or null at the end."
    )


def _entity_out(e: Entity) -> EntityOut:
    return EntityOut(name=e.name, entityType=e.entityType, observations=list(e.observations))


def _relation_out(r: Relation) -> RelationOut:
    return RelationOut(source=r.source, target=r.target, relationType=r.relationType)


def _graph(entities: Sequence[Entity], relations: Sequence[Relation]) -> GraphOut:
    return GraphOut(
        entities=[_entity_out(e) for e in entities], relations=[_relation_out(r) for r in relations]
    )


def graph_json(entities: Sequence[Entity], relations: Sequence[Relation]) -> str:
    """The graph as the reference prints it (``JSON.stringify(graph, null, 2)``)."""
    return _json(
        {"entities": [e.to_json() for e in entities], "relations": [r.to_json() for r in relations]}
    )


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


class _Compat:
    """The handlers: one graph per caller partition."""

    def __init__(self, memory: Memory) -> None:
        self.mem = memory
        self._graphs: dict[str | None, KnowledgeGraph] = {}

    def graph(self, caller: Caller) -> KnowledgeGraph:
        g = self._graphs.get(caller.partition)
        if g is None:
            g = self._graphs.setdefault(
                caller.partition, KnowledgeGraph(self.mem, caller.partition)
            )
        return g

    def create_entities(self, a: CreateEntitiesArgs, c: Caller) -> EntitiesOut:
        made = self.graph(c).create_entities(
            Entity(e.name, e.entityType, tuple(e.observations)) for e in a.entities
        )
        return EntitiesOut(entities=[_entity_out(e) for e in made])

    def create_relations(self, a: CreateRelationsArgs, c: Caller) -> RelationsOut:
        made = self.graph(c).create_relations(
            Relation(r.source, r.target, r.relationType) for r in a.relations
        )
        return RelationsOut(relations=[_relation_out(r) for r in made])

    def add_observations(self, a: AddObservationsArgs, c: Caller) -> ResultsOut:
        done = self.graph(c).add_observations((o.entityName, o.contents) for o in a.observations)
        return ResultsOut(
            results=[AddedOut(entityName=n, addedObservations=added) for n, added in done]
        )

    def delete_entities(self, a: DeleteEntitiesArgs, c: Caller) -> MessageOut:
        deleted, missing = self.graph(c).delete_entities(a.entityNames)
        if not missing:
            message = "Entities deleted successfully"
        else:
            message = (
                f"Deleted {len(deleted)} of {len(a.entityNames)} entities. "
                f"Not found: {', '.join(missing)}"
            )
        return MessageOut(success=True, message=message)

    def delete_observations(self, a: DeleteObservationsArgs, c: Caller) -> MessageOut:
        count, missing = self.graph(c).delete_observations(
            (d.entityName, d.observations) for d in a.deletions
        )
        requested = sum(len(d.observations) for d in a.deletions)
        if count == requested:
            message = "Observations deleted successfully"
        else:
            message = f"Deleted {count} of {requested} observations." + (
                f" Entities not found: {', '.join(missing)}" if missing else ""
            )
        return MessageOut(success=True, message=message)

    def delete_relations(self, a: DeleteRelationsArgs, c: Caller) -> MessageOut:
        count = self.graph(c).delete_relations(
            Relation(r.source, r.target, r.relationType) for r in a.relations
        )
        if count == len(a.relations):
            message = "Relations deleted successfully"
        else:
            message = f"Deleted {count} of {len(a.relations)} relations. The rest matched nothing."
        return MessageOut(success=True, message=message)

    def read_graph(self, a: ReadGraphArgs, c: Caller) -> GraphOut:
        entities, relations = self.graph(c).read()
        if a.offset is None and a.limit is None:
            return _graph(entities, relations)
        return _paged(entities, relations, a, _from)

    def search_nodes(self, a: SearchNodesArgs, c: Caller) -> GraphOut:
        g = self.graph(c)
        found, relations = g.substring_matches(a.query)
        names = {e.name for e in found}
        if a.query.strip():  # a fixed number of extras: every page slices one answer
            part = PARTITION_ALL if c.partition is None else c.partition
            hits = self.mem.search(a.query, partition=part, kind=ENTITY_KIND, limit=SEARCH_EXTRAS)
            for hit in hits:
                e = g.entity_of_item(hit.item)
                if e is not None and e.name not in names and hit.item.id == _id(g, e):
                    names.add(e.name)
                    found.append(e)
        if a.offset is None and a.limit is None:
            return _graph(found, [r for r in relations if _touches(r, names)])
        return _paged(found, relations, a, _touches)

    def open_nodes(self, a: OpenNodesArgs, c: Caller) -> GraphOut:
        return _graph(*self.graph(c).open(a.names))


def _id(g: KnowledgeGraph, e: Entity) -> str:
    from .graph import entity_id

    return entity_id(e.name, g.partition)


def _paged(
    entities: Sequence[Entity],
    relations: Sequence[Relation],
    a: _Page,
    keep: Callable[[Relation, set[str]], bool],
) -> GraphOut:
    """The page of ``entities`` that ``a`` asks for, and the ``relations`` that go with it.

    ``keep(relation, names)`` says whether a relation goes with the page whose
    entities are ``names``. The answer carries the extensions ``total`` (all
    entities) and ``nextOffset`` (``None`` on the last page).
    """
    start = a.offset or 0
    end = len(entities) if a.limit is None else start + a.limit
    page = list(entities[start:end])
    names = {e.name for e in page}
    out = _graph(page, [r for r in relations if keep(r, names)])
    out.total, out.nextOffset = len(entities), end if end < len(entities) else None
    return out


def _from(r: Relation, names: set[str]) -> bool:
    """``read_graph``'s rule: a relation goes with the entity it starts from."""
    return r.source in names


def _touches(r: Relation, names: set[str]) -> bool:
    """``search_nodes``'s rule: a relation goes with either of its entities."""
    return r.source in names or r.target in names


def _graph_text(r: GraphOut) -> str:
    data = r.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return _json(data)


def compat_tools(memory: Memory) -> list[ToolSpec[Any, Any]]:
    """The reference server's nine tools over ``memory``, in its order."""
    h = _Compat(memory)
    spec: Callable[..., ToolSpec[Any, Any]] = ToolSpec
    w, f = SCOPE_WRITE, SCOPE_FORGET
    return [
        spec(
            "create_entities",
            "Create Entities",
            "Create multiple new entities in the knowledge graph",
            CreateEntitiesArgs,
            EntitiesOut,
            h.create_entities,
            lambda r: _json(r.model_dump(mode="json")["entities"]),
            scope=w,
        ),
        spec(
            "create_relations",
            "Create Relations",
            "Create multiple new relations between entities in the knowledge graph. "
            "Relations should be in active voice",
            CreateRelationsArgs,
            RelationsOut,
            h.create_relations,
            lambda r: _json(r.model_dump(mode="json", by_alias=True)["relations"]),
            scope=w,
        ),
        spec(
            "add_observations",
            "Add Observations",
            "Add new observations to existing entities in the knowledge graph",
            AddObservationsArgs,
            ResultsOut,
            h.add_observations,
            lambda r: _json(r.model_dump(mode="json")["results"]),
            scope=w,
        ),
        spec(
            "delete_entities",
            "Delete Entities",
            "Delete multiple entities and their associated relations from the knowledge graph",
            DeleteEntitiesArgs,
            MessageOut,
            h.delete_entities,
            lambda r: r.message,
            scope=f,
            idempotent=True,
            destructive=True,
        ),
        spec(
            "delete_observations",
            "Delete Observations",
            "Delete specific observations from entities in the knowledge graph",
            DeleteObservationsArgs,
            MessageOut,
            h.delete_observations,
            lambda r: r.message,
            scope=f,
            idempotent=True,
            destructive=True,
        ),
        spec(
            "delete_relations",
            "Delete Relations",
            "Delete multiple relations from the knowledge graph",
            DeleteRelationsArgs,
            MessageOut,
            h.delete_relations,
            lambda r: r.message,
            scope=f,
            idempotent=True,
            destructive=True,
        ),
        spec(
            "read_graph",
            "Read Graph",
            "Read the entire knowledge graph (offset/limit: one page of entities)",
            ReadGraphArgs,
            GraphOut,
            h.read_graph,
            _graph_text,
            idempotent=True,
        ),
        spec(
            "search_nodes",
            "Search Nodes",
            "Search for nodes in the knowledge graph based on a query",
            SearchNodesArgs,
            GraphOut,
            h.search_nodes,
            _graph_text,
            idempotent=True,
        ),
        spec(
            "open_nodes",
            "Open Nodes",
            "Open specific nodes in the knowledge graph by their names",
            OpenNodesArgs,
            GraphOut,
            h.open_nodes,
            _graph_text,
            idempotent=True,
        ),
    ]
