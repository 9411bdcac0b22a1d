"""Value filters for stored JSON documents, with one meaning on every journal.

A filter maps a key to a condition. The key is a top-level field, or a dotted
path into nested objects (``"user.name"``) when the document has no top-level
field of that exact name. The condition is a plain value (equality) or an
object of operators: ``$eq $ne $gt $gte $lt $lte``; several operators must all hold.

Values are compared as JSON values, never as text: objects and arrays are equal
when they are equal as wholes (an object without ``$`` keys is a value, not a set
of operators), numbers compare numerically (``1 == 1.0``, ``10 > 9``), a boolean
is not a number (``true != 1``), strings order by code point. An ordering
operator holds only between two numbers or two strings, so a missing field, a
``null`` or a value of another type never satisfies ``$gt``. A missing field
reads as ``null`` for ``$eq`` and ``$ne``.

>>> doc = {"n": 10, "user": {"name": "ada"}, "tags": ["a", "b"]}
>>> matches(doc, {"n": {"$gt": 9.5}, "user.name": "ada", "tags": ["a", "b"]})
True
>>> matches(doc, {"user": {"name": "ada", "x": 1}})
False
>>> matches(doc, {"n": {"$gt": "9"}})
False
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from memstore.errors import MemstoreError

__all__ = ["OPERATORS", "FilterError", "check_filter", "json_equal", "matches"]


class FilterError(MemstoreError, ValueError):
    """A filter that cannot be read: not a mapping, an unknown operator, mixed keys."""


_MISSING: Final = object()


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of two JSON values (numbers by value, booleans apart, NaN never equal).

    >>> json_equal(1, 1.0), json_equal(True, 1), json_equal({"a": [1]}, {"a": [1.0]})
    (True, False, True)
    """
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping | list | tuple) or isinstance(b, Mapping | list | tuple):
        return False
    if _is_number(a) or _is_number(b):
        return False  # a number and a non-number
    return bool(a == b)


def _ordered(a: Any, b: Any, test: Callable[[Any, Any], bool]) -> bool:
    if _is_number(a) and _is_number(b):
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            return False
        return test(a, b)
    if isinstance(a, str) and isinstance(b, str):
        return test(a, b)
    return False


OPERATORS: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "$eq": json_equal,
    "$ne": lambda a, b: not json_equal(a, b),
    "$gt": lambda a, b: _ordered(a, b, lambda x, y: x > y),
    "$gte": lambda a, b: _ordered(a, b, lambda x, y: x >= y),
    "$lt": lambda a, b: _ordered(a, b, lambda x, y: x < y),
    "$lte": lambda a, b: _ordered(a, b, lambda x, y: x <= y),
}
"""The comparison operators, each ``(stored value, filter operand) -> bool``."""


def _is_operator_object(cond: Any) -> bool:
    return isinstance(cond, Mapping) and bool(cond) and all(str(k).startswith("$") for k in cond)


def check_filter(flt: Mapping[str, Any] | None) -> None:
    """Raise :class:`FilterError` when ``flt`` cannot be read; ``None`` is no filter.

    >>> check_filter({"n": {"$between": [1, 2]}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memstore.integrations._filters.FilterError: unknown filter operator '$between' on 'n'; ...
    """
    if flt is None:
        return
    if not isinstance(flt, Mapping):
        raise FilterError(f"a filter is a mapping of field to condition, got {flt!r:.80}")
    for key, cond in flt.items():
        if not isinstance(key, str) or not key:
            raise FilterError(f"filter keys are non-empty field names, got {key!r:.80}")
        if not isinstance(cond, Mapping):
            continue
        dollar = [k for k in cond if isinstance(k, str) and k.startswith("$")]
        if dollar and len(dollar) != len(cond):
            raise FilterError(
                f"filter on {key!r} mixes operators and fields ({sorted(map(str, cond))}); "
                "write either {'$op': value, ...} or a whole object value"
            )
        for op in dollar:
            if op not in OPERATORS:
                raise FilterError(
                    f"unknown filter operator {op!r} on {key!r}; use one of {', '.join(OPERATORS)}"
                )


def resolve(doc: Mapping[str, Any], key: str) -> Any:
    """The value a filter key names: the field itself, else the dotted path; missing: ``None``.

    >>> resolve({"a": {"b": 1}, "a.b": 2}, "a.b"), resolve({"a": {"b": 1}}, "a.b")
    (2, 1)
    """
    if key in doc:
        return doc[key]
    if "." not in key:
        return None
    cur: Any = doc
    for part in key.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            return None
    return cur


def matches(doc: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether ``doc`` satisfies every condition of ``flt`` (call :func:`check_filter` first)."""
    if not flt:
        return True
    for key, cond in flt.items():
        value = resolve(doc, key)
        if _is_operator_object(cond):
            if not all(OPERATORS[op](value, operand) for op, operand in cond.items()):
                return False
        elif not json_equal(value, cond):
            return False
    return True
