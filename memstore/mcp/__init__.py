"""``memstore mcp``: memstore as a Model Context Protocol server, for every MCP client.

Coding agents and chat clients attach memory over MCP. This package serves a
:class:`~memstore.memory.Memory` over the official Python SDK (the ``mcp``
package, extra ``memstore-engine[mcp]``), on stdio or streamable HTTP:

- native tools (:mod:`memstore.mcp.native`): ``remember``, ``recall``,
  ``get_memory``, ``update_memory``, ``forget``, ``link``, ``related``,
  ``history``, ``recent``, and the resources ``memory://recent`` and
  ``memory://item/{id}``;
- ``--compat knowledge-graph`` (:mod:`memstore.mcp.compat`): the nine tools
  of the reference ``@modelcontextprotocol/server-memory``, answering as it
  does, on a durable journal and hybrid search;
- :mod:`memstore.mcp.importer`: ``memstore import --format mcp-memory``
  migrates the reference server's ``memory.jsonl``.

The package talks to :class:`~memstore.memory.Memory` alone and adds no
storage rules; every tool is a translation. See ``docs/mcp.md``.
"""

from __future__ import annotations

__all__ = ["INSTALL_HINT", "SDK_RANGE"]

SDK_RANGE = "mcp>=1.26,<2"
"""The SDK versions this package is tested with (the ``mcp`` extra pins the same)."""
INSTALL_HINT = 'pip install "memstore-engine[mcp]"'
"""How to get the SDK when it is missing."""
