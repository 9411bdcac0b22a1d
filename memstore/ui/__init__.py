"""The browser memory inspector: a page served by ``memstore serve`` at ``/ui``.

Plain HTML, CSS and ES modules shipped in the package (``memstore/ui/static``;
no CDN, no build step, no network at run time) and the small JSON API the page
needs besides MemoryProtocol: search over every kind with explanations, an item
with its history, links and related items, "as of" views, statistics, forget
(:mod:`memstore.ui.api`, shaped by :mod:`memstore.ui.views`). Live changes come
from the server's own ``/v1/events``.

This package talks to :class:`~memstore.Memory` alone: the server hands
:func:`install` its app, its memory and its token check
(:data:`~memstore.web.mount.Authenticate`). See ``docs/ui.md``. Needs the
``server`` extra (FastAPI) to install routes; importing it does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstore.memory import Memory
    from memstore.web.mount import Authenticate

__all__ = ["install"]


def install(app: Any, memory: Memory, authenticate: Authenticate) -> None:
    """Add the inspector to a FastAPI ``app``: see :func:`memstore.ui.api.install`."""
    from memstore.ui.api import install as install_api

    install_api(app, memory, authenticate)
