"""The gate's one-pass header read against :func:`single_header`, header by header."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstore.web.headers import headers_named, one_header, single_header
from memstore.web.refusal import Refusal

_NAMES = [b"authorization", b"content-type", b"content-encoding", b"content-length"]
_SPELLINGS = st.sampled_from(
    [*_NAMES, b"Authorization", b"CONTENT-TYPE", b"Content-Length", b"host", b"accept", b"x"]
)


def _answer(read: object) -> tuple[str, object]:
    try:
        return "value", read() if callable(read) else read
    except Refusal as r:
        return "refused", (r.status, r.code, str(r))


@given(st.lists(st.tuples(_SPELLINGS, st.binary(max_size=6)), max_size=8))
def test_headers_named_then_one_header_answers_as_single_header(
    headers: list[tuple[bytes, bytes]],
) -> None:
    """Each name's value, or the refusal of a repeated one (its wording too), as a
    separate scan of the headers for that name gives."""
    scope = {"headers": headers}
    found = headers_named(scope, frozenset(_NAMES))
    assert set(found) <= set(_NAMES)
    for name in _NAMES:
        got = _answer(lambda name=name: one_header(found.get(name), name))
        assert got == _answer(lambda name=name: single_header(scope, name))


def test_a_repeated_header_is_refused_with_the_status_asked() -> None:
    scope = {"headers": [(b"authorization", b"a"), (b"Authorization", b"b")]}
    found = headers_named(scope, {b"authorization"})
    with pytest.raises(Refusal) as e:
        one_header(found.get(b"authorization"), b"authorization", status=401, code="x")
    assert (e.value.status, e.value.code) == (401, "x")
