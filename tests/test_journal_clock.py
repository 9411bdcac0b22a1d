"""A writer whose clock reads the year 2200 or later is refused before it stamps anything.

Stamps only increase, and every process sharing a journal moves its clock past
the newest stamp it sees. So one write from a machine whose clock read 2230
(a dead RTC battery, a typo in ``date -s``) stamped everything after it in 2230:
the other processes' writes too, for good. ``as_of(now)`` then saw none of
them, and an export of the memory was refused by ``import`` (which refuses
stamps from 2200 on). From the year 2248 on a write failed with a bare
``OverflowError`` (SQLite) or ``bigint out of range`` (PostgreSQL). Now the
write is refused with a :class:`JournalError` naming the clock, nothing is
written, and the journal is as it was.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from memstore import JournalError, Memory
from memstore.journal.sqlite import SqliteJournal
from tests.pgtest import PgPlace, postgres_module


def _ms(year: int) -> int:
    return (dt.datetime(year, 1, 1, tzinfo=dt.UTC) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // (
        dt.timedelta(milliseconds=1)
    )


def test_a_postgres_writer_with_a_clock_in_2230_does_not_stamp_the_others_writes(
    pg_place: PgPlace,
) -> None:
    pg = postgres_module()
    wrong = Memory(
        None,
        embedder=None,
        journal=pg.PostgresJournal(
            pg_place.dsn, schema=pg_place.schema, node_id=1, wall=lambda: _ms(2230)
        ),
    )
    right = Memory(
        None, embedder=None, journal=pg.PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    )
    try:
        right.add("written before the broken clock came along", id="before")
        head = right.journal.head()
        with pytest.raises(JournalError, match=r"clock reads 2230-01-01.*nothing was written"):
            wrong.add("from the machine whose clock is wrong", id="wrong")
        assert wrong.get("wrong") is None and wrong.journal.head() == head
        right.add("written after", id="after")
        now = dt.datetime.now(dt.UTC)
        assert right.journal.head().to_datetime() <= now  # its stamps follow the real time
        assert sorted(it.id for it in right.as_of(now)) == ["after", "before"]
        stamps = pg_place.sql("SELECT max(lsn) FROM {s}.versions")[0][0]
        assert stamps >> 20 < _ms(2200)  # no row stamped from the broken clock
    finally:
        wrong.close()
        right.close()


@pytest.mark.parametrize("year", [2200, 2230, 2300])
def test_a_sqlite_writer_with_a_clock_past_2200_is_refused_and_changes_nothing(
    tmp_path: Path, year: int
) -> None:
    clock = {"ms": _ms(2026)}
    path = os.fspath(tmp_path / "journal.db")
    with Memory(None, embedder=None, journal=SqliteJournal(path, wall=lambda: clock["ms"])) as mem:
        mem.add("the ledger closes on Friday", id="ledger")
        head = mem.journal.head()
        clock["ms"] = _ms(year)
        with pytest.raises(JournalError, match=f"clock reads {year}-01-01"):
            mem.add("a note from the wrong year", id="wrong")
        assert mem.get("wrong") is None and mem.journal.head() == head
        assert [it.id for it in mem.store.all_items()] == ["ledger"]
        clock["ms"] = _ms(2026) + 1000  # the clock set right: writes go on
        mem.add("the clock is right again", id="fixed")
        assert mem.journal.head().to_datetime().year == 2026
    with Memory(None, embedder=None, journal=SqliteJournal(path)) as reopened:
        assert sorted(it.id for it in reopened.store.all_items()) == ["fixed", "ledger"]
