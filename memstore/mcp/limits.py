"""The bounds of ``memstore mcp``'s HTTP transport that the command line needs too.

A module of its own, importing nothing: ``memstore mcp --help`` shows the
default of ``--max-body`` without the MCP SDK installed.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_BODY_BYTES"]

MAX_BODY_BYTES: Final = 4 * 1024 * 1024
"""The largest POST body read unless ``--max-body`` says (the SDK's own default limit)."""
