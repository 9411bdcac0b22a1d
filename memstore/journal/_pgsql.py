"""Every statement of the PostgreSQL journal, composed once per schema.

The write of a group is one statement (data-modifying CTEs): purge, close
the open version of each id, insert the new versions and vectors, append the
commit to the feed, move the head and ``NOTIFY`` the followers, in one round
trip. Arrays travel as ``unnest`` parameters, so a batch of 1,000 versions
is still one statement.
"""

from __future__ import annotations

from typing import Final

from psycopg import sql

__all__ = ["COLUMNS", "Queries"]

COLUMNS: Final = "id, lsn, node, to_lsn, to_node, op, kind, partition, shared, item"
"""The columns of ``versions``, in :class:`~memstore.journal.version.Row` order."""


class Queries:
    """Every statement, composed once for one schema."""

    def __init__(self, s: sql.Identifier) -> None:
        self.s = s
        cols = sql.SQL(COLUMNS)

        def q(text: str) -> sql.Composed:
            return sql.SQL(text).format(s=s, cols=cols)

        live = "lsn <= %s AND (to_lsn IS NULL OR to_lsn > %s) AND op = 'upsert'"
        self.head = q("SELECT seq, lsn FROM {s}.head")
        self.lock_head = q("SELECT seq, lsn FROM {s}.head FOR UPDATE")
        self.current_rows = q(
            "SELECT {cols} FROM {s}.versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id"
        )
        self.current_items = q(
            "SELECT item FROM {s}.versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id"
        )
        self.as_of = q(f"SELECT {{cols}} FROM {{s}}.versions WHERE {live} ORDER BY id")
        self.as_of_partition = q(
            f"SELECT {{cols}} FROM {{s}}.versions WHERE partition = %s AND {live} "
            f"UNION ALL SELECT {{cols}} FROM {{s}}.versions "
            f"WHERE shared AND partition != %s AND {live} ORDER BY id"
        )
        order = " ORDER BY id, lsn, node"
        self.rows_of_ids = q("SELECT {cols} FROM {s}.versions WHERE id = ANY(%s)" + order)
        self.rows_of_partition = q("SELECT {cols} FROM {s}.versions WHERE partition = %s" + order)
        self.rows_all = q("SELECT {cols} FROM {s}.versions" + order)
        log = (
            "INSERT INTO {s}.commits (seq, node, lsn, op, ids) "
            "VALUES (%(seq)s, %(me)s, %(last)s, %(cop)s, %(ids)s::text[])"
        )
        move = "UPDATE {s}.head SET seq = %(seq)s, lsn = %(last)s"
        notify = "SELECT pg_notify(%(channel)s, %(payload)s)"
        self.log_commit = q(f"WITH logged AS ({log}), moved AS ({move}) {notify}")
        self.write = q(
            f"""WITH
            purged AS (DELETE FROM {{s}}.versions WHERE id = ANY(%(purge)s::text[])),
            unvectored AS (DELETE FROM {{s}}.vectors WHERE id = ANY(%(unvec)s::text[])),
            closed AS (
                UPDATE {{s}}.versions v SET to_lsn = f.lsn, to_node = f.node
                FROM unnest(%(f_id)s::text[], %(f_lsn)s::bigint[], %(f_node)s::int[])
                    AS f(id, lsn, node)
                WHERE v.id = f.id AND v.to_lsn IS NULL),
            inserted AS (
                INSERT INTO {{s}}.versions ({{cols}})
                SELECT * FROM unnest(%(id)s::text[], %(lsn)s::bigint[], %(node)s::int[],
                    %(to_lsn)s::bigint[], %(to_node)s::int[], %(op)s::text[], %(kind)s::text[],
                    %(partition)s::text[], %(shared)s::bool[], %(item)s::text[])),
            vectored AS (
                INSERT INTO {{s}}.vectors (id, model, text_hash, dim, vector)
                SELECT * FROM unnest(%(v_id)s::text[], %(v_model)s::text[], %(v_hash)s::text[],
                    %(v_dim)s::int[], %(v_vec)s::bytea[])
                ON CONFLICT (id, model) DO UPDATE SET text_hash = excluded.text_hash,
                    dim = excluded.dim, vector = excluded.vector),
            logged AS ({log}),
            moved AS ({move})
            {notify}"""
        )
        self.import_rows = q(
            "INSERT INTO {s}.versions ({cols}) "
            "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::int[], %s::bigint[], %s::int[], "
            "%s::text[], %s::text[], %s::text[], %s::bool[], %s::text[]) "
            "ON CONFLICT (id, lsn, node) DO NOTHING"
        )
        self.relink = q(
            """UPDATE {s}.versions v SET to_lsn = n.next_lsn, to_node = n.next_node
            FROM (SELECT id, lsn, node, lead(lsn) OVER w AS next_lsn, lead(node) OVER w AS next_node
                  FROM {s}.versions WHERE id = ANY(%s)
                  WINDOW w AS (PARTITION BY id ORDER BY lsn, node)) n
            WHERE v.id = n.id AND v.lsn = n.lsn AND v.node = n.node
              AND (v.to_lsn IS DISTINCT FROM n.next_lsn
                   OR v.to_node IS DISTINCT FROM n.next_node)"""
        )
        self.fill_vectors = q(
            "INSERT INTO {s}.vectors (id, model, text_hash, dim, vector) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::bytea[]) "
            "ON CONFLICT (id, model) DO NOTHING"
        )
