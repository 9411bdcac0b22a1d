"""Cutting a PostgreSQL connection from another thread, to end a wait on a silent network.

A thread waiting for PostgreSQL's answer on a network that went silent waits
until the kernel gives up on the peer (see
:data:`~memstore.journal._pgconn.TCP_DEFAULTS`), or for ever when the peer's
kernel still answers (a frozen server process, a stalled proxy). Closing the
connection from another thread is no way out: libpq's ``PQfinish`` frees what
the waiting thread is using, and the freed descriptor's number may already
name another socket when that thread looks at it again.

What ends the wait cleanly is ``shutdown(SHUT_RDWR)`` on the socket: the
waiting ``recv()`` returns at once with end-of-file, libpq reports the
connection lost, and psycopg raises :class:`psycopg.OperationalError` and
marks the connection broken, in the thread that was waiting. So every
connection is tracked here with a duplicate of its descriptor, taken when it
opened: the duplicate keeps the socket itself alive until the connection is
released, so a cut always lands on that connection's socket, never on a
descriptor number reused meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import weakref

import psycopg
from psycopg.rows import TupleRow

__all__ = ["Sockets"]

Conn = psycopg.Connection[TupleRow]


class Sockets:
    """The sockets of one journal's open connections, each cuttable (thread-safe).

    A connection dropped without :meth:`release` (its journal never closed)
    lets go of its duplicate when it is collected, as it closes its own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: weakref.WeakKeyDictionary[Conn, tuple[int, weakref.finalize[[int], Conn]]]
        self._fds = weakref.WeakKeyDictionary()
        self.cut_all = False
        """Set by :meth:`cut_every`: the journal is closing and opens nothing more."""

    def track(self, conn: Conn) -> bool:
        """Keep a handle on ``conn``'s socket; ``False`` (nothing kept) once :attr:`cut_all`."""
        try:
            fd = os.dup(conn.fileno())
        except (OSError, psycopg.Error):  # no socket to hold: nothing to cut either
            return not self.cut_all
        with self._lock:
            if not self.cut_all:
                self._fds[conn] = (fd, weakref.finalize(conn, os.close, fd))
                return True
        os.close(fd)
        return False

    def release(self, conn: Conn) -> None:
        """Close ``conn`` and let go of its socket."""
        try:
            conn.close()
        finally:
            with self._lock:
                entry = self._fds.pop(conn, None)
                if entry is not None:
                    entry[1]()  # closes the duplicate, once

    def cut(self, conn: Conn) -> None:
        """End any wait on ``conn``: its owner's statement fails, the connection broken."""
        with self._lock:
            entry = self._fds.get(conn)
            if entry is not None:
                _shut(entry[0])

    def cut_every(self) -> int:
        """Cut every tracked connection, and track no new one; how many were cut."""
        with self._lock:
            self.cut_all = True
            fds = [fd for fd, _ in self._fds.values()]
            for fd in fds:
                _shut(fd)
        return len(fds)


def _shut(fd: int) -> None:
    """``shutdown(SHUT_RDWR)`` the socket behind ``fd`` (held open while the lock is held)."""
    sock = socket.socket(fileno=fd)
    try:
        with contextlib.suppress(OSError):  # already shut, or never connected
            sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()  # the descriptor stays ours, open
