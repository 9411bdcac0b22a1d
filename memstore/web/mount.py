"""How a server composes its surfaces: a :data:`Mount` adds routes to an app it did not build.

``memstore serve`` builds one FastAPI app (MemoryProtocol's) and then lets
other surfaces (the browser inspector, :mod:`memstore.ui`) add their routes
to it, without either importing the other. The server hands each mount the
app, the :class:`~memstore.memory.Memory` it serves, and an
:data:`Authenticate`: the server's own bearer tokens, as a function from an
``Authorization`` header value to the :class:`Caller` it acts for. A mount
therefore shares the server's tokens, Host/Origin guard, security headers
and failsafe, and knows nothing of how tokens are stored.

>>> caller = Caller("acme", frozenset({"recall"}))
>>> caller.partitions, caller.may("recall"), caller.may("forget")
(('acme',), True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["Authenticate", "Caller", "Mount"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request acts for: a tenant, the partitions it may see, what it may do.

    ``scopes`` are the server's words for what a token may do (MemoryProtocol's
    ``ingest``, ``recall``, ``forget``); ``partitions`` defaults to the tenant alone.
    """

    tenant: str
    scopes: frozenset[str]
    partitions: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.partitions:
            object.__setattr__(self, "partitions", (self.tenant,))

    def may(self, scope: str) -> bool:
        """Whether this caller holds ``scope``."""
        return scope in self.scopes


Authenticate: TypeAlias = Callable[[str | None], Caller]
"""An ``Authorization`` header value (None: absent) to its caller.

It raises :class:`~memstore.web.refusal.Refusal` (401 ``unauthorized`` for a
missing or unknown token, 429 ``rate_limited`` when the tenant's bucket is
empty) with the server's own message, which a mount shows as it is.
"""

Mount: TypeAlias = Callable[[Any, Any, Authenticate], None]
"""Adds a surface's routes to a FastAPI app (the first argument) over the
:class:`~memstore.memory.Memory` it serves (the second; typed ``Any`` here, as this
package imports neither a framework nor the engine's storage)."""
