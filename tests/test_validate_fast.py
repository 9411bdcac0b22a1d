"""The size checks' fast path says exactly what the slow path says.

:func:`memstore.validate._size_rejection` returns ``""`` at once for the
common item (ASCII text, short tags, no references, links or data) and hands
everything else to :func:`~memstore.validate._size_rejection_slow`. Whatever
the item holds (text at and past every bound, non-ASCII and lone surrogates,
fields of the wrong type assigned after construction), both give the same
answer, or fail with the same exception type.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import validate as v
from memstore.item import Item, ThoughtLink
from memstore.limits import MAX_EVENT_DATE_CHARS, MAX_SUBJECT_CHARS, MAX_TAG_CHARS
from memstore.vocabulary import Vocabulary

_CHARS = st.sampled_from(["a", "Z", "0", " ", ",", "é", "漢", "😀", "\ud800", "\0"])


def _text(bound: int) -> st.SearchStrategy[str]:
    """Text short, or right around ``bound`` characters."""
    sizes = st.one_of(st.integers(0, 6), st.integers(bound - 2, bound + 2))
    return st.builds(
        lambda n, c, tail: (c * n)[: max(0, n - len(tail))] + tail,
        sizes,
        _CHARS,
        st.text(_CHARS, max_size=3),
    )


_ODD = st.sampled_from([None, 0, 1, (), ("a",), "", "ab", b"x", {}, {"k": "v"}, frozenset()])


def _maybe_odd(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strategy, strategy, strategy, _ODD)


_ASCII = st.sampled_from(["a", "Z", "0", " ", ",", "\0"])


def _ascii_text(bound: int) -> st.SearchStrategy[str]:
    """ASCII text short, or right around ``bound`` characters."""
    sizes = st.sampled_from([0, 1, 5, bound - 1, bound, bound + 1])
    return st.builds(lambda n, c: c * n, sizes, _ASCII)


_FIELDS = ["id", "kind", "title", "content", "subject", "event_date", "tags"]
_FIELDS += ["supersedes", "evidence_refs", "links", "data"]


# The strategies are built once, here, not on every draw: building one costs
# more than drawing from it (Hypothesis validates each new strategy), and the
# same strategies draw the same items.
_COMMON_ID = st.text(_ASCII, max_size=4)
_COMMON_TITLE = st.text(_ASCII, max_size=5)
_COMMON_SUBJECT = _ascii_text(MAX_SUBJECT_CHARS)
_COMMON_EVENT_DATE = _ascii_text(MAX_EVENT_DATE_CHARS)
_TAG_CHARS = st.sampled_from(["a", ",", "\0", "a", ",", "é", "\ud800"])


def _common_tags(count: int) -> st.SearchStrategy[list[tuple[str, int]]]:
    """``count`` tags near the bound, or whose lengths add up to near it."""
    bound = MAX_TAG_CHARS // max(count, 1)
    sizes = st.sampled_from([0, 1, bound - 1, bound, bound + 1])
    return st.lists(st.tuples(_TAG_CHARS, sizes), min_size=count, max_size=count)


_COMMON_TAGS = {count: _common_tags(count) for count in range(5)}
_OFF_FIELD = st.sampled_from([None, None, None, None, None, None, *_FIELDS])
_OFF_VALUE = st.one_of(_ODD, st.sampled_from(["\ud800", "é", ["\ud800"], ["é"]]))


@st.composite
def common_items(draw: st.DrawFn) -> Item:
    """Items the fast path may take: ASCII text of the declared types, lengths at the bounds."""
    it = Item(kind="note", title="t")
    d = it.__dict__
    d["id"] = draw(_COMMON_ID)
    d["title"] = draw(_COMMON_TITLE)
    d["content"] = draw(_COMMON_TITLE)
    d["subject"] = draw(_COMMON_SUBJECT)
    d["event_date"] = draw(_COMMON_EVENT_DATE)
    # One tag near the bound, or a few whose lengths add up to near it.
    count = draw(st.integers(0, 4))
    d["tags"] = [c * n for c, n in draw(_COMMON_TAGS[count])]
    # Now and then one field steps off the fast path's ground.
    field = draw(_OFF_FIELD)
    if field is not None:
        d[field] = draw(_OFF_VALUE)
    return it


_COMMON = common_items()
_ID = _maybe_odd(st.text(_CHARS, max_size=4))
_KIND = _maybe_odd(st.sampled_from(["note", "nøte", "k\ud800"]))
_TITLE = _maybe_odd(st.text(_CHARS, max_size=5))
_SUBJECT = _maybe_odd(_text(MAX_SUBJECT_CHARS))
_EVENT_DATE = _maybe_odd(_text(MAX_EVENT_DATE_CHARS))
_TAGS = _maybe_odd(
    st.one_of(
        st.lists(
            st.one_of(_text(MAX_TAG_CHARS), _text(MAX_TAG_CHARS // 2), _text(MAX_TAG_CHARS // 4)),
            max_size=5,
        ),
        st.lists(_maybe_odd(st.just("t")), max_size=3),
    )
)
_REFS = _maybe_odd(st.lists(st.text(_CHARS, max_size=3), max_size=2))
_LINKS = _maybe_odd(
    st.lists(
        st.builds(
            lambda t: ThoughtLink(to_id=t, relation="explains"),
            st.text(_CHARS, min_size=1, max_size=3),
        ),
        max_size=2,
    )
)
_DATA = _maybe_odd(
    st.dictionaries(st.text(_CHARS, max_size=3), st.text(_CHARS, max_size=3), max_size=2)
)


@st.composite
def items(draw: st.DrawFn) -> Item:
    if draw(st.booleans()):
        return draw(_COMMON)
    it = Item(kind="note", title="t")
    d = it.__dict__
    d["id"] = draw(_ID)
    d["kind"] = draw(_KIND)
    d["title"] = draw(_TITLE)
    d["content"] = draw(_TITLE)
    d["subject"] = draw(_SUBJECT)
    d["event_date"] = draw(_EVENT_DATE)
    d["tags"] = draw(_TAGS)
    d["supersedes"] = draw(_REFS)
    d["evidence_refs"] = draw(_REFS)
    d["links"] = draw(_LINKS)
    d["data"] = draw(_DATA)
    return it


def _outcome(fn: Any, *args: Any) -> object:
    try:
        return fn(*args)
    except Exception as e:  # the same failure, by type
        return type(e)


@settings(max_examples=1500, deadline=None)
@given(items())
def test_fast_size_checks_agree_with_the_slow_ones(item: Item) -> None:
    assert _outcome(v._size_rejection, item) == _outcome(v._size_rejection_slow, item)


@settings(max_examples=1500, deadline=None)
@given(common_items())
def test_fast_size_checks_agree_on_items_near_the_bounds(item: Item) -> None:
    assert _outcome(v._size_rejection, item) == _outcome(v._size_rejection_slow, item)


@settings(max_examples=500, deadline=None)
@given(items())
def test_validate_base_agrees_with_the_slow_size_checks(item: Item) -> None:
    vocab = Vocabulary()
    fast = _outcome(v.validate_base, vocab, item)
    patched = v._size_rejection
    v._size_rejection = v._size_rejection_slow  # type: ignore[assignment]
    try:
        slow = _outcome(v.validate_base, vocab, item)
    finally:
        v._size_rejection = patched  # type: ignore[assignment]
    assert fast == slow


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("subject", "s" * (MAX_SUBJECT_CHARS + 1), "subject is"),
        ("event_date", "2" * (MAX_EVENT_DATE_CHARS + 1), "event_date is"),
        ("tags", ["t" * (MAX_TAG_CHARS + 1)], "tag 'ttt"),
        ("tags", ["ok", "t" * (MAX_TAG_CHARS + 1)], "tag 'ttt"),
        ("tags", ["", "t" * (MAX_TAG_CHARS + 1)], "tag 'ttt"),
        ("title", "caf\ud800", "title is not valid Unicode"),
        ("tags", ["ok", "\ud800"], "a tag is not valid Unicode"),
    ],
)
def test_the_fast_path_lets_no_bound_pass(field: str, value: object, why: str) -> None:
    item = Item(kind="note", title="t", content="c")
    item.__dict__[field] = value
    assert v._size_rejection(item).startswith(why)
    assert v._size_rejection(item) == v._size_rejection_slow(item)


def test_tags_exactly_at_the_bound_pass_either_way() -> None:
    one = Item(kind="note", title="t", tags=["t" * MAX_TAG_CHARS])
    two = Item(
        kind="note", title="t", tags=["a" * (MAX_TAG_CHARS // 2), "b" * (MAX_TAG_CHARS // 2)]
    )
    many = Item(kind="note", title="t", tags=["a" * MAX_TAG_CHARS, "b" * MAX_TAG_CHARS])
    for item in (one, two, many):
        assert v._size_rejection(item) == v._size_rejection_slow(item) == ""
