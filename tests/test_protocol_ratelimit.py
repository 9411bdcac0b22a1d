"""Token buckets per tenant: burst, refill, Retry-After, against an exact reference."""

from __future__ import annotations

import random
import threading
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore.protocol.errors import ProtocolError
from memstore.protocol.ratelimit import DEFAULT_BURST, DEFAULT_RATE_PER_SECOND, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_seed_defaults() -> None:
    assert (DEFAULT_RATE_PER_SECOND, DEFAULT_BURST) == (60.0, 120)
    limiter = RateLimiter(clock=Clock())
    assert sum(limiter.acquire("t") == 0.0 for _ in range(200)) == 120


def test_burst_then_refill_at_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=5, burst=10, clock=clock)
    assert [limiter.acquire("acme") for _ in range(10)] == [0.0] * 10
    assert limiter.acquire("acme") == pytest.approx(0.2)
    clock.now += 0.1
    assert limiter.acquire("acme") == pytest.approx(0.1)  # a refusal takes nothing
    clock.now += 0.1
    assert limiter.acquire("acme") == 0.0
    clock.now += 3600
    assert limiter.tokens("acme") == 10.0  # never more than the burst


def test_tenants_have_their_own_buckets() -> None:
    limiter = RateLimiter(rate_per_second=1, burst=1, clock=Clock())
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") > 0.0
    assert limiter.acquire("b") == 0.0


def test_check_raises_429_with_retry_after_rounded_up() -> None:
    limiter = RateLimiter(rate_per_second=0.4, burst=1, clock=Clock())
    limiter.check("acme")
    with pytest.raises(ProtocolError) as info:
        limiter.check("acme")
    err = info.value
    assert (err.status, err.code, err.headers) == (429, "rate_limited", {"Retry-After": "3"})


def test_a_clock_stepping_back_refills_nothing() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=1, burst=2, clock=clock)
    limiter.acquire("a")
    limiter.acquire("a")
    clock.now -= 50
    assert limiter.acquire("a") == pytest.approx(1.0)
    clock.now += 1
    assert limiter.acquire("a") == 0.0


@pytest.mark.parametrize(
    ("rate", "burst"),
    [(0, 1), (-1, 1), (float("inf"), 1), (float("nan"), 1), (1, 0), (1, 1.5), (1, True)],
)
def test_bad_settings(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate_per_second=rate, burst=burst)


def test_full_buckets_are_forgotten_without_changing_answers() -> None:
    """Many keys: answers equal a bucket table that forgets nothing, and it stays small."""
    clock = Clock()
    rate, burst = 50.0, 3
    limiter = RateLimiter(rate_per_second=rate, burst=burst, clock=clock)
    model: dict[str, tuple[float, float]] = {}
    rng = random.Random(7)
    for step in range(30_000):
        clock.now += rng.choice([0.0, 0.0, 0.001, 0.01])
        key = f"k{rng.randrange(200)}" if step % 3 else f"once{step}"
        tokens, since = model.get(key, (float(burst), clock.now))
        tokens = min(float(burst), tokens + max(0.0, clock.now - since) * rate)
        expected = 0.0 if tokens >= 1.0 - 1e-9 else (1.0 - tokens) / rate
        model[key] = (max(0.0, tokens - 1.0) if expected == 0.0 else tokens, clock.now)
        assert limiter.acquire(key) == expected
    assert len(limiter) < len(model) / 2


def test_threads_share_one_bucket() -> None:
    limiter = RateLimiter(rate_per_second=1, burst=50, clock=Clock())
    admitted: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(25):
            ok = limiter.acquire("acme") == 0.0
            with lock:
                admitted.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(admitted) == 50 and len(admitted) == 200


# Steps are (seconds to advance, requests); times are multiples of 1/8 s so that the
# float arithmetic is exact and the Fraction reference must agree request by request.
_STEPS = st.lists(
    st.tuples(st.integers(0, 40).map(lambda n: n / 8), st.integers(0, 6)), max_size=40
)


@settings(deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 0.5]), st.integers(1, 6), _STEPS)
def test_agrees_with_an_exact_reference(
    rate: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=rate, burst=burst, clock=clock)
    tokens, last, now = Fraction(burst), Fraction(100), Fraction(100)
    for dt, requests in steps:
        clock.now += dt
        now += Fraction(dt)
        for _ in range(requests):
            tokens = min(Fraction(burst), tokens + (now - last) * Fraction(rate))
            last = now
            wait = limiter.acquire("t")
            if tokens >= 1:
                tokens -= 1
                assert wait == 0.0
            else:
                assert wait == pytest.approx(float((1 - tokens) / Fraction(rate)))


@settings(deadline=None)
@given(
    st.floats(0.01, 1000),
    st.integers(1, 50),
    st.lists(st.floats(0, 5), min_size=1, max_size=30),
)
def test_waiting_the_time_told_is_enough(rate: float, burst: int, gaps: list[float]) -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_second=rate, burst=burst, clock=clock)
    admitted = 0
    start = clock.now
    for gap in gaps:
        clock.now += gap
        while (wait := limiter.acquire("t")) == 0.0:
            admitted += 1
        clock.now += wait
        assert limiter.acquire("t") == 0.0
        admitted += 1
    # Never more than the burst plus what the rate refilled.
    assert admitted <= burst + (clock.now - start) * rate + 1e-6 * admitted
