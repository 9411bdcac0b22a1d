"""Bearer tokens in the ``Authorization`` header: the one reading every surface shares.

``memstore serve``, ``memstore mcp`` and the inspector all authenticate a
request by the token after ``Bearer``; they read the header here, so a header
one accepts the others accept too.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["B64TOKEN", "MAX_TOKEN_CHARS", "bearer_token"]

MAX_TOKEN_CHARS: Final = 512
"""Longest token accepted, in a tokens file or in a header."""

B64TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750 ``b64token``: what may follow ``Bearer`` in an ``Authorization`` header."""


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization`` header value ``Bearer <token>``, or None.

    The scheme is case-insensitive (RFC 7235), spaces around the token are
    ignored, and the token must be an RFC 6750 ``b64token`` of at most
    :data:`MAX_TOKEN_CHARS` characters. Anything else (another scheme, no
    token, two words) is None.

    >>> bearer_token("Bearer tok-1"), bearer_token("bearer  tok-1 "), bearer_token("BEARER a=")
    ('tok-1', 'tok-1', 'a=')
    >>> bearer_token("Basic dTpw"), bearer_token("Bearer"), bearer_token("Bearer a b")
    (None, None, None)
    """
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    token = credentials.strip(" ")
    if scheme.lower() != "bearer" or len(token) > MAX_TOKEN_CHARS:
        return None
    return token if B64TOKEN.fullmatch(token) else None
