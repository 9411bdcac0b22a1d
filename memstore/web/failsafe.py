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

from memstore.web.asgi import ASGIApp, Receive, Scope, Send
from memstore.web.refusal import Refusal, RenderRefusal, refusal_body, send_refusal
from memstore.web.started import StartWatch

__all__ = ["Failsafe"]


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
        watched = StartWatch(send)
        try:
            await self.app(scope, receive, watched)
        except Exception:
            if watched.started:
                raise
            self.logger.exception("memstore: %s %s failed", scope.get("method"), scope.get("path"))
            await send_refusal(self.error, send, self.render)
