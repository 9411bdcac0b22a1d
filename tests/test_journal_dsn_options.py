"""A PostgreSQL journal's timeouts given in its DSN, where a DSN string is all one can give.

``Memory(journal="postgresql://...")`` and the servers' ``--journal`` take a
DSN alone; its ``memstore_`` query parameters set the journal's timeouts and
are taken out before libpq, which refuses parameters it does not know.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from memstore import Memory
from memstore.errors import JournalError, MemstoreError
from memstore.journal.dsnoptions import journal_options, libpq_dsn
from memstore.web.journal_option import postgres_journal
from tests.pgtest import PgPlace, Schemas

ROOT = Path(__file__).resolve().parents[1]
NOWHERE = "postgresql://nobody@127.0.0.1:1/none"
"""A DSN nothing answers: a refusal that came from it would be a connection error."""


def _with(dsn: str, query: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + query


@pytest.mark.parametrize(
    ("dsn", "libpq", "options"),
    [
        ("postgresql://app@db/memory", "postgresql://app@db/memory", {}),
        ("host=db memstore_statement_timeout=5", "host=db memstore_statement_timeout=5", {}),
        (
            "postgres://app@db/m?sslmode=require&memstore_close_timeout=2.5"
            "&application_name=a%26b&memstore_lock_timeout=1e1",
            "postgres://app@db/m?sslmode=require&application_name=a%26b",
            {"close_timeout": 2.5, "lock_timeout": 10.0},
        ),
        (
            "postgresql://app@db/m?memstore_statement_timeout=%35",
            "postgresql://app@db/m",
            {"statement_timeout": 5.0},
        ),
        ("postgresql://app@db/m?application_name=memstore_x", None, {}),
        ("postgresql://app@db/m?a=1&&b=2", None, {}),
        # The prefix encoded or in capitals: libpq would refuse either as unknown.
        (
            "postgresql://app@db/m?memstore%5Flock_timeout=3",
            "postgresql://app@db/m",
            {"lock_timeout": 3.0},
        ),
        (
            "postgresql://app@db/m?MEMSTORE_lock_timeout=3&x=1",
            "postgresql://app@db/m?x=1",
            {"lock_timeout": 3.0},
        ),
    ],
)
def test_memstores_parameters_are_taken_out_the_rest_kept_as_written(
    dsn: str, libpq: str | None, options: dict[str, float]
) -> None:
    assert journal_options(dsn) == (libpq or dsn, options)
    assert libpq_dsn(dsn) == (libpq or dsn)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("memstore_statment_timeout=5", "names 'memstore_statment_timeout', which memstore"),
        ("memstore_close_timeout=1&memstore_close_timeout=2", "gives memstore_close_timeout twice"),
        ("memstore_lock_timeout=soon", "memstore_lock_timeout in the DSN takes a number"),
        ("memstore_lock_timeout=nan", "takes a number of seconds, got 'nan'"),
        ("memstore_lock_timeout", "takes a number of seconds, got ''"),
        ("memstore_lock_timeout=1&memstore%5Flock_timeout=2", "gives memstore_lock_timeout twice"),
        ("statement_timeout=5", "names statement_timeout, which libpq does not know: .*memstore_"),
        ("schema=agents", "names schema, which libpq does not know: .*memstore_schema \\(a sch"),
        ("memstore_schema=a&memstore_schema=a", "gives memstore_schema twice"),
    ],
)
def test_a_bad_parameter_is_refused_before_connecting(query: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        journal_options(_with(NOWHERE, query))
    with pytest.raises(ValueError, match=says):
        Memory(journal=_with(NOWHERE, query), embedder=None)


def test_a_value_the_journal_cannot_take_is_refused_naming_its_keyword() -> None:
    with pytest.raises(ValueError, match="statement_timeout"):
        Memory(journal=_with(NOWHERE, "memstore_statement_timeout=-1"), embedder=None)


def test_the_servers_journal_takes_its_timeouts_from_the_dsn(pg_place: PgPlace) -> None:
    dsn = _with(
        pg_place.dsn,
        "memstore_statement_timeout=2.5&memstore_close_timeout=3&memstore_lock_timeout=4",
    )
    with pytest.raises(psycopg.ProgrammingError, match="memstore_statement_timeout"):
        psycopg.connect(dsn).close()  # libpq's refusal: why they are taken out
    journal = postgres_journal(dsn, pg_place.schema)
    assert journal is not None
    try:
        db = journal._db
        with db.write_lock:
            writer = db.writer()
            assert writer.execute("SHOW statement_timeout").fetchone() == ("2500ms",)
            assert writer.execute("SHOW lock_timeout").fetchone() == ("4s",)
        assert db.close_timeout == 3.0
    finally:
        journal.close()


def test_serve_refuses_a_bad_parameter_and_makes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as s:  # a port free now (serve binds it before opening the journal)
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bad = _with(NOWHERE, "memstore_statement_timeout=soon")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memstore",
            "serve",
            "--data",
            str(data),
            "--port",
            port,
            "--journal",
            bad,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert "memstore_statement_timeout in the DSN takes a number of seconds" in done.stderr
    assert not data.exists()


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("memstore_close_timeout=3", "holds memstore_close_timeout, .* takes close_timeout= as a"),
        ("lock_timeout=3", "names lock_timeout, which libpq does not know"),
    ],
)
def test_a_postgres_journal_given_a_timeout_in_its_dsn_names_it(
    pg_place: PgPlace, query: str, says: str
) -> None:
    """A PostgresJournal takes its timeouts as keywords and gives libpq its DSN as it is;
    libpq's refusal cannot be shown (it may quote the password), so the error said only
    that the DSN 'does not read as written', pointing at the user and password."""
    from memstore.journal.postgres import PostgresJournal

    with pytest.raises(JournalError, match=f"cannot connect to PostgreSQL: the DSN {says}"):
        PostgresJournal(_with(pg_place.dsn, query), schema=pg_place.schema)


@pytest.mark.parametrize(
    ("command", "query", "says"),
    [
        (["mcp", "--transport", "http"], "memstore_statement_timeout=x", "memstore mcp: memstore_"),
        (["mcp", "--transport", "http"], "memstore_lock_timeout=-1", "memstore mcp: lock_timeout"),
        (["mcp", "--transport", "http"], "memstore_schema=a-b", "memstore mcp: memstore_schema"),
        (["serve"], "memstore_schema=9", "memstore: memstore_schema in the DSN takes a plain"),
        (["serve", "--api", "mindlayer"], "memstore_close_timeout=x", "memstore: memstore_close_"),
        (
            ["serve", "--api", "mindlayer"],
            "memstore_lock_timeout=-1",
            "memstore: lock_timeout must",
        ),
    ],
)
def test_the_other_servers_refuse_a_bad_parameter_in_a_line_and_make_nothing(
    tmp_path: Path, command: list[str], query: str, says: str
) -> None:
    """memstore mcp and the Mind Layer server printed a ValueError's traceback (exit 1)."""
    data = tmp_path / "data"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    done = subprocess.run(
        [sys.executable, "-m", "memstore", *command, "--data", str(data), "--port", port,
         "--embedder", "none", "--journal", _with(NOWHERE, query)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(says) and "Traceback" not in done.stderr, done.stderr
    assert not data.exists()


@pytest.mark.parametrize(
    ("journal", "shown"),
    [
        ("host=db user=app password=s3cret dbname=memory", "a libpq 'key=value' string"),
        ("postgresq://app:s3cret@db/memory", "'postgresq://...'"),  # a typo'd scheme
        ("mysql://root:s3cret@db/memory", "'mysql://...'"),
    ],
)
def test_a_refused_journal_string_never_shows_its_password(journal: str, shown: str) -> None:
    """Memory(journal=...) quoted the first 40 characters of a string it refused."""
    with pytest.raises(MemstoreError, match="pass a Journal object") as caught:
        Memory(journal=journal, embedder=None)
    assert "s3cret" not in str(caught.value)
    assert str(caught.value).startswith(f"journal={shown}")
    from memstore.mcp.opening import open_memory

    with pytest.raises(MemstoreError, match="--journal takes a postgresql:// DSN") as caught:
        open_memory(Path("unused"), journal=journal)
    assert "s3cret" not in str(caught.value)


def _schema_of(mem: Memory) -> str:
    from memstore.journal.postgres import PostgresJournal

    assert isinstance(mem.journal, PostgresJournal)
    return mem.journal.schema


def _schema_exists(place: PgPlace, name: str) -> bool:
    found = place.sql("SELECT 1 FROM pg_namespace WHERE nspname = %s", name)
    return bool(found)


def test_two_memories_in_one_database_keep_to_the_schemas_their_dsns_name(
    pg_schemas: Schemas,
) -> None:
    """Memory(dsn) opened schema memstore whatever the DSN: two memories could not share
    a database (memstore_schema was refused as a parameter memstore does not know)."""
    one, two = pg_schemas.new("one"), pg_schemas.new("two")
    dsn = {p.schema: _with(p.dsn, f"memstore_schema={p.schema}") for p in (one, two)}
    with (
        Memory(journal=dsn[one.schema], embedder=None) as a,
        Memory(journal=_with(dsn[two.schema], "memstore_lock_timeout=5"), embedder=None) as b,
    ):
        assert (_schema_of(a), _schema_of(b)) == (one.schema, two.schema)
        mine = a.add("The staging database moved to db-7.")
        theirs = b.add("The staging database moved to db-9.")
        assert a.get(theirs.id) is None and b.get(mine.id) is None
        assert [h.item.id for h in a.search("staging database")] == [mine.id]
        assert [h.item.id for h in b.search("staging database")] == [theirs.id]
    assert one.sql("SELECT count(*) FROM {s}.versions") == [(1,)]
    with Memory(journal=dsn[one.schema], embedder=None) as again:
        assert again.get(mine.id) is not None and again.get(theirs.id) is None
        assert again.stats().items == 1


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("2agents", "'2agents'"),
        ("a-b", "'a-b'"),
        ("", "''"),
        ("agents%3Bdrop", "'agents;drop'"),
        ("%s_" + "x" * 64, "'mst_"),  # too long: PostgreSQL would cut it to 63 bytes
    ],
)
def test_a_schema_the_journal_cannot_take_is_refused_naming_the_parameter_and_nothing_is_made(
    pg_place: PgPlace, value: str, shown: str
) -> None:
    value = value.replace("%s", pg_place.schema)
    bad = _with(pg_place.dsn, f"memstore_schema={value}")
    says = f"^memstore_schema in the DSN takes a plain identifier .*, got {shown}"
    with pytest.raises(ValueError, match=says):
        Memory(journal=bad, embedder=None)
    with pytest.raises(ValueError, match=says):
        postgres_journal(bad, None)
    assert not _schema_exists(pg_place, pg_place.schema)
    assert not _schema_exists(pg_place, value[:63])


def test_the_servers_take_the_schema_from_the_dsn_or_the_flag_but_not_two(
    pg_place: PgPlace, tmp_path: Path
) -> None:
    from memstore.mcp.opening import open_memory
    from memstore.web.journal_option import JournalOptionError

    dsn = _with(pg_place.dsn, f"memstore_schema={pg_place.schema}")
    with pytest.raises(JournalOptionError, match="name two schemas: give one"):
        postgres_journal(dsn, pg_place.schema + "_other")
    assert not _schema_exists(pg_place, pg_place.schema)
    for flag in (None, pg_place.schema):  # the same schema named twice is one
        journal = postgres_journal(dsn, flag)
        assert journal is not None and journal.schema == pg_place.schema
        journal.close()
    opened = open_memory(tmp_path / "data", embedder=None, journal=dsn)  # memstore mcp
    with opened.memory as mem:
        assert _schema_of(mem) == pg_place.schema
