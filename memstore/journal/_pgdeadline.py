"""A bound on how long a PostgreSQL statement may go unanswered (``statement_timeout``).

With ``statement_timeout`` set, PostgreSQL cancels a statement that runs
longer and answers with an error: the connection stays usable. That answer
needs the network and the server, though: on a network gone silent, or from a
frozen server process (whose kernel still acknowledges every packet, so TCP
keepalives never notice), it never comes. So the client keeps its own bound
too: a statement with no answer :data:`ANSWER_GRACE_S` seconds after
PostgreSQL should have cancelled it has its connection cut
(:mod:`memstore.journal._pgcut`) and fails with :class:`NoAnswer`.

Every exchange with the server (a statement and its rows, a ``FETCH`` of a
server-side cursor, a ``COMMIT``) goes through :meth:`BoundedConnection.wait`,
which arms one deadline for it; :class:`Deadlines` is one thread per journal
that cuts the connections whose deadline passed.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Final, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.rows import TupleRow

from memstore.journal._pgcut import Sockets

__all__ = ["ANSWER_GRACE_S", "BoundedConnection", "Deadlines", "NoAnswer"]

ANSWER_GRACE_S: Final = 2.0
"""How long after ``statement_timeout`` the client waits for PostgreSQL's own answer."""

RV = TypeVar("RV")


class NoAnswer(psycopg.OperationalError):
    """No answer came within ``statement_timeout`` and its grace: the connection was cut."""


class Deadlines:
    """Cuts every connection whose exchange outlived its deadline (one thread, thread-safe)."""

    def __init__(self, sockets: Sockets) -> None:
        self._sockets = sockets
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, psycopg.Connection[Any]]] = {}
        self._tokens = itertools.count()
        self._wake_at = float("inf")
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, conn: psycopg.Connection[Any], seconds: float) -> int:
        """Cut ``conn`` in ``seconds`` unless :meth:`disarm` comes first; the token to disarm."""
        due = time.monotonic() + seconds
        with self._cond:
            token = next(self._tokens)
            self._due[token] = (due, conn)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="memstore-pg-deadlines", daemon=True
                )
                self._thread.start()
            if due < self._wake_at:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching; ``False`` if the deadline had passed (the connection was cut)."""
        with self._cond:
            return self._due.pop(token, None) is not None

    def close(self) -> None:
        """End the thread (exchanges still in flight are no longer watched)."""
        with self._cond:
            self._closed = True
            self._due.clear()
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                for token in [t for t, (due, _) in self._due.items() if due <= now]:
                    _, conn = self._due.pop(token)
                    self._sockets.cut(conn)
                self._wake_at = min((due for due, _ in self._due.values()), default=float("inf"))
                self._cond.wait(None if self._wake_at == float("inf") else self._wake_at - now)
            self._thread = None


class BoundedConnection(psycopg.Connection[TupleRow]):
    """A connection whose every exchange with the server is bounded, once :meth:`bound`."""

    _deadlines: Deadlines | None = None
    _seconds: float = 0.0
    _statement_timeout: float = 0.0

    def bound(self, deadlines: Deadlines, statement_timeout: float) -> None:
        """Cut this connection when an answer is ``ANSWER_GRACE_S`` later than PostgreSQL's
        ``statement_timeout`` (the caller sets that one on the server)."""
        self._deadlines = deadlines
        self._statement_timeout = statement_timeout
        self._seconds = statement_timeout + ANSWER_GRACE_S

    def wait(self, gen: PQGen[RV], *args: Any, **kwargs: Any) -> RV:
        deadlines = self._deadlines
        if deadlines is None:
            return super().wait(gen, *args, **kwargs)
        token = deadlines.arm(self, self._seconds)
        try:
            return super().wait(gen, *args, **kwargs)
        except psycopg.OperationalError as e:
            if deadlines.disarm(token):
                raise
            raise NoAnswer(
                f"no answer from PostgreSQL within {self._seconds:g}s (statement_timeout "
                f"{self._statement_timeout:g}s and {ANSWER_GRACE_S:g}s more): the network or "
                "the server stalled, and the connection was closed"
            ) from e
        finally:
            deadlines.disarm(token)
