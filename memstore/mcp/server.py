"""The MCP server: tools and resources on the SDK's low-level ``Server``.

:func:`build_server` wires a :class:`~memstore.mcp.toolkit.Toolbox` and
:class:`~memstore.mcp.resources.Resources` into an ``mcp.server.lowlevel.Server``.
Input validation is ours (the argument models, with messages that say what to
send), not the SDK's schema check, so that argument aliases work and a bad
call gets a tool error rather than a protocol error. Who calls (partition,
scopes) comes from ``caller_of``: fixed for stdio, from the bearer token over HTTP.

A resource that does not exist (an unknown URI, an id the caller's partition
cannot see) answers the JSON-RPC error :data:`RESOURCE_NOT_FOUND` with the
URI in its ``data``, as MCP's SEP-2164 settles it. Reading a resource needs
the ``recall`` scope, as the read tools do (else -32600, invalid request).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from memstore import __version__
from memstore.errors import MemstoreError
from memstore.memory import Memory

from .compat import compat_tools
from .native import native_tools
from .resources import Resources, compat_resources, native_resources
from .toolkit import SCOPE_READ, Caller, Toolbox

__all__ = [
    "COMPAT_MODES",
    "RESOURCE_NOT_FOUND",
    "SERVER_NAME",
    "Surface",
    "build_server",
    "surface",
]

SERVER_NAME: Final = "memstore"
COMPAT_MODES: Final = ("knowledge-graph",)
"""What ``--compat`` accepts."""
RESOURCE_NOT_FOUND: Final = types.INVALID_PARAMS
"""The JSON-RPC code of a ``resources/read`` for a URI that names nothing.

-32602 (invalid params), as SEP-2164 standardised it and the TypeScript SDK
answers; the older spec text's -32002 sits in the range JSON-RPC leaves to
implementations. The installed SDK defines no code of its own for it.
"""

_INSTRUCTIONS: Final = (
    "Long-term memory. Call recall before answering questions that may depend on what "
    "you learned earlier; call remember for durable facts, decisions and preferences "
    "(one self-contained statement each). Results are bounded by max_chars."
)


class Surface:
    """The tools and resources one server offers."""

    def __init__(self, toolbox: Toolbox, resources: Resources, instructions: str) -> None:
        self.toolbox = toolbox
        self.resources = resources
        self.instructions = instructions


def surface(memory: Memory, *, compat: str | None = None, readonly_reason: str = "") -> Surface:
    """The native tools, or the ``compat`` mode's, over ``memory``."""
    if compat is None:
        return Surface(
            Toolbox(native_tools(memory), readonly_reason), native_resources(memory), _INSTRUCTIONS
        )
    if compat == "knowledge-graph":
        return Surface(Toolbox(compat_tools(memory), readonly_reason), compat_resources(memory), "")
    raise ValueError(f"--compat {compat!r}: the modes are {', '.join(COMPAT_MODES)}")


def build_server(s: Surface, caller_of: Callable[[], Caller]) -> Server[Any, Any]:
    """An SDK server offering ``s``; ``caller_of`` tells who the current request is from."""
    server: Server[Any, Any] = Server(
        SERVER_NAME, version=__version__, instructions=s.instructions or None
    )

    @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
    async def _tools() -> list[types.Tool]:
        return s.toolbox.describe()

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def _call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await s.toolbox.call(name, arguments, caller_of())

    @server.list_resources()  # type: ignore[no-untyped-call,untyped-decorator]
    async def _resources() -> list[types.Resource]:
        return s.resources.listed

    @server.list_resource_templates()  # type: ignore[no-untyped-call,untyped-decorator]
    async def _templates() -> list[types.ResourceTemplate]:
        return s.resources.templates

    @server.read_resource()  # type: ignore[no-untyped-call,untyped-decorator]
    async def _read(uri: AnyUrl) -> list[ReadResourceContents]:
        caller = caller_of()
        if not caller.may(SCOPE_READ):  # a resource is a read, as recall is
            raise McpError(
                types.ErrorData(
                    code=types.INVALID_REQUEST,
                    message=f"reading resources needs a token with the {SCOPE_READ!r} scope",
                    data={"uri": str(uri)},
                )
            )
        try:
            text = await anyio.to_thread.run_sync(s.resources.read, str(uri), caller)
        except MemstoreError as e:  # an unknown URI or id: the client's mistake, said so
            raise _not_found(str(uri), e) from None
        return [ReadResourceContents(content=text, mime_type="application/json")]

    return server


def _not_found(uri: str, why: MemstoreError) -> McpError:
    """The protocol error for a resource that does not exist, naming ``uri`` in its data."""
    return McpError(types.ErrorData(code=RESOURCE_NOT_FOUND, message=str(why), data={"uri": uri}))
