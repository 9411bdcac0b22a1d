"""Request bodies: the media type, a bounded read, and a JSON text check before parsing.

:func:`read_body` reads a whole body from ASGI ``receive`` and refuses it
(413) as soon as it is larger than the limit, whatever ``Content-Length``
claimed. :func:`check_json_text` then refuses (400 ``invalid_request``) a body
that no JSON parser should be handed: bytes that are not UTF-8, or arrays and
objects nested deeper than a limit (a thousand ``[`` make Python's parser
raise ``RecursionError``, and the structures that do parse are walked
recursively by everything that handles them later).

>>> check_json_text(b'{"a": [1, {"b": "[[[["}]}', max_depth=3)
>>> check_json_text(b"[[[[1]]]]", max_depth=3)
Traceback (most recent call last):
...
memstore.web.refusal.Refusal: the body nests JSON arrays and objects 4 levels deep; the limit is 3
>>> check_json_text(b'{"q": "\\xff"}', max_depth=3)
Traceback (most recent call last):
...
memstore.web.refusal.Refusal: the body is not UTF-8 text: invalid start byte at byte 7
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Final

import numpy as np

from memstore.web.asgi import Message, Receive
from memstore.web.refusal import (
    INVALID_REQUEST,
    PAYLOAD_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    Refusal,
)

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "NOT_JSON",
    "ClientDisconnected",
    "RepeatedKey",
    "check_identity_encoding",
    "check_json_media",
    "check_json_text",
    "is_json_media",
    "json_depth",
    "parse_unique_keys",
    "read_body",
    "replay",
    "replay_message",
    "too_many_digits",
    "unique_pairs",
]

DEFAULT_MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of JSON arrays and objects :func:`check_json_text` accepts by default."""


# A JSON string, unrolled so that the regex engine never backtracks: '"', runs of
# ordinary characters, each escape with the run after it, '"'.
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_OPEN: Final = (ord("["), ord("{"))


class ClientDisconnected(Exception):
    """The client went away before the whole body arrived (nothing is to be answered)."""


def is_json_media(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is JSON: ``application/json``, ``application/*+json``, or absent.

    No header at all is read as JSON: ``curl --data-binary`` and many small
    clients send none, and a JSON API has nothing else to read a body as.

    >>> is_json_media("application/json; charset=utf-8"), is_json_media(None)
    (True, True)
    >>> is_json_media("application/merge-patch+json"), is_json_media("text/plain")
    (True, False)
    """
    if content_type is None:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def check_json_media(content_type: str | None) -> None:
    """Pass for a JSON media type (:func:`is_json_media`).

    :raises Refusal: 415 ``unsupported_media_type`` naming the type sent.
    """
    if not is_json_media(content_type):
        raise Refusal(
            415,
            UNSUPPORTED_MEDIA_TYPE,
            f"Content-Type {(content_type or '')[:80]!r} is not application/json",
        )


def check_identity_encoding(content_encoding: str | None) -> None:
    """Pass for a body sent as it is: no ``Content-Encoding``, or ``identity``.

    The body is read as the bytes that came; a compressed one would be read
    as text it is not (a gzip body refused as "not UTF-8", or a body that
    claims ``br`` but is plain JSON served as if the header were not there).
    RFC 9110 (15.5.16) answers an unsupported content coding with 415 and
    ``Accept-Encoding`` naming what is accepted.

    >>> check_identity_encoding(None), check_identity_encoding("Identity")
    (None, None)
    >>> check_identity_encoding("gzip")
    Traceback (most recent call last):
    ...
    memstore.web.refusal.Refusal: Content-Encoding 'gzip' is not supported: send it uncompressed
    """
    if content_encoding is None:
        return
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    if all(c in ("", "identity") for c in codings):
        return
    raise Refusal(
        415,
        UNSUPPORTED_MEDIA_TYPE,
        f"Content-Encoding {content_encoding[:40]!r} is not supported: send it uncompressed",
        headers={"Accept-Encoding": "identity"},
    )


def _too_large(size: int, limit: int) -> Refusal:
    return Refusal(
        413,
        PAYLOAD_TOO_LARGE,
        f"request body is {size} bytes; the limit is {limit}",
        {"limit": limit, "size": size},
    )


async def read_body(receive: Receive, limit: int, content_length: str | None = None) -> bytes:
    """The whole body of an ASGI HTTP request, at most ``limit`` bytes.

    A ``Content-Length`` over the limit is refused before anything is read.

    :raises Refusal: 413 ``payload_too_large`` (``details``: ``size``, ``limit``).
    :raises ClientDisconnected: the client disconnected (or the server closed a
        connection whose body was too slow) before the body was complete.
    """
    declared = (content_length or "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnected
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def replay(body: bytes, receive: Receive) -> Receive:
    """An ASGI ``receive`` that hands out ``body`` whole, then defers to ``receive``."""
    return replay_message({"type": "http.request", "body": body, "more_body": False}, receive)


def replay_message(message: Message, receive: Receive) -> Receive:
    """An ASGI ``receive`` that hands out ``message`` (already received) again, then
    defers to ``receive``: a middleware that read a request's first message can pass
    the request on as it came."""
    replayed = False

    async def again() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return message
        return await receive()

    return again


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``raw``: O(len(raw)) in C.

    Strings are cut out first (their brackets are text), then what is left of
    the brackets is summed up as +1/-1 with numpy. Meant for well-formed or
    nearly well-formed text; for text that is not JSON the answer is only a
    bound worth checking.

    >>> json_depth(b'[1, [2, {"a": "]]]"}]]'), json_depth(b'"x"'), json_depth(b"{}")
    (3, 0, 1)
    """
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == _OPEN[0]) | (codes == _OPEN[1]), 1, -1)
    return int(np.cumsum(steps).max())


def check_json_text(raw: bytes, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> None:
    """Pass for a body that is UTF-8 and nests at most ``max_depth`` levels.

    Syntax is left to the parser that runs next (it says where the text
    breaks); this refuses only what would make a parser fail in ways that
    are not syntax errors. Cheap: a body with at most ``max_depth`` brackets
    is not scanned at all.

    :raises Refusal: 400 ``invalid_request`` saying which.
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refusal(
            400, INVALID_REQUEST, f"the body is not UTF-8 text: {e.reason} at byte {e.start}"
        ) from None
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return
    depth = json_depth(raw)
    if depth > max_depth:
        raise Refusal(
            400,
            INVALID_REQUEST,
            f"the body nests JSON arrays and objects {depth} levels deep; the limit is {max_depth}",
            {"depth": depth, "limit": max_depth},
        )


class RepeatedKey(ValueError):
    """An object names ``key`` twice (raised by :func:`unique_pairs`)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key[:64]!r} is named twice in one object; send it once")
        self.key = key


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A ``json.loads`` ``object_pairs_hook`` that refuses a key named twice in one object.

    Every surface that parses JSON itself (a stdio line, a body read before a
    framework sees it) passes it, so that ``{"k": 1, "k": 100}`` is one refusal
    everywhere, not the last value on one surface and the first on a proxy.

    >>> json.loads('{"k": 1, "k": 100}', object_pairs_hook=unique_pairs)
    Traceback (most recent call last):
    ...
    memstore.web.body.RepeatedKey: the key 'k' is named twice in one object; send it once

    :raises RepeatedKey: naming the key.
    """
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return out


def too_many_digits(what: str = "the body") -> str:
    """The words for valid JSON holding an integer Python will not convert.

    ``json.loads`` raises a plain ``ValueError`` for an integer of more than
    ``sys.get_int_max_str_digits()`` digits (4300), whose text names Python's
    internals (``use sys.set_int_max_str_digits()``); a client can act on this
    instead. ``what`` names what held it (a stdio line is not a body).

    >>> too_many_digits("the line").split(",")[0]
    'the line holds a number of more than 4300 digits'
    """
    return (
        f"{what} holds a number of more than {sys.get_int_max_str_digits()} digits, "
        "which this server does not read; send it as a string"
    )


NOT_JSON: Final = object()
"""What :func:`parse_unique_keys` returns for a body that is not JSON."""
_UNIQUE_KEYS: Final = json.JSONDecoder(object_pairs_hook=unique_pairs)


def parse_unique_keys(raw: bytes) -> Any:
    """``raw`` parsed, refusing an object that names a key twice; :data:`NOT_JSON` if not JSON.

    JSON parsers keep the last of two equal keys silently, others the first:
    ``{"k": 1, "k": 100}`` read by a proxy that checks the first and a server
    that acts on the last is two different requests. Refusing it leaves one.
    A key spelled with escapes is the key it decodes to. Syntax is left to the
    parser that runs next (it says where the text breaks); the value returned
    spares that parser the work when it can take it.

    >>> parse_unique_keys(b'{"a": {"k": 1}, "b": {"k": 2}}')
    {'a': {'k': 1}, 'b': {'k': 2}}
    >>> parse_unique_keys(b'{"k": 1, "\\\\u006b": 100}')
    Traceback (most recent call last):
    ...
    memstore.web.refusal.Refusal: the body names the key 'k' twice in one object; send it once
    >>> parse_unique_keys(b"{broken") is NOT_JSON
    True

    :raises Refusal: 400 ``invalid_request`` naming the key (``details.key``), or
        saying that a number has more digits than Python reads (before, the
        framework's 400 said only "There was an error parsing the body").
    """
    try:
        # json.loads(raw, object_pairs_hook=unique_pairs), step by step: json.loads
        # builds a new decoder for each call given a hook; this one is made once.
        return _UNIQUE_KEYS.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except RepeatedKey as e:
        raise Refusal(
            400,
            INVALID_REQUEST,
            f"the body names the key {e.key[:64]!r} twice in one object; send it once",
            {"key": e.key[:64]},
        ) from None
    except json.JSONDecodeError:
        return NOT_JSON
    except ValueError:  # valid JSON Python refuses to read: an integer of too many digits
        raise Refusal(400, INVALID_REQUEST, too_many_digits()) from None
    except RecursionError:
        return NOT_JSON
