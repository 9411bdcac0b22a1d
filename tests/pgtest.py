"""PostgreSQL for the tests: where it is, whether it answers, fresh schemas per run.

The DSN comes from ``MEMSTORE_TEST_PG_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``). Every journal a test opens
lives in a schema of its own, named under one prefix per test run; the run
drops them all at the end. When the server does not answer, the tests that
need it skip with a message saying how to enable them, unless ``CI`` is set
or ``MEMSTORE_REQUIRE_PG=1``: then they fail.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

DSN = os.environ.get("MEMSTORE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRED = bool(os.environ.get("CI")) or os.environ.get("MEMSTORE_REQUIRE_PG") == "1"
HOW = (
    "start PostgreSQL on 127.0.0.1:5432 (trust auth, database 'test'), or set "
    "MEMSTORE_TEST_PG_DSN=postgresql://user@host:port/db, "
    "and pip install 'memstore-engine[postgres]'"
)
RUN_PREFIX = f"mst_{os.getpid()}_{secrets.token_hex(3)}"
"""Every schema this test run creates starts with it."""


@functools.cache
def unreachable() -> str | None:
    """Why PostgreSQL cannot be used, or ``None`` when it answers."""
    try:
        import psycopg
    except ModuleNotFoundError:
        return "psycopg is not installed"
    try:
        with psycopg.connect(DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as e:
        return f"PostgreSQL at {DSN} does not answer ({str(e).strip().splitlines()[0]})"
    return None


def require_pg() -> None:
    """Skip (or, in CI or with ``MEMSTORE_REQUIRE_PG=1``, fail) without PostgreSQL."""
    why = unreachable()
    if why is None:
        return
    if REQUIRED:
        pytest.fail(f"{why}; these tests must run here (CI or MEMSTORE_REQUIRE_PG=1)")
    pytest.skip(f"{why}: {HOW} to run the PostgreSQL tests")


def postgres_module() -> Any:
    """``memstore.journal.postgres``, for a test module that needs it at import time.

    Without psycopg the module is skipped (failed in CI or with
    ``MEMSTORE_REQUIRE_PG=1``), like every test that needs the server.
    """
    try:
        import memstore.journal.postgres as module
    except ModuleNotFoundError as e:
        if REQUIRED:
            raise
        pytest.skip(f"{e}: {HOW} to run the PostgreSQL tests", allow_module_level=True)
    return module


@dataclass(frozen=True)
class PgPlace:
    """Where a PostgreSQL journal lives: a DSN and a schema."""

    dsn: str
    schema: str

    def sql(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement on a connection of its own (``{s}`` is the schema); its rows."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(statement.replace("{s}", f'"{self.schema}"'), params or None)
            return cur.fetchall() if cur.description else []

    @contextlib.contextmanager
    def at_commit(self, name: str, table: str, body: str) -> Iterator[None]:
        """For the block, every COMMIT that inserted into ``{s}.TABLE`` runs the PL/pgSQL
        ``body`` first (a deferred constraint trigger ``name``): ``RAISE EXCEPTION`` refuses
        the commit, ``pg_terminate_backend`` loses its connection mid-commit."""
        self.sql(f"CREATE FUNCTION {{s}}.{name}() RETURNS trigger LANGUAGE plpgsql AS $$ {body} $$")
        self.sql(
            f"CREATE CONSTRAINT TRIGGER {name} AFTER INSERT ON {{s}}.{table} "
            f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {{s}}.{name}()"
        )
        try:
            yield
        finally:
            self.sql(f"DROP TRIGGER {name} ON {{s}}.{table}")

    @contextlib.contextmanager
    def commit_lock_held(self) -> Iterator[None]:
        """Another session holds the commit lock (the ``head`` row, ``FOR UPDATE``) for the
        block, as a process stuck mid-commit would; it lets go when the block ends."""
        import psycopg

        with psycopg.connect(self.dsn) as other:
            other.execute(f'SELECT seq FROM "{self.schema}".head FOR UPDATE')
            try:
                yield
            finally:
                other.rollback()


def followers_of(schema: str) -> list[str]:
    """The journal followers (threads) of this process still following ``schema``.

    A journal on PostgreSQL follows its schema in a thread until it is closed
    (``Memory.close``, ``PostgresJournal.close``). One still running when the
    schema is dropped reports, as it must in production, that it lost its
    connection (``relation ... does not exist``): a test leaves none running.
    """
    prefix = f"memstore-follow-{schema}-"  # the follower's thread name, with its node id
    return [
        t.name
        for t in threading.enumerate()
        if t.name.startswith(prefix) and t.name[len(prefix) :].isdigit() and t.is_alive()
    ]


def check_closed(place: PgPlace) -> None:
    """Fail when a journal on ``place`` is still open in this process (its follower runs):
    the schema is about to be dropped under it."""
    running = followers_of(place.schema)
    assert not running, (
        f"a journal on schema {place.schema} is still open ({', '.join(running)}): close the "
        "Memory or journal the test opened before its schema is dropped"
    )


class Schemas:
    """Hands out fresh schema names for this run, and drops them all at the end.

    Before dropping, :meth:`drop_all` checks that no journal of this process
    still follows one of them (:func:`check_closed`); it drops them all either way.
    """

    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def new(self, tag: str = "") -> PgPlace:
        with self._lock:
            self._n += 1
            n = self._n
        return PgPlace(DSN, f"{RUN_PREFIX}_{n}{'_' + tag if tag else ''}"[:63])

    def drop_all(self) -> None:
        import psycopg

        with psycopg.connect(DSN, autocommit=True) as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                    (RUN_PREFIX + "%",),
                )
            ]
            still_open = [f for name in names for f in followers_of(name)]
            for name in names:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        assert not still_open, (
            f"journals still open when their schemas were dropped ({', '.join(still_open)}): "
            "close every Memory or journal a test opens"
        )


def run_together(target: Callable[..., None], argss: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Run ``target(*args, barrier, out)`` in one spawned process per ``args``, at once.

    Each process waits at ``barrier`` (shared by all of them) so that they
    race, and puts what it saw on the queue ``out``; the answers come back in
    the order they arrived. Every process must exit cleanly (one that hangs is
    killed, and the exit codes are asserted).
    """
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(argss))
    out: Any = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for args in argss]
    for p in procs:
        p.start()
    try:
        got = [out.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():  # pragma: no cover - reported by the assert
                p.kill()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    return got
