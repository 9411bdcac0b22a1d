"""Migrating from the reference server: ``memstore import --format mcp-memory memory.jsonl``.

The reference ``@modelcontextprotocol/server-memory`` keeps one JSON object a
line: ``{"type": "entity", "name", "entityType", "observations"}`` and
``{"type": "relation", "from", "to", "relationType"}``. The importer reads the
whole file first and refuses it, naming the line, if any line is not one of
those (the reference skips such lines silently; a migration must not lose
them), if a text in it is not valid Unicode (a lone surrogate), if an entity
name or a relation type is empty or only whitespace (the graph tools refuse
such a name), or if a relation names an entity the file does not hold. Then it
writes everything in one transaction: all of it is kept, or nothing.
Entities already in the graph gain the observations they lack; relations
already there are not doubled.

>>> import io
>>> from memstore import Memory
>>> lines = io.StringIO(
...     '{"type": "entity", "name": "Alice", "entityType": "person", '
...     '"observations": ["likes tea"]}\\n'
...     '{"type": "entity", "name": "Acme", "entityType": "company", "observations": []}\\n'
...     '{"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"}\\n')
>>> with Memory(embedder=None) as mem:
...     import_graph(mem, lines)
GraphImport(entities=2, observations=1, relations=1)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

from memstore.arguments import has_lone_surrogate
from memstore.errors import InvalidItemError, MemstoreError
from memstore.journal.exportfile import BOM
from memstore.memory import Memory
from memstore.transaction import transaction

from .graph import NOT_BLANK, Entity, KnowledgeGraph, Relation, blank

__all__ = ["GraphImport", "GraphImportError", "import_graph", "read_graph_lines"]


class GraphImportError(MemstoreError, ValueError):
    """The file cannot be imported; the message names the line. Nothing was written."""


@dataclass(frozen=True)
class GraphImport:
    """What an import added."""

    entities: int
    observations: int
    relations: int


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _unicode(n: int, fields: Iterable[tuple[str, str]]) -> None:
    """Refuse line ``n`` if a field holds a lone surrogate (JSON may carry ``"\\ud800"``).

    No entity can be stored under such a name (its id is a hash of the UTF-8
    text), so the write would fail with Python's own encoding error; the
    MCP tools refuse such an argument the same way (:mod:`memstore.mcp.compat`).
    """
    for field, text in fields:
        if has_lone_surrogate(text):
            raise GraphImportError(
                f"line {n}: {field} is not valid Unicode text (it holds a lone surrogate); "
                "nothing was imported"
            )


def _named(n: int, fields: Iterable[tuple[str, str]]) -> None:
    """Refuse line ``n`` if an entity name or a relation type is empty or only whitespace.

    The graph tools refuse such a name (:func:`~memstore.mcp.graph.blank`), so
    an entity imported under one could be read but never named by a tool.
    """
    for field, text in fields:
        if blank(text):
            raise GraphImportError(f"line {n}: {field} {NOT_BLANK}; nothing was imported")


def read_graph_lines(lines: Iterable[str]) -> tuple[list[Entity], list[Relation]]:
    """Parse a reference ``memory.jsonl``; a :class:`GraphImportError` names a bad line.

    Entities with the same name are joined (observations in order, once each).
    A byte-order mark opening the first line (a file an editor saved as "UTF-8
    with BOM", opened with ``encoding="utf-8"``) is skipped, as
    ``encoding="utf-8-sig"`` would.
    """
    entities, _, relations = _parse(lines)
    return entities, [r for _, r in relations]


def _parse(
    lines: Iterable[str],
) -> tuple[list[Entity], dict[str, list[int]], list[tuple[int, Relation]]]:
    """:func:`read_graph_lines`, with the lines of each entity and relation (to name them)."""
    entities: dict[str, Entity] = {}
    where: dict[str, list[int]] = {}
    relations: list[tuple[int, Relation]] = []
    for n, line in enumerate(lines, 1):
        if n == 1:
            line = line.removeprefix(BOM)
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise GraphImportError(f"line {n}: not JSON ({e}); nothing was imported") from None
        except RecursionError:  # a graph line nests two levels: deeper is no graph
            raise GraphImportError(
                f"line {n}: JSON nested too deeply for a graph; nothing was imported"
            ) from None
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == "entity":
            name, etype, obs = rec.get("name"), rec.get("entityType"), rec.get("observations")
            if not isinstance(name, str) or not isinstance(etype, str) or not _strings(obs):
                raise GraphImportError(
                    f"line {n}: an entity needs name and entityType (text) and observations "
                    "(a list of text); nothing was imported"
                )
            _unicode(n, [("name", name), ("entityType", etype)])
            _named(n, [("name", name)])
            _unicode(n, [(f"observations.{i}", o) for i, o in enumerate(obs)])
            have = entities.get(name)
            joined = list(dict.fromkeys([*(have.observations if have else ()), *obs]))
            entities[name] = Entity(name, have.entityType if have else etype, tuple(joined))
            where.setdefault(name, []).append(n)
        elif kind == "relation":
            ends = (rec.get("from"), rec.get("to"), rec.get("relationType"))
            if not all(isinstance(v, str) for v in ends):
                raise GraphImportError(
                    f"line {n}: a relation needs from, to and relationType (text); "
                    "nothing was imported"
                )
            _unicode(n, zip(("from", "to", "relationType"), ends, strict=True))
            _named(n, zip(("from", "to", "relationType"), ends, strict=True))
            relations.append((n, Relation(*ends)))
        else:
            export = isinstance(rec, dict) and str(rec.get("format", "")).startswith(
                "memstore-journal-export/"
            )
            hint = " (it is a memstore export: import it without --format mcp-memory)"
            raise GraphImportError(
                f'line {n}: expected an object with "type": "entity" or "relation"; '
                f"nothing was imported{hint if export else ''}"
            )
    for n, r in relations:
        for end in (r.source, r.target):
            if end not in entities:
                raise GraphImportError(
                    f"line {n}: relation names entity {end!r}, which the file does not hold; "
                    "nothing was imported"
                )
    return list(entities.values()), where, relations


def _lines(ns: list[int]) -> str:
    """Where an entity is in the file: ``line 3``, or ``line 3 (joined with lines 7, 9)``."""
    more = ", ".join(map(str, ns[1:6])) + (", ..." if len(ns) > 6 else "")
    return f"line {ns[0]}" + (f" (joined with lines {more})" if more else "")


def _shown(name: str) -> str:
    """An entity's name quoted for a message, a long one cut (the refusal may be its length)."""
    return repr(name) if len(name) <= 60 else repr(name[:60]) + f"... ({len(name)} characters)"


def _relation_refused(
    graph: KnowledgeGraph, relations: list[tuple[int, Relation]]
) -> InvalidItemError | None:
    """Which relation the engine refuses, named with its line; ``None`` if none is.

    Called once :meth:`KnowledgeGraph.create_relations` refused the whole
    list (its step undone): the relations of one source are kept on the
    source's item, so the engine refuses a source whose item would outgrow
    a limit (its ``data``), not a line. Each source's relations are written
    again, one source a step; in the first source refused, one relation a
    step, in file order: the one refused is the line that crossed the limit.
    The caller's transaction undoes these writes. One step a source, the
    import's failure path only.
    """
    by_source: dict[str, list[tuple[int, Relation]]] = {}
    for n, r in relations:
        by_source.setdefault(r.source, []).append((n, r))
    for group in by_source.values():
        try:
            graph.create_relations([r for _, r in group])
            continue
        except InvalidItemError:
            pass  # that step was undone: find the line within the group
        for n, r in group:
            try:
                graph.create_relations([r])
            except InvalidItemError as err:
                shown = f"{_shown(r.source)} -> {_shown(r.target)} ({_shown(r.relationType)})"
                return InvalidItemError(f"line {n}: relation {shown}: {err.reason}")
    return None


def import_graph(memory: Memory, fp: IO[str], partition: str | None = None) -> GraphImport:
    """Import a reference ``memory.jsonl`` into ``memory``'s graph, all or nothing.

    A file that cannot be read as a graph raises :class:`GraphImportError`; an
    entity the engine refuses to store (an observation past the content limit)
    raises :class:`~memstore.errors.InvalidItemError` naming its line and
    name before the engine's reason, ``line 3: entity 'Ada': content is ...``
    (``line 3 (joined with lines 7)`` when lines with one name were joined).
    A relation the engine refuses (an entity's relations are kept on its
    item, whose ``data`` has a limit) is named the same way, with its ends
    and type: ``line 9: relation 'Ada' -> 'Acme' ('works_at'): data holds ...``.
    Either way nothing was written.
    """
    entities, where, relations = _parse(fp)
    graph = KnowledgeGraph(memory, partition)
    made: list[Entity] = []
    added: list[tuple[str, list[str]]] = []
    with transaction(memory):
        for e in entities:  # one at a time, to name the entity a write refuses
            try:
                made += graph.create_entities([e])
                added += graph.add_observations([(e.name, e.observations)])
            except InvalidItemError as err:
                raise InvalidItemError(
                    f"{_lines(where[e.name])}: entity {_shown(e.name)}: {err.reason}"
                ) from None
        try:
            linked = graph.create_relations([r for _, r in relations])
        except InvalidItemError as err:
            raise (_relation_refused(graph, relations) or err) from None
    observations = sum(len(e.observations) for e in made) + sum(len(a) for _, a in added)
    return GraphImport(len(made), observations, len(linked))
