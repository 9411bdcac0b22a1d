"""Token-bucket rate limiting per key (every HTTP surface's key is the tenant).

Each key owns a bucket holding up to ``burst`` tokens, refilled continuously
at ``rate_per_second`` and full at first sight. A request takes one token;
with none left it is refused and told how long until one is there. The clock
is injectable, so tests move time instead of sleeping:

>>> now = [0.0]
>>> limiter = RateLimiter(rate_per_second=2, burst=3, clock=lambda: now[0])
>>> [limiter.acquire("acme") for _ in range(4)]
[0.0, 0.0, 0.0, 0.5]
>>> now[0] = 0.5
>>> limiter.acquire("acme"), limiter.acquire("acme")
(0.0, 0.5)
>>> limiter.acquire("other")
0.0
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["DEFAULT_BURST", "DEFAULT_RATE_PER_SECOND", "RateLimiter", "retry_after_seconds"]

DEFAULT_RATE_PER_SECOND: Final = 60.0
"""The default refill rate per tenant (``--rate-per-second``; MemoryProtocol's seed's)."""
DEFAULT_BURST: Final = 120
"""The default bucket size per tenant (``--rate-burst``; MemoryProtocol's seed's)."""
_PRUNE_AT: Final = 4096
"""Past this many tracked keys, full buckets (the same as untracked ones) are dropped.

The threshold then doubles past what is left, so pruning stays amortised O(1)."""
_EPSILON: Final = 1e-9
"""Slack for float refill arithmetic: waiting exactly the time told is always enough."""


class RateLimiter:
    """Token buckets by key; thread-safe; O(1) per request (amortised pruning).

    :param rate_per_second: tokens added per second, a positive finite number.
    :param burst: bucket size, at least 1: how many requests may arrive at once.
    :param clock: seconds from a monotonic clock (``time.monotonic`` by default).
    """

    def __init__(
        self,
        rate_per_second: float = DEFAULT_RATE_PER_SECOND,
        burst: int = DEFAULT_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (math.isfinite(rate_per_second) and rate_per_second > 0):
            raise ValueError(f"rate_per_second must be a positive number, got {rate_per_second}")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an integer of at least 1, got {burst!r}")
        self.rate_per_second = float(rate_per_second)
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, as of)
        self._prune_at = _PRUNE_AT

    def acquire(self, key: str) -> float:
        """Take a token from ``key``'s bucket: ``0.0`` if one was there, else the wait.

        A refused request takes nothing; the wait (in seconds, > 0) is how long
        until the bucket holds a whole token again.
        """
        with self._lock:
            now = self._clock()
            tokens = self._tokens(key, now)
            if tokens >= 1.0 - _EPSILON:
                self._buckets[key] = (max(0.0, tokens - 1.0), now)
                if len(self._buckets) > self._prune_at:
                    self._prune(now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate_per_second

    def tokens(self, key: str) -> float:
        """How many tokens ``key``'s bucket holds now (a full bucket if never seen)."""
        with self._lock:
            return self._tokens(key, self._clock())

    def _tokens(self, key: str, now: float) -> float:
        state = self._buckets.get(key)
        if state is None:
            return float(self.burst)
        tokens, since = state
        elapsed = max(0.0, now - since)  # a clock that steps back refills nothing
        return min(float(self.burst), tokens + elapsed * self.rate_per_second)

    def _prune(self, now: float) -> None:
        full = [k for k in self._buckets if self._tokens(k, now) >= self.burst]
        for key in full:
            del self._buckets[key]
        self._prune_at = max(_PRUNE_AT, 2 * len(self._buckets))

    def __len__(self) -> int:
        """How many keys are tracked (full buckets may be forgotten)."""
        return len(self._buckets)


def retry_after_seconds(wait: float) -> int:
    """The ``Retry-After`` of a refusal after :meth:`RateLimiter.acquire` said ``wait``.

    Whole seconds (HTTP's delta-seconds are integers), rounded up so that a
    client waiting exactly that long finds a token, and at least 1.

    >>> retry_after_seconds(0.01), retry_after_seconds(2.0), retry_after_seconds(2.5)
    (1, 2, 3)
    """
    if math.isnan(wait):
        raise ValueError("retry-after seconds must be a number")
    return max(1, math.ceil(wait))
