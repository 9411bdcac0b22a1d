"""Server-Sent Events: hub events as a W3C ``text/event-stream``, resumable by event id.

Framing follows the W3C/WHATWG rules: a frame is ``field: value`` lines ended
by a blank line; ``data`` that spans several lines becomes several ``data:``
lines (split on CR LF, CR or LF, the only line breaks the format knows);
a line starting with ``:`` is a comment (a keep-alive). Each hub event is one
frame::

    id: 01J5Z3...-42
    event: change
    data: {"seq":42,"partition":"alpha","op":"upsert","id":"n1",...}

The id is the hub's epoch and the event's sequence number. A client that
reconnects sends the last id it saw as ``Last-Event-ID``; :func:`stream` and
:func:`astream` then replay what it missed from the hub's replay buffer, with
no gap and no repeat, or, when that is no longer possible, say so with a
``reset`` event before the live events: the client should reload its state.

>>> print(format_event("first line\\nsecond", event="note", id="7"), end="")
id: 7
event: note
data: first line
data: second
<BLANKLINE>

Serving it is a matter of handing the generator to your web framework, e.g.
with Starlette: ``StreamingResponse(astream(hub, last_event_id=request.headers.get(
"last-event-id"), partition=tenant), media_type=CONTENT_TYPE)``. The generator
subscribes at its first step, which a ``StreamingResponse`` takes only after
it sent the headers: a client that takes the headers for "following now" and
then makes a change may not be sent it. Take the first frame before answering
(``first = await anext(frames)``) and send it ahead of the rest, as
``memstore serve``'s ``/v1/events`` does.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import AsyncGenerator, Callable, Collection, Generator, Iterator
from typing import Any, Final

import regex

from memstore_hub.events import Event
from memstore_hub.hub import DEFAULT_MAXSIZE, Hub
from memstore_hub.subscription import GAP_UNKNOWN, Subscription

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_KEEPALIVE_S",
    "EVENT_RESET",
    "GAP_DROPPED",
    "KEEP_ALIVE",
    "astream",
    "encode",
    "event_id",
    "format_comment",
    "format_event",
    "parse_event_id",
    "stream",
]

CONTENT_TYPE = "text/event-stream; charset=utf-8"
"""The media type of an SSE response (the stream is UTF-8)."""
DEFAULT_KEEPALIVE_S = 15.0
"""Idle seconds before a keep-alive comment, so proxies do not time the stream out."""
KEEP_ALIVE = ": keep-alive\n\n"
"""The keep-alive frame: a comment, which clients ignore."""
EVENT_RESET = "reset"
"""The event type telling a client that events were lost: reload, then follow."""
GAP_DROPPED: Final = "dropped"
"""A ``reset`` reason: the client read too slowly and events were dropped from its queue."""
ECHO_MAX_CHARS: Final = 80
"""How much of an unusable ``Last-Event-ID`` a ``reset`` echoes (longer: cut, with ``…``)."""

_LINE_BREAK = regex.compile(r"\r\n|\r|\n")
# Not str.splitlines(): it also splits on U+2028, U+0085, form feed..., which
# SSE treats as ordinary characters; splitting there would corrupt the data.


def _field(name: str, value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError(f"an SSE {name} cannot contain a line break: {value!r}")
    return f"{name}: {value}\n"


def format_event(
    data: str, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> str:
    """One SSE frame: optional ``id:``, ``event:`` and ``retry:`` lines, then ``data``.

    Each line of ``data`` gets its own ``data:`` line, so the client rebuilds
    ``data`` exactly (line breaks come back as ``\\n``). Raises
    :class:`ValueError` when ``event`` or ``id`` holds a line break, ``id`` a
    NUL (a client would ignore it), or ``retry`` is negative.
    """
    out = []
    if id is not None:
        if "\0" in id:
            raise ValueError(f"an SSE id cannot contain NUL: {id!r}")
        out.append(_field("id", id))
    if event is not None:
        out.append(_field("event", event))
    if retry is not None:
        if retry < 0:
            raise ValueError(f"retry must be >= 0 milliseconds, got {retry}")
        out.append(f"retry: {retry}\n")
    out.extend(f"data: {line}\n" for line in _LINE_BREAK.split(data))
    out.append("\n")
    return "".join(out)


def format_comment(text: str = "") -> str:
    """A comment frame (``: text`` per line), ignored by clients: a keep-alive."""
    return "".join(f": {line}\n" for line in _LINE_BREAK.split(text)) + "\n"


def event_id(epoch: str, seq: int) -> str:
    """The SSE id of the event ``seq`` of the hub named ``epoch``: ``"<epoch>-<seq>"``."""
    return f"{epoch}-{seq}"


_MAX_SEQ_DIGITS: Final = 20
"""The longest sequence number an event id can carry (2**64 has 20 digits): longer
is an id no hub issued, and ``int()`` refuses past 4300 digits anyway."""


def parse_event_id(value: str | None, epoch: str) -> int | None:
    """The sequence number in ``value`` if it is an id of the hub named ``epoch``, else ``None``.

    ``None`` is an unknown id (a client told to reset), whatever ``value`` holds.

    >>> parse_event_id("01ABC-42", "01ABC"), parse_event_id("01XYZ-42", "01ABC")
    (42, None)
    >>> parse_event_id("01ABC-" + "9" * 5000, "01ABC") is None
    True
    """
    if not value:
        return None
    prefix, sep, digits = value.strip().rpartition("-")
    if not sep or prefix != epoch or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits) if len(digits) <= _MAX_SEQ_DIGITS else None


def _json_default(value: object) -> Any:
    """JSON for what the standard encoder refuses (an lsn of a journal's own type)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    return str(value)


def encode(event: Event, epoch: str, *, default: Callable[[object], Any] | None = None) -> str:
    """The SSE frame of a published hub event: id, topic as the event type, JSON data.

    ``default`` turns values the JSON encoder does not know into JSON (the
    fallback: dataclasses and pydantic models as objects, dates as ISO
    strings, anything else as ``str``).
    """
    data = json.dumps(
        event.payload(),
        ensure_ascii=False,
        separators=(",", ":"),
        default=default or _json_default,
    )
    return format_event(data, event=event.topic, id=event_id(epoch, event.seq))


def echo(value: str, limit: int = ECHO_MAX_CHARS) -> str:
    """``value`` as a ``reset`` repeats it: whole up to ``limit`` characters, else cut with ``…``.

    The ``Last-Event-ID`` header is the client's to fill; echoed whole, a
    10,000-character header came back as 10,000 characters of every reset.
    What is kept is enough to tell which id was meant.

    >>> echo("E-42")
    'E-42'
    >>> len(echo("9" * 10_000)), echo("9" * 10_000)[-2:]
    (80, '9…')
    """
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _open(
    hub: Hub,
    last_event_id: str | None,
    topics: Collection[str] | None,
    partition: str | None,
    maxsize: int,
    retry: int | None,
    shared: bool,
) -> tuple[Subscription, str]:
    """Subscribe, resuming after ``last_event_id`` if possible; the first frame to send."""
    after = parse_event_id(last_event_id, hub.epoch) if last_event_id else None
    sub = hub.subscribe(
        topics=topics, partition=partition, maxsize=maxsize, after=after, shared=shared
    )
    position = event_id(hub.epoch, sub.position)
    if last_event_id and (after is None or sub.gap):
        reason = sub.gap or GAP_UNKNOWN
        data = json.dumps(
            {"reason": reason, "last_event_id": echo(last_event_id), "resume_from": position},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return sub, format_event(data, event=EVENT_RESET, id=position, retry=retry)
    if last_event_id:  # resumed: the client already holds an id, and the replay follows
        return sub, format_comment("resumed") if retry is None else f"retry: {retry}\n\n"
    # A fresh client: an id without data sets its last event id without firing
    # an event, so a reconnect before the first event resumes from here.
    head = f"retry: {retry}\n" if retry is not None else ""
    return sub, f"{head}id: {position}\n\n"


def _dropped(event: Event, epoch: str) -> str:
    """The ``reset`` frame sent before ``event`` when the events just before it were
    dropped (the client read too slowly and its queue overflowed).

    Its id is the position right before ``event``: the client reloads, then
    follows from there (a reconnect with that id replays what comes next).
    """
    position = event_id(epoch, event.seq - 1)
    data = json.dumps(
        {"reason": GAP_DROPPED, "dropped": event.dropped, "resume_from": position},
        separators=(",", ":"),
    )
    return format_event(data, event=EVENT_RESET, id=position)


def _frames(
    event: Event | None, epoch: str, default: Callable[[object], Any] | None
) -> Iterator[str]:
    """The frames for what one wait on the subscription gave, while it is open.

    An event, preceded by a ``reset`` when events were dropped before it; no
    event (the wait timed out): a :data:`KEEP_ALIVE`.
    """
    if event is None:
        yield KEEP_ALIVE
        return
    if event.dropped:
        yield _dropped(event, epoch)
    yield encode(event, epoch, default=default)


def stream(
    hub: Hub,
    *,
    last_event_id: str | None = None,
    topics: Collection[str] | None = None,
    partition: str | None = None,
    maxsize: int = DEFAULT_MAXSIZE,
    keepalive: float = DEFAULT_KEEPALIVE_S,
    retry: int | None = None,
    default: Callable[[object], Any] | None = None,
    shared: bool = True,
) -> Generator[str, None, None]:
    """SSE frames of the hub's events, for a thread-per-client server.

    Subscribes on the first ``next()``: the first frame positions a new client
    (or tells a resuming one about a gap, see :data:`EVENT_RESET`), then come
    the replayed and live events, with :data:`KEEP_ALIVE` after ``keepalive``
    idle seconds. A client too slow for its ``maxsize`` queue loses the oldest
    events, and is sent a ``reset`` (reason :data:`GAP_DROPPED`) before the
    next one it gets. It ends when the hub closes; closing the generator (the
    client went away) unsubscribes. ``retry`` (milliseconds) sets the client's
    reconnection delay. ``topics``, ``partition`` and ``shared`` choose the
    events as :meth:`Hub.subscribe <memstore_hub.Hub.subscribe>` does.
    """
    sub, first = _open(hub, last_event_id, topics, partition, maxsize, retry, shared)
    try:
        yield first
        epoch = hub.epoch
        while True:
            event = sub.get(timeout=keepalive)
            if event is None and sub.closed:
                return
            yield from _frames(event, epoch, default)
    finally:
        sub.close()


async def astream(
    hub: Hub,
    *,
    last_event_id: str | None = None,
    topics: Collection[str] | None = None,
    partition: str | None = None,
    maxsize: int = DEFAULT_MAXSIZE,
    keepalive: float = DEFAULT_KEEPALIVE_S,
    retry: int | None = None,
    default: Callable[[object], Any] | None = None,
    shared: bool = True,
) -> AsyncGenerator[str, None]:
    """:func:`stream` for asyncio servers (Starlette, FastAPI...): same frames, awaited."""
    sub, first = _open(hub, last_event_id, topics, partition, maxsize, retry, shared)
    try:
        yield first
        epoch = hub.epoch
        while True:
            event = await sub.aget(timeout=keepalive)
            if event is None and sub.closed:
                return
            for frame in _frames(event, epoch, default):
                yield frame
    finally:
        sub.close()
