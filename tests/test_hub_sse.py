"""SSE encoding and resumable streams, checked by an independent event-stream parser.

``EventStreamParser`` below is written from the WHATWG HTML standard,
"Interpreting an event stream" (the W3C Server-Sent Events rules): lines end
with CR LF, CR or LF; an empty line dispatches; ``:`` starts a comment; the
``data`` buffer gets each value plus LF and loses its last LF on dispatch; an
``id`` without NUL sets the last event id, which the dispatch makes current
even when there is no data to dispatch. It shares no code with
``memstore_hub.sse``. A simulated client built on it reconnects with
``Last-Event-ID`` and must end up with every event of its partition exactly
once, or be told about the gap.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from memstore import Item
from memstore_hub import Hub
from memstore_hub.sse import (
    CONTENT_TYPE,
    EVENT_RESET,
    KEEP_ALIVE,
    astream,
    encode,
    event_id,
    format_comment,
    format_event,
    parse_event_id,
    stream,
)

# ------------------------------------------------------------- the parser


@dataclass(frozen=True)
class Message:
    type: str
    data: str
    last_event_id: str


@dataclass
class EventStreamParser:
    """An EventSource's stream interpretation, from the WHATWG rules (no memstore code)."""

    messages: list[Message] = field(default_factory=list)
    last_event_id: str = ""
    retry: int | None = None
    _data: str = ""
    _type: str = ""
    _id_buffer: str = ""
    _line: list[str] = field(default_factory=list)
    _after_cr: bool = False
    _started: bool = False

    def feed(self, chunk: str) -> list[Message]:
        """Consume decoded text; the messages dispatched by it."""
        before = len(self.messages)
        if not self._started and chunk:
            self._started = True
            if chunk.startswith("\ufeff"):  # one leading BOM is ignored
                chunk = chunk[1:]
        for ch in chunk:
            if self._after_cr:
                self._after_cr = False
                if ch == "\n":  # the LF of a CR LF pair
                    continue
            if ch == "\r":
                self._end_line()
                self._after_cr = True
            elif ch == "\n":
                self._end_line()
            else:
                self._line.append(ch)
        return self.messages[before:]

    def _end_line(self) -> None:
        line = "".join(self._line)
        self._line.clear()
        if line == "":
            self._dispatch()
        elif line.startswith(":"):
            return
        elif ":" in line:
            name, value = line.split(":", 1)
            self._field(name, value[1:] if value.startswith(" ") else value)
        else:
            self._field(line, "")

    def _field(self, name: str, value: str) -> None:
        if name == "event":
            self._type = value
        elif name == "data":
            self._data += value + "\n"
        elif name == "id":
            if "\0" not in value:
                self._id_buffer = value
        elif name == "retry" and value and all("0" <= c <= "9" for c in value):
            self.retry = int(value)
        # any other field is ignored

    def _dispatch(self) -> None:
        self.last_event_id = self._id_buffer
        if self._data == "":
            self._type = ""
            return
        data = self._data[:-1] if self._data.endswith("\n") else self._data
        self.messages.append(Message(self._type or "message", data, self.last_event_id))
        self._data = self._type = ""


def parse(text: str) -> list[Message]:
    return EventStreamParser().feed(text)


def test_the_parser_follows_the_standard_examples() -> None:
    # The examples of the WHATWG section, as written there.
    assert parse("data: YHOO\ndata: +2\ndata: 10\n\n") == [Message("message", "YHOO\n+2\n10", "")]
    p = EventStreamParser()
    got = p.feed(": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n")
    got += p.feed("data:  third event\n\n")
    assert [(m.data, m.last_event_id) for m in got] == [
        ("first event", "1"),
        ("second event", ""),
        (" third event", ""),
    ]
    assert parse("data\n\ndata\ndata\n\ndata:") == [
        Message("message", "", ""),
        Message("message", "\n", ""),
    ]  # the last, unterminated event is never dispatched
    assert parse("data:test\n\ndata: test\n\n") == [Message("message", "test", "")] * 2


# --------------------------------------------------------------- framing

line_free = st.text().filter(lambda s: "\r" not in s and "\n" not in s)


def _normalized(data: str) -> str:
    return data.replace("\r\n", "\n").replace("\r", "\n")


@settings(max_examples=500, deadline=None)
@given(
    data=st.text(),
    event=st.none() | line_free,
    id=st.none() | line_free.filter(lambda s: "\0" not in s),
)
def test_any_text_round_trips_through_a_frame(data: str, event: str | None, id: str | None) -> None:
    frame = format_event(data, event=event, id=id)
    (message,) = parse(frame)
    assert message.data == _normalized(data)
    assert message.type == (event or "message")
    assert message.last_event_id == (id or "")


def test_multi_line_and_unicode_data_keep_every_character() -> None:
    data = "ligne un\r\nzweite Zeile\rтретья\n第四行 🚀\u2028still line four\x85\x0c\x1e end"
    frame = format_event(data, event="note")
    assert frame.count("data: ") == 4  # split on CR LF, CR, LF only
    assert parse(frame) == [
        Message(
            "note",
            "ligne un\nzweite Zeile\nтретья\n第四行 🚀\u2028still line four\x85\x0c\x1e end",
            "",
        )
    ]
    assert parse(format_event("")) == [Message("message", "", "")]
    assert parse(format_event("\n")) == [Message("message", "\n", "")]
    assert parse(format_event(" leading space")) == [Message("message", " leading space", "")]


@settings(max_examples=200, deadline=None)
@given(
    datas=st.lists(st.text(), min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
)
def test_frames_split_anywhere_parse_the_same(datas: list[str], cuts: list[int]) -> None:
    text = "".join(
        format_event(d, id=str(k)) + (format_comment("keep-alive") if k % 2 else KEEP_ALIVE)
        for k, d in enumerate(datas)
    )
    encoded = text.encode("utf-8").decode("utf-8")
    points = sorted({c % (len(encoded) + 1) for c in cuts})
    parser = EventStreamParser()
    previous = 0
    for point in [*points, len(encoded)]:
        parser.feed(encoded[previous:point])
        previous = point
    assert parser.messages == parse(encoded)
    assert [m.data for m in parser.messages] == [_normalized(d) for d in datas]
    assert parser.last_event_id == str(len(datas) - 1)


def test_comments_and_keep_alives_dispatch_nothing() -> None:
    assert parse(KEEP_ALIVE + format_comment("two\nlines") + ":\n\n") == []
    assert KEEP_ALIVE.startswith(":")


def test_bad_fields_are_refused_with_the_culprit() -> None:
    with pytest.raises(ValueError, match="event cannot contain a line break"):
        format_event("x", event="a\nb")
    with pytest.raises(ValueError, match="id cannot contain a line break"):
        format_event("x", id="1\r")
    with pytest.raises(ValueError, match="NUL"):
        format_event("x", id="1\0")
    with pytest.raises(ValueError, match="retry must be >= 0"):
        format_event("x", retry=-1)
    p = EventStreamParser()
    p.feed(format_event("x", retry=2500))
    assert p.retry == 2500


def test_event_ids_carry_the_hub_epoch() -> None:
    assert event_id("E1", 42) == "E1-42"
    assert parse_event_id("E1-42", "E1") == 42
    assert parse_event_id(" E1-42 ", "E1") == 42
    for bad in ("E2-42", "E1-", "E1-4x", "42", "", None, "E1-٤٢"):
        assert parse_event_id(bad, "E1") is None, bad
    assert CONTENT_TYPE.startswith("text/event-stream")


# ----------------------------------------------------------- hub events


def test_hub_events_encode_to_frames_whose_json_is_the_payload() -> None:
    hub = Hub(epoch="E")
    item = Item(
        id="n1",
        kind="note",
        title="Café crème 🚀",
        content="line one\r\nline two\u2028same line\x85",
        tags=["tenant/alpha"],
    )
    events = [
        hub.publish_change("upsert", item, lsn=(1700000000000, 3)),
        hub.publish_change("delete", None, "n1", "note", previous=item),
        hub.publish_hit(["n1"], "café\ncrème", "note", ["note"], partition="alpha"),
        hub.publish_metrics({"search.total": 7, "ratio": 0.5}),
    ]
    text = "".join(encode(ev, hub.epoch) for ev in events if ev is not None)
    messages = parse(text)
    assert [m.type for m in messages] == ["change", "change", "hit", "metrics"]
    assert [m.last_event_id for m in messages] == ["E-1", "E-2", "E-3", "E-4"]
    for m, ev in zip(messages, events, strict=True):
        assert ev is not None
        assert json.loads(m.data) == json.loads(json.dumps(ev.payload(), default=list))
    up = json.loads(messages[0].data)
    assert up["item"]["title"] == "Café crème 🚀" and up["lsn"] == [1700000000000, 3]
    assert up["item"]["content"] == item.content
    assert "no_embed" not in up["item"]  # in-process fields never leave the process


def test_unknown_lsn_types_are_encoded_not_refused() -> None:
    @dataclass(frozen=True)
    class Lsn:
        wall_ms: int
        counter: int

    hub = Hub(epoch="E")
    ev = hub.publish_change("upsert", Item(id="a", kind="note", title="t"), lsn=Lsn(5, 1))
    assert ev is not None
    (m,) = parse(encode(ev, hub.epoch))
    assert json.loads(m.data)["lsn"] == {"wall_ms": 5, "counter": 1}
    ev2 = hub.publish_change("upsert", Item(id="b", kind="note", title="t"), lsn=object())
    assert ev2 is not None
    (m2,) = parse(encode(ev2, hub.epoch, default=lambda o: "custom"))
    assert json.loads(m2.data)["lsn"] == "custom"


# --------------------------------------------------------------- streams


class Client:
    """An EventSource over :func:`stream`: reconnects with its last event id.

    ``keepalive=0`` makes the stream answer at once: a queued event, else a
    keep-alive, so "read what is there" needs no clock.
    """

    def __init__(self, hub: Hub, partition: str | None) -> None:
        self.hub = hub
        self.partition = partition
        self.parser = EventStreamParser()
        self.frames: Generator[str, None, None] | None = None

    def connect(self) -> None:
        self.frames = stream(
            self.hub,
            last_event_id=self.parser.last_event_id or None,
            partition=self.partition,
            keepalive=0,
        )
        self.parser.feed(next(self.frames))  # the position, resume note or reset

    def read_available(self, limit: int | None = None) -> None:
        assert self.frames is not None
        got = 0
        while limit is None or got < limit:
            frame = next(self.frames)
            if frame == KEEP_ALIVE:
                return
            got += len(self.parser.feed(frame))

    def disconnect(self) -> None:
        assert self.frames is not None
        self.frames.close()
        self.frames = None


def _seq(message: Message) -> int:
    return int(message.last_event_id.rpartition("-")[2])


def test_a_fresh_stream_positions_the_client_then_streams_its_partition() -> None:
    hub = Hub(epoch="E")
    hub.publish_hit(["x"], "before")
    client = Client(hub, "alpha")
    client.connect()
    assert client.parser.messages == [] and client.parser.last_event_id == "E-1"
    hub.publish_hit(["a"], "mine", partition="alpha")
    hub.publish_hit(["b"], "theirs", partition="beta")
    hub.publish_hit(["c"], "everyone's", partition="")
    client.read_available()
    assert [json.loads(m.data)["query"] for m in client.parser.messages] == ["mine", "everyone's"]
    assert client.parser.last_event_id == "E-4"


def test_a_reconnecting_client_gets_exactly_what_it_missed() -> None:
    hub = Hub(epoch="E")
    client = Client(hub, "alpha")
    client.connect()
    for k in range(3):
        hub.publish_hit([f"a{k}"], f"q{k}", partition="alpha")
    client.read_available(limit=2)
    client.disconnect()
    assert hub.stats().subscribers == 0  # closing the generator unsubscribed
    hub.publish_hit(["a3"], "q3", partition="alpha")
    hub.publish_hit(["b"], "other", partition="beta")
    client.connect()
    client.read_available()
    assert [json.loads(m.data)["query"] for m in client.parser.messages] == ["q0", "q1", "q2", "q3"]
    assert all(m.type == "hit" for m in client.parser.messages)


def test_a_client_beyond_the_replay_buffer_is_told_to_reload() -> None:
    hub = Hub(epoch="E", replay=2)
    client = Client(hub, None)
    client.connect()
    client.disconnect()
    for k in range(5):
        hub.publish_hit(["a"], f"q{k}")
    client.connect()
    (reset,) = client.parser.messages
    assert reset.type == EVENT_RESET
    assert json.loads(reset.data) == {
        "reason": "expired",
        "last_event_id": "E-0",
        "resume_from": "E-5",
    }
    assert client.parser.last_event_id == "E-5"
    hub.publish_hit(["a"], "live")
    client.read_available()
    assert [m.type for m in client.parser.messages] == [EVENT_RESET, "hit"]
    assert client.parser.last_event_id == "E-6"


def test_an_id_from_another_hub_instance_is_unknown() -> None:
    old, new = Hub(epoch="OLD"), Hub(epoch="NEW")
    for k in range(3):
        old.publish_hit(["a"], str(k))
        new.publish_hit(["a"], str(k))
    frames = stream(new, last_event_id="OLD-1", keepalive=0)
    (reset,) = parse(next(frames))
    assert reset.type == EVENT_RESET
    assert json.loads(reset.data)["reason"] == "unknown"
    assert next(frames) == KEEP_ALIVE  # nothing replayed from a foreign position
    frames.close()


@pytest.mark.parametrize("seq", ["9" * 21, "9" * 5000])
def test_an_id_with_a_sequence_no_hub_issues_is_unknown(seq: str) -> None:
    hub = Hub(epoch="E")
    hub.publish_hit(["a"], "q")
    frames = stream(hub, last_event_id=f"E-{seq}", keepalive=0)
    (reset,) = parse(next(frames))
    assert (reset.type, json.loads(reset.data)["reason"]) == (EVENT_RESET, "unknown")
    assert reset.last_event_id == "E-1"
    frames.close()


def test_a_reset_echoes_a_long_last_event_id_cut_short() -> None:
    # Before: a 10,000-character Last-Event-ID came back whole in the reset's data.
    hub = Hub(epoch="E")
    hub.publish_hit(["a"], "q")
    for sent, echoed in (("x" * 10_000, "x" * 79 + "…"), ("OLD-7", "OLD-7"), ("y" * 80, "y" * 80)):
        frames = stream(hub, last_event_id=sent, keepalive=0)
        (reset,) = parse(next(frames))
        data = json.loads(reset.data)
        assert (reset.type, data["reason"], data["last_event_id"]) == (
            EVENT_RESET,
            "unknown",
            echoed,
        )
        frames.close()


def test_a_stream_sends_keep_alives_when_idle_and_ends_when_the_hub_closes() -> None:
    hub = Hub(epoch="E")
    frames = stream(hub, keepalive=0, retry=3000)
    first = next(frames)
    p = EventStreamParser()
    p.feed(first)
    assert p.retry == 3000 and p.last_event_id == "E-0"
    assert next(frames) == KEEP_ALIVE
    hub.publish_hit(["a"], "last")
    hub.close()
    rest = list(frames)
    assert [m.type for m in parse("".join(rest))] == ["hit"]


def test_the_async_stream_resumes_like_the_thread_one() -> None:
    hub = Hub(epoch="E")
    for k in range(4):
        hub.publish_hit(["a"], f"q{k}", partition="alpha")

    async def main() -> list[str]:
        frames = astream(hub, last_event_id="E-2", partition="alpha", keepalive=0)
        out = [await anext(frames)]
        while (frame := await anext(frames)) != KEEP_ALIVE:
            out.append(frame)
        hub.close()
        out.extend([frame async for frame in frames])
        return out

    frames = asyncio.run(main())
    assert frames[0].startswith(":")  # a resumed stream starts with a comment
    messages = parse("".join(frames))
    assert [json.loads(m.data)["query"] for m in messages] == ["q2", "q3"]
    assert [m.last_event_id for m in messages] == ["E-3", "E-4"]


# ------------------------------------------------ resumption, as a property

Step = tuple[str, Any]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.sampled_from(("a", "b", "", None))),
        st.tuples(st.just("read"), st.none() | st.integers(min_value=0, max_value=3)),
        st.tuples(st.just("reconnect"), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(script=steps, replay=st.sampled_from((0, 2, 5, 1000)))
def test_a_reconnecting_client_never_misses_an_event_without_being_told(
    script: list[Step], replay: int
) -> None:
    hub = Hub(epoch="E", replay=replay)
    client = Client(hub, "a")
    client.connect()
    visible: list[int] = []  # the seqs of every event partition "a" may see
    for action, arg in script:
        if action == "publish":
            ev = hub.publish_hit(["x"], "q", partition=arg)
            assert ev is not None
            if arg in ("a", ""):
                visible.append(ev.seq)
        elif action == "read":
            client.read_available(limit=arg)
        else:
            client.disconnect()
            client.connect()
    client.read_available()

    last = 0  # the position the client knows up to
    resets = 0
    for m in client.parser.messages:
        seq = _seq(m)
        if m.type == EVENT_RESET:
            resets += 1  # told: what it missed is excused
        else:
            assert m.type == "hit" and json.loads(m.data)["seq"] == seq
            assert [v for v in visible if last < v < seq] == [], "missed without a reset"
        assert seq >= last
        last = seq
    assert [v for v in visible if v > last] == []
    if replay >= len(script):
        assert resets == 0  # the buffer always reached back: never a needless reset
    event("resets" if resets else "no reset")


def _fall_behind(frames: list[str]) -> None:
    messages = parse("".join(frames))
    assert [m.type for m in messages] == [EVENT_RESET, "hit", "hit"]
    reset = messages[0]
    assert json.loads(reset.data) == {"reason": "dropped", "dropped": 3, "resume_from": "E-3"}
    assert reset.last_event_id == "E-3"  # a reconnect from here replays what follows
    assert [json.loads(m.data)["query"] for m in messages[1:]] == ["q3", "q4"]


def test_a_client_that_fell_behind_is_told_to_reload_not_left_to_spot_a_field() -> None:
    """A stream whose queue overflowed (a client that stopped reading) says so with a
    ``reset``, as a reconnect past the replay buffer does, before the events that follow."""
    hub = Hub(epoch="E")
    frames = stream(hub, maxsize=2, keepalive=0)
    out = [next(frames)]
    for k in range(5):
        hub.publish_hit(["a"], f"q{k}")
    while (frame := next(frames)) != KEEP_ALIVE:
        out.append(frame)
    frames.close()
    _fall_behind(out[1:])

    hub2 = Hub(epoch="E")

    async def main() -> list[str]:
        aframes = astream(hub2, maxsize=2, keepalive=0)
        got = [await anext(aframes)]
        for k in range(5):
            hub2.publish_hit(["a"], f"q{k}")
        while (frame := await anext(aframes)) != KEEP_ALIVE:
            got.append(frame)
        await aframes.aclose()
        return got

    _fall_behind(asyncio.run(main())[1:])
