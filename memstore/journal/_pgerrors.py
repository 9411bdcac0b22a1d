"""What a failed PostgreSQL statement means: a lost connection, or PostgreSQL's refusal.

psycopg raises :class:`psycopg.OperationalError` for a connection that failed,
but also for whole SQLSTATE classes of errors the server *answered*: 53
(insufficient resources: disk full, out of memory, too many connections), 54
(program limit exceeded: "index row size 3048 exceeds btree version 4
maximum 2704"), 57 (operator intervention: a cancelled statement, a
``statement_timeout``) and 58 (system error). Calling those a failed
connection would send whoever reads the error to check the network when the
server told them what is wrong. So the error names the cause:

* a **lost connection** (:func:`connection_lost`): no answer came (no
  SQLSTATE: the socket closed or was cut), SQLSTATE class 08 (connection
  exception), or an error that ended the session (severity ``FATAL`` or
  ``PANIC``, e.g. ``pg_terminate_backend``'s 57P01 or a server shutting
  down): "the connection to PostgreSQL failed (...)";
* any other :class:`~psycopg.OperationalError`: "PostgreSQL refused the
  write: <its words>" (or the read);
* any other error (a constraint, a syntax error): its words alone.

A write's outcome is as before: "nothing was changed" unless the failure came
while committing, when "may or may not be on record" (see :func:`write_error`).

>>> translate(psycopg.OperationalError("server closed the connection"), "reading")
JournalError('reading: the connection to PostgreSQL failed (server closed the connection)')
"""

from __future__ import annotations

import psycopg

from memstore.errors import JournalError

__all__ = ["connection_lost", "first_line", "translate", "write_error"]

_SESSION_ENDING = frozenset({"FATAL", "PANIC"})


def first_line(e: BaseException) -> str:
    """The first line of an error's message (PostgreSQL adds DETAIL and HINT lines)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def connection_lost(e: psycopg.Error) -> bool:
    """Whether ``e`` means the connection failed, rather than PostgreSQL answering an error.

    >>> connection_lost(psycopg.OperationalError("consuming input failed: EOF"))
    True
    >>> connection_lost(psycopg.errors.QueryCanceled("canceling statement due to user request"))
    False
    """
    if not isinstance(e, psycopg.OperationalError):
        return False
    state = e.sqlstate
    if state is None or state.startswith("08"):
        return True
    return e.diag.severity_nonlocalized in _SESSION_ENDING or state.startswith("57P")


def translate(e: psycopg.Error, what: str, doing: str = "read") -> JournalError:
    """The journal error a failed read or open means, with PostgreSQL's words kept.

    ``doing``: what PostgreSQL refused, when it answered with an error ("read",
    "write", "request").
    """
    if connection_lost(e):
        return JournalError(f"{what}: the connection to PostgreSQL failed ({first_line(e)})")
    if isinstance(e, psycopg.OperationalError):
        return JournalError(f"{what}: PostgreSQL refused the {doing}: {first_line(e)}")
    return JournalError(f"{what}: {first_line(e)}")


def write_error(e: psycopg.Error, committing: bool, what: str) -> JournalError:
    """The error a failed write raises (the store undoes the group either way).

    ``committing``: the failure came while PostgreSQL was committing, when a
    lost connection leaves the outcome unknown; the message says so. An
    :class:`~psycopg.OperationalError` PostgreSQL *answered* to the commit (a
    cancel, a resource running out) gets the same cautious outcome, naming
    what it answered: PostgreSQL rolls back a commit it fails, but "may or
    may not" never misleads (the follower brings in a write that was
    recorded), while "nothing was changed" would if the answer ever came
    after the commit record was written.
    """
    if isinstance(e, psycopg.errors.LockNotAvailable):
        return JournalError(
            f"{what}; nothing was changed: another process held the journal's commit lock "
            f"longer than lock_timeout ({first_line(e)})"
        )
    if committing and isinstance(e, psycopg.OperationalError):
        why = (
            "the connection to PostgreSQL was lost while committing, so"
            if connection_lost(e)
            else "PostgreSQL failed the commit with an error of its own;"
        )
        return JournalError(
            f"{what}: {why} the write may or may not be on record; the store does not hold "
            f"it, and if it was recorded the journal's follower brings it in ({first_line(e)})"
        )
    return translate(e, f"{what}; nothing was changed", "write")
