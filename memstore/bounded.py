"""The adapters' side of the one check of a number against its bounds.

Every adapter takes numbers that size the work of one call (MemoryProtocol's
``k``, Mind Layer's ``limit`` and ``max_chars``, an MCP tool's ``limit``,
``depth`` and ``max_chars``, a LangGraph search's ``limit`` and ``offset``).
Each checks them with the engine's rule, :func:`memstore.arguments.count`, so
a number out of range is refused the same way everywhere:
:class:`~memstore.errors.OutOfRangeError`, code :data:`OUT_OF_RANGE`, naming
the argument, the value and the bounds. Nothing is cut down to fit, and the
adapter maps the error into its own envelope (a 400, an MCP tool error, a
``ValueError``) with the same code and message. This module holds what a
pydantic request model needs for that: the rule as a validator
(:func:`check`) and the way back to the error from pydantic's report
(:func:`found_in`). ``bounded``, ``OutOfRangeError`` and ``OUT_OF_RANGE`` are
the engine's, under the names this module has always given them.

The bounds themselves live in :mod:`memstore.limits` (the engine's) or beside
the adapter (its own smaller cap, see :func:`~memstore.limits.adapter_cap`).

>>> bounded(5, "limit", 1, 100)
5
>>> bounded(0, "limit", 1, 100)
Traceback (most recent call last):
...
memstore.errors.OutOfRangeError: limit must be between 1 and 100, got 0
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memstore.arguments import count
from memstore.errors import OUT_OF_RANGE, OutOfRangeError

__all__ = ["OUT_OF_RANGE", "OutOfRangeError", "bounded", "check", "found_in"]

bounded = count
"""The engine's check, :func:`memstore.arguments.count`, by its adapters' name."""


def check(name: str, low: int, high: int | None = None) -> Callable[[int], int]:
    """:func:`~memstore.arguments.count` for one argument, as a pydantic ``AfterValidator``.

    An adapter's request model checks its numbers with the engine's rule::

        k: Annotated[int, AfterValidator(check("k", 1, MAX_K))]

    and its error handler finds the :class:`OutOfRangeError` with :func:`found_in`.

    >>> check("depth", 1, 8)(9)
    Traceback (most recent call last):
    ...
    memstore.errors.OutOfRangeError: depth must be between 1 and 8, got 9
    """

    def run(value: int) -> int:
        return count(value, name, low, high)

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
