"""What a request to ``/mcp`` passes before the SDK sees it, each refusal a JSON-RPC error.

The SDK's streamable HTTP transport (1.30) refuses a foreign ``Host`` or
``Origin`` and a wrong ``Content-Type`` with a plain-text body, answers a
body that is not UTF-8 or nests too deep with a 500, takes
``{"id": true, "method": "ping"}`` for a notification (202, dropped), and
gives its own errors the made-up id ``"server-error"``. :func:`gate` answers
all of these as the MCP specification and JSON-RPC 2.0 ask, before the
request reaches the SDK:

1. the SDK's own checks (the same settings: its Content-Type check, the
   Host and Origin being :class:`~memstore.web.guard.HostOriginGuard`'s in
   front of the endpoint), their status kept, the body a JSON-RPC error with
   ``id`` ``null`` (code :data:`TRANSPORT_ERROR`);
2. for a POST, a ``Content-Encoding`` other than ``identity`` refused (415,
   ``Accept-Encoding: identity``: the SDK reads the body as the bytes sent,
   so a gzip body would be a parse error and a ``br`` label on plain JSON
   ignored), then the body read to at most ``max_body_bytes``
   (``--max-body``, default :data:`MAX_BODY_BYTES`; 413 as soon as it is
   larger: it is never held whole);
3. the body through :func:`~memstore.mcp.framing.frame`: a parse error or an
   invalid request is a 400, an unknown method or bad params a 200 carrying
   -32601 or -32602, a notification the server cannot use a 202 (dropped).

What passes goes on to the SDK with its body replayed; :func:`null_error_ids`
rewrites the id of any error the SDK still answers itself (an unknown
session, a missing ``Accept``) to ``null``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from mcp import types
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from memstore.web.body import ClientDisconnected, check_identity_encoding, read_body, replay
from memstore.web.headers import single_header
from memstore.web.refusal import Refusal

from .framing import error_reply, frame
from .limits import MAX_BODY_BYTES

__all__ = [
    "MAX_BODY_BYTES",
    "TRANSPORT_ERROR",
    "gate",
    "null_error_ids",
    "refusal_response",
    "refuse",
    "render_refusal",
]

TRANSPORT_ERROR: Final = -32000
"""The JSON-RPC code of a refusal by the transport (headers, size), as the TypeScript SDK's."""
_SDK_PLACEHOLDER_ID: Final = "server-error"


def _ascii_json(body: dict[str, Any]) -> bytes:
    """ASCII JSON: a message quoting a lone surrogate cannot break the answer."""
    return json.dumps(body, separators=(",", ":")).encode("ascii")


async def _answer(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    body: dict[str, Any] | None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Answer ``body`` (a JSON-RPC error) with ``status``; no body at all for ``None``."""
    if body is None:
        response = Response(status_code=status, headers=headers)
    else:
        response = Response(_ascii_json(body), status, headers, media_type="application/json")
    await response(scope, receive, send)


async def refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Refuse a ``/mcp`` request with ``status`` and ``headers``, the body a JSON-RPC error.

    The body is ``{"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": ...}}``
    (:data:`TRANSPORT_ERROR`): a request refused before its body is read has no id
    to answer with. For the refusals of the endpoint itself: an unknown method
    (405 with ``Allow``), a GET without ``Mcp-Session-Id`` (405, ``Allow`` without
    GET), a missing or unknown token (401 with ``WWW-Authenticate``), a repeated
    ``Authorization`` header (400).
    """
    await _answer(scope, receive, send, status, error_reply(TRANSPORT_ERROR, message), headers)


def refusal_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """:func:`refuse`'s answer as a response, for a Starlette exception handler.

    >>> r = refusal_response(404, "Not Found: no route /x")
    >>> r.status_code, json.loads(r.body)["error"]
    (404, {'code': -32000, 'message': 'Not Found: no route /x'})
    """
    body = _ascii_json(error_reply(TRANSPORT_ERROR, message))
    return Response(body, status, headers, media_type="application/json")


def render_refusal(refusal: Refusal) -> bytes:
    """A refusal of the server plumbing as a JSON-RPC error body (``id`` ``null``).

    The ``render`` of ``/mcp``'s :class:`~memstore.web.runner.ServeConfig`: the
    503 of a request cut off by the shutdown and of a connection over the caps,
    the 408 of a header that trickles, the 431 of headers too large.

    >>> from memstore.web.shutdown import SHUTDOWN_REFUSAL
    >>> json.loads(render_refusal(SHUTDOWN_REFUSAL))["error"]["message"]
    'the server is shutting down and did not finish this request; send it again'
    """
    return _ascii_json(error_reply(TRANSPORT_ERROR, refusal.message))


async def gate(
    scope: Scope,
    receive: Receive,
    send: Send,
    security: TransportSecuritySettings,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Receive | None:
    """Check one ``/mcp`` request; the ``receive`` to hand the SDK, or ``None`` once answered.

    ``max_body_bytes``: the largest POST body (``--max-body``); a larger one is 413.
    """
    request = Request(scope, receive)
    is_post = request.method == "POST"
    refused = await TransportSecurityMiddleware(security).validate_request(request, is_post)
    if refused is not None:
        reason = bytes(refused.body).decode("utf-8", "replace") or "refused"
        body = error_reply(TRANSPORT_ERROR, reason)
        await _answer(scope, receive, send, refused.status_code, body)
        return None
    if not is_post:
        return receive
    try:
        check_identity_encoding(single_header(scope, b"content-encoding"))
        raw = await read_body(receive, max_body_bytes, request.headers.get("content-length"))
    except ClientDisconnected:
        return None
    except Refusal as r:
        body = error_reply(TRANSPORT_ERROR, r.message)
        await _answer(scope, receive, send, r.status, body, r.headers)
        return None
    framed = frame(raw)
    if framed.error is not None:
        code = framed.error["error"]["code"]
        # A well-formed request is answered (200), even when its answer is an error.
        status = 400 if code in (types.PARSE_ERROR, types.INVALID_REQUEST) else 200
        await _answer(scope, receive, send, status, framed.error)
        return None
    if framed.message is None:  # a notification nobody can use: accepted, dropped
        await _answer(scope, receive, send, 202, None)
        return None
    return replay(raw, receive)


def null_error_ids(send: Send) -> Send:
    """``send``, with the SDK's placeholder id ``"server-error"`` in an error body made ``null``.

    JSON-RPC gives an error whose request id could not be read the id
    ``null``; a client matching answers to requests by id must not find a
    request called ``"server-error"``. Only a 4xx/5xx answered in one piece
    is looked at; anything else passes untouched.
    """
    held: list[Message] = []

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
            held.append(message)
            return
        if held and message["type"] == "http.response.body":
            start = held.pop()
            body = message.get("body", b"")
            if not message.get("more_body", False):
                fixed = _nulled(body)
                if fixed is not None:
                    start = dict(start)
                    start["headers"] = [
                        (k, str(len(fixed)).encode() if k.lower() == b"content-length" else v)
                        for k, v in start.get("headers", [])
                    ]
                    message = dict(message, body=fixed)
            await send(start)
        await send(message)

    return sending


def _nulled(body: bytes) -> bytes | None:
    """``body`` with its placeholder id made ``null``, or ``None`` when it has none."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("id") != _SDK_PLACEHOLDER_ID:
        return None
    value["id"] = None
    return json.dumps(value, separators=(",", ":")).encode()
