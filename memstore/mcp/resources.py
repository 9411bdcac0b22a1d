"""Resources: memories a client can attach without a tool call.

Native mode: ``memory://recent`` (the newest memories, as JSON) and the
template ``memory://item/{id}`` (one memory in full). Compatibility mode:
``memory://knowledge-graph``, the whole graph, as the reference serves it.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mcp import types
from pydantic import AnyUrl

from memstore.errors import ItemNotFoundError
from memstore.memory import Memory
from memstore.search import default_visible
from memstore.tags import PARTITION_ALL

from .graph import KnowledgeGraph
from .shapes import memory_of
from .toolkit import Caller, ToolError

__all__ = [
    "ITEM_PREFIX",
    "RECENT_LIMIT",
    "RECENT_URI",
    "Resources",
    "compat_resources",
    "native_resources",
]

RECENT_URI: Final = "memory://recent"
ITEM_PREFIX: Final = "memory://item/"
RECENT_LIMIT: Final = 20
"""How many memories ``memory://recent`` holds."""
_JSON: Final = "application/json"


@dataclass(frozen=True)
class Resources:
    """What a server lists and how it reads a URI."""

    listed: list[types.Resource]
    templates: list[types.ResourceTemplate]
    read: Callable[[str, Caller], str]
    """The JSON text of a URI (a :class:`~memstore.errors.MemstoreError` if it names nothing)."""


def _dumps(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def native_resources(memory: Memory) -> Resources:
    """``memory://recent`` and ``memory://item/{id}`` over ``memory``."""

    def read(uri: str, caller: Caller) -> str:
        part = caller.partition if caller.partition is not None else PARTITION_ALL
        if uri == RECENT_URI:
            items = memory.recent(RECENT_LIMIT, partition=part)
            return _dumps({"items": [memory_of(it).model_dump(mode="json") for it in items]})
        if uri.startswith(ITEM_PREFIX):
            # A URI carries non-ASCII (and reserved) characters as %XX: the SDK
            # parses every URI so, and clients expand the template so.
            id = urllib.parse.unquote(uri[len(ITEM_PREFIX) :])
            item = memory.get(id)
            if item is None or not default_visible(item, part):
                raise ItemNotFoundError(id)
            return _dumps(memory_of(item).model_dump(mode="json"))
        raise ToolError(f"no resource {uri!r}; read {RECENT_URI} or {ITEM_PREFIX}{{id}}")

    return Resources(
        listed=[
            types.Resource(
                uri=AnyUrl(RECENT_URI),
                name="recent",
                title="Recent memories",
                description=f"The {RECENT_LIMIT} newest memories, newest first",
                mimeType=_JSON,
            )
        ],
        templates=[
            types.ResourceTemplate(
                uriTemplate=ITEM_PREFIX + "{id}",
                name="item",
                title="A memory",
                description="One memory in full, by id",
                mimeType=_JSON,
            )
        ],
        read=read,
    )


def compat_resources(memory: Memory) -> Resources:
    """The reference's ``memory://knowledge-graph`` over ``memory``."""
    from .compat import GRAPH_RESOURCE, graph_json

    def read(uri: str, caller: Caller) -> str:
        if uri != GRAPH_RESOURCE:
            raise ToolError(f"no resource {uri!r}; read {GRAPH_RESOURCE}")
        return graph_json(*KnowledgeGraph(memory, caller.partition).read())

    return Resources(
        listed=[
            types.Resource(
                uri=AnyUrl(GRAPH_RESOURCE),
                name="knowledge-graph",
                title="Knowledge Graph",
                description="The full knowledge graph with all entities and relations",
                mimeType=_JSON,
            )
        ],
        templates=[],
        read=read,
    )
