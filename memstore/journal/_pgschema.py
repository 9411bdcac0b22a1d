"""The PostgreSQL journal's tables, their migrations, and node-id allocation.

One schema holds one journal (default ``memstore``):

``versions``
    One row per version, as in the SQLite journal: ``(id, lsn, node)`` is the
    key, ``to_lsn``/``to_node`` close a version, ``item`` is the item's JSON
    text. Ids sort bytewise (``COLLATE "C"``), as Python sorts them.
``head``
    One row: the last commit's sequence number and the newest stamp on
    record. Every commit locks it first (``SELECT ... FOR UPDATE``), so
    commits are serialised: sequence numbers and stamps grow in commit order.
``commits``
    The change feed: one row per commit (its sequence number, node, stamp,
    ``op`` and the ids it touched). Replicas read it from their last applied
    sequence number.
``vectors``
    The newest vector of each id per embedding model, written in the same
    transaction as the version that made it, so a replica never re-embeds.
``nodes`` and the ``node_ids`` sequence
    Who opened the journal: every process gets a node id of its own.

A newer schema than this code knows fails with
:class:`~memstore.errors.JournalSchemaError` and changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import socket
from typing import Final

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from memstore.errors import JournalError, JournalSchemaError
from memstore.journal.hlc import MAX_NODE_ID

__all__ = ["SCHEMA_VERSION", "allocate_node", "lock_key", "open_schema"]

SCHEMA_VERSION: Final = 1
"""The PostgreSQL schema this code writes; older ones are migrated forward on open."""

# Each step takes the schema from version i to i + 1 (index i). ``{s}`` is the schema.
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """CREATE TABLE {s}.versions (
            id TEXT COLLATE "C" NOT NULL,
            lsn BIGINT NOT NULL,
            node INTEGER NOT NULL,
            to_lsn BIGINT,
            to_node INTEGER,
            op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
            kind TEXT NOT NULL,
            partition TEXT COLLATE "C" NOT NULL,
            shared BOOLEAN NOT NULL,
            item TEXT,
            PRIMARY KEY (id, lsn, node)
        )""",
        "CREATE INDEX versions_open ON {s}.versions (id) WHERE to_lsn IS NULL",
        "CREATE INDEX versions_lsn ON {s}.versions (lsn)",
        "CREATE INDEX versions_partition ON {s}.versions (partition, id, lsn)",
        "CREATE INDEX versions_shared ON {s}.versions (id, lsn) WHERE shared",
        """CREATE TABLE {s}.head (
            one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
            seq BIGINT NOT NULL,
            lsn BIGINT NOT NULL
        )""",
        "INSERT INTO {s}.head (one, seq, lsn) VALUES (true, 0, 0)",
        """CREATE TABLE {s}.commits (
            seq BIGINT PRIMARY KEY,
            node INTEGER NOT NULL,
            lsn BIGINT NOT NULL,
            op TEXT NOT NULL CHECK (op IN ('write', 'purge', 'import')),
            ids TEXT[] NOT NULL,
            committed_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
        """CREATE TABLE {s}.vectors (
            id TEXT COLLATE "C" NOT NULL,
            model TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BYTEA NOT NULL,
            PRIMARY KEY (id, model)
        )""",
        f"CREATE SEQUENCE {{s}}.node_ids MINVALUE 1 MAXVALUE {MAX_NODE_ID} CYCLE",
        """CREATE TABLE {s}.nodes (
            node INTEGER PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            opened_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
    ),
)


def lock_key(schema: str) -> int:
    """A stable 32-bit key naming ``schema`` in advisory locks (the first lock key)."""
    digest = hashlib.blake2b(f"memstore:{schema}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def open_schema(conn: psycopg.Connection[TupleRow], schema: str) -> None:
    """Create or migrate ``schema`` to :data:`SCHEMA_VERSION`; refuse a newer or foreign one.

    Runs in one transaction under an advisory lock, so processes opening a
    fresh database at the same moment create it once.
    """
    s = sql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (lock_key(schema),))
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            )
        }
        version = 0
        if "meta" in tables:
            row = conn.execute(
                sql.SQL("SELECT value FROM {s}.meta WHERE key = 'schema_version'").format(s=s)
            ).fetchone()
            if row is None or not str(row[0]).isdigit():
                raise JournalSchemaError(f"schema {schema!r}: the journal has no schema version")
            version = int(row[0])
        elif tables:
            raise JournalSchemaError(
                f"schema {schema!r} holds tables but is not a memstore journal "
                f"({sorted(tables)[:5]}); give the journal another schema="
            )
        if version > SCHEMA_VERSION:
            raise JournalSchemaError(
                f"schema {schema!r} has journal schema {version}, newer than this memstore "
                f"understands ({SCHEMA_VERSION}): upgrade memstore to open it"
            )
        if version == SCHEMA_VERSION:
            return
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {s}").format(s=s))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            ).format(s=s)
        )
        for step in _MIGRATIONS[version:]:
            for statement in step:
                conn.execute(sql.SQL(statement).format(s=s))
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ).format(s=s),
            (str(SCHEMA_VERSION),),
        )


def allocate_node(conn: psycopg.Connection[TupleRow], schema: str) -> int:
    """A node id (1..65535) no live process of this journal holds, held by ``conn``.

    Ids come from a cycling sequence; each is claimed with a session advisory
    lock, which PostgreSQL releases when the connection ends (a killed process
    included), and an id still held is skipped. The ``nodes`` table records
    which host and process took it.
    """
    s = sql.Identifier(schema)
    key = lock_key(schema)
    for _ in range(MAX_NODE_ID):
        row = conn.execute(sql.SQL("SELECT nextval('{s}.node_ids')").format(s=s)).fetchone()
        assert row is not None
        node = int(row[0])
        taken = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (key, node)).fetchone()
        if taken is not None and taken[0]:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {s}.nodes (node, host, pid) VALUES (%s, %s, %s) "
                    "ON CONFLICT (node) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
                    "opened_at = now()"
                ).format(s=s),
                (node, socket.gethostname(), os.getpid()),
            )
            return node
    raise JournalError(f"schema {schema!r}: all {MAX_NODE_ID} node ids are held by live processes")


def hold_node(conn: psycopg.Connection[TupleRow], schema: str, node: int) -> bool:
    """Claim ``node`` again on a new connection (after a reconnect); whether it was free."""
    row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (lock_key(schema), node)).fetchone()
    return bool(row is not None and row[0])
