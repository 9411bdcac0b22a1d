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
import re
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
    "UNREADABLE",
    "Call",
    "ChangeStream",
    "LineSplitter",
    "Options",
    "RecallStream",
    "RetryPolicy",
    "SseReader",
    "answer",
    "applied_lsn",
    "broken",
    "client_options",
    "confirm_call",
    "cut_short",
    "decode_error",
    "episode_call",
    "events_call",
    "forget_call",
    "health_call",
    "ingest_call",
    "parsed",
    "recall_call",
    "recall_event_hit",
    "retry_delay",
    "snapshot_call",
    "snapshot_entries",
    "snapshot_path",
    "target_json",
]

SSE = "text/event-stream"
Mode = Literal["semantic", "graph"]
RECALL_DONE: Final = "done"
"""The event that ends a streamed recall: without it, the hits are not all there."""
STREAM_RECONNECTS: Final = 3
"""How many times in a row ``events()`` reconnects connections that broke before they
got going (nothing after the server's first frame) before it raises the break. A
connection that carried more (a change, a keep-alive) starts the count again."""
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
    """One request, and how to read its successful answer.

    ``repeatable``: sending the request twice does no more than sending it once
    (a read, a dry run, an ingest that names its episode). Every ``GET`` is.
    """

    method: str
    path: str
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    parse: Callable[[Any], Any] = lambda body: body
    repeatable: bool = False

    @property
    def safe_to_repeat(self) -> bool:
        """Whether a refusal of unknown meaning may be answered by sending it again."""
        return self.method == "GET" or self.repeatable


_B64TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750 ``b64token``: what a Bearer token is (the server reads no other)."""
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""RFC 9110 ``token``: what a header's name is."""
_HEADER_VALUE: Final = re.compile(r"[\t\x20-\x7e]*")
"""What a header's value can be sent as: printable ASCII, spaces and tabs (no line break)."""


@dataclass(frozen=True, slots=True)
class Options:
    """A client's checked options, as :func:`client_options` reads them."""

    base_url: httpx.URL
    headers: httpx.Headers
    timeout: float | httpx.Timeout | None
    retry: RetryPolicy


def client_options(
    base_url: object, token: object, timeout: object, retry: object, headers: object
) -> Options:
    """Check what a client is made with, before it opens anything (status 0 refusals).

    ``base_url``: an ``http://`` or ``https://`` URL with a host (a path is kept:
    ``http://proxy/memory`` sends ``/memory/v1/recall``), and no user name or
    password (httpx would send them in place of the token), query or fragment
    (they would swallow the verb's path). ``token``: an RFC 6750
    Bearer token, sent as ``Authorization: Bearer <token>`` in place of any
    ``Authorization`` in ``headers`` (whatever its case), never quoted in an
    error. ``timeout``: seconds above 0, an :class:`httpx.Timeout`, or ``None``
    (no limit). ``retry``: a :class:`RetryPolicy` or ``None``. ``headers``: a
    mapping of header names (RFC 9110 tokens) to printable ASCII text, what
    HTTP/1.1 can send (no line break).
    """
    url = base_url if isinstance(base_url, httpx.URL) else None
    if isinstance(base_url, str):
        try:
            url = httpx.URL(base_url)
        except httpx.InvalidURL:
            url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise refused(
            f"base_url must be an http:// or https:// URL with a host, got {_shown(base_url)}"
        )
    if url.userinfo or url.query or url.fragment:
        # httpx would send a user and password as Basic auth in place of the token and
        # name them in every error; a query or a fragment would swallow the verb's path.
        raise refused(
            "base_url must not hold a user name or password, a query or a fragment: "
            f"give the server's URL and its path only, got {_shown(base_url)}"
        )
    if not isinstance(headers, Mapping | None) or any(
        not isinstance(k, str)
        or not isinstance(v, str)
        or not _HEADER_NAME.fullmatch(k)
        or not _HEADER_VALUE.fullmatch(v)
        for k, v in (headers or {}).items()
    ):
        raise refused(
            "headers must be a mapping of header names (letters, digits and !#$%&'*+.^_`|~-) "
            "to printable ASCII text, without line breaks"
        )
    merged = httpx.Headers(dict(headers or {}))
    if token is not None:
        if not isinstance(token, str) or not _B64TOKEN.fullmatch(token):
            raise refused(
                "token must be the server's Bearer token as text (letters, digits and "
                f"-._~+/ then any '='), got {_kind(token)}; the token is not shown"
            )
        merged["Authorization"] = f"Bearer {token}"  # replaces any, whatever its case
    if not (
        timeout is None
        or (isinstance(timeout, httpx.Timeout) and all(map(_seconds_or_none, _steps(timeout))))
        or _seconds_or_none(timeout)
    ):
        raise refused(
            f"timeout must be a number of seconds above 0, an httpx.Timeout of such numbers "
            f"(or None for a step), or None, got {timeout!r:.60}"
        )
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise refused(f"retry must be a RetryPolicy or None, got {type(retry).__name__}")
    return Options(url, merged, timeout, retry or RetryPolicy())  # type: ignore[arg-type]


def _shown(base_url: object) -> str:
    """``base_url`` as an error may quote it: cut short, any user and password hidden.

    >>> print(_shown("http://alice:s3cret@127.0.0.1:8080/memory"))
    'http://***@127.0.0.1:8080/memory'
    """
    text = str(base_url)
    scheme, sep, rest = text.partition("://")
    authority, slash, path = rest.partition("/")
    if sep and "@" in authority:
        text = f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{path}"
    return f"{text!r:.60}" if isinstance(base_url, str | httpx.URL) else f"{base_url!r:.60}"


def _steps(timeout: httpx.Timeout) -> tuple[object, ...]:
    """The four limits of an :class:`httpx.Timeout` (connect, read, write, pool)."""
    return (timeout.connect, timeout.read, timeout.write, timeout.pool)


def _seconds_or_none(value: object) -> bool:
    """Whether ``value`` can bound a step: ``None`` (no limit) or a finite number above 0.

    httpx takes any number in an :class:`httpx.Timeout`; the socket refuses a
    negative one, and 0 or NaN, at the first request.
    """
    return value is None or (_is_number(value) and 0 < value < math.inf)  # type: ignore[operator]


def _kind(value: object) -> str:
    """What a refused secret was, without its text."""
    if isinstance(value, str):
        return "text that is not one (empty, spaces, other characters)" if value else "''"
    return f"a {type(value).__name__}"


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


def answer(call: Call, response: httpx.Response) -> Any:
    """The typed answer of a successful ``call`` whose body ``response`` has read whole.

    A body that is not JSON, or JSON of another shape than ``call`` reads, is a
    :class:`ProtocolTransportError`.
    """
    try:
        body = response.json()
    except ValueError as e:
        raise ProtocolTransportError(f"{call.path}: the answer is not JSON: {e}") from e
    return parsed(call, body)


UNREADABLE: Final[tuple[type[httpx.RequestError], ...]] = (
    httpx.TransportError,
    httpx.DecodingError,
)
"""What httpx raises when no answer can be read: no connection, one that broke or timed
out, or a body its ``Content-Encoding`` does not decode (a ``DecodingError``, which is no
``TransportError``). The clients raise each as a :class:`ProtocolTransportError`."""


def broken(call: Call, e: httpx.RequestError) -> ProtocolTransportError:
    """The error for a streamed answer whose connection broke after it began."""
    return ProtocolTransportError(f"{call.path}: the stream broke: {e}")


def cut_short(call: Call) -> ProtocolTransportError:
    """The error for a recall stream that ended before its ``done`` event."""
    return ProtocolTransportError(
        f"{call.method} {call.path}: the stream ended before its {RECALL_DONE!r} event; "
        "the hits received may not be all of them"
    )


def unanswered(call: Call, url: httpx.URL, e: httpx.RequestError) -> ProtocolTransportError:
    """The error for a request that got no answer, naming the whole URL it went to.

    A wrong port, host or scheme then shows in the message itself; a refused
    or failed connection also asks whether the server runs there.

    >>> e = httpx.ConnectError("[Errno 111] Connection refused")
    >>> print(unanswered(Call("POST", "/v1/recall"), httpx.URL("http://127.0.0.1:1/v1/recall"), e))
    POST http://127.0.0.1:1/v1/recall: [Errno 111] Connection refused (is the server running there?)
    """
    reason = str(e) or type(e).__name__
    hint = " (is the server running there?)" if isinstance(e, httpx.ConnectError) else ""
    return ProtocolTransportError(f"{call.method} {url}: {reason}{hint}")


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


def retry_delay(error: ServerError, attempt: int, policy: RetryPolicy, call: Call) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or ``None`` to raise ``error`` now.

    Retried: a 429 (the request was refused, not taken), and a 503 that says
    ``unavailable`` (the MemoryProtocol's code: the server took nothing). A 503
    in other words (a proxy's or a load balancer's page) may come after the
    request reached the server behind it: it is retried only for a call that is
    :attr:`~Call.safe_to_repeat`, never for a write that could happen twice.
    """
    if attempt >= policy.max_retries:
        return None
    if isinstance(error, RateLimitedError):
        delay = max(error.retry_after, 0.0)  # a server's negative value is no wait
    elif isinstance(error, UnavailableError) and (error.code == UNAVAILABLE or call.safe_to_repeat):
        delay = policy.unavailable_wait * (2**attempt)
    else:
        return None
    return delay if delay <= policy.max_wait else None


UNAVAILABLE: Final = "unavailable"
"""The MemoryProtocol's 503 code: the server took nothing, so any request may be sent again."""


def decode_error(response: httpx.Response) -> ServerError:
    """The exception for an error answer (its body already read)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    err = error_from_response(response.status_code, body)
    if isinstance(err, RateLimitedError) and "retry_after" not in err.details:
        header = response.headers.get("retry-after", "").strip()
        if header.lstrip("-").isdigit():
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
        _json_value("metadata", body["metadata"])
    # An ingest that names its episode replaces it: sent twice, it is there once.
    return Call("POST", "/v1/ingest", body, parse=IngestResult.from_json, repeatable=id is not None)


def _json_value(name: str, value: Any) -> None:
    """Refuse what JSON cannot carry (bytes, a set, NaN, infinity) before any request."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise refused(f"{name} must be JSON (text, numbers, lists, objects): {e}") from None


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
    if min_relevance is not None and not 0 <= min_relevance <= 1:  # NaN fails too
        raise refused(f"min_relevance must be a number from 0 to 1, got {min_relevance!r}")
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
    return Call("POST", "/v1/recall", body, headers, parse=_hits, repeatable=True)


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
    # A dry run changes nothing; a forget writes an audit item, a hard one spends its preview.
    return Call("POST", "/v1/forget", body, parse=ForgetReceipt.from_json, repeatable=dry_run)


def confirm_call(preview: object) -> Call:
    """The hard forget a dry run's receipt confirms."""
    if not isinstance(preview, ForgetReceipt):
        raise refused(
            f"preview must be a ForgetReceipt (preview_hard_forget's answer), got "
            f"{type(preview).__name__}"
        )
    return forget_call(preview.target, hard=True, confirmation_token=preview.token())


def episode_call(id: str) -> Call:
    if type(id) is not str:
        raise refused(f"id must be a str, got {type(id).__name__} {id!r:.40}")
    return Call("GET", f"/v1/episode/{quote(id, safe='')}", parse=Episode.from_json)


def snapshot_path(lsn: Lsn | str) -> str:
    if not isinstance(lsn, Lsn | str):
        raise refused(f"lsn must be an Lsn or 'wall_ms.counter' text, got {lsn!r:.40}")
    return f"/v1/snapshot/{quote(str(lsn), safe='')}"


def snapshot_call(lsn: Lsn | str) -> Call:
    return Call("GET", snapshot_path(lsn))


def events_call(last_event_id: str | None) -> Call:
    """``GET /v1/events``, resuming after ``last_event_id`` (an event's ``id``) when given."""
    headers = {"Accept": SSE}
    if last_event_id is not None:
        if (
            not isinstance(last_event_id, str)
            or not last_event_id.isascii()
            or not last_event_id.isprintable()
        ):
            raise refused(
                "last_event_id must be an event's id (printable ASCII text), got "
                f"{last_event_id!r:.40}"
            )
        headers["Last-Event-ID"] = last_event_id
    return Call("GET", "/v1/events", headers=headers)


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


class LineSplitter:
    r"""Cuts a streamed body's text into lines at ``\n`` alone, one trailing ``\r`` dropped.

    httpx's ``iter_lines`` also breaks at U+2028, U+2029 and U+0085 (Python's
    ``str.splitlines``), which JSON allows raw inside a string: a server other
    than today's memstore (or an older one) sending ``"a\u2028b"`` unescaped
    would have its NDJSON line or SSE ``data:`` line cut in two, neither JSON.
    Feed the text as it comes; :meth:`end` returns an unterminated last line.

    >>> s = LineSplitter()
    >>> s.feed('{"t": "a\u2028'), s.feed('b"}\r\n{"t"'), s.feed(': 1}'), s.end()
    ([], ['{"t": "a\u2028b"}'], [], ['{"t": 1}'])
    """

    def __init__(self) -> None:
        self._held: list[str] = []

    def feed(self, text: str) -> list[str]:
        """The lines ``text`` completes (with what was held before it)."""
        if "\n" not in text:
            if text:
                self._held.append(text)
            return []
        lines = text.split("\n")
        lines[0] = "".join(self._held) + lines[0]
        last = lines.pop()
        self._held = [last] if last else []
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    def end(self) -> list[str]:
        """The last line, when the body did not end with a line break (else nothing)."""
        rest = "".join(self._held)
        self._held = []
        if not rest:
            return []
        return [rest[:-1] if rest.endswith("\r") else rest]


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


class RecallStream:
    """A streamed recall's lines read as hits, the I/O left to the client.

    Feed each line: :meth:`feed` returns a :class:`Hit` or ``None``, and
    :attr:`done` turns true at the :data:`RECALL_DONE` event, after which the
    client stops reading. Lines that end before it are :meth:`cut_short`.

    >>> s = RecallStream(recall_call("q", k=None, filter=None, as_of=None, mode=None))
    >>> [s.feed(x) for x in ["event: done", "data: {}", ""]], s.done
    ([None, None, None], True)
    """

    def __init__(self, call: Call) -> None:
        self.call = call
        self.done = False
        self._sse = SseReader()

    def feed(self, line: str) -> Hit | None:
        event = self._sse.feed(line)
        if event is None:
            return None
        if event.event == RECALL_DONE:
            self.done = True
            return None
        return recall_event_hit(event)

    def cut_short(self) -> ProtocolTransportError:
        """The error to raise when the lines ended before :attr:`done`."""
        return cut_short(self.call)


class ChangeStream:
    """A change stream's lines read as events, and when a broken one is opened again.

    :attr:`call` is the request of the next connection. Feed each of its lines:
    :meth:`feed` returns a :class:`ChangeEvent` worth handing on (never the
    server's ``position`` frames, which only move the resume point) or
    ``None``. When a connection breaks, :meth:`reconnect` says whether to open
    :attr:`call` again, now resuming from the last position the server gave:
    not if it broke before it got going (nothing after the server's first
    frame) :data:`STREAM_RECONNECTS` times in a row, nor if it never answered.
    """

    def __init__(self, last_event_id: str | None) -> None:
        self.call = events_call(last_event_id)
        self._sse = SseReader(last_id=last_event_id)
        self._breaks = 0
        self._opened = False
        self._frames = 0

    def feed(self, line: str) -> ChangeEvent | None:
        self._opened = True
        if not line:
            self._frames += 1
            if self._frames > 1:  # this connection got going: it is no dud
                self._breaks = 0
        event = self._sse.feed(line)
        return event if event is not None and event.event != "position" else None

    def reconnect(self) -> bool:
        """After a break: ``True`` to open :attr:`call` (updated) again, ``False`` to raise."""
        if not self._opened or self._breaks >= STREAM_RECONNECTS:
            return False
        self._breaks += 1
        self._sse = SseReader(last_id=self._sse.last_id)  # a frame cut short is dropped
        self.call = events_call(self._sse.last_id)
        self._opened, self._frames = False, 0
        return True
