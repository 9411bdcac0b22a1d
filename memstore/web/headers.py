"""Reading request headers from an ASGI scope, refusing the ones that must come once.

ASGI hands a request's headers over as a list of ``(name, value)`` byte
pairs, in the order received and with repeats kept. Turning that list into a
dict keeps the *last* of a repeated header: a request carrying two
``Authorization`` headers would then be judged by whichever one a proxy in
front of the server did not look at. :func:`single_header` refuses such a
request instead.

>>> scope = {"headers": [(b"host", b"x"), (b"authorization", b"Bearer a")]}
>>> single_header(scope, b"authorization"), single_header(scope, b"origin")
('Bearer a', None)
>>> single_header({"headers": [(b"authorization", b"a"), (b"authorization", b"b")]},
...               b"authorization")
Traceback (most recent call last):
...
memstore.web.refusal.Refusal: the authorization header appears 2 times; send it once
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Final

from memstore.web.refusal import INVALID_REQUEST, Refusal

__all__ = ["accepts", "header_values", "headers_named", "one_header", "single_header"]

_Q_ZERO: Final = re.compile(r"\s*q\s*=\s*0(\.0{0,3})?\s*", re.IGNORECASE)


def header_values(scope: Mapping[str, Any], name: bytes) -> list[bytes]:
    """Every value of header ``name`` (lower-case bytes), in the order received."""
    return [value for key, value in scope["headers"] if key.lower() == name]


def headers_named(scope: Mapping[str, Any], names: Collection[bytes]) -> dict[bytes, list[bytes]]:
    """Every value of each header of ``names`` (lower-case bytes) the request carries, in
    the order received, read in one pass (for :func:`one_header`).

    >>> headers_named({"headers": [(b"Host", b"x"), (b"a", b"1"), (b"A", b"2")]}, {b"a", b"b"})
    {b'a': [b'1', b'2']}
    """
    found: dict[bytes, list[bytes]] = {}
    for key, value in scope["headers"]:
        key = key.lower()
        if key in names:
            got = found.get(key)
            if got is None:
                found[key] = [value]
            else:
                got.append(value)
    return found


def single_header(
    scope: Mapping[str, Any], name: bytes, *, status: int = 400, code: str = INVALID_REQUEST
) -> str | None:
    """The one value of header ``name`` (latin-1 text), or None when absent.

    :raises Refusal: ``status``/``code`` (400 ``invalid_request`` by default)
        when the header appears more than once.
    """
    return one_header(header_values(scope, name), name, status=status, code=code)


def one_header(
    values: list[bytes] | None, name: bytes, *, status: int = 400, code: str = INVALID_REQUEST
) -> str | None:
    """:func:`single_header` of the ``values`` of header ``name`` read already
    (:func:`headers_named`; ``None``: absent).

    :raises Refusal: as :func:`single_header`.
    """
    if not values:
        return None
    if len(values) > 1:
        raise Refusal(
            status,
            code,
            f"the {name.decode('latin-1')} header appears {len(values)} times; send it once",
        )
    return values[0].decode("latin-1")


def accepts(accept: str | None, media: str) -> bool:
    """Whether an ``Accept`` header value names ``media`` (a lower-case ``type/subtype``).

    Media types are case-insensitive (RFC 9110, 8.3.1); an entry with ``q=0``
    says "not this". Repeated ``Accept`` headers mean the same as one joined by
    commas. Ranges (``text/*``) are not matched: the caller asks for one type.

    >>> accepts("TEXT/EVENT-STREAM", "text/event-stream")
    True
    >>> accepts("application/json, text/event-stream;q=0", "text/event-stream")
    False
    """
    for entry in (accept or "").split(","):
        kind, *params = entry.split(";")
        if kind.strip().lower() == media and not any(_Q_ZERO.fullmatch(p) for p in params):
            return True
    return False
