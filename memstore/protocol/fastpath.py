"""POST /v1/recall without the framework's routing: the plain recall, answered directly.

Most of a server's requests are plain recalls: a JSON body that is a valid
:class:`~memstore.protocol.models.RecallRequest`, no ``as_of``, no streamed
answer. For those, FastAPI's router, dependency solving, request objects and
exception middleware cost about as much CPU as the search of a confident
lexical answer. :class:`RecallFastPath`, the innermost middleware (behind the
gate's authentication, rate limit and body checks, and the failsafe), answers
them itself with the same steps the route takes: the body parsed as the
framework parses it (:func:`json.loads`, by the gate as it checked the keys,
then the strict model), the request
checked and run by the same functions, and the answer sent as the same
response class sends it (:func:`~memstore.web.responses.send_json_answer`),
so the bytes and headers are the route's own.

Anything else goes to the route untouched, its body replayed: another path
or method, a media type other than ``application/json`` (with parameters) or
none, an ``Accept`` naming ``text/event-stream``, a body that is not a valid
request (the route answers its 400 with the framework's validation message),
``as_of``. A :class:`~memstore.protocol.errors.ProtocolError` raised on the
way is answered as the application's handler answers it; any other exception
goes up to the failsafe, as it does from the route.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

from pydantic import ValidationError

from memstore.protocol.errors import ProtocolError
from memstore.protocol.gate import JSON_BODY, principal_of
from memstore.protocol.models import RecallRequest
from memstore.protocol.verbs import PreparedRecall, Verbs
from memstore.web.asgi import ASGIApp, Receive, Scope, Send
from memstore.web.body import NOT_JSON, replay_message
from memstore.web.headers import accepts
from memstore.web.responses import NewlineJSONResponse, send_json_answer

__all__ = ["RecallFastPath", "plain_recall"]


PATH: Final = "/v1/recall"
_STREAM: Final = "text/event-stream"


def plain_recall(body: bytes, parsed: Any = NOT_JSON) -> RecallRequest | None:
    """``body`` as a recall request the fast path answers, or ``None`` (the route's to answer).

    ``None`` for what is not JSON, not a valid request (the route words the
    400), or asks ``as_of`` (answered from the journal in a thread of its own).
    ``parsed``: ``body`` already parsed (by the gate), so it is not parsed again.

    >>> plain_recall(b'{"query": "deploys", "k": 3}').k, plain_recall(b'{"query": 3}')
    (3, None)
    """
    data = parsed
    if data is NOT_JSON:
        try:
            data = json.loads(body)
        except ValueError:
            return None
    if not isinstance(data, dict):
        return None
    try:
        req = RecallRequest.model_validate(data)
    except ValidationError:
        return None
    return req if req.as_of is None else None


def _takes(scope: Scope) -> bool:
    """Whether the request's line and headers are those of a plain recall."""
    if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
        return False
    if scope.get("root_path"):
        return False
    json_media = True  # no Content-Type: the gate and the framework read JSON
    for name, value in scope["headers"]:
        if name == b"accept" and accepts(value.decode("latin-1"), _STREAM):
            return False
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            json_media = json_media and media == b"application/json"
    return json_media


class RecallFastPath:
    """The middleware; see the module documentation.

    ``answer``: the route's own batched run of a prepared recall (its hits);
    ``count``: records the hits answered to a tenant (the metrics).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        verbs: Verbs,
        answer: Callable[[PreparedRecall], Awaitable[list[dict[str, Any]]]],
        count: Callable[[str, list[dict[str, Any]]], None],
    ) -> None:
        self.app = app
        self.verbs = verbs
        self.answer = answer
        self.count = count
        self.answered = 0
        """Recalls answered here (the rest went to the route)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _takes(scope):
            await self.app(scope, receive, send)
            return
        message = await receive()  # the gate has read the body whole: it replays it
        body: bytes = message.get("body", b"")
        parsed = scope.get("state", {}).get(JSON_BODY, NOT_JSON)
        req = None if message.get("more_body") else plain_recall(body, parsed)
        if req is None:
            await self.app(scope, replay_message(message, receive), send)
            return
        tenant = principal_of(scope.setdefault("state", {})).tenant
        try:
            run = self.verbs.prepare_recall(tenant, req)
            hits = await self.answer(run)
        except ProtocolError as e:
            answer = NewlineJSONResponse(e.body(), status_code=e.status, headers=e.headers)
            await answer(scope, receive, send)
            return
        self.count(tenant, hits)
        self.answered += 1
        await send_json_answer(send, hits)  # NewlineJSONResponse(hits)'s messages
