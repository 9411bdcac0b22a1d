"""The SQLite journal closes a group's superseded versions with one set-based statement.

:func:`memstore.journal.sqlite._close_open_rows` closes the open row of every
id a group writes by one ``UPDATE ... id IN (SELECT value FROM json_each(?))``
when the group's rows share one stamp. These tests hold it to the statement
per id it replaced: the same rows, byte for byte, whatever the ids hold
(quotes, backslashes, non-ASCII, control characters, lone surrogates), the
stamps or the history, and a failed write changes no row at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item, JournalError, Store
from memstore.journal import SqliteJournal
from memstore.journal.sqlite import _CLOSE_ONE, _COLUMNS, _close_open_rows, _values
from memstore.journal.version import Row

_ODD_IDS = ["a", 'q"uote', "back\\slash", "é漢字", "😀", "tab\there", "nl\nx", "nul\0x", "\ud800"]


def _row(id: str, lsn: int, node: int = 0, op: str = "upsert") -> Row:
    return Row(id, lsn, node, None, None, op, "note", "", False, '{"id": "x"}')  # type: ignore[arg-type]


def _table(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return conn.execute(f"SELECT {_COLUMNS} FROM versions ORDER BY id, lsn, node").fetchall()


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[SqliteJournal]:
    with SqliteJournal(tmp_path / "j.db", durability="off") as j:
        yield j


def _reference(conn: sqlite3.Connection, groups: list[list[Row]]) -> None:
    """What _commit_rows did before: one UPDATE per id, then the inserts."""
    for rows in groups:
        firsts: dict[str, Row] = {}
        for r in rows:
            firsts.setdefault(r.id, r)
        conn.execute("BEGIN")
        conn.executemany(_CLOSE_ONE, ((r.lsn, r.node, r.id) for r in firsts.values()))
        conn.executemany(
            f"INSERT INTO versions ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [_values(r) for r in rows],
        )
        conn.execute("COMMIT")


def _encodable(id: str) -> bool:
    try:
        id.encode()
    except UnicodeEncodeError:
        return False
    return True


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    groups=st.lists(
        st.tuples(
            st.lists(
                st.sampled_from([i for i in _ODD_IDS if _encodable(i)]), unique=True, max_size=6
            ),
            st.booleans(),  # one stamp for the group (a store's group), or one per row
        ),
        max_size=6,
    )
)
def test_set_based_close_leaves_the_rows_the_statement_per_id_left(
    tmp_path_factory: pytest.TempPathFactory, groups: list[tuple[list[str], bool]]
) -> None:
    folder = tmp_path_factory.mktemp("close")
    built: list[list[Row]] = []
    lsn = 1 << 20
    for ids, one_stamp in groups:
        rows = []
        for id in ids:
            rows.append(_row(id, lsn, node=3))
            if not one_stamp:
                lsn += 1
        lsn += 1
        built.append(rows)
    with SqliteJournal(folder / "j.db", durability="off") as j:
        for rows in built:
            j._commit_rows(rows)
        ours = _table(j._conn)
        ref = sqlite3.connect(folder / "j.db", isolation_level=None)
        try:
            ref.execute("DELETE FROM versions")
            _reference(ref, built)
            assert _table(ref) == ours
        finally:
            ref.close()


def test_ids_json_cannot_carry_take_the_statement_per_id(journal: SqliteJournal) -> None:
    conn = journal._conn
    ids = ["plain", "nul\0x", "nl\nx", "tab\tx"]
    journal._commit_rows([_row(i, 10) for i in ids])
    journal._commit_rows([_row(i, 20) for i in ids])
    table = _table(conn)
    assert [(r[0], r[1], r[3]) for r in table] == [
        (i, lsn, to) for i in sorted(ids) for lsn, to in ((10, 20), (20, None))
    ]
    conn.execute("BEGIN")
    with pytest.raises(UnicodeEncodeError):  # as the statement per id refused it
        _close_open_rows(conn, [_row("ok", 30), _row("\ud800", 30)])
    conn.execute("ROLLBACK")
    assert _table(conn) == table


def test_a_failed_group_write_leaves_every_row_as_it_was(journal: SqliteJournal) -> None:
    ids = [f"n{i}" for i in range(50)]
    journal._commit_rows([_row(i, 10) for i in ids])
    before = _table(journal._conn)
    # The second row collides with a stored version (same id and stamp): the insert
    # fails after every open row of the group was closed, and all of it rolls back.
    with pytest.raises(JournalError):
        journal._commit_rows([_row("n0", 20), _row("n1", 10), *(_row(i, 20) for i in ids[2:])])
    assert _table(journal._conn) == before
    assert not journal._conn.in_transaction


def test_a_store_batch_closes_exactly_its_superseded_versions(tmp_path: Path) -> None:
    with SqliteJournal(tmp_path / "j.db", durability="off") as journal:
        store = Store()
        journal.attach(store)
        store.upsert_many([Item(id=f"n{i}", kind="note", title=f"one {i}") for i in range(20)])
        store.upsert_many(
            [Item(id=f"n{i}", kind="note", title=f"two {i}") for i in range(0, 20, 2)]
        )
        rows = journal._conn.execute(
            "SELECT id, lsn, to_lsn FROM versions ORDER BY id, lsn"
        ).fetchall()
        first, second = sorted({lsn for _, lsn, _ in rows})
        for i in range(20):
            mine = [(lsn, to) for id, lsn, to in rows if id == f"n{i}"]
            assert mine == ([(first, second), (second, None)] if i % 2 == 0 else [(first, None)])


def test_without_json_each_every_group_takes_the_statement_per_id(
    journal: SqliteJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memstore.journal.sqlite as backend

    assert backend._JSON_EACH  # this build has JSON1: the set-based path is the one tested above
    monkeypatch.setattr(backend, "_JSON_EACH", False)
    ids = [f"n{i}" for i in range(5)]
    journal._commit_rows([_row(i, 10) for i in ids])
    journal._commit_rows([_row(i, 20) for i in ids[:3]])
    rows = [(r[0], r[1], r[3]) for r in _table(journal._conn)]
    closed = [(i, 10, 20) for i in ids[:3]]
    assert sorted(rows) == sorted(
        [*closed, *((i, 20, None) for i in ids[:3]), *((i, 10, None) for i in ids[3:])]
    )
