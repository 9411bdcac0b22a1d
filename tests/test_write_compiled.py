"""A durable write's compiled checks and rows (``memstore._speedups``) against their oracles.

Two per-item steps of ``Memory.add_many`` run compiled where the extension is
built: the recogniser of the common item (``plain_item``, whose oracle is
:func:`memstore._plainitem.plain_item`) and the journal row's JSON
(``row_json``, whose oracle is pydantic-core's serializer of the persisted
fields, ``memstore.journal.version._FIELDS_TO_JSON``). Each is held to its
oracle over random items near its shape: the same answer for every item, and
the same text wherever the compiled writer writes one (it may decline, never
differ). Then whole writes: the same batch through ``add_many`` with the
compiled steps and with the pure ones leaves the same journal rows, byte for
byte, and refuses a bad entry with the same message and nothing written.

Without the extension these tests skip (``MEMSTORE_REQUIRE_SPEEDUPS=1`` makes
that a failure in ``tests/test_speedups.py``).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_plain_item import VOCAB, near_plain

from memstore import Config, InvalidItemError, Item, Memory, _wordbatch
from memstore._plainitem import _RULES, plain_check, plain_item
from memstore._shared import share_containers
from memstore._updatekey import PARSED_UTC
from memstore.journal.version import _FIELDS_TO_JSON, _ROW_FIELDS, _UTCS

try:
    from memstore import _speedups as COMPILED
except ImportError:  # not built: these tests skip
    COMPILED = None

pytestmark = pytest.mark.skipif(COMPILED is None, reason="memstore._speedups is not built")
assert VOCAB  # the kinds test_plain_item's items use, found valid once


@pytest.fixture(autouse=True)
def _compiled_outside_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled steps where built, even under ``MEMSTORE_PURE_PYTHON=1``."""
    if COMPILED is not None:
        monkeypatch.setattr(_wordbatch, "speedups", COMPILED)


def compiled_plain(d: dict[str, Any]) -> bool:
    assert COMPILED is not None
    answer: bool = COMPILED.plain_item(_RULES, d)
    return answer


# ----------------------------------------------------------------- plain_item


@settings(max_examples=3000, deadline=None)
@given(near_plain())
def test_the_compiled_recogniser_answers_as_the_python_one(item: Item) -> None:
    assert compiled_plain(item.__dict__) is plain_item(item.__dict__)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("title", " \t\x1c\x1f"),  # all whitespace as str.isspace has it
        ("title", "\x0b"),
        ("id", "a\x7f"),  # DEL: not printable
        ("id", "a~"),
        ("id", "a b"),
        ("event_date", "2026-02-30"),
        ("event_date", "2026-02-03"),
        ("subject", "s" * 1000),
        ("subject", "s" * 1001),
        ("content", "é"),
        ("kind", "event"),
        ("tags", ["tenant/" + "n" * 128]),
        ("tags", ["tenant/" + "n" * 129]),
        ("tags", ["x" * 256]),
        ("tags", ["x" * 128, "y" * 127]),
        ("tags", ["x" * 128, "y" * 128]),
        ("tags", ["tenant/a", "x", "tenant/b"]),
        ("tags", ["a~b", "shared"]),
        ("tags", ["a\x7f"]),
        ("no_embed", 1),
        ("scope", "private"),
        ("status", "gone"),
    ],
)
def test_the_compiled_recogniser_at_each_rules_edge(field: str, value: object) -> None:
    item = Item(kind="note", title="deploy", content="x", tags=["tenant/a"])
    d = item.__dict__
    d[field] = value
    if field == "title":
        d["content"] = ""
    assert compiled_plain(d) is plain_item(d)


def test_plain_check_picks_the_compiled_recogniser_and_the_switch_the_python_one() -> None:
    item = Item(kind="note", title="x", tags=["tenant/a"])
    assert plain_check()(item.__dict__) is True
    assert plain_check() is not plain_item
    with _wordbatch.pure_python():
        assert plain_check() is plain_item


def test_the_compiled_recogniser_sees_kinds_found_valid_later() -> None:
    """``_RULES`` holds the rules' own cache: a kind validated after import counts."""
    from memstore.validate import validate_base

    item = Item(kind="compiled_kind_seen_later", title="x")
    assert not compiled_plain(item.__dict__)
    assert validate_base(VOCAB, item) == ""
    assert compiled_plain(item.__dict__) and plain_item(item.__dict__)


# ------------------------------------------------------------------- row_json

TEXT = st.one_of(
    st.text(st.sampled_from([*"ab 1/:-", '"', "\\"]), max_size=8),
    st.text(max_size=8),  # any code point: controls, non-ASCII, astral, lone surrogates
)
HOUR = _dt.timedelta(hours=1)
STAMP = st.one_of(
    st.none(),
    st.datetimes(
        min_value=_dt.datetime(1, 1, 1),
        max_value=_dt.datetime(9999, 12, 31),
        timezones=st.sampled_from(
            [_dt.UTC, PARSED_UTC, _dt.timezone(HOUR * 2, "x"), _dt.timezone(HOUR * 0, "z")]
        ),
    ),
    st.datetimes(min_value=_dt.datetime(2000, 1, 1)).map(lambda t: t.replace(microsecond=0)),
)


@st.composite
def stamped_items(draw: st.DrawFn) -> Item:
    """An item as a write stamps it: any text, tags, data and stamps, often stored-shared."""
    item = Item(kind="note", title="x")
    d = item.__dict__
    for name in ("id", "kind", "title", "content", "subject", "event_date"):
        d[name] = draw(TEXT)
    d["confidence"] = draw(st.sampled_from(["", "high"]))
    d["origin"] = draw(st.sampled_from(["", "derived", "human"]))
    d["tags"] = draw(st.lists(TEXT, max_size=3))
    d["supersedes"] = draw(st.lists(TEXT, max_size=2))
    d["evidence_refs"] = draw(st.lists(TEXT, max_size=2))
    d["data"] = draw(st.dictionaries(TEXT, TEXT, max_size=2))
    for name in ("stale_after", "created_at", "updated_at"):
        d[name] = draw(STAMP)
    if draw(st.booleans()):
        d["no_embed"] = True
    if draw(st.booleans()):
        share_containers(item)  # the store's shared lists and frozen dict
    return item


def _pydantic_text(d: dict[str, Any]) -> str | None:
    try:
        return _FIELDS_TO_JSON(d).decode()
    except Exception:  # pydantic-core refuses it (a lone surrogate): the compiled one must too
        return None


@settings(max_examples=3000, deadline=None)
@given(stamped_items())
def test_the_compiled_row_is_pydantics_text_or_none(item: Item) -> None:
    assert COMPILED is not None and _ROW_FIELDS is not None
    d = item.__dict__
    text = COMPILED.row_json(_ROW_FIELDS, _UTCS, d)
    if text is not None:
        assert text == _pydantic_text(d)
    times = [d[n] for n in ("stale_after", "created_at", "updated_at")]
    utc = [t is None or any(t.tzinfo is u for u in _UTCS) for t in times]
    if all(utc) and _pydantic_text(d) is not None:
        assert text is not None  # the compiled writer wrote it (it declines only the rest)


def test_the_compiled_row_declines_what_it_does_not_write() -> None:
    assert COMPILED is not None and _ROW_FIELDS is not None
    item = Item(kind="note", title="x", links=[{"to_id": "a", "relation": "supports"}])
    assert COMPILED.row_json(_ROW_FIELDS, _UTCS, item.__dict__) is None  # a link
    plain = Item(kind="note", title="x")

    class Text(str):
        pass

    for name, value in [
        ("title", Text("x")),
        ("title", "\ud800"),
        ("created_at", _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone(_dt.timedelta(hours=1)))),
        ("created_at", _dt.datetime(2026, 1, 1)),
        ("tags", ("a",)),
        ("data", {"a": 1}),
    ]:
        d = dict(plain.__dict__, **{name: value})
        assert COMPILED.row_json(_ROW_FIELDS, _UTCS, d) is None, name
    d = dict(plain.__dict__)
    del d["title"]
    assert COMPILED.row_json(_ROW_FIELDS, _UTCS, d) is None


# -------------------------------------------------------------- whole writes


def _rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path / "journal.db") as conn:
        return conn.execute(
            "SELECT id, kind, partition, shared, op, item, to_lsn IS NULL FROM versions "
            "ORDER BY rowid"
        ).fetchall()


def _ticking() -> Callable[[], _dt.datetime]:
    """A clock that moves 1.5 ms a reading: the same stamps in every run."""
    start = _dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=_dt.UTC)
    counter: Iterator[int] = itertools.count()
    return lambda: start + _dt.timedelta(microseconds=1500 * next(counter))


def _entries(n: int) -> list[Any]:
    return [
        *[
            Item(
                id=f"note-{i:05d}",
                kind=["observation", "note", "decision"][i % 3],
                title=f"deploy {i} of api-{i % 7}",
                content=f'rev {i}: "quoted" \\ back\tslash, café {i}' if i % 5 == 0 else f"rev {i}",
                tags=[f"tenant/t{i % 4}", *(["shared"] if i % 6 == 0 else [])],
                event_date="2026-01-02" if i % 4 == 0 else "",
                data={"k": str(i)} if i % 9 == 0 else {},
                no_embed=i % 8 == 0,
            )
            for i in range(n)
        ],
        "plain text, no id",
        {"text": "a mapping", "partition": "p2", "kind": "note"},
        Item(kind="stable_fact", title="a fact", content="checked the long way", confidence="high"),
    ]


def test_add_many_writes_the_same_rows_compiled_and_pure(tmp_path: Path) -> None:
    """Every row a batch writes, compiled, equals the pure run's, byte for byte."""

    def run(where: Path, pure_run: bool) -> list[tuple[Any, ...]]:
        config = Config(clock=_ticking(), id_prefix="n-")
        with Memory(where, embedder=None, config=config) as mem:
            if pure_run:
                with _wordbatch.pure_python():
                    mem.add_many(_entries(40))
                    mem.add_many(_entries(10))  # updates: the ids again
            else:
                mem.add_many(_entries(40))
                mem.add_many(_entries(10))
        return _rows(where)

    def minted_named(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The rows with a minted id (random in part) named ``minted``, in the JSON too."""
        return [
            r if r[0].startswith("note-") else ("minted", *r[1:5], r[5].replace(r[0], "-"), r[6])
            for r in rows
        ]

    compiled_rows = run(tmp_path / "c", False)
    pure_rows = run(tmp_path / "p", True)
    assert len(compiled_rows) == 40 + 10 + 3 * 2 and len(compiled_rows) == len(pure_rows)
    assert minted_named(compiled_rows) == minted_named(pure_rows)
    assert any('\\"quoted\\"' in r[5] and "café" in r[5] for r in compiled_rows)
    assert any('"no_embed":true' in r[5] for r in compiled_rows)


def test_a_bad_entry_is_refused_compiled_as_pure_and_nothing_is_written(tmp_path: Path) -> None:
    bad = Item(kind="note", title="x", tags=["tenant/a"])
    bad.__dict__["tags"] = ["tenant/a", "tenant/b"]
    messages = []
    for pure in (False, True):
        with Memory(tmp_path / str(pure), embedder=None) as mem:
            mem.add_many(_entries(3))
            before = _rows(tmp_path / str(pure))
            with pytest.raises(InvalidItemError) as caught:
                if pure:
                    with _wordbatch.pure_python():
                        mem.add_many([*_entries(5), bad])
                else:
                    mem.add_many([*_entries(5), bad])
            messages.append(caught.value.reason)
            assert len(mem.store) == len(_entries(3))
            assert mem.search("rev", limit=50)  # the indexes still answer
        assert _rows(tmp_path / str(pure)) == before
    assert messages[0] == messages[1] and messages[0].startswith("entry 8: ")
