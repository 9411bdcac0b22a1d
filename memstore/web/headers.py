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
from collections.abc import Mapping
from typing import Any, Final

from memstore.web.refusal import INVALID_REQUEST, Refusal

__all__ = ["accepts", "header_values", "single_header"]

_Q_ZERO: Final = re.compile(r"\s*q\s*=\s*0(\.0{0,3})?\s*", re.IGNORECASE)


def header_values(scope: Mapping[str, Any], name: bytes) -> list[bytes]:
    """Every value of header ``name`` (lower-case bytes), in the order received."""
    return [value for key, value in scope["headers"] if key.lower() == name]


def single_header(
    scope: Mapping[str, Any], name: bytes, *, status: int = 400, code: str = INVALID_REQUEST
) -> str | None:
    """The one value of header ``name`` (latin-1 text), or None when absent.

    :raises Refusal: ``status``/``code`` (400 ``invalid_request`` by default)
        when the header appears more than once.
    """
    values = header_values(scope, name)
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
