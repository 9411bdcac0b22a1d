"""One check for a caller's number against its bounds, and the one error it raises.

Every adapter takes numbers that size the work of one call (MemoryProtocol's
``k``, Mind Layer's ``limit`` and ``max_chars``, an MCP tool's ``limit``,
``depth`` and ``max_chars``, a LangGraph search's ``limit`` and ``offset``).
Each checks them here, so a number out of range is refused the same way
everywhere: :class:`OutOfRangeError`, code :data:`OUT_OF_RANGE`, naming the
argument, the value and the bounds. Nothing is cut down to fit (a caller who
asked for 5,000 results and silently got 100 would page wrongly), and the
adapter maps the error into its own envelope (a 400, an MCP tool error, a
``ValueError``) with the same code and message.

The bounds themselves live in :mod:`memstore.limits` (the engine's) or beside
the adapter (its own smaller cap, see :func:`~memstore.limits.adapter_cap`).

>>> bounded(5, "limit", 1, 100)
5
>>> bounded(0, "limit", 1, 100)
Traceback (most recent call last):
...
memstore.bounded.OutOfRangeError: limit must be between 1 and 100, got 0
>>> bounded(-1, "offset", 0)
Traceback (most recent call last):
...
memstore.bounded.OutOfRangeError: offset must be at least 0, got -1
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from memstore.errors import InvalidItemError

__all__ = ["OUT_OF_RANGE", "OutOfRangeError", "bounded", "check", "found_in"]

OUT_OF_RANGE: Final = "arguments.out_of_range"
"""The code every adapter answers a number out of its range with."""


class OutOfRangeError(InvalidItemError):
    """A whole number outside its bounds (an :class:`InvalidItemError`, so a ``ValueError``).

    ``name``, ``value``, ``low`` and ``high`` (``None``: no upper bound) say
    which argument, what was given and what was allowed; ``code`` is
    :data:`OUT_OF_RANGE`. Nothing was changed.
    """

    code: Final = OUT_OF_RANGE

    def __init__(self, name: str, value: int, low: int, high: int | None) -> None:
        allowed = f"at least {low}" if high is None else f"between {low} and {high}"
        super().__init__(f"{name} must be {allowed}, got {value}")
        self.name = name
        self.value = value
        self.low = low
        self.high = high

    def __repr__(self) -> str:
        return f"OutOfRangeError({self.name!r}, {self.value!r}, {self.low!r}, {self.high!r})"

    def details(self) -> dict[str, object]:
        """The fields of the error as JSON-ready values (for an adapter's error body)."""
        return {"argument": self.name, "value": self.value, "min": self.low, "max": self.high}


def bounded(value: int, name: str, low: int, high: int | None = None) -> int:
    """``value`` if it is a whole number in ``low..high`` (``high=None``: no upper bound).

    :raises OutOfRangeError: ``value`` is outside the bounds.
    :raises InvalidItemError: ``value`` is not a whole number (a ``bool``, a
        float and text are not).
    """
    if isinstance(value, bool):
        raise InvalidItemError(f"{name} must be a whole number, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise InvalidItemError(
            f"{name} must be a whole number, got {type(value).__name__}"
        ) from None
    if n < low or (high is not None and n > high):
        raise OutOfRangeError(name, n, low, high)
    return n


def check(name: str, low: int, high: int | None = None) -> Callable[[int], int]:
    """:func:`bounded` for one argument, as a validator (pydantic's ``AfterValidator``).

    An adapter's request model checks its numbers with the engine's rule::

        k: Annotated[int, AfterValidator(check("k", 1, MAX_K))]

    and its error handler finds the :class:`OutOfRangeError` with :func:`found_in`.

    >>> check("depth", 1, 8)(9)
    Traceback (most recent call last):
    ...
    memstore.bounded.OutOfRangeError: depth must be between 1 and 8, got 9
    """

    def run(value: int) -> int:
        return bounded(value, name, low, high)

    return run


def found_in(errors: Iterable[Mapping[str, Any]]) -> OutOfRangeError | None:
    """The :class:`OutOfRangeError` of the first of a pydantic ``ValidationError.errors()``.

    ``None`` when the first problem is another one (a wrong type, a missing
    field): the adapter words that one as it always has.
    """
    for err in errors:
        raised = (err.get("ctx") or {}).get("error")
        return raised if isinstance(raised, OutOfRangeError) else None
    return None
