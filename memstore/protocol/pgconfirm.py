"""Redeemed hard-delete receipts recorded in PostgreSQL, shared by every replica.

A dry-run receipt confirms one hard delete. One server remembers the
receipts it redeemed in memory; replicas of one memory must share that
record, or a receipt used on one replica would still be good on another.
:class:`PostgresClaims` keeps it in a table of the journal's schema,
``protocol_redeemed`` (created if missing, outside the journal's own
migrations: it holds nothing the journal needs), where the primary key makes
the first redemption of a nonce the only one::

    confirmations = Confirmations(key, claim=PostgresClaims(dsn, "memstore"))

Rows live until their receipt expires; each claim deletes the expired ones.
A hard delete that fails takes its row back (:meth:`PostgresClaims.release`),
so its receipt confirms a retry.

A claim is final only once its hard delete has landed
(:meth:`PostgresClaims.settle` marks the row ``done``). Until then the
claiming server holds a PostgreSQL advisory lock on the nonce, on a
connection of the claim's own: a server killed between the claim and the
erase (``kill -9``, a crash) loses that connection, PostgreSQL drops the
lock, and the receipt confirms a retry, instead of staying used for an
erase that never happened. A live claim in progress keeps the others out
(the lock is held), and a settled one is used for good.
"""

from __future__ import annotations

import threading
from typing import Final

import psycopg
from psycopg import sql

from memstore.errors import JournalError

__all__ = ["REDEEMED_TABLE", "PostgresClaims"]

REDEEMED_TABLE: Final = "protocol_redeemed"
"""The table of redeemed receipt nonces, in the journal's schema."""


class PostgresClaims:
    """``claim(nonce, expires_ms, now_ms)`` for :class:`~memstore.protocol.confirm.Confirmations`.

    :param dsn: the journal's libpq DSN. :param schema: the journal's schema
        (which must exist: the journal makes it). Each claim opens a short connection of its own:
        hard deletes are rare, and no connection is held between them.
    """

    def __init__(self, dsn: str, schema: str) -> None:
        """Create the table if missing.

        :raises JournalError: PostgreSQL refused (the server, or a DSN parameter
            libpq rejects, such as ``connect_timeout=abc``): one line, no password.
        """
        self.dsn = dsn
        self._table = sql.Identifier(schema, REDEEMED_TABLE)
        self._lock = threading.Lock()
        self._held: dict[str, psycopg.Connection[tuple[object, ...]]] = {}
        """The connection holding each unsettled claim's advisory lock, by nonce."""
        try:
            # Replicas starting together: IF NOT EXISTS alone can race, the lock cannot.
            with psycopg.connect(dsn) as conn:  # one transaction, committed on exit
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{schema}.{REDEEMED_TABLE}",)
                )
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} "
                        "(nonce TEXT PRIMARY KEY, expires_ms BIGINT NOT NULL)"
                    ).format(self._table)
                )
                # Rows of a server before settling existed were final at once: done.
                conn.execute(
                    sql.SQL(
                        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS done BOOLEAN NOT NULL DEFAULT TRUE"
                    ).format(self._table)
                )
        except psycopg.Error as e:  # psycopg's messages quote parameters, never the password
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise JournalError(
                f"cannot keep hard-delete receipts in {schema}.{REDEEMED_TABLE}: {reason}"
            ) from None

    def __call__(self, nonce: str, expires_ms: int, now_ms: int) -> bool:
        """Whether this is the first redemption of ``nonce`` on any replica.

        True also when an earlier claim of it never settled and its server is
        gone (its advisory lock went with its connection). A True claim holds
        the lock until :meth:`settle` or :meth:`release`.
        """
        conn = psycopg.connect(self.dsn, autocommit=True)
        try:
            locked = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (nonce,)).fetchone()
            if not (locked and locked[0]):  # another server is redeeming it right now
                conn.close()
                return False
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE expires_ms < %s").format(self._table), (now_ms,)
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (nonce, expires_ms, done) VALUES (%s, %s, FALSE) "
                    "ON CONFLICT DO NOTHING"
                ).format(self._table),
                (nonce, expires_ms),
            )
            row = conn.execute(
                sql.SQL("SELECT done FROM {} WHERE nonce = %s").format(self._table), (nonce,)
            ).fetchone()
        except BaseException:
            conn.close()
            raise
        if row is None or row[0]:  # used for good (or expired meanwhile)
            conn.close()
            return False
        with self._lock:
            self._held[nonce] = conn
        return True

    def settle(self, nonce: str) -> None:
        """The hard delete ``nonce`` confirmed has landed: its receipt is used for good."""
        conn = self._take(nonce)
        if conn is None:
            return
        with conn:
            conn.execute(
                sql.SQL("UPDATE {} SET done = TRUE WHERE nonce = %s").format(self._table), (nonce,)
            )

    def release(self, nonce: str) -> None:
        """Take back the redemption of ``nonce`` (its hard delete failed: nothing was erased)."""
        held = self._take(nonce)
        with held if held is not None else psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE nonce = %s").format(self._table), (nonce,))

    def _take(self, nonce: str) -> psycopg.Connection[tuple[object, ...]] | None:
        """The connection of ``nonce``'s claim (closing it drops the advisory lock)."""
        with self._lock:
            return self._held.pop(nonce, None)
