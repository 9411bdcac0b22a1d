"""The ASGI interface's types, named once for the HTTP layer and the adapters on it.

An ASGI application is a coroutine function ``app(scope, receive, send)``: ``scope``
describes the connection (type, method, path, headers...), ``receive()`` gives the
next message from the client (a body chunk, a disconnect), ``send(message)`` hands
one to the server (the response's start, its body). Every message is a mapping with
a ``"type"``. These are the same shapes as ``starlette.types``; memstore's own layer
names them here so that it needs no web framework to be imported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
