"""The PostgreSQL journal's connections, and the errors their failures become.

A journal holds one *write* connection (which also holds its node id's
advisory lock, and is opened again when lost), a pool of *read* connections
(``REPEATABLE READ``, read-only: a read is one consistent snapshot) and, while
attached, its follower's own connection. Every connection is named
``memstore:<schema>:<role>:<node>`` in ``pg_stat_activity``.

A pooled connection is handed out unchecked (a check would cost every read a
round trip), so one the server dropped while it sat idle (a restart, a
failover, ``pg_terminate_backend``) fails its read's first statement. Reads
change nothing, so :meth:`Connections.read` and :meth:`Connections.stream`
run such a read once more on a new connection, and close the rest of the pool,
which the same event most likely dropped too.

A network that goes silent (a dropped route, a firewall eating packets, a
frozen server host) sends no error at all: a connection waiting for an answer
would wait in ``recv()`` for ever. So every connection asks the kernel to
notice a dead peer (:data:`TCP_DEFAULTS`: TCP keepalives probing an idle wait,
and ``tcp_user_timeout`` bounding how long sent data may go unacknowledged),
which turns the silence into a failed statement within about 30 seconds. A
DSN that sets any of these keeps its own value.

Closing never waits on such a connection for ever either: :meth:`Connections.close`
gives a write in flight ``close_timeout`` seconds to end, then cuts every
connection (:mod:`memstore.journal._pgcut`), which fails whatever waited on
them at once, and opens no new one. With ``statement_timeout`` set, a
statement is bounded on both sides (:mod:`memstore.journal._pgdeadline`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import unquote

import psycopg
from psycopg import IsolationLevel, sql
from psycopg.abc import Query
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import TupleRow

from memstore.errors import JournalError
from memstore.journal._pgcut import Sockets
from memstore.journal._pgdeadline import BoundedConnection, Deadlines, NoAnswer
from memstore.journal._pgerrors import connection_lost, first_line, translate, write_error
from memstore.journal._pgschema import hold_node
from memstore.journal.dsnoptions import misplaced_option

__all__ = [
    "TCP_DEFAULTS",
    "UNREADABLE_DSN",
    "Conn",
    "Connections",
    "describe",
    "dsn_fields",
    "tcp_options",
    "translate",
    "write_error",
]

Conn = psycopg.Connection[TupleRow]

SYNCHRONOUS: Final = {"full": "on", "normal": "off", "off": "off"}
"""``durability`` to PostgreSQL's ``synchronous_commit``."""

TCP_DEFAULTS: Final[Mapping[str, str]] = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "4",
    "tcp_user_timeout": "30000",
}
"""libpq's options that bound a silent network, unless the DSN sets them itself.

A connection idle on its side (waiting for an answer, or for a notification)
sends a keepalive probe after ``keepalives_idle`` seconds of silence, then one
every ``keepalives_interval`` seconds, and gives up after
``keepalives_count`` unanswered ones: 10 + 4 x 5 = 30 s. A connection with
data on its way gives up once it went unacknowledged for ``tcp_user_timeout``
milliseconds (30 s; on Linux it then also ends the keepalives' probing). A server
that is alive but slow answers both (its kernel does): a long statement is
never cut by them. On a Unix-domain socket libpq ignores them, and with
``keepalives=0`` it sets none of them (``tcp_user_timeout`` included).
"""

_log = logging.getLogger("memstore")

T = TypeVar("T")


class Connections:
    """One journal's write connection and read pool (thread-safe)."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        durability: str,
        connect_timeout: int,
        lock_timeout_ms: int,
        close_timeout: float,
        statement_timeout: float | None = None,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self._fields = dsn_fields(dsn)
        self._tcp: dict[str, Any] = dict(tcp_options(dsn))
        self.where = describe(dsn)
        self.node = 0
        """The node id in connection names (and whose lock the writer holds, if ``held``)."""
        self.held = False
        self._synchronous = SYNCHRONOUS[durability]
        self._connect_timeout = connect_timeout
        self._lock_timeout_ms = lock_timeout_ms
        self.close_timeout = close_timeout
        """Seconds :meth:`close` waits for a write in flight before cutting the connections."""
        self._sockets = Sockets()
        self._statement_timeout = statement_timeout
        self._deadlines = None if statement_timeout is None else Deadlines(self._sockets)
        self._readers: list[Conn] = []
        self._rlock = threading.Lock()
        self._closed = False
        self.write_lock = threading.RLock()
        """Held around every use of :meth:`writer`."""
        self._writer = self.connect("write")
        try:
            self._set_up_writer(self._writer)
        except BaseException:
            self.release(self._writer)
            raise

    def connect(self, role: str) -> Conn:
        """A new autocommit connection, or :class:`JournalError` saying where it failed.

        The error quotes libpq's message only when the DSN reads as written
        (see :func:`dsn_fields`): libpq quotes the pieces it could not read,
        and of a mangled DSN those may be pieces of the password. Then the
        error says so instead, and does not chain libpq's exception either
        (a traceback would print it).

        Once :meth:`close` or :meth:`cut` was called, nothing more is opened
        (a read in flight whose connection died does not read again):
        :class:`JournalError`.
        """
        if self._closed or self._sockets.cut_all:
            raise self._closing()
        try:
            conn: Conn = BoundedConnection.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name=self._name(role),
                **self._tcp,
            )
        except psycopg.Error as e:
            if self._fields is None:
                why = misplaced_option(self.dsn) or UNREADABLE_DSN
                raise JournalError(f"cannot connect to PostgreSQL: {why}") from None
            why = first_line(e)
            password = self._fields.get("password")
            if password and password in why:  # libpq never quotes it; should it ever
                raise JournalError(f"cannot connect to PostgreSQL at {self.where}") from None
            raise JournalError(f"cannot connect to PostgreSQL at {self.where}: {why}") from e
        if not self._sockets.track(conn):  # cut while it opened
            conn.close()
            raise self._closing()
        if self._deadlines is not None and isinstance(conn, BoundedConnection):
            try:
                self._bound(conn, self._deadlines)
            except psycopg.Error as e:
                self.release(conn)
                raise JournalError(
                    f"cannot connect to PostgreSQL at {self.where}: {first_line(e)}"
                ) from e
        return conn

    def _bound(self, conn: BoundedConnection, deadlines: Deadlines) -> None:
        """``statement_timeout`` on the server, and the client's own bound after it."""
        seconds = self._statement_timeout
        assert seconds is not None
        conn.bound(deadlines, seconds)
        ms = max(1, round(seconds * 1000))  # 0 would be no timeout at all
        conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(ms)))

    def _closing(self) -> JournalError:
        return JournalError(
            f"PostgreSQL at {self.where}: the journal is closing, its connections were closed"
        )

    @property
    def closing(self) -> bool:
        """Whether :meth:`cut` cut every connection (the journal is closing)."""
        return self._sockets.cut_all

    def cut_error(self, e: psycopg.Error, committing: bool, what: str) -> JournalError:
        """The error of a write whose connection :meth:`cut` cut (see :func:`write_error`)."""
        if not connection_lost(e):  # PostgreSQL answered: not the cut
            return write_error(e, committing, what)
        why = (
            f"the journal was closed while this waited on PostgreSQL at {self.where}, and no "
            f"answer came within close_timeout ({self.close_timeout}s): its connection was cut"
        )
        if committing:
            return JournalError(
                f"{what}: {why} while committing, so the write may or may not be on record"
            )
        return JournalError(f"{what}; nothing was changed: {why}")

    def release(self, conn: Conn) -> None:
        """Close a connection this object opened (every one goes this way)."""
        self._sockets.release(conn)

    def cut(self, conn: Conn | None = None) -> None:
        """End every wait on ``conn`` (``None``: on every connection, and open no more).

        A statement waiting on a cut connection fails at once with
        :class:`psycopg.OperationalError` and the connection is broken (see
        :mod:`memstore.journal._pgcut`); its owner releases it as usual.
        """
        if conn is not None:
            self._sockets.cut(conn)
            return
        if self._sockets.cut_every():
            _log.warning(
                "memstore: closing the journal at %s cut connections still in use after %ss",
                self.where,
                self.close_timeout,
            )

    def _name(self, role: str) -> str:
        return f"memstore:{self.schema}:{role}:{self.node}"

    def set_node(self, node: int) -> None:
        """Name connections after ``node``, the open write connection too (hold :attr:`write_lock`).

        The write connection is opened before the node id is known (it
        allocates it), so it is renamed in place (``SET application_name``).
        """
        self.node = node
        self._writer.execute(
            sql.SQL("SET application_name = {}").format(sql.Literal(self._name("write")))
        )

    def _set_up_writer(self, conn: Conn) -> None:
        conn.execute(sql.SQL("SET synchronous_commit = {}").format(sql.Literal(self._synchronous)))
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(self._lock_timeout_ms)))

    def writer(self) -> Conn:
        """The write connection (hold :attr:`write_lock`), opened again if it was lost."""
        conn = self._writer
        if not (conn.closed or conn.broken):
            return conn
        self.release(conn)
        conn = self.connect("write")
        try:
            self._set_up_writer(conn)
            if self.held and not hold_node(conn, self.schema, self.node):
                _log.warning("memstore: node id %d was taken while reconnecting", self.node)
        except BaseException:
            self.release(conn)
            raise
        self._writer = conn
        return conn

    def read(self, body: Callable[[Conn], T]) -> T:
        """``body(conn)`` in one read transaction on a pooled connection; what it returns.

        If the connection turns out dead, ``body`` runs once more from the
        start, in a new transaction on a new connection: it must only read
        (and return what it read, having kept nothing of a failed run).
        A second failure raises.
        """
        retried = False
        while True:
            conn = self._take()
            try:
                with conn.transaction():
                    return body(conn)
            except psycopg.OperationalError as e:
                if retried or isinstance(e, NoAnswer) or not self._dead(conn, e):
                    raise
                retried = True
            finally:
                self._give(conn)

    def stream(
        self,
        query: Query,
        params: Mapping[str, Any],
        *,
        itersize: int,
        first: Query | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of ``query``, in one read transaction through a server-side cursor.

        ``first``: a query run before it in the same transaction, whose one
        row comes first (a repeatable read's snapshot is taken at the first
        statement: both answers describe the same state).

        A connection that turns out dead before the first row came is
        replaced, and the query run once more. Not after: the caller holds
        rows of the first snapshot then, and the rest from another snapshot
        could contradict them (a commit in between), so the read fails.
        """
        retried = False
        while True:
            conn = self._take()
            started = False
            try:
                with conn.transaction(), conn.cursor(name="memstore_rows") as cur:
                    if first is not None:
                        rec = conn.execute(first).fetchone()
                        assert rec is not None, "the first query answers one row"
                        started = True
                        yield rec
                    cur.itersize = itersize
                    cur.execute(query, params)
                    for rec in cur:
                        started = True
                        yield rec
                return
            except psycopg.OperationalError as e:
                if retried or started or isinstance(e, NoAnswer) or not self._dead(conn, e):
                    raise
                retried = True
            finally:
                self._give(conn)

    def _take(self) -> Conn:
        """A connection of the read pool, or a new one when the pool is empty."""
        with self._rlock:
            conn = self._readers.pop() if self._readers else None
        if conn is not None and not (conn.closed or conn.broken):
            return conn
        conn = self.connect("read")
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        return conn

    def _give(self, conn: Conn) -> None:
        """Put ``conn`` back in the pool if it can serve another read, else close it."""
        healthy = (
            not conn.closed
            and not conn.broken
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        with self._rlock:
            if healthy and not self._closed:
                self._readers.append(conn)
                return
        self.release(conn)

    def _dead(self, conn: Conn, e: psycopg.OperationalError) -> bool:
        """Whether ``e`` was ``conn`` dying; if so, close the idle rest of the pool too."""
        if not conn.broken:
            return False
        with self._rlock:
            idle, self._readers = self._readers, []
        for other in idle:
            self.release(other)
        _log.info("memstore: a read connection was lost (%s); reading again", first_line(e))
        return True

    def close(self) -> None:
        """Close every connection (which releases the node's advisory lock), never hanging.

        A write in flight gets :attr:`close_timeout` seconds to end; then every
        connection is cut (a write waiting on a silent network fails) and the
        writer gets as long again to let go. A read in flight is not waited
        for: it gives its connection back when it ends, which closes it.
        """
        with self._rlock:
            self._closed = True
            idle, self._readers = self._readers, []
        for conn in idle:
            self.release(conn)
        try:
            self._close_writer()
        finally:
            if self._deadlines is not None:
                self._deadlines.close()

    def _close_writer(self) -> None:
        if not self.write_lock.acquire(timeout=self.close_timeout):
            self.cut()
            if not self.write_lock.acquire(timeout=self.close_timeout):  # pragma: no cover
                _log.warning("memstore: a write on %s did not let go of its connection", self.where)
                return
        try:
            self.release(self._writer)
        finally:
            self.write_lock.release()


UNREADABLE_DSN: Final = (
    "the DSN does not read as written (it does not parse, or its URI's user and password "
    "do not end at the '@': percent-encode / ? # @ % and spaces in them, e.g. with "
    "urllib.parse.quote(password, safe='')); it is not shown, nor is libpq's message, "
    "as either may hold the password"
)
"""Why a connection failed, when the DSN cannot be quoted (see :func:`dsn_fields`)."""

_URI_SCHEMES: Final = ("postgresql://", "postgres://")


def dsn_fields(dsn: str) -> dict[str, str] | None:
    """A DSN's fields as libpq reads them, or ``None`` if they might hold the password.

    ``None`` when the DSN does not parse (libpq's message quotes the piece it
    stopped at), and when a URI's credentials did not end where the writer
    meant them to: the user and password run up to the *last* ``@`` of the
    URI, while libpq ends them at the first ``@`` or ``/``. So
    ``postgresql://app:pa/ss@db/memory`` reads as host ``app``, port ``pa``
    and database ``ss@db/memory``: showing any field would show the password.

    >>> dsn_fields("postgresql://app:s3cret@db.internal/memory")["host"]
    'db.internal'
    >>> dsn_fields("postgresql://app:pa/ss@db.internal/memory") is None
    True
    >>> dsn_fields("host=db.internal password=pa ss") is None
    True
    """
    try:
        info = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except psycopg.Error:
        return None
    if dsn.startswith(_URI_SCHEMES):
        credentials, at, _ = dsn.split("://", 1)[1].rpartition("@")
        user, colon, password = credentials.partition(":")
        if at and (
            info.get("user", "") != unquote(user)
            or (colon and info.get("password", "") != unquote(password))
        ):
            return None
    return info


def tcp_options(dsn: str) -> dict[str, str]:
    """The :data:`TCP_DEFAULTS` a DSN does not set itself (its own settings win).

    >>> sorted(tcp_options("host=db keepalives_idle=60 tcp_user_timeout=0"))
    ['keepalives', 'keepalives_count', 'keepalives_interval']
    >>> tcp_options("postgresql://db/memory?keepalives=0")["tcp_user_timeout"]
    '30000'
    """
    try:
        own = conninfo_to_dict(dsn)
    except psycopg.Error:  # connecting fails too, and says so
        own = {}
    return {k: v for k, v in TCP_DEFAULTS.items() if k not in own}


def describe(dsn: str) -> str:
    """Where a DSN points, without its password: ``user@host:port/dbname``.

    "the given DSN" when its fields cannot be shown safely (see :func:`dsn_fields`).

    >>> describe("postgresql://app:s3cret@db.internal/memory")
    'app@db.internal:5432/memory'
    """
    info = dsn_fields(dsn)
    if info is None:
        return "the given DSN"
    host = info.get("host") or "localhost"
    port = info.get("port") or "5432"
    user = f"{info['user']}@" if info.get("user") else ""
    return f"{user}{host}:{port}/{info.get('dbname') or ''}"
