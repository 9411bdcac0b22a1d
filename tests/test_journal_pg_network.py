"""A PostgreSQL journal on a network that goes silent: it fails or closes, never hangs.

A silent network sends no error: without a bound, a statement waiting for its
answer waits in ``recv()`` for ever. Every connection a journal opens asks the
kernel to notice a dead peer (TCP keepalives and ``tcp_user_timeout``, read
back here from the sockets themselves), unless the DSN chose otherwise.

The silences below are made by :class:`tests.pgproxy.CuttingProxy` on
loopback. Its kernel still acknowledges every packet and keepalive probe (as a
frozen server process's would), so TCP never notices them: what ends those
waits is the journal's own doing (closing cuts its connections).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg.conninfo import make_conninfo

from memstore import Item, Store
from tests.pgtest import PgPlace, postgres_module

pg = postgres_module()
PostgresJournal = pg.PostgresJournal


@contextmanager
def _socket_of(conn: object) -> Iterator[socket.socket]:
    """A handle on ``conn``'s own socket (a duplicate descriptor, closed after)."""
    handle = socket.socket(fileno=os.dup(conn.fileno()))  # type: ignore[attr-defined]
    try:
        yield handle
    finally:
        handle.close()


def _tcp(conn: object) -> dict[str, int]:
    """What the kernel applies to ``conn``'s socket."""
    tcp = socket.IPPROTO_TCP
    with _socket_of(conn) as s:
        return {
            "keepalives": s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepalives_idle": s.getsockopt(tcp, socket.TCP_KEEPIDLE),
            "keepalives_interval": s.getsockopt(tcp, socket.TCP_KEEPINTVL),
            "keepalives_count": s.getsockopt(tcp, socket.TCP_KEEPCNT),
            "tcp_user_timeout": s.getsockopt(tcp, socket.TCP_USER_TIMEOUT),
        }


def _defaults() -> dict[str, int]:
    from memstore.journal._pgconn import TCP_DEFAULTS

    return {k: int(v) for k, v in TCP_DEFAULTS.items()}


def _writer_and_reader_tcp(journal: object) -> tuple[dict[str, int], dict[str, int]]:
    db = journal._db  # type: ignore[attr-defined]
    with db.write_lock:
        writer = _tcp(db.writer())
    return writer, db.read(_tcp)


def test_every_connection_bounds_a_silent_network_by_default(pg_place: PgPlace) -> None:
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, replicate=False)
    try:
        writer, reader = _writer_and_reader_tcp(journal)
    finally:
        journal.close()
    expected = _defaults()
    assert writer == reader == expected
    assert expected["keepalives"] == 1 and expected["tcp_user_timeout"] > 0


def test_a_dsn_keeps_its_own_keepalive_settings(pg_place: PgPlace) -> None:
    """What the DSN says wins, option by option; the rest take the defaults."""
    dsn = make_conninfo(pg_place.dsn, keepalives_idle=77, tcp_user_timeout=1234)
    journal = PostgresJournal(dsn, schema=pg_place.schema, replicate=False)
    try:
        writer, reader = _writer_and_reader_tcp(journal)
    finally:
        journal.close()
    expected = _defaults()
    expected.update(keepalives_idle=77, tcp_user_timeout=1234)
    assert writer == reader == expected


def test_a_dsn_may_turn_keepalives_off(pg_place: PgPlace) -> None:
    """``keepalives=0`` is heard, and turns ``tcp_user_timeout`` off too: libpq sets
    it only on a socket with keepalives (as docs/journal.md says)."""
    dsn = make_conninfo(pg_place.dsn, keepalives=0)
    journal = PostgresJournal(dsn, schema=pg_place.schema, replicate=False)
    store = Store()
    journal.attach(store)
    try:
        store.upsert(Item(kind="note", title="written without keepalives"))
        writer, reader = _writer_and_reader_tcp(journal)
    finally:
        journal.close()
    assert writer["keepalives"] == reader["keepalives"] == 0
    assert writer["tcp_user_timeout"] == reader["tcp_user_timeout"] == 0
