"""``JournalBase.current_stamps``: many items' current stamps in one read, on both backends.

Checked against the per-id path it replaces (``history(id)[-1]``: its stamp
when it is an upsert, else ``None``) after random sequences of creations,
updates, deletes, re-creations, batches, purges and imports of another
journal's versions (stamped by another node on the same wall, so stamps
interleave and tie on position), for every id written and for ids never
written. The fallback that reads every row (:class:`CurrentStamps`) must
agree too. The statements are checked to walk the primary key (a plan, not
a timing).
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memstore import Item, Store
from memstore.errors import InvalidItemError
from memstore.journal import Hlc, JournalBase, Lsn, SqliteJournal
from memstore.journal._stamps import STAMPS_PER_STATEMENT, CurrentStamps
from tests.journals import Place, open_journal
from tests.pgtest import Schemas

IDS = ["a", "b", "c", "d"]
UNKNOWN = ["never", "z" * 40]

Op = tuple[Any, ...]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(["main", "other"]), st.sampled_from(IDS)),
        st.tuples(st.just("delete"), st.sampled_from(["main", "other"]), st.sampled_from(IDS)),
        st.tuples(st.just("batch"), st.lists(st.sampled_from(IDS), min_size=1, max_size=4)),
        st.tuples(st.just("purge"), st.sampled_from(IDS)),
        st.tuples(st.just("import")),
        st.tuples(st.just("tick"), st.integers(-2, 3)),
    ),
    max_size=40,
)


def per_id(journal: JournalBase, id: str) -> Hlc | None:
    """Today's path: the whole history, then its last version."""
    history = journal.history(id)
    return history[-1].valid_from if history and history[-1].op == "upsert" else None


def fallback(journal: JournalBase, ids: list[str]) -> dict[str, Hlc | None]:
    """The answer of the fallback that reads every row (what a backend overrides)."""
    out: dict[str, Hlc | None] = dict.fromkeys(ids)
    for id, lsn, node, op in CurrentStamps._newest_stamps(journal, ids):
        if op == "upsert":
            at = Lsn.unpack(lsn)
            out[id] = Hlc(at.wall_ms, at.counter, node)
    return out


def run(main_place: Place, other_dir: Path, sequence: list[Op]) -> None:
    wall = [1_000_000]
    main = open_journal(main_place, wall=lambda: wall[0])
    other = SqliteJournal(other_dir / "other.db", node_id=1, wall=lambda: wall[0])
    stores = {"main": Store(), "other": Store()}
    main.attach(stores["main"])
    other.attach(stores["other"])
    n = 0
    try:
        for op in sequence:
            n += 1
            if op[0] == "put":
                stores[op[1]].upsert(Item(id=op[2], kind="note", content=f"v{n}"))
            elif op[0] == "delete" and stores[op[1]].get(op[2]) is not None:
                stores[op[1]].delete(op[2])
            elif op[0] == "batch":
                with stores["main"].batch():
                    for k, id in enumerate(op[1]):
                        stores["main"].upsert(Item(id=id, kind="note", content=f"v{n}.{k}"))
            elif op[0] == "purge":
                main.purge([op[1]])
            elif op[0] == "import":
                buf = io.StringIO()
                other.export(None, buf)
                buf.seek(0)
                main.import_(buf)
            elif op[0] == "tick":
                wall[0] += op[1]
        asked = [*IDS, *UNKNOWN]
        expected = {id: per_id(main, id) for id in asked}
        assert main.current_stamps(asked) == expected
        assert main.current_stamps(reversed(asked)) == expected  # any order, any iterable
        assert main.current_stamps(["a", "a", "never"]) == {
            "a": expected["a"],
            "never": None,
        }
        assert fallback(main, asked) == expected
        for id in IDS:  # a live item's stamp is its store state's current version
            live = stores["main"].get(id)
            assert (expected[id] is not None) == (live is not None), id
    finally:
        main.close()
        other.close()


TIED: list[Op] = [("put", "other", "a"), ("put", "main", "a"), ("import",)]
"""Two nodes stamp the same id at one position: the higher node is the later version."""
OLDER: list[Op] = [("put", "other", "b"), ("tick", 3), ("put", "main", "b"), ("import",)]
"""An import brings a version older than the current one: the current one stays."""
NEWER: list[Op] = [("put", "main", "c"), ("delete", "main", "c"), ("tick", 2)]
NEWER += [("put", "other", "c"), ("import",), ("purge", "a"), ("put", "main", "d")]
"""An import brings a version newer than a delete: the item lives again."""

_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(sequence=ops)
@example(sequence=TIED)
@example(sequence=OLDER)
@example(sequence=NEWER)
def test_current_stamps_match_the_last_version_of_each_history_on_sqlite(
    sequence: list[Op],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "main.db", Path(tmp), sequence)


@_SETTINGS
@given(sequence=ops)
@example(sequence=TIED)
@example(sequence=OLDER)
@example(sequence=NEWER)
def test_current_stamps_match_the_last_version_of_each_history_on_postgresql(
    pg_schemas: Schemas, sequence: list[Op]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run(pg_schemas.new("stamps"), Path(tmp), sequence)


@pytest.fixture
def journal(place: Place) -> Iterator[JournalBase]:
    journal = open_journal(place)
    journal.attach(Store())
    yield journal
    journal.close()


def test_more_ids_than_one_statement_takes(journal: JournalBase) -> None:
    store = journal._attached()
    with store.batch():
        for n in range(STAMPS_PER_STATEMENT + 20):
            store.upsert(Item(id=f"i{n}", kind="note", content=f"v{n}"))
    store.upsert(Item(id="i3", kind="note", content="again"))
    store.delete("i4")
    asked = [f"i{n}" for n in range(STAMPS_PER_STATEMENT + 40)]
    got = journal.current_stamps(asked)
    assert got == {id: per_id(journal, id) for id in asked}
    assert got["i4"] is None and got[asked[-1]] is None
    assert got["i3"] != got["i2"]


def test_a_bare_string_or_a_bad_id_is_refused(journal: JournalBase) -> None:
    with pytest.raises(InvalidItemError, match="list of ids"):
        journal.current_stamps("abc")
    with pytest.raises(InvalidItemError):
        journal.current_stamps(["ok", "bad\x00id"])
    assert journal.current_stamps([]) == {}


def test_sqlite_walks_the_primary_key_backwards_for_one_row(tmp_path: Path) -> None:
    from memstore.journal.sqlite import _newest_query

    with SqliteJournal(tmp_path / "j.db") as journal, journal._reader() as conn:
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + _newest_query(3), "abc")]
    assert any("COVERING INDEX sqlite_autoindex_versions_1 (id=?)" in p for p in plan), plan
    assert any("INTEGER PRIMARY KEY (rowid=?)" in p for p in plan), plan
    assert not any("B-TREE" in p or p.startswith("SCAN versions") for p in plan), plan


def test_postgresql_walks_the_primary_key_backwards_for_one_row(pg_schemas: Schemas) -> None:
    place = pg_schemas.new("plan")
    journal = open_journal(place)
    journal.close()  # the schema exists now
    q = journal._q  # type: ignore[attr-defined]
    import psycopg

    with psycopg.connect(place.dsn) as conn:
        conn.execute("SET enable_seqscan = off")  # a tiny table: ask whether the index can serve
        plan = [
            r[0]
            for r in conn.execute(
                psycopg.sql.SQL("EXPLAIN ") + q.newest_of, {"ids": '["a", "b"]'}
            ).fetchall()
        ]
    text = "\n".join(plan)
    assert "Index Scan Backward using versions_pkey" in text, text
    assert "Limit" in text and "Sort" not in text, text
