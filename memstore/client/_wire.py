"""What the blocking and the asyncio clients share: requests as data, answers as types.

A verb is turned into a :class:`Call` (method, path, JSON body, headers and
the function that reads a successful answer) by the functions here, so
:class:`~memstore.client.MemoryClient` and
:class:`~memstore.client.AsyncMemoryClient` differ only in how they send it.
The Server-Sent Events reader and the retry rule live here too.

An answer the client cannot read as the protocol says (a body that is not
JSON, JSON of another shape, a snapshot line that is not an entry, a recall
stream that ends before its ``done``) is a
:class:`~memstore.client.errors.ProtocolTransportError`: no usable answer came,
as when the connection breaks, and nothing partial passes for complete.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import quote

import httpx

from memstore.client.errors import (
    InvalidRequestError,
    ProtocolTransportError,
    RateLimitedError,
    ServerError,
    UnavailableError,
    error_from_response,
)
from memstore.client.models import (
    ChangeEvent,
    Episode,
    ForgetReceipt,
    Hit,
    IngestResult,
    SnapshotEntry,
)
from memstore.journal import Lsn

__all__ = [
    "RECALL_DONE",
    "Call",
    "RetryPolicy",
    "SseReader",
    "applied_lsn",
    "cut_short",
    "decode_error",
    "episode_call",
    "forget_call",
    "health_call",
    "ingest_call",
    "parsed",
    "recall_call",
    "recall_event_hit",
    "retry_delay",
    "snapshot_entries",
    "snapshot_path",
    "target_json",
]

SSE = "text/event-stream"
Mode = Literal["semantic", "graph"]
RECALL_DONE: Final = "done"
"""The event that ends a streamed recall: without it, the hits are not all there."""
_MALFORMED: Final = (KeyError, IndexError, TypeError, ValueError, AttributeError)
"""What reading a body of the wrong shape raises (a missing key, a list for an object...)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When a refused request is sent again.

    Only answers that say the request was not taken are retried: 429
    ``rate_limited`` (after its ``Retry-After``) and 503 ``unavailable``. A
    wait longer than ``max_wait`` seconds is not slept through: the error is
    raised instead, so a caller is never blocked for minutes unawares.
    """

    max_retries: int = 3
    max_wait: float = 30.0
    unavailable_wait: float = 0.5

    def __post_init__(self) -> None:
        if type(self.max_retries) is not int or self.max_retries < 0:
            raise ValueError(f"max_retries must be a whole number >= 0, got {self.max_retries!r}")
        for name in ("max_wait", "unavailable_wait"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 <= value < math.inf:  # NaN fails too
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Call:
    """One request, and how to read its successful answer."""

    method: str
    path: str
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    parse: Callable[[Any], Any] = lambda body: body


def parsed(call: Call, body: Any) -> Any:
    """``call.parse(body)``: the typed answer, or a :class:`ProtocolTransportError`.

    >>> parsed(ingest_call("s", "x", id=None, t_ref=None, metadata=None), {"lsn": 5})
    Traceback (most recent call last):
    ...
    memstore.client.errors.ProtocolTransportError: POST /v1/ingest: the answer is not the \
protocol's (TypeError: 'int' object is not subscriptable)
    """
    try:
        return call.parse(body)
    except _MALFORMED as e:
        raise _off_protocol(f"{call.method} {call.path}", e) from e


def cut_short(call: Call) -> ProtocolTransportError:
    """The error for a recall stream that ended before its ``done`` event."""
    return ProtocolTransportError(
        f"{call.method} {call.path}: the stream ended before its {RECALL_DONE!r} event; "
        "the hits received may not be all of them"
    )


def _off_protocol(where: str, e: BaseException) -> ProtocolTransportError:
    return ProtocolTransportError(
        f"{where}: the answer is not the protocol's ({type(e).__name__}: {e})"
    )


def _object(body: Any) -> dict[str, Any]:
    """A body that must be a JSON object (``/healthz``)."""
    if not isinstance(body, dict):
        raise TypeError(f"expected a JSON object, got {type(body).__name__}")
    return body


def _hits(body: Any) -> list[Hit]:
    """``POST /v1/recall``'s answer: a JSON array of hits."""
    if not isinstance(body, list):
        raise TypeError(f"expected a JSON array of hits, got {type(body).__name__}")
    return [Hit.from_json(h) for h in body]


def health_call() -> Call:
    return Call("GET", "/healthz", parse=_object)


def applied_lsn(health: Mapping[str, Any]) -> Lsn:
    """The ``lsn`` of a ``/healthz`` answer, or a :class:`ProtocolTransportError`."""
    try:
        return Lsn.parse(str(health["lsn"]))
    except _MALFORMED as e:
        raise _off_protocol("GET /healthz", e) from e


def retry_delay(error: ServerError, attempt: int, policy: RetryPolicy) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or ``None`` to raise ``error`` now."""
    if attempt >= policy.max_retries:
        return None
    if isinstance(error, RateLimitedError):
        delay = error.retry_after
    elif isinstance(error, UnavailableError):
        delay = policy.unavailable_wait * (2**attempt)
    else:
        return None
    return delay if delay <= policy.max_wait else None


def decode_error(response: httpx.Response) -> ServerError:
    """The exception for an error answer (its body already read)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    err = error_from_response(response.status_code, body)
    if isinstance(err, RateLimitedError) and "retry_after" not in err.details:
        header = response.headers.get("retry-after", "")
        if header.isdigit():
            err.details["retry_after"] = int(header)
    return err


def refused(message: str) -> InvalidRequestError:
    """The error for an argument refused before any request is sent (status 0)."""
    return InvalidRequestError(0, "invalid_request", message)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    """Refuse ``value`` unless it is ``None`` or a ``kind`` (never a ``bool`` for a number).

    Checked here, not left to the server: a value JSON cannot carry
    (``b"x"``) would raise a bare ``TypeError`` from the encoder.
    """
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise refused(f"{name} must be {what} or None, got {type(value).__name__} {value!r:.40}")


def wait_args(lsn: object, timeout: object, poll: object) -> None:
    """Refuse what ``wait_applied`` cannot wait on (a NaN timeout would never run out)."""
    if not isinstance(lsn, Lsn):
        raise refused(f"lsn must be an Lsn (as ingest returns), got {lsn!r:.40}")
    if not _is_number(timeout) or not 0 <= timeout < math.inf:  # type: ignore[operator]
        raise refused(f"timeout must be a finite number of seconds >= 0, got {timeout!r}")
    if not _is_number(poll) or not 0 < poll < math.inf:  # type: ignore[operator]
        raise refused(f"poll must be a finite number of seconds above 0, got {poll!r}")


def _rfc3339(value: str | _dt.datetime) -> str:
    if not isinstance(value, str | _dt.datetime):
        raise refused(f"a time must be RFC 3339 text or an aware datetime, got {value!r:.40}")
    if isinstance(value, _dt.datetime):
        if value.utcoffset() is None:
            raise InvalidRequestError(
                0, "invalid_request", "a datetime must be timezone-aware (e.g. datetime.now(UTC))"
            )
        return value.isoformat()
    return value


def ingest_call(
    source: str,
    content: str,
    *,
    id: str | None,
    t_ref: str | _dt.datetime | None,
    metadata: Mapping[str, Any] | None,
) -> Call:
    for name, value in (("source", source), ("content", content)):
        if type(value) is not str:
            raise refused(f"{name} must be a str, got {type(value).__name__} {value!r:.40}")
    _check("id", id, str, "a str")
    _check("metadata", metadata, Mapping, "a mapping")
    body: dict[str, Any] = {"source": source, "content": content}
    if id is not None:
        body["id"] = id
    if t_ref is not None:
        body["t_ref"] = _rfc3339(t_ref)
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return Call("POST", "/v1/ingest", body, parse=IngestResult.from_json)


def recall_call(
    query: str,
    *,
    k: int | None,
    filter: str | None,
    as_of: str | _dt.datetime | None,
    mode: Mode | None,
    stream: bool = False,
    min_relevance: float | None = None,
) -> Call:
    if type(query) is not str:
        raise refused(f"query must be a str, got {type(query).__name__} {query!r:.40}")
    _check("k", k, int, "a whole number")
    _check("filter", filter, str, "a str")
    _check("mode", mode, str, "'semantic' or 'graph'")
    _check("min_relevance", min_relevance, (int, float), "a number")
    body: dict[str, Any] = {"query": query}
    if min_relevance is not None:
        body["min_relevance"] = min_relevance
    if k is not None:
        body["k"] = k
    if filter is not None:
        body["filter"] = filter
    if as_of is not None:
        body["as_of"] = _rfc3339(as_of)
    if mode is not None:
        body["mode"] = mode
    headers = {"Accept": SSE} if stream else {}
    return Call("POST", "/v1/recall", body, headers, parse=_hits)


def target_json(*, id: str | None, source: str | None, before: Lsn | None) -> dict[str, Any]:
    """The wire target of a forget: exactly one of ``id``, ``source`` (a prefix), ``before``."""
    _check("id", id, str, "a str")
    _check("source", source, str, "a str")
    _check("before", before, Lsn, "an Lsn")
    given = [
        name for name, v in (("id", id), ("source", source), ("before", before)) if v is not None
    ]
    if len(given) != 1:
        raise InvalidRequestError(
            0,
            "invalid_request",
            "forget takes exactly one of id=, source= or before=, got "
            + (", ".join(given) if given else "none"),
        )
    if id is not None:
        return {"Id": id}
    if source is not None:
        return {"Scope": {"BySource": source}}
    assert before is not None
    return {"Before": {"wall_ms": before.wall_ms, "counter": before.counter}}


def forget_call(
    target: Mapping[str, Any],
    *,
    hard: bool = False,
    dry_run: bool = False,
    confirmation_token: str | None = None,
) -> Call:
    if type(dry_run) is not bool:
        raise refused(f"dry_run must be True or False, got {dry_run!r:.40}")
    body: dict[str, Any] = {"target": dict(target), "hard": hard, "dry_run": dry_run}
    if confirmation_token is not None:
        body["confirmation_token"] = confirmation_token
    return Call("POST", "/v1/forget", body, parse=ForgetReceipt.from_json)


def episode_call(id: str) -> Call:
    if type(id) is not str:
        raise refused(f"id must be a str, got {type(id).__name__} {id!r:.40}")
    return Call("GET", f"/v1/episode/{quote(id, safe='')}", parse=Episode.from_json)


def snapshot_path(lsn: Lsn | str) -> str:
    if not isinstance(lsn, Lsn | str):
        raise refused(f"lsn must be an Lsn or 'wall_ms.counter' text, got {lsn!r:.40}")
    return f"/v1/snapshot/{quote(str(lsn), safe='')}"


def snapshot_entries(lines: Iterable[str]) -> Iterator[SnapshotEntry]:
    """Parse NDJSON snapshot lines (blank lines skipped).

    A line that is not a ``{"key", "value"}`` object raises
    :class:`ProtocolTransportError`: the snapshot cannot be read whole.
    """
    for line in lines:
        if line.strip():
            try:
                row = json.loads(line)
                entry = SnapshotEntry(str(row["key"]), dict(row["value"]))
            except _MALFORMED as e:
                raise _off_protocol(f"snapshot line {line[:60]!r}", e) from e
            yield entry


@dataclass
class SseReader:
    """Turns the lines of an event stream into events (the WHATWG parsing rules).

    Feed each line, without its line break; a blank line ends an event and
    :meth:`feed` returns it. Comments (``: keep-alive``) are dropped; an event
    with no ``event:`` field is a ``message``. ``last_id`` is the last id seen,
    the ``Last-Event-ID`` to resume with.

    >>> r = SseReader()
    >>> [r.feed(x) for x in ["id: 7", "event: change", 'data: {"a":', "data: 1}", ""]][-1]
    ChangeEvent(id='7', event='change', data={'a': 1})
    """

    last_id: str | None = None
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _has_id: bool = False

    def feed(self, line: str) -> ChangeEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self.last_id = value
            self._has_id = True
        return None

    def _dispatch(self) -> ChangeEvent | None:
        event, data, has_id = self._event or "message", self._data, self._has_id
        self._event, self._data, self._has_id = "", [], False
        if not data:
            return ChangeEvent(self.last_id, "position", {}) if has_id else None
        text = "\n".join(data)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = {"text": text}
        return ChangeEvent(
            self.last_id, event, parsed if isinstance(parsed, dict) else {"value": parsed}
        )


def recall_event_hit(event: ChangeEvent) -> Hit | None:
    """A streamed recall's ``hit`` event as a :class:`Hit`; ``None`` for any other event.

    The caller stops at :data:`RECALL_DONE` and skips events it does not know.
    An ``error`` event (the search failed after the stream started) raises,
    and so does a hit that is not the protocol's (:class:`ProtocolTransportError`).
    """
    if event.event == "hit":
        try:
            return Hit.from_json(event.data)
        except _MALFORMED as e:
            raise _off_protocol("recall stream hit", e) from e
    if event.event == "error":
        raise error_from_response(500, event.data)
    return None
