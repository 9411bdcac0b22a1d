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
"""

from __future__ import annotations

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
        except psycopg.Error as e:  # psycopg's messages quote parameters, never the password
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise JournalError(
                f"cannot keep hard-delete receipts in {schema}.{REDEEMED_TABLE}: {reason}"
            ) from None

    def __call__(self, nonce: str, expires_ms: int, now_ms: int) -> bool:
        """Whether this is the first redemption of ``nonce`` on any replica."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE expires_ms < %s").format(self._table), (now_ms,)
            )
            cur = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (nonce, expires_ms) VALUES (%s, %s) ON CONFLICT DO NOTHING"
                ).format(self._table),
                (nonce, expires_ms),
            )
            return cur.rowcount == 1

    def release(self, nonce: str) -> None:
        """Take back the redemption of ``nonce`` (its hard delete failed: nothing was erased)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE nonce = %s").format(self._table), (nonce,))
