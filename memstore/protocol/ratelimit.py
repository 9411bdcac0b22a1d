"""MemoryProtocol's rate limiting: the shared token buckets, refusing with 429 ``rate_limited``.

The buckets are :mod:`memstore.web.ratelimit`'s (every HTTP surface limits
its tenants with them: ``memstore mcp --transport http`` too); this adds
:meth:`RateLimiter.check`, which raises the protocol's own error:

>>> from memstore.protocol.errors import ProtocolError
>>> now = [0.0]
>>> limiter = RateLimiter(rate_per_second=2, burst=1, clock=lambda: now[0])
>>> limiter.check("acme")
>>> try:
...     limiter.check("acme")
... except ProtocolError as e:
...     print(e.status, e.code, e.headers)
429 rate_limited {'Retry-After': '1'}
"""

from __future__ import annotations

from memstore.protocol.errors import rate_limited
from memstore.web.ratelimit import DEFAULT_BURST, DEFAULT_RATE_PER_SECOND
from memstore.web.ratelimit import RateLimiter as _Buckets

__all__ = ["DEFAULT_BURST", "DEFAULT_RATE_PER_SECOND", "RateLimiter"]


class RateLimiter(_Buckets):
    """Token buckets by key (``acquire``, ``tokens``: the web layer's) and ``check``, the 429.

    ``acquire(key)`` (the wait, ``0.0`` when a token was taken) and ``tokens(key)``
    are :class:`memstore.web.ratelimit.RateLimiter`'s, every HTTP surface's buckets.

    :param rate_per_second: tokens added per second, a positive finite number.
    :param burst: bucket size, at least 1: how many requests may arrive at once.
    :param clock: seconds from a monotonic clock (``time.monotonic`` by default).
    """

    def check(self, key: str) -> None:
        """Take a token or raise the 429 ``rate_limited`` error with its Retry-After.

        :raises ProtocolError: 429, ``Retry-After`` in whole seconds, rounded up.
        """
        wait = self.acquire(key)
        if wait > 0.0:
            raise rate_limited(wait)
