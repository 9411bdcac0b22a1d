"""The checks every public entry point applies to its arguments, before touching anything.

Each function takes a caller's value and the argument's name and returns the
value to use, or raises :class:`~memstore.errors.InvalidItemError` saying
what was expected, so a wrong type never surfaces as a ``TypeError`` from
deep inside (or, worse, as a surprising success: a string is not a list of
letters). :class:`~memstore.memory.Memory` calls them at the top of each
method; :class:`~memstore.async_memory.AsyncMemory` delegates to it. The
bounds are the named limits of :mod:`memstore.limits`.

>>> count(5, "limit", 1, 10)
5
>>> count("5", "limit", 1, 10)
Traceback (most recent call last):
...
memstore.errors.InvalidItemError: limit must be a whole number, got str '5'
>>> count(11, "limit", 1, 10)
Traceback (most recent call last):
...
memstore.errors.OutOfRangeError: limit must be between 1 and 10, got 11
>>> text_arg("caf\\udce9", "query", 100)
Traceback (most recent call last):
...
memstore.errors.InvalidItemError: query is not valid Unicode text (it holds a lone surrogate)
"""

from __future__ import annotations

import io
import math
import operator
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from memstore.errors import InvalidItemError, OutOfRangeError
from memstore.limits import MAX_ID_CHARS, MAX_NAME_CHARS

__all__ = [
    "count",
    "describe",
    "entries",
    "flag",
    "has_lone_surrogate",
    "id_arg",
    "id_list",
    "key_arg",
    "name_arg",
    "query_vector_arg",
    "readable",
    "text_arg",
    "text_list",
    "unit_interval",
    "unit_weight",
    "writable",
]


def describe(value: object) -> str:
    """A short description of a wrong value: its type and the start of its repr.

    The repr is built bounded (:data:`_SHORT`: a few levels, a few entries),
    never whole: a list nested 100,000 deep or holding a million entries is
    described as quickly as a small one, with no ``RecursionError``.

    >>> describe([[[[[[1]]]]]])
    'list [[[[[...]]]]]'
    """
    try:
        shown = _SHORT.repr(value)
    except Exception:  # a repr of the caller's own that fails: the type says enough
        shown = "<unprintable>"
    return f"{type(value).__name__} {shown:.40}"


def _short_repr() -> reprlib.Repr:
    """How :func:`describe` shows a value: bounded in depth and in length."""
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 4, 40, 40
    return short


_SHORT = _short_repr()


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (not encodable as UTF-8)."""
    if text.isascii():  # the common case, without encoding anything
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def text_arg(value: object, name: str, max_chars: int, *, empty: bool = True) -> str:
    """A string of at most ``max_chars`` valid characters (``empty=False``: not blank)."""
    if not isinstance(value, str):
        raise InvalidItemError(f"{name} must be text, got {describe(value)}")
    if len(value) > max_chars:
        raise InvalidItemError(f"{name} is {len(value)} characters; at most {max_chars}")
    if has_lone_surrogate(value):
        raise InvalidItemError(f"{name} is not valid Unicode text (it holds a lone surrogate)")
    if not empty and not value.strip():
        raise InvalidItemError(f"{name} must not be empty")
    return value


def key_arg(value: object, name: str, max_chars: int, *, empty: bool = True) -> str:
    """:func:`text_arg` for text a journal looks rows up by (an id, a partition).

    A NUL character is refused too: no item's id or tag can hold one (the
    write rules refuse it, since PostgreSQL's ``text`` cannot), so a lookup
    by such a key is a mistake, refused alike whatever the backend (SQLite
    would answer "nothing", PostgreSQL could not send the query).

    >>> key_arg("a\\x00b", "id", 256)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memstore.errors.InvalidItemError: id 'a\\x00b' holds a NUL character (\\x00), ...
    """
    text = text_arg(value, name, max_chars, empty=empty)
    if "\x00" in text:
        raise InvalidItemError(
            f"{name} {text[:60]!r} holds a NUL character (\\x00), which no id or tag can"
        )
    return text


def id_arg(value: object, name: str = "id") -> str:
    """An item id to look up or change (text up to :data:`MAX_ID_CHARS`, no NUL)."""
    return key_arg(value, name, MAX_ID_CHARS)


def name_arg(value: object, name: str) -> str:
    """A partition name or user key: non-blank text, no commas, line breaks or NUL."""
    text = key_arg(value, name, MAX_NAME_CHARS, empty=False)
    if any(c in text for c in ",\r\n"):
        raise InvalidItemError(f"{name} {text[:60]!r} must not hold commas or line breaks")
    return text


def count(value: object, name: str, low: int, high: int | None = None) -> int:
    """A whole number in ``low..high`` (``high=None``: no upper bound), as an ``int``.

    The one rule for a caller's number against its bounds: the engine's
    methods and every adapter (MemoryProtocol's ``k``, Mind Layer's
    ``limit``, an MCP tool's ``depth``, a LangGraph search's ``offset``) check
    with it, directly or through :func:`memstore.bounded.check`, so a number
    out of range is refused the same way everywhere. Nothing is cut down to
    fit: a caller who asked for 5,000 results and silently got 100 would page
    wrongly. A NumPy integer is a whole number; a ``bool``, a float and text
    are not.

    >>> count(-1, "offset", 0)
    Traceback (most recent call last):
    ...
    memstore.errors.OutOfRangeError: offset must be at least 0, got -1

    :raises OutOfRangeError: a whole number outside the bounds (code
        ``arguments.out_of_range``).
    :raises InvalidItemError: not a whole number.
    """
    if isinstance(value, bool):
        raise InvalidItemError(f"{name} must be a whole number, got {describe(value)}")
    try:
        n = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidItemError(f"{name} must be a whole number, got {describe(value)}") from None
    if n < low or (high is not None and n > high):
        raise OutOfRangeError(name, n, low, high)
    return n


def flag(value: object, name: str) -> bool:
    """``True`` or ``False`` (not a truthy string)."""
    if not isinstance(value, bool):
        raise InvalidItemError(f"{name} must be True or False, got {describe(value)}")
    return value


def unit_weight(value: object, name: str = "weight") -> float:
    """A finite number in ``(0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidItemError(f"{name} must be a number, got {describe(value)}")
    w = float(value)
    if not math.isfinite(w) or not 0.0 < w <= 1.0:
        raise InvalidItemError(f"{name} must be above 0 and at most 1, got {value!r}")
    return w


def unit_interval(value: object, name: str) -> float:
    """A number in ``[0, 1]`` (a ``bool`` is not one, nor NaN), as a float.

    >>> unit_interval(0.25, "min_relevance"), unit_interval(1, "min_relevance")
    (0.25, 1.0)
    >>> unit_interval(float("nan"), "min_relevance")
    Traceback (most recent call last):
    ...
    memstore.errors.InvalidItemError: min_relevance must be between 0 and 1, got nan
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidItemError(f"{name} must be a number between 0 and 1, got {describe(value)}")
    x = float(value)
    if not 0.0 <= x <= 1.0:  # NaN fails both comparisons
        raise InvalidItemError(f"{name} must be between 0 and 1, got {value!r}")
    return x


def text_list(value: object, name: str, max_items: int, max_chars: int) -> list[str]:
    """A list (or tuple, or other collection) of strings; one bare string is refused."""
    if (
        type(value) is list
        and len(value) <= max_items
        and all(type(v) is str and len(v) <= max_chars and v.isascii() for v in value)
    ):
        return list(value)  # the common case: every check below would pass
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidItemError(f"{name} must be a list of text, got {describe(value)}")
    out = list(value)
    if len(out) > max_items:
        raise InvalidItemError(f"{name} has {len(out)} entries; at most {max_items}")
    for n, entry in enumerate(out):
        text_arg(entry, f"{name}[{n}]", max_chars)
    return out


def id_list(value: object, name: str = "ids") -> list[str]:
    """Ids from a collection; one bare string is a mistake, not a list of letters."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidItemError(f"{name}: expected a list of ids, got {describe(value)}")
    out = list(value)
    for n, entry in enumerate(out):
        id_arg(entry, f"{name}[{n}]")
        if not entry:
            raise InvalidItemError(f"{name}[{n}] is empty; ids must be non-empty strings")
    return out


def entries(value: object, name: str = "items") -> Iterable[Any]:
    """The entries of a batch: an iterable, not a string (which would be one per letter)."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidItemError(
            f"{name} must be a list of texts, Items or mappings, got {describe(value)}"
        )
    return value


def writable(value: object, name: str = "fp") -> Any:
    """A text file (or anything with ``write``) to write to; a binary file is refused.

    A file opened with ``"wb"`` (or a ``BytesIO``) would take the first line
    and fail on it: refused before anything is written.
    """
    binary = isinstance(value, io.RawIOBase | io.BufferedIOBase)
    if binary or isinstance(value, str | bytes) or not callable(getattr(value, "write", None)):
        raise InvalidItemError(
            f"{name} must be a file opened for writing text, got {describe(value)}"
        )
    return value


def readable(value: object, name: str = "fp") -> Any:
    """A text file (or any iterable of lines) to read; a string is a path or text, not a file."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidItemError(
            f"{name} must be a file opened for reading text (or lines of text), "
            f"got {describe(value)}"
        )
    return value


_KINDS = {"b": "boolean", "c": "complex", "U": "text", "S": "bytes", "M": "datetime"}


def query_vector_arg(
    value: object, dim: int | None, name: str = "query_vector"
) -> npt.NDArray[np.float32]:
    """One query vector: ``dim`` finite real numbers, not all zero, as a float32 copy.

    A 1-D sequence or array (a list of floats, a numpy row); a matrix, a string,
    booleans, complex or non-numeric values are refused, as are NaN, infinity
    (including a float64 too large for float32) and the zero vector, which has
    no direction to compare. ``dim`` ``None``: any length of at least one.
    The copy is the caller's no more: changing the original later changes nothing.

    >>> query_vector_arg([3, 4], 2).tolist()
    [3.0, 4.0]
    >>> query_vector_arg([1.0, 0.0, 0.0], 2)
    Traceback (most recent call last):
    ...
    memstore.errors.InvalidItemError: query_vector has 3 values; this index's vectors have 2
    """
    if isinstance(value, str | bytes | bytearray | Mapping) or value is None:
        raise InvalidItemError(f"{name} must be a sequence of numbers, got {describe(value)}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:  # ragged nesting and the like
        raise InvalidItemError(f"{name} must be a sequence of numbers: {e}") from None
    if arr.dtype.kind not in "iuf":
        what = _KINDS.get(arr.dtype.kind, "non-numeric")
        raise InvalidItemError(f"{name} must hold real numbers, got {what} values")
    if arr.ndim != 1:
        raise InvalidItemError(
            f"{name} must be one vector (1-D), got shape {arr.shape}; "
            "pass one row of a matrix at a time"
        )
    if dim is not None and arr.shape[0] != dim:
        raise InvalidItemError(f"{name} has {arr.shape[0]} values; this index's vectors have {dim}")
    if arr.shape[0] == 0:
        raise InvalidItemError(f"{name} is empty")
    with np.errstate(over="ignore"):  # a float64 past float32's range: refused just below
        vec: npt.NDArray[np.float32] = np.array(arr, dtype=np.float32)  # a copy, always
    if not np.isfinite(vec).all():
        raise InvalidItemError(f"{name} holds a NaN or an infinite value (as float32)")
    if not vec.any():
        raise InvalidItemError(f"{name} is the zero vector, which has no direction")
    return vec
