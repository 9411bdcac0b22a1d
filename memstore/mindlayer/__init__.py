"""The Mind Layer REST API (seed 002) on the memstore engine: ``memstore serve --api mindlayer``.

A Mind Layer client switches by changing nothing but the URL: the routes,
bodies, limits and status codes are seed 002's REST section. Underneath,
each agent/user scope is a memstore partition, each memory an item, and
search is memstore's (typo-tolerant lexical ranking, an HNSW vector index,
its hybrid fusion and rerank). See ``docs/mindlayer.md``.

One concept per module:

| module | concept |
|---|---|
| :mod:`memstore.mindlayer.limits` | the API's bounds |
| :mod:`memstore.mindlayer.errors` | the error taxonomy and body |
| :mod:`memstore.mindlayer.scope` | scopes as partitions, memories as items |
| :mod:`memstore.mindlayer.models` | strict request parsing |
| :mod:`memstore.mindlayer.provider` | the optional OpenAI-compatible provider |
| :mod:`memstore.mindlayer.service` | :class:`MindLayer`: the operations, in Python |
| :mod:`memstore.mindlayer.auth` | the owner token |
| :mod:`memstore.mindlayer.app` | the ASGI application (routes, gate, shared plumbing) |
| :mod:`memstore.mindlayer.server` | ``memstore serve --api mindlayer`` start-up |

This package talks to :class:`memstore.Memory` only; importing it imports
no web framework (:mod:`~memstore.mindlayer.app` and
:mod:`~memstore.mindlayer.server` need the ``server`` extra).
"""

from __future__ import annotations

from memstore.mindlayer.scope import Scope
from memstore.mindlayer.service import MindLayer

__all__ = ["MindLayer", "Scope"]
