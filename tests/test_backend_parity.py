"""SQLite and PostgreSQL journals take, keep and give back the same things.

The same sequence of public :class:`~memstore.Memory` operations runs on a
Memory over a real SQLite journal and on one over a real PostgreSQL journal
(no mocks), fed on purpose with values that databases treat differently:
NUL characters (PostgreSQL ``text`` and ``json`` refuse ``\\u0000``), lone
surrogates, zero-width, right-to-left and combining characters, NFC and NFD
spellings of one word, sizes at and one past every bound of
:mod:`memstore.limits`, ``data`` payloads that are not text (NaN, huge
integers, 1,200 levels of nesting), and times at the edges of the calendar.

Every call must end the same way on both (the same result, or the same
:class:`~memstore.errors.MemstoreError` with the same message; anything else
escaping fails the test), and everything a user can read (items, ``get``,
``recent``, search hits in order, stats, links, history, ``as_of`` every
position seen, the export) must be the same on both, in memory, on disk, and
again after both are closed and reopened. Each export is then imported into
a fresh Memory of the *other* backend, which must read back the same.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import itertools
import json
import math
import os
import tempfile
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Memory
from memstore import limits as L
from memstore.errors import MemstoreError
from memstore.journal import Hlc, InvalidLsnError, JournalBase, Lsn, SqliteJournal
from memstore.journal import _pgsql as pgsql
from memstore.journal.base import EXPORT_FORMAT
from tests.pgtest import PgPlace, Schemas, postgres_module

PostgresJournal = postgres_module().PostgresJournal

WALL_MS = 1_767_225_600_000
"""Both journals' wall clock (2026-01-01, standing still: stamps differ by counter alone)."""
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
EMBEDDER = os.environ.get("PARITY_EMBEDDER") or None
"""``None`` (lexical search); ``PARITY_EMBEDDER=hash`` runs it all with vectors too."""
"""Both stores' clock (standing still: ``created_at`` and ``updated_at`` are the same)."""


# ------------------------------------------------------------ the two sides


@dataclass
class Side:
    """One backend: how to open its journal again, and the Memory open on it."""

    name: str
    opener: Callable[[], JournalBase]
    memory: Memory | None = None

    def open(self) -> Memory:
        self.memory = Memory(
            embedder=EMBEDDER, journal=self.opener(), config=Config(clock=lambda: T0)
        )
        return self.memory

    @property
    def mem(self) -> Memory:
        assert self.memory is not None, f"the {self.name} side is closed"
        return self.memory

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None


def sqlite_side(folder: Path, name: str = "sqlite") -> Side:
    path = folder / f"{name}.db"
    return Side(name, lambda: SqliteJournal(path, durability="off", wall=lambda: WALL_MS))


def postgres_side(place: PgPlace, name: str = "postgres") -> Side:
    def opener() -> JournalBase:
        journal: JournalBase = PostgresJournal(
            place.dsn,
            schema=place.schema,
            node_id=0,
            durability="off",
            replicate=False,
            wall=lambda: WALL_MS,
        )
        return journal

    return Side(name, opener)


@contextlib.contextmanager
def both(schemas: Schemas) -> Iterator[tuple[Side, Side]]:
    """A SQLite side and a PostgreSQL side, opened, and closed whatever happens."""
    with tempfile.TemporaryDirectory() as folder:
        sides = (sqlite_side(Path(folder)), postgres_side(schemas.new("parity")))
        try:
            for side in sides:
                side.open()
            yield sides
        finally:
            for side in sides:
                side.close()


# ---------------------------------------------------------- what is seen


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What a call ended with: its result made comparable, or the engine's error.

    Only :class:`MemstoreError` is an answer; anything else (a ``TypeError``,
    a ``RecursionError``, a driver's exception) escapes and fails the test.
    """
    try:
        return ("ok", plain(call()))
    except MemstoreError as e:
        return ("refused", type(e).__name__, str(e))


def plain(value: Any) -> Any:
    """``value`` as plain data: items as their JSON, containers element by element."""
    if isinstance(value, Item):
        return value.model_dump_json()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Lsn):
        return str(value)
    return value


QUERIES = ("a", "note", "café", "cafe\u0301", "😀", "الذاكرة", "x y z")


def observe(mem: Memory, ids: list[str], heads: list[Lsn]) -> dict[str, Any]:
    """Everything a user can read of ``mem``, as plain data.

    ``items`` is the store's view (an item past its ``stale_after`` reads as
    stale), ``on_disk`` what the journal holds; each is compared with the
    same on the other backend.
    """
    journal = mem.journal
    assert journal is not None
    stats = mem.stats()
    seen: dict[str, Any] = {
        "items": sorted(it.model_dump_json() for it in mem.store.items()),
        "on_disk": sorted(it.model_dump_json() for it in journal.current()),
        "get": {id: outcome(lambda id=id: mem.get(id)) for id in ids},
        "history": {
            id: outcome(
                lambda id=id: [
                    (str(v.valid_from), str(v.valid_to), v.op, v.kind, plain(v.item))
                    for v in mem.history(id)
                ]
            )
            for id in ids
        },
        "history_unstamped": {
            id: outcome(lambda id=id: [(v.op, v.kind, plain(v.item)) for v in mem.history(id)])
            for id in ids
        },
        "recent": [it.id for it in mem.recent(L.MAX_RESULTS)],
        "search": {
            q: outcome(lambda q=q: [(r.item.id, r.relevance) for r in mem.search(q, limit=50)])
            for q in QUERIES
        },
        "as_of": [outcome(lambda h=h: mem.as_of(h)) for h in heads],
        "stats": (stats.items, stats.active, stats.vectors),
        "partitioned": [
            (
                outcome(lambda p=p: [it.id for it in mem.recent(L.MAX_RESULTS, partition=p)]),
                outcome(lambda p=p: [h.item.id for h in mem.search("a x", partition=p)]),
                outcome(lambda p=p: unstamped(export_of(mem, p).split("\n", 1)[1])),
            )
            for p in ("p", NFD, "*", "tenant/x")
        ],
        "head": str(stats.head),
    }
    export = io.StringIO()
    mem.export(export)
    header, body = export.getvalue().split("\n", 1)
    seen["export"] = body
    seen["export_unstamped"] = unstamped(body)
    seen["export_header"] = {k: v for k, v in json.loads(header).items() if k != "head"}
    return seen


def unstamped(body: str) -> list[Any]:
    """An export's item lines and end line with the versions' stamps left out.

    Stamps part where the heads do (see :data:`MOVES_HEAD_ON_POSTGRES`); what the
    versions say must not.
    """
    *items, end = body.splitlines()
    lines = [json.loads(line)["versions"] for line in items]
    bare = [[{k: x for k, x in v.items() if k != "valid_from"} for v in vs] for vs in lines]
    return [*bare, json.loads(end)]


MOVES_HEAD_ON_POSTGRES = ("purge", "import")
"""Where the heads part, by design: PostgreSQL gives a purge or an import a commit
stamp of its own (its followers wait for it, docs/postgres.md); SQLite's head is
its newest version. Positions differ from then on, never what is read at them."""


STAMPED = frozenset({"head", "history", "export"})
"""What carries journal positions (the rest is compared whether or not the heads parted)."""


def assert_same(seen: list[dict[str, Any]], what: str, stamps: bool = True) -> None:
    """Both sides saw the same (what carries positions only when ``stamps``)."""
    a, b = seen
    for key in a:
        if stamps or key not in STAMPED:
            assert a[key] == b[key], f"{what}: {key} differs"


# ------------------------------------------------ pathological values


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for n in range(levels):
        value = [value] if n % 2 else {"k": value}
    return value


def sized(limit: int) -> list[str]:
    """Text at ``limit`` characters and one past it (two bytes a character in UTF-8)."""
    return ["é" * limit, "é" * (limit + 1)]


NFC, NFD = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
ODD_TEXT = [
    "a\x00b",
    "\x00",
    "caf\udce9",  # a lone low surrogate
    "\ud83d",  # half an emoji
    "\u200b\u200c\u200d\ufeff",  # zero-width characters
    "\u202eevil\u202c \u05e9\u05dc\u05d5\u05dd \u0627\u0644\u0630\u0627\u0643\u0631\u0629",
    "e\u0301\u0302\u0303 a\u0308",  # combining marks
    "😀 👩\u200d👩\u200d👧 🇫🇷 \U0010ffff \uffff",
    "line\r\nline\rline\n",
    "\\u0000 \\ud800 \"quoted\" 'single' \t",
    NFC,
    NFD,
    " padded ",
]
text = st.one_of(
    st.sampled_from(ODD_TEXT),
    st.text(st.characters(exclude_categories=()), min_size=1, max_size=12),
)
IDS = [
    "a",
    "A",
    "note",
    "Note",
    NFC,
    NFD,
    "a/b",
    "a.b",
    "..",
    "x" * L.MAX_ID_CHARS,
    "x" * (L.MAX_ID_CHARS + 1),
    " a",
    "a b",
    "a\x00b",
    "a\x01",
    "\u200ba",
    "\u202eab",
    "😀",
    "a\ud800",
]
ids = st.sampled_from(IDS)
TAGS = ["t", "T", NFC, NFD, " t", "a,b", "a\x00", "tenant/x", "shared", "a/b.c", "😀"]
tags = st.lists(st.sampled_from([*TAGS, *sized(L.MAX_TAG_CHARS)]), max_size=4)
partitions = st.sampled_from(
    [None, "p", "P", NFC, NFD, "p q", "a/b", "p\x00", "\u200bp", *sized(L.MAX_NAME_CHARS)]
)
NOT_TEXT = [
    math.nan,
    math.inf,
    -0.0,
    2**63,
    2**53 + 1,
    -(2**64),
    None,
    True,
    b"bytes",
    ("a", "b"),
    ["a", "b"],
    deep(1_200),
]
data_keys = st.one_of(
    text, st.sampled_from(["k\x00", "K", "k", *sized(L.MAX_DATA_KEY_CHARS), 1, None, ("t",)])
)
data = st.one_of(
    st.dictionaries(data_keys, st.one_of(text, st.sampled_from(NOT_TEXT)), max_size=3),
    st.sampled_from(
        [
            {f"k{n}": "v" for n in range(L.MAX_DATA_KEYS + 1)},
            {"k": "é" * (L.MAX_DATA_CHARS - 1)},
            {"k": "é" * L.MAX_DATA_CHARS},
            deep(1_200),
        ]
    ),
)
EVENT_DATES = [
    "0001-01-01",
    "9999-12-31",
    "0000-12-31",
    "10000-01-01",
    "2016-12-31T23:59:60Z",  # a leap second
    "2024-02-29",
    "2023-02-29",
    "2024-01-01T00:00:00.123456789Z",
    "2024-01-01T00:00:00+14:00",
    "2024-01-01T00:00:00-12:00",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "2024-01-01T00:00:00+00:09:21",
    "2024-01-01\x00",
    "x" * L.MAX_EVENT_DATE_CHARS,
]


def zone(**delta: float) -> dt.timezone:
    return dt.timezone(dt.timedelta(**delta))


TIMES: list[object] = [
    dt.datetime(1, 1, 1, tzinfo=dt.UTC),
    dt.datetime(1, 1, 1, tzinfo=zone(hours=14)),  # before year 1 in UTC
    dt.datetime(1, 1, 1, 12, tzinfo=zone(seconds=561)),
    dt.datetime(1, 1, 1, tzinfo=zone(seconds=561)),  # before year 1 in UTC
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
    dt.datetime(9999, 12, 31, 23, 59, tzinfo=zone(hours=-14)),  # after 9999 in UTC
    dt.datetime(9999, 12, 31, 23, tzinfo=zone(seconds=-561)),
    dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=zone(seconds=-561)),  # after 9999 in UTC
    dt.datetime(2030, 1, 1, tzinfo=zone(hours=23, minutes=59)),
    "2030-01-01T00:00:00.123456789+14:00",
    "2016-12-31T23:59:60Z",
    "2030-01-01T00:00:00",  # naive
]
kinds = st.sampled_from(
    ["note", "event", "Note", "a b", "k\x00", "é", "x" * L.MAX_KIND_CHARS, "x" * 65, "hypothesis"]
)
contents = st.one_of(text, st.sampled_from(sized(L.MAX_CONTENT_CHARS)))


@st.composite
def fields(draw: st.DrawFn) -> dict[str, Any]:
    """A few ``Item`` fields, each pathological or plain."""
    out: dict[str, Any] = {}
    choices: dict[str, st.SearchStrategy[Any]] = {
        "title": st.one_of(text, st.sampled_from(sized(L.MAX_TITLE_CHARS))),
        "subject": st.one_of(text, st.sampled_from(sized(L.MAX_SUBJECT_CHARS))),
        "kind": kinds,
        "tags": tags,
        "data": data,
        "event_date": st.sampled_from(EVENT_DATES),
        "stale_after": st.sampled_from(TIMES),
        "created_at": st.sampled_from(TIMES),
        "evidence_refs": st.lists(st.one_of(text, st.sampled_from(sized(L.MAX_REF_CHARS)))),
        "supersedes": st.lists(ids, max_size=2),
        "private_to": st.sampled_from(["u", "U", NFD, "u\x00", " u", "x" * 129]),
        "links": st.lists(
            st.fixed_dictionaries(
                {"to_id": ids, "relation": st.sampled_from(["explains", "Explains", "nope"])},
                optional={"weight": st.sampled_from([1.0, 5e-324, math.nan, 0.0, 2.0])},
            ),
            max_size=2,
        ),
    }
    for name in draw(st.lists(st.sampled_from(sorted(choices)), max_size=3, unique=True)):
        out[name] = draw(choices[name])
    return out


add = st.tuples(st.just("add"), contents, ids, partitions, fields(), st.booleans())
op = st.one_of(
    add,
    st.tuples(st.just("add_many"), st.lists(st.tuples(contents, ids, fields()), max_size=3)),
    st.tuples(st.just("update"), ids, fields()),
    st.tuples(st.just("supersede"), ids, contents, ids),
    st.tuples(st.just("delete"), ids),
    st.tuples(
        st.just("link"),
        ids,
        ids,
        st.sampled_from(["explains", "caused_by", "Explains", "explains\x00", "nope"]),
        st.sampled_from([1.0, 5e-324, 0.5, -0.0, math.nan, 1.0000000000000002]),
    ),
    st.tuples(st.just("refute"), ids, text),
    st.tuples(st.just("purge"), st.lists(ids, max_size=2)),
    st.tuples(st.just("history"), ids),
    st.tuples(st.just("expire"), ids),
    st.tuples(st.just("context"), st.one_of(ids, text)),
    st.tuples(st.just("search"), text, partitions, st.sampled_from([None, "u", NFD])),
    st.tuples(st.just("as_of"), st.sampled_from(TIMES[:9]), partitions),
)
batch = st.tuples(st.just("batch"), st.lists(add, min_size=1, max_size=3), st.booleans())
ops = st.lists(st.one_of(op, batch), min_size=1, max_size=8)


class Rollback(Exception):
    """Raised inside a batch to undo it."""


def apply(mem: Memory, step: tuple[Any, ...]) -> Any:
    """Run one operation on ``mem`` (exceptions are the caller's to compare)."""
    name = step[0]
    if name == "add":
        _, content, id, partition, extra, dedup = step
        return mem.add(content, id=id, partition=partition, dedup=dedup, **extra)
    if name == "add_many":
        return mem.add_many([{"text": c, "id": id, **extra} for c, id, extra in step[1]])
    if name == "update":
        return mem.update(step[1], **step[2])
    if name == "supersede":
        return mem.supersede(step[1], step[2], id=step[3])
    if name == "delete":
        return mem.delete(step[1])
    if name == "link":
        return mem.link(step[1], step[2], step[3], step[4])
    if name == "refute":
        return mem.refute(step[1], step[2])
    if name == "purge":
        return mem.purge(step[1])
    if name == "expire":
        return mem.expire(step[1])
    if name == "context":
        found, scored = mem.context(step[1])
        return [it.id for it in found], [(s.item.id, s.score) for s in scored]
    if name == "search":
        hits = mem.search(step[1], partition=step[2], user=step[3], limit=20)
        return [(h.item.id, h.relevance) for h in hits]
    if name == "as_of":
        return mem.as_of(step[1], partition=step[2])
    if name == "history":
        return [(v.op, v.kind, plain(v.item)) for v in mem.history(step[1])]
    assert name == "batch"
    assert mem.journal is not None
    with contextlib.suppress(Rollback), mem.journal.transaction():
        out = [outcome(lambda s=s: apply(mem, s)) for s in step[1]]
        if step[2]:
            raise Rollback
    return out


def run_both(sides: tuple[Side, Side], steps: list[tuple[Any, ...]]) -> list[list[Lsn]]:
    """Every step on both sides, with the same outcome; each side's head after each step.

    The heads are the same until a purge (see :data:`MOVES_HEAD_ON_POSTGRES`).
    """
    heads: list[list[Lsn]] = [[], []]
    parted = False
    for n, step in enumerate(steps):
        got = []
        for side, seen in zip(sides, heads, strict=True):
            mem = side.memory
            assert mem is not None
            got.append(outcome(lambda mem=mem, step=step: apply(mem, step)))
            head = mem.stats().head
            assert head is not None
            seen.append(head)
        assert got[0] == got[1], f"step {n} ({step[0]}) ended differently"
        parted = parted or (step[0] in MOVES_HEAD_ON_POSTGRES and got[0][0] == "ok")
        assert parted or heads[0][-1] == heads[1][-1], f"step {n} ({step[0]}): heads differ"
    return heads


def check_sequence(schemas: Schemas, steps: list[tuple[Any, ...]]) -> None:
    parted = any(step[0] in MOVES_HEAD_ON_POSTGRES for step in steps)
    with both(schemas) as sides:
        heads = run_both(sides, steps)
        before = [observe(side.mem, IDS, h) for side, h in zip(sides, heads, strict=True)]
        assert_same(before, "before reopening", stamps=not parted)
        for side in sides:
            side.close()
            side.open()
        after = [observe(side.mem, IDS, h) for side, h in zip(sides, heads, strict=True)]
        for b, a, side in zip(before, after, sides, strict=True):
            assert_same([b, a], f"{side.name} reopened")
        exports = [export_of(side.mem) for side in sides]
    # each export, imported into a fresh Memory of the other backend
    with both(schemas) as sides:
        for side, export in zip(sides, reversed(exports), strict=True):
            side.mem.import_(io.StringIO(export))
        imported = [observe(side.mem, IDS, []) for side in sides]
        assert_same(imported, "imported", stamps=False)
        assert imported[0]["export"] == before[1]["export"]  # SQLite took PostgreSQL's
        assert imported[1]["export"] == before[0]["export"]


def export_of(mem: Memory, partition: str | None = None) -> str:
    out = io.StringIO()
    mem.export(out, partition)
    return out.getvalue()


@settings(
    max_examples=int(os.environ.get("PARITY_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(steps=ops)
def test_both_backends_take_and_give_back_the_same(
    pg_schemas: Schemas, steps: list[tuple[Any, ...]]
) -> None:
    check_sequence(pg_schemas, steps)


# ------------------------------------- the values each fix is about


def test_every_odd_value_is_taken_or_refused_alike(pg_schemas: Schemas) -> None:
    """Every pathological value above, in every field, once: an exhaustive pass."""
    steps: list[tuple[Any, ...]] = []
    for n, value in enumerate(ODD_TEXT):
        for name in ("title", "subject", "content"):
            extra = {} if name == "content" else {name: value}
            text = value if name == "content" else "x"
            steps.append(("add", text, f"t{n}{name}", None, extra, False))
        steps.append(("add", "x", f"d{n}", None, {"data": {value: value}}, False))
        steps.append(("add", "x", f"r{n}", None, {"evidence_refs": [value]}, False))
    for n, value in enumerate(NOT_TEXT):
        steps.append(("add", "x", f"n{n}", None, {"data": {"k": value}}, False))
    for n, date in enumerate(EVENT_DATES):
        steps.append(("add", "x", f"e{n}", None, {"kind": "event", "event_date": date}, False))
    for n, when in enumerate(TIMES):
        for name in ("stale_after", "created_at"):
            steps.append(("add", "x", f"s{n}{name}", None, {name: when}, False))
    for id, partition in itertools.product(IDS, ["p", NFD]):
        steps.append(("add", "x", id, partition, {}, False))
    steps.extend(("history", id) for id in IDS)
    steps.append(("purge", ["a\x00b", "a"]))
    check_sequence(pg_schemas, steps)


# --------------------------------- one root cause each, on both backends


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on each backend in turn, holding one note (id ``kept``)."""
    if request.param == "sqlite":
        side = sqlite_side(tmp_path)
    else:
        side = postgres_side(request.getfixturevalue("pg_schemas").new("parity"))
    memory = side.open()
    memory.add("the billing service runs in eu-west-1", id="kept", partition="acme")
    yield memory
    side.close()


def refused(mem: Memory, call: Callable[[], Any], error: type[Exception], match: str) -> None:
    """``call`` raises ``error`` matching ``match``, and memory and disk are as they were."""
    before = export_of(mem), sorted(it.model_dump_json() for it in mem.store.items())
    with pytest.raises(error, match=match):
        call()
    assert (export_of(mem), sorted(it.model_dump_json() for it in mem.store.items())) == before


@pytest.mark.parametrize("field", ["stale_after", "created_at"])
@pytest.mark.parametrize(
    "when",
    [
        dt.datetime(1, 1, 1, tzinfo=zone(hours=14)),
        dt.datetime(1, 1, 1, tzinfo=zone(seconds=561)),
        dt.datetime(9999, 12, 31, 23, 59, tzinfo=zone(hours=-14)),
        dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=zone(seconds=-561)),
    ],
)
def test_a_time_outside_the_utc_years_is_refused_before_anything_is_written(
    mem: Memory, field: str, when: dt.datetime
) -> None:
    """Before: accepted by the store, then a PydanticSerializationError at the journal
    (an offset in seconds is written as UTC) or an instant no UTC reader can convert."""
    outside = "outside the years 1-9999 in UTC"
    refused(mem, lambda: mem.add("x", id="edge", **{field: when}), MemstoreError, outside)
    refused(mem, lambda: mem.update("kept", **{field: when}), MemstoreError, outside)
    with Memory(embedder=None) as bare, pytest.raises(MemstoreError, match=outside):
        bare.add("x", **{field: when})  # no journal: the same rule
    inside = when.replace(year=2) if when.year == 1 else when.replace(year=9998)
    assert getattr(mem.add("x", id="fine", **{field: inside}), field) == inside


def test_a_deeply_nested_argument_is_refused_not_recursed_into(mem: Memory) -> None:
    """Before: RecursionError while describing the bad value for the message."""
    nested = [deep(100_000)]
    refused(mem, lambda: mem.add("x", tags=nested), MemstoreError, r"tags\[0\] must be text")
    refused(mem, lambda: mem.get(deep(100_000)), MemstoreError, "id must be text")


def test_a_nul_in_a_key_is_refused_alike_before_the_database(mem: Memory) -> None:
    """Before: SQLite answered (nothing found, or purged nothing) where PostgreSQL,
    whose text cannot hold NUL, raised a JournalError from the driver."""
    head = mem.stats().head
    assert head is not None
    nul = "holds a NUL character"
    refused(mem, lambda: mem.history("kept\x00"), MemstoreError, nul)
    refused(mem, lambda: mem.purge(["kept\x00"]), MemstoreError, nul)
    refused(mem, lambda: mem.get("kept\x00"), MemstoreError, nul)
    refused(mem, lambda: mem.as_of(head, partition="acme\x00"), MemstoreError, nul)
    refused(mem, lambda: mem.export(io.StringIO(), partition="acme\x00"), MemstoreError, nul)
    assert mem.journal is not None
    journal = mem.journal
    refused(mem, lambda: journal.as_of(head, partition="a\x00"), MemstoreError, nul)
    # text fields hold NUL as any other character, and give it back
    assert mem.add("a\x00b", id="nul", data={"k\x00": "v\x00"}).content == "a\x00b"
    assert mem.get("nul") == journal.as_of(journal.head())[-1]


@pytest.mark.parametrize(
    "position",
    [Lsn(2**70, 0), Lsn(-1, 0), Lsn(0, 2**40), Hlc(2**63, 0, 0), Lsn(1.5, 0), Lsn(True, 0)],  # type: ignore[arg-type]
)
def test_a_position_out_of_range_is_refused_whatever_its_form(
    mem: Memory, position: Lsn | Hlc
) -> None:
    """Before: SQLite raised OverflowError (or TypeError) where PostgreSQL answered []."""
    as_of: Callable[[object], Any] = mem.as_of  # an Hlc is taken too (the journal's AsOf)
    refused(mem, lambda: as_of(position), InvalidLsnError, "out of range|whole numbers")


@pytest.mark.parametrize(
    ("when", "found"),
    [
        (dt.datetime(2248, 9, 26, 15, 10, 22, 207000, tzinfo=dt.UTC), True),  # the last one
        (dt.datetime(2248, 9, 26, 15, 10, 22, 208000, tzinfo=dt.UTC), True),  # one past it
        (dt.datetime(2300, 1, 1, tzinfo=zone(hours=-5)), True),
        (dt.datetime(9999, 12, 31, 23, 59, tzinfo=zone(hours=-14)), True),
        (dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC), False),
        (dt.datetime(1, 1, 1, tzinfo=zone(hours=14)), False),
    ],
)
def test_any_moment_is_an_as_of(mem: Memory, when: dt.datetime, found: bool) -> None:
    """A moment past the journal's last millisecond (2248) is after every write.

    Before: the engine raised its internal ``wall_ms ... out of range`` for it
    (and for a moment before 1970), where MemoryProtocol's ``as_of`` answered.
    """
    assert [it.id for it in mem.as_of(when)] == (["kept"] if found else [])


@pytest.mark.parametrize("position", ["8796093022208.0", Lsn(8796093022208, 0)])
def test_a_position_past_the_last_names_as_of_and_the_range(
    mem: Memory, position: Lsn | str
) -> None:
    as_of: Callable[[object], Any] = mem.as_of
    match = r"^as_of '8796093022208\.0': wall_ms .* out of range 0\.\.8796093022207 .*2248-09-26"
    refused(mem, lambda: as_of(position), InvalidLsnError, match)


def export_line(id: object, *versions: dict[str, Any]) -> str:
    header = json.dumps({"format": EXPORT_FORMAT, "partition": None, "head": "1.0"})
    line = json.dumps({"id": id, "versions": list(versions)})
    return f"{header}\n{line}\n" + '{"end": true, "items": 1}\n'


def version(op: str, wall_ms: int, kind: object = "note", **item: Any) -> dict[str, Any]:
    body = {"id": item.pop("id"), "kind": "note", "title": "t", **item} if op == "upsert" else None
    return {"valid_from": {"wall_ms": wall_ms, "counter": 0}, "op": op, "kind": kind, "item": body}


@pytest.mark.parametrize(
    ("id", "match"),
    [
        ("gone\x00", r"holds a control character \('\\x00'\), which is not printable"),
        ("gone \u2028", "holds a space"),
        ("x" * (L.MAX_ID_CHARS + 1), "at most 256 characters"),
        ("gone\ud800", "lone surrogate"),
    ],
)
def test_import_checks_the_id_of_an_item_only_deleted(mem: Memory, id: str, match: str) -> None:
    """Before: a delete-only entry's id was never checked: SQLite stored ids no item may
    have (or raised UnicodeEncodeError), PostgreSQL raised a JournalError."""
    text = export_line(id, version("delete", 5))
    refused(mem, lambda: mem.import_(io.StringIO(text)), MemstoreError, f"line 2: .*{match}")


@pytest.mark.parametrize("kind", ["note\x00", {"a": 1}, "\udc00"])
def test_import_checks_the_kind_a_delete_names(mem: Memory, kind: object) -> None:
    """Before: a delete's kind was stored unchecked (``str()`` of a dict, a NUL that
    PostgreSQL refused at the database, a surrogate SQLite could not encode)."""
    text = export_line("x", version("upsert", 5, id="x"), version("delete", 6, kind))
    refused(mem, lambda: mem.import_(io.StringIO(text)), MemstoreError, "a delete version: .*kind")
    fine = export_line("x", version("upsert", 5, id="x"), version("delete", 6, ""))
    assert mem.import_(io.StringIO(fine)) == 1
    assert [v.kind for v in mem.history("x")] == ["note", "note"]


@pytest.mark.parametrize("kind", ["k" * 100_000, "two words"])
def test_a_delete_naming_a_kind_only_put_could_store_imports_unless_rules_are_checked(
    mem: Memory, kind: str
) -> None:
    """``put`` stores a kind of any shape, and its delete names it: the export imports."""
    text = export_line("x", version("upsert", 5, id="x"), version("delete", 6, kind))
    refused(
        mem,
        lambda: mem.import_(io.StringIO(text), check_rules=True),
        MemstoreError,
        "a delete version: .*kind",
    )
    assert mem.import_(io.StringIO(text)) == 1
    assert [v.kind for v in mem.history("x")] == ["note", kind]


@pytest.mark.parametrize("where", ["header", "entry"])
def test_import_of_json_nested_past_the_stack_is_refused(mem: Memory, where: str) -> None:
    """Before: RecursionError from the JSON parser escaped import_."""
    nested = "[" * 100_000 + "]" * 100_000
    text = nested + "\n" if where == "header" else export_line("x")[:-1].replace("[]", nested)
    refused(mem, lambda: mem.import_(io.StringIO(text)), MemstoreError, "nested too deeply")


# ------------------------------------------- groups past 1 GB of JSON


def max_size_items(n: int, start: int = 0) -> list[Item]:
    """Items with every field at its bound, in emoji (twelve characters each as JSON)."""
    e = "😀"
    return [
        Item(
            id=f"big{k}",
            kind="note",
            title=e * L.MAX_TITLE_CHARS,
            content=e * L.MAX_CONTENT_CHARS,
            subject=e * L.MAX_SUBJECT_CHARS,
            tags=[f"{k}-{t}" + e * (L.MAX_TAG_CHARS - 8) for t in range(L.MAX_TAGS)],
            # Each its own: two current items superseding one id would fork a chain.
            supersedes=[f"{k}-{r}" + e * (L.MAX_REF_CHARS - 8) for r in range(L.MAX_REFS)],
            evidence_refs=[e * L.MAX_REF_CHARS] * L.MAX_REFS,
            data={f"k{d:03}": e * (L.MAX_DATA_CHARS // L.MAX_DATA_KEYS - 4) for d in range(256)},
        )
        for k in range(start, start + n)
    ]


def test_a_group_sent_in_chunks_reads_back_as_one_commit(
    pg_schemas: Schemas, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The staged path (what a group past 1 GB takes), forced here with a small limit."""
    monkeypatch.setattr(pgsql, "MAX_ROWS_JSON_CHARS", 20_000_000)  # 2-3 items a chunk
    with both(pg_schemas) as sides:
        for side in sides:
            side.mem.add("a note before", id="before")
            side.mem.add_many(max_size_items(7))
        seen = [observe(side.mem, ["before", "big0", "big6"], []) for side in sides]
        assert_same(seen, "written in chunks")
        heads = [side.mem.stats().head for side in sides]
        assert heads[0] == heads[1]
        assert [v.valid_from.lsn for v in sides[1].mem.history("big6")] == [heads[1]]
        export = export_of(sides[0].mem)
    with both(pg_schemas) as sides:
        for side in sides:
            assert side.mem.import_(io.StringIO(export)) == 8
        seen = [observe(side.mem, ["big3"], []) for side in sides]
        assert_same(seen, "imported in chunks", stamps=False)  # an import moves PostgreSQL's head


def test_a_group_past_postgresql_one_gigabyte_is_taken_as_sqlite_takes_it(
    pg_schemas: Schemas,
) -> None:
    """Before: 125 items, each within every bound, were one JSON parameter of 1.09 GB:
    SQLite took them, PostgreSQL refused ("server closed the connection")."""
    items = max_size_items(125)
    with both(pg_schemas) as sides:
        for side in sides:
            assert len(side.mem.add_many(items)) == 125
        sqlite, postgres = sides
        postgres.close()
        postgres.open()  # restored from what PostgreSQL holds
        assert sqlite.mem.stats() == postgres.mem.stats()
        for id in ("big0", "big124"):
            assert outcome(lambda id=id: sqlite.mem.get(id)) == outcome(
                lambda id=id: postgres.mem.get(id)
            )
        got = postgres.mem.get("big124")
        assert got is not None and got.content == items[124].content
        assert got.data == items[124].data and got.tags == items[124].tags
