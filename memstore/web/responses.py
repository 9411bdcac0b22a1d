"""JSON answers that end with a newline, so a ``curl`` session reads cleanly.

>>> NewlineJSONResponse({"ok": True}).body
b'{"ok":true}\\n'

:func:`send_json_answer` sends the same answer without building a response
object: the two ASGI messages :class:`NewlineJSONResponse` sends for a 200
with no headers of its own, for a hot path that answers many requests a
second (the recall fast path).
"""

from __future__ import annotations

from typing import Any, Final

from starlette.responses import JSONResponse

from memstore.web.asgi import Send
from memstore.web.refusal import json_bytes

__all__ = ["NewlineJSONResponse", "send_json_answer"]


_JSON_TYPE: Final = (b"content-type", b"application/json")


class NewlineJSONResponse(JSONResponse):
    """Starlette's JSON response, rendered by :func:`~memstore.web.refusal.json_bytes`."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


async def send_json_answer(send: Send, content: Any) -> None:
    """Answer ``content`` on ASGI ``send`` as ``NewlineJSONResponse(content)`` answers an
    HTTP request: status 200, its ``content-length`` then ``content-type`` headers (in
    Starlette's order), then the body, in the same two messages.

    Cheaper by the response object it does not build (its header list is made
    from the media type and the body's length on every answer);
    ``tests/test_protocol_recall_answer.py`` holds the messages to the class's.
    """
    body = json_bytes(content)
    headers = [(b"content-length", b"%d" % len(body)), _JSON_TYPE]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
