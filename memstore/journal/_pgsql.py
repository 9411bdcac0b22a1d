"""Every statement of the PostgreSQL journal, composed once per schema.

The write of a group is one statement (data-modifying CTEs): purge, close
the open version of each id, insert the new versions and vectors, append the
commit to the feed, move the head and ``NOTIFY`` the followers, in one round
trip. Rows and id lists travel as one JSON text each (:func:`rows_json`,
:func:`ids_json`), which both sides encode and parse in C: a batch of 1,000
versions costs a few milliseconds, where a parameter array per column costs
ten times more to build in Python.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Final

from psycopg import sql

from memstore.journal.version import Row

__all__ = [
    "COLUMNS",
    "MAX_ROWS_JSON_CHARS",
    "Queries",
    "ids_json",
    "rows_json",
    "rows_json_chunks",
    "vectors_json",
]

COLUMNS: Final = "id, lsn, node, to_lsn, to_node, op, kind, partition, shared, item"
"""The columns of ``versions``, in :class:`~memstore.journal.version.Row` order."""


_ROWS = (
    "json_to_recordset(%({name})s::json) AS r(id text, lsn bigint, node int, to_lsn bigint, "
    "to_node int, op text, kind text, partition text, shared boolean, item text)"
)


def _ids(name: str) -> str:
    """An id list parameter (:func:`ids_json`) as an array, for ``= ANY(...)``."""
    return f"ARRAY(SELECT json_array_elements_text(%({name})s::json))"


def rows_json(rows: Sequence[Row]) -> str:
    """Versions as the ``rows`` parameter of a write."""
    return json.dumps(
        [
            {
                "id": r.id,
                "lsn": r.lsn,
                "node": r.node,
                "to_lsn": r.to_lsn,
                "to_node": r.to_node,
                "op": r.op,
                "kind": r.kind,
                "partition": r.partition,
                "shared": bool(r.shared),
                "item": r.item,
            }
            for r in rows
        ]
    )


MAX_ROWS_JSON_CHARS: Final = 128 * 2**20
"""The most characters of row JSON sent as one parameter (well under PostgreSQL's 1 GB).

PostgreSQL refuses a message or a value past 1 GB, and a group of items
each within every bound of :mod:`memstore.limits` can pass it (125 items of
100,000 emoji do: an emoji is twelve characters as escaped JSON). A group
whose rows do not fit one parameter is sent in several, staged in a
temporary table of the transaction (:attr:`Queries.stage_rows`): the same
commit, and no group SQLite takes is refused here.
"""


def rows_json_chunks(rows: Sequence[Row], limit: int | None = None) -> list[str]:
    """``rows`` as :func:`rows_json` texts of at most about ``limit`` characters each.

    ``limit`` defaults to :data:`MAX_ROWS_JSON_CHARS` (read at each call).

    One text when it fits (the common case, built once); else consecutive
    slices of the rows, each cut before the row that would pass ``limit``
    (a single row larger than ``limit`` travels alone).
    """
    if limit is None:
        limit = MAX_ROWS_JSON_CHARS
    whole = rows_json(rows)
    if len(whole) <= limit:
        return [whole]
    chunks: list[str] = []
    start, size = 0, 0
    for n, row in enumerate(rows):
        # At least the row's share of rows_json: its item as escaped JSON, and
        # the short fields as if every character took a \uXXXX escape.
        cost = 256 + len(row.id) * 6 + len(row.kind) * 6 + len(row.partition) * 6
        cost += len(json.dumps(row.item)) if row.item is not None else 0
        if n > start and size + cost > limit:
            chunks.append(rows_json(rows[start:n]))
            start, size = n, 0
        size += cost
    chunks.append(rows_json(rows[start:]))
    return chunks


def ids_json(ids: Iterable[str]) -> str:
    """An id list as a JSON parameter."""
    return json.dumps(list(ids))


def vectors_json(rows: Iterable[tuple[str, str, str, int, bytes]]) -> str:
    """``(id, model, text_hash, dim, float32 bytes)`` rows as the ``vectors`` parameter."""
    return json.dumps(
        [
            {"id": id, "model": m, "text_hash": h, "dim": d, "vector": base64.b64encode(v).decode()}
            for id, m, h, d, v in rows
        ]
    )


class Queries:
    """Every statement, composed once for one schema."""

    def __init__(self, s: sql.Identifier) -> None:
        self.s = s
        cols = sql.SQL(COLUMNS)

        def q(text: str) -> sql.Composed:
            return sql.SQL(text).format(s=s, cols=cols)

        live = "lsn <= %(at)s AND (to_lsn IS NULL OR to_lsn > %(at)s) AND op = 'upsert'"
        self.head = q("SELECT seq, lsn FROM {s}.head")
        self.commits_after = q(
            "SELECT seq, node, lsn, op, ids FROM {s}.commits "
            "WHERE seq > %(after)s ORDER BY seq LIMIT %(limit)s"
        )
        self.lock_head = q("SELECT seq, lsn FROM {s}.head FOR UPDATE")
        self.touched_after = q(
            "SELECT seq, lsn, ids FROM {s}.commits "
            f"WHERE seq > %(after)s AND ids && {_ids('ids')} ORDER BY seq"
        )
        """The commits after a position that touched any of a write's ids (conflict check)."""
        self.current_rows = q(
            "SELECT {cols} FROM {s}.versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id"
        )
        self.current_items = q(
            "SELECT item FROM {s}.versions WHERE to_lsn IS NULL AND op = 'upsert' ORDER BY id"
        )
        self.current_of = q(
            "SELECT id, item FROM {s}.versions "
            f"WHERE id = ANY({_ids('ids')}) AND to_lsn IS NULL AND op = 'upsert'"
        )
        self.as_of = q(f"SELECT {{cols}} FROM {{s}}.versions WHERE {live} ORDER BY id")
        self.as_of_partition = q(
            f"SELECT {{cols}} FROM {{s}}.versions WHERE partition = %(part)s AND {live} "
            f"UNION ALL SELECT {{cols}} FROM {{s}}.versions "
            f"WHERE shared AND partition != %(part)s AND {live} ORDER BY id"
        )
        order = " ORDER BY id, lsn, node"
        self.rows_of_ids = q(
            f"SELECT {{cols}} FROM {{s}}.versions WHERE id = ANY({_ids('ids')})" + order
        )
        self.rows_of_partition = q(
            "SELECT {cols} FROM {s}.versions WHERE partition = %(part)s" + order
        )
        self.rows_last_in = q(  # the rows of the ids whose newest version is in part
            "SELECT {cols} FROM {s}.versions WHERE id IN (SELECT id FROM {s}.versions "
            "WHERE to_lsn IS NULL AND partition = %(part)s)" + order
        )
        self.rows_all = q("SELECT {cols} FROM {s}.versions" + order)
        self.tail_of = q(  # HistoryTails._tail_rows: the newest rows, the whole id summed up
            "SELECT {cols}, COUNT(*) OVER (), MIN(partition) OVER (), MAX(partition) OVER (), "
            "bool_or(op = 'upsert' AND strpos(item, %(mark)s) > 0) OVER () "
            "FROM {s}.versions WHERE id = %(id)s ORDER BY lsn DESC, node DESC LIMIT %(limit)s"
        )
        self.newest_of = q(  # CurrentStamps._newest_stamps: the primary key backwards, 1 row
            "SELECT v.id, v.lsn, v.node, v.op "
            "FROM json_array_elements_text(%(ids)s::json) AS a(id) CROSS JOIN LATERAL "
            "(SELECT id, lsn, node, op FROM {s}.versions WHERE id = a.id "
            "ORDER BY lsn DESC, node DESC LIMIT 1) v"
        )
        self.vectors_of = q(
            "SELECT id, text_hash, vector FROM {s}.vectors "
            f"WHERE model = %(model)s AND dim = %(dim)s AND id = ANY({_ids('ids')})"
        )
        log = (
            "INSERT INTO {s}.commits (seq, node, lsn, op, ids) "
            f"VALUES (%(seq)s, %(me)s, %(last)s, %(cop)s, {_ids('ids')})"
        )
        move = "UPDATE {s}.head SET seq = %(seq)s, lsn = %(last)s"
        notify = "SELECT pg_notify(%(channel)s, %(payload)s)"
        self.log_commit = q(f"WITH logged AS ({log}), moved AS ({move}) {notify}")
        rows = _ROWS.format(name="rows")
        staged = "pg_temp.memstore_rows"
        self.stage_table = q(
            f"CREATE TEMP TABLE IF NOT EXISTS {staged} (id text, lsn bigint, node int, "
            "to_lsn bigint, to_node int, op text, kind text, partition text, shared boolean, "
            "item text) ON COMMIT DELETE ROWS"
        )
        """The temporary table a group too large for one parameter is sent into."""
        self.stage_rows = q(f"INSERT INTO {staged} SELECT * FROM {rows}")
        vectors = (
            "json_to_recordset(%(vectors)s::json) "
            "AS x(id text, model text, text_hash text, dim int, vector text)"
        )
        self.write, self.write_staged = (
            q(
                f"""WITH
            new AS MATERIALIZED (SELECT * FROM {source}),
            purged AS (DELETE FROM {{s}}.versions WHERE id = ANY({_ids("purge")})),
            unvectored AS (DELETE FROM {{s}}.vectors WHERE id = ANY({_ids("unvec")})),
            closed AS (
                UPDATE {{s}}.versions v SET to_lsn = f.lsn, to_node = f.node
                FROM (SELECT DISTINCT ON (id) id, lsn, node FROM new ORDER BY id, lsn, node) f
                WHERE v.id = f.id AND v.to_lsn IS NULL),
            inserted AS (INSERT INTO {{s}}.versions ({{cols}}) SELECT {{cols}} FROM new),
            vectored AS (
                INSERT INTO {{s}}.vectors (id, model, text_hash, dim, vector)
                SELECT id, model, text_hash, dim, decode(vector, 'base64') FROM {vectors}
                ON CONFLICT (id, model) DO UPDATE SET text_hash = excluded.text_hash,
                    dim = excluded.dim, vector = excluded.vector),
            logged AS ({log}),
            moved AS ({move})
            {notify}"""
            )
            for source in (rows, staged)
        )
        self.import_rows, self.import_staged = (
            q(
                f"INSERT INTO {{s}}.versions ({{cols}}) SELECT {{cols}} FROM {source} "
                "ON CONFLICT (id, lsn, node) DO NOTHING"
            )
            for source in (rows, staged)
        )
        self.relink = q(
            f"""UPDATE {{s}}.versions v SET to_lsn = n.next_lsn, to_node = n.next_node
            FROM (SELECT id, lsn, node, lead(lsn) OVER w AS next_lsn, lead(node) OVER w AS next_node
                  FROM {{s}}.versions WHERE id = ANY({_ids("ids")})
                  WINDOW w AS (PARTITION BY id ORDER BY lsn, node)) n
            WHERE v.id = n.id AND v.lsn = n.lsn AND v.node = n.node
              AND (v.to_lsn IS DISTINCT FROM n.next_lsn
                   OR v.to_node IS DISTINCT FROM n.next_node)"""
        )
        self.fill_vectors = q(
            "INSERT INTO {s}.vectors (id, model, text_hash, dim, vector) "
            f"SELECT id, model, text_hash, dim, decode(vector, 'base64') FROM {vectors} "
            "ON CONFLICT (id, model) DO NOTHING"
        )
