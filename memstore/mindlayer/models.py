"""Request bodies and query strings of the Mind Layer API: parsed strictly, refused clearly.

A body is JSON text with nothing after it (:func:`parse_json`: no trailing
JSON, no repeated key, no ``NaN``); its object is validated by a pydantic
model that refuses unknown fields and coerces nothing (``"limit": "5"`` is
an error, not 5). Every refusal is a 400 :class:`~memstore.mindlayer.errors.MindLayerError`
naming the field. ``null`` for an optional field is read as the field left
out (its default); ``null`` for a required one is refused like any other
value of the wrong type.

>>> req = parse_body(SearchRequest, b'{"scope": {"agent": "a", "user": "u"}, "query": "dinner"}')
>>> req.mode, req.limit, req.scope.partition
('lexical', 5, 'mindlayer/a/u')
>>> parse_body(SearchRequest, b'{"scope": {"agent": "a", "user": "u"}, "query": "x", "limit": null}'
...            ).limit
5
>>> parse_body(SearchRequest, b'{"scope": {"agent": "a", "user": "u"}, "query": null}')
Traceback (most recent call last):
...
memstore.mindlayer.errors.MindLayerError: query: Input should be a valid string
>>> parse_body(SearchRequest, b'{"scope": {"agent": "a", "user": "u"}, "query": "x", "k": 1}')
Traceback (most recent call last):
...
memstore.mindlayer.errors.MindLayerError: k: unknown field
>>> parse_body(SearchRequest, b'{"scope": {"agent": "a", "user": "u"}, "query": "x"} {}')
Traceback (most recent call last):
...
memstore.mindlayer.errors.MindLayerError: the body is not one JSON value: Extra data at character 53
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from memstore.arguments import count, describe, has_lone_surrogate, unit_interval
from memstore.errors import InvalidItemError, OutOfRangeError
from memstore.mindlayer.errors import invalid, out_of_range
from memstore.mindlayer.limits import (
    DEFAULT_CONTEXT_CHARS,
    DEFAULT_LIMIT,
    MAX_SESSION_BYTES,
    MAX_TEXT_BYTES,
)
from memstore.mindlayer.scope import Scope, valid_id
from memstore.web.body import RepeatedKey, too_many_digits, unique_pairs

__all__ = [
    "ContextRequest",
    "IngestRequest",
    "PersonalityRequest",
    "ScopeIn",
    "SearchRequest",
    "StoreRequest",
    "checked_count",
    "checked_id",
    "checked_relevance",
    "checked_text",
    "parse_body",
    "parse_json",
    "query_params",
    "scope_of",
]

Mode = Literal["lexical", "semantic", "hybrid"]
M = TypeVar("M", bound=BaseModel)

_ID_RULE = "must be 1-128 ASCII letters, digits, '_', '.' or '-'"


def _check_id(value: str) -> str:
    if not valid_id(value):
        raise ValueError(_ID_RULE)
    return value


def _bytes_at_most(value: str, limit: int, *, nonempty: bool) -> str:
    if nonempty and not value.strip():
        raise ValueError("must not be empty")
    if has_lone_surrogate(value):  # JSON can escape one ("\\ud800"); UTF-8 cannot hold it
        raise ValueError("is not valid Unicode text (it holds a lone surrogate)")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"is {size} bytes; at most {limit} (UTF-8)")
    return value


class _Strict(BaseModel):
    """Unknown fields refused, nothing coerced, and ``null`` for an optional field read as absent.

    Clients commonly send ``null`` for "not given": an optional field (one
    with a default) holding ``null`` takes its default, exactly as if it were
    left out. A required field holding ``null`` is still refused (``text:
    Input should be a valid string``), and so is an unknown field, ``null`` or not.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if not isinstance(data, dict) or None not in data.values():
            return data  # the common case: nothing to drop
        fields = cls.model_fields
        return {
            k: v
            for k, v in data.items()
            if not (v is None and k in fields and not fields[k].is_required())
        }


class ScopeIn(_Strict):
    """``{"agent": ..., "user": ...}``: the namespace every memory operation names."""

    agent: str
    user: str

    _ids = field_validator("agent", "user")(_check_id)

    @property
    def partition(self) -> str:
        """The memstore partition of the scope."""
        return self.scope().partition

    def scope(self) -> Scope:
        """As a :class:`~memstore.mindlayer.scope.Scope`."""
        return Scope(self.agent, self.user)


class StoreRequest(_Strict):
    """``POST /v1/memories``: store, or update by id inside the scope."""

    scope: ScopeIn
    id: str | None = None
    text: str
    session: str = ""

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        return None if value is None else _check_id(value)

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _bytes_at_most(value, MAX_TEXT_BYTES, nonempty=True)

    @field_validator("session")
    @classmethod
    def _session(cls, value: str) -> str:
        return _bytes_at_most(value, MAX_SESSION_BYTES, nonempty=False)


class SearchRequest(_Strict):
    """``POST /v1/search`` (and ``/v1/chat``): a query in one scope."""

    scope: ScopeIn
    query: str
    mode: Mode = "lexical"
    limit: int = DEFAULT_LIMIT
    """1 to ``MAX_LIMIT``: checked by the service (:func:`checked_count`), as for a Python call."""
    min_relevance: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    """An addition: drop ``hybrid`` hits whose relevance (0-1) is below it."""

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        return _bytes_at_most(value, MAX_TEXT_BYTES, nonempty=True)


class ContextRequest(SearchRequest):
    """``POST /v1/context``: a search plus the character budget of the rendered block."""

    max_chars: int = DEFAULT_CONTEXT_CHARS
    """1 to ``MAX_CONTEXT_CHARS``: checked by the service, as ``limit`` is."""


class PersonalityRequest(_Strict):
    """``PUT /v1/personality``: the scope's personality text (empty clears it)."""

    scope: ScopeIn
    personality: str

    @field_validator("personality")
    @classmethod
    def _personality(cls, value: str) -> str:
        return _bytes_at_most(value, MAX_TEXT_BYTES, nonempty=False)


class IngestRequest(_Strict):
    """``POST /v1/ingest``: text for the provider to extract durable facts from."""

    scope: ScopeIn
    text: str
    session: str = ""

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _bytes_at_most(value, MAX_TEXT_BYTES, nonempty=True)

    @field_validator("session")
    @classmethod
    def _session(cls, value: str) -> str:
        return _bytes_at_most(value, MAX_SESSION_BYTES, nonempty=False)


def checked_id(field: str, value: str) -> str:
    """``value`` if it is an id (1-128 of ``[A-Za-z0-9_.-]``), for the Python API.

    :raises MindLayerError: 400 naming ``field``, as the routes answer it.
    """
    _text_typed(field, value)
    try:
        return _check_id(value)
    except ValueError as e:
        raise invalid(f"{field}: {e}") from None


def checked_text(field: str, value: str, limit: int, *, nonempty: bool) -> str:
    """``value`` if it is text of at most ``limit`` UTF-8 bytes (``nonempty``: not blank).

    :raises MindLayerError: 400 naming ``field``, as the routes answer it.
    """
    _text_typed(field, value)
    try:
        return _bytes_at_most(value, limit, nonempty=nonempty)
    except ValueError as e:
        raise invalid(f"{field}: {e}") from None


def _text_typed(field: str, value: object) -> None:
    """Refuse a value that is not text, as the routes do (a Python caller can pass anything)."""
    if not isinstance(value, str):
        raise invalid(f"{field}: must be text, got {describe(value)}")


def checked_relevance(value: float) -> float:
    """``min_relevance`` if it is a number from 0 to 1 (NaN is not), for the Python API.

    The routes refuse the same through their model; this is that bound for a
    call of :class:`~memstore.mindlayer.service.MindLayer`, in the engine's words.

    >>> checked_relevance(0.5)
    0.5
    >>> checked_relevance(-1.0)
    Traceback (most recent call last):
    ...
    memstore.mindlayer.errors.MindLayerError: min_relevance must be between 0 and 1, got -1.0

    :raises MindLayerError: 400, as the routes answer it.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"min_relevance: must be a number from 0 to 1, got {describe(value)}")
    try:
        return unit_interval(value, "min_relevance")
    except InvalidItemError as e:
        raise invalid(e.reason) from None


def checked_count(field: str, value: int, low: int, high: int) -> int:
    """``value`` if it is a whole number in ``[low, high]``, by the engine's rule.

    One out of range is refused as every adapter refuses it
    (:func:`memstore.arguments.count`): 400 ``invalid_request`` with the
    engine's message (``limit must be between 1 and 100, got 101``) and
    ``details.code`` ``arguments.out_of_range``.

    :raises MindLayerError: 400 naming ``field``, for a route and a Python call alike.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{field}: must be a whole number from {low} to {high}, got {value!r:.40}")
    try:
        return count(value, field, low, high)
    except OutOfRangeError as e:
        raise out_of_range(e) from None


class _NotJson(ValueError):
    """Text ``json.loads`` would read that JSON does not allow (``NaN``, ``Infinity``)."""


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


def parse_json(raw: bytes) -> Any:
    """The one JSON value of ``raw``.

    :raises MindLayerError: 400, not UTF-8 JSON, trailing data, a repeated key, ``NaN``,
        an integer of more than 4300 digits (in the words of
        :func:`~memstore.web.body.too_many_digits`, not Python's).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("the body is not UTF-8 text") from None
    try:
        return json.loads(text, object_pairs_hook=unique_pairs, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise invalid(f"the body is not one JSON value: {e.msg} at character {e.pos}") from None
    except (RepeatedKey, _NotJson) as e:
        raise invalid(f"the body is not valid JSON: {e}") from None
    except ValueError:  # valid JSON Python will not read: an integer of too many digits
        raise invalid(too_many_digits()) from None


def _field_name(part: object) -> str:
    """A step of an error's location as a message shows it: a field name as is; a key the
    client made up (long, or not printable: a terminal escape) quoted and cut at 60."""
    text = str(part)
    return text if len(text) <= 60 and text.isprintable() else repr(text[:60])


def _message(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(_field_name(p) for p in first.get("loc", ()))
    kind = first.get("type", "")
    if kind == "extra_forbidden":
        problem = "unknown field"
    elif kind == "missing":
        problem = "is required"
    else:
        problem = str(first.get("msg", "is invalid")).removeprefix("Value error, ")
    return f"{where}: {problem}" if where else problem


def parse_body(model: type[M], raw: bytes) -> M:
    """``raw`` as a ``model``.

    :raises MindLayerError: 400 naming the first field at fault.
    """
    value = parse_json(raw)
    if not isinstance(value, dict):
        raise invalid("the body must be a JSON object")
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise invalid(_message(e)) from None


def query_params(pairs: Sequence[tuple[str, str]], required: Sequence[str]) -> Mapping[str, str]:
    """A query string's parameters: each of ``required`` exactly once, nothing else.

    >>> query_params([("agent", "a"), ("user", "u")], ("agent", "user"))
    {'agent': 'a', 'user': 'u'}
    >>> query_params([("agent", "a")], ("agent", "user"))
    Traceback (most recent call last):
    ...
    memstore.mindlayer.errors.MindLayerError: the query parameter 'user' is required
    """
    out: dict[str, str] = {}
    for key, value in pairs:
        if key not in required:
            raise invalid(f"unknown query parameter {key[:60]!r}")
        if key in out:
            raise invalid(f"the query parameter {key!r} appears twice")
        out[key] = value
    for key in required:
        if key not in out:
            raise invalid(f"the query parameter {key!r} is required")
        if not valid_id(out[key]):
            raise invalid(f"{key} {_ID_RULE}")
    return out


def scope_of(params: Mapping[str, str]) -> Scope:
    """The scope of checked query parameters ``agent`` and ``user``."""
    return Scope(params["agent"], params["user"])
