"""An unexpected exception: logged once, answered 500, and the connection kept.

Starlette's outermost middleware answers an exception that no handler took
with a 500 and then *re-raises* it, so that the server logs it a second time
and closes the connection: a keep-alive client's next request on that
connection fails with a reset. :class:`Failsafe`, placed inside the
application's own middleware, ends the story where it starts: one log
record with the traceback, the surface's 500 body, and the connection
stays usable. An exception after the response has started cannot be
answered any more; it is re-raised, and the server closes the connection
(the client sees a truncated answer, which it must).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from memstore.web.refusal import Refusal, RenderRefusal, refusal_body, send_refusal

__all__ = ["Failsafe"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Failsafe:
    """The middleware; see the module documentation.

    :param error: the 500 to answer (its message should name no internals).
    :param logger: where the one record goes.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        error: Refusal,
        logger: logging.Logger,
        render: RenderRefusal = refusal_body,
    ) -> None:
        self.app = app
        self.error = error
        self.logger = logger
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception:
            if started:
                raise
            self.logger.exception("memstore: %s %s failed", scope.get("method"), scope.get("path"))
            await send_refusal(self.error, send, self.render)
