"""``--journal`` checked against the journal a served folder records.

A folder a server serves on PostgreSQL records that journal in
``journal.json``; every data command refuses the folder without
``--journal``. Before, a ``--journal`` naming *another* journal (another
schema, database or port) was taken as it was: the command worked on a memory
the folder's server never sees, and opening it made the schema when missing.
Now it is refused before anything is opened, naming both journals; the same
journal reached another way (another user, a password, the schema in the DSN,
the default port left out) is taken. Real PostgreSQL, the real command line
run as processes (:mod:`tests.cli_harness`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstore import Memory
from memstore._journal_record import JOURNAL_RECORD_FILE
from tests.cli_harness import memstore, refused
from tests.pgtest import PgPlace, Schemas

WHERE = "postgres@127.0.0.1:5432/test"


@pytest.fixture
def served(pg_schemas: Schemas, tmp_path: Path) -> tuple[Path, PgPlace]:
    """A folder whose memory a server kept in PostgreSQL (the server since stopped)."""
    place = pg_schemas.new("served")
    data = tmp_path / "data"
    with Memory(data, embedder=None, journal=f"{place.dsn}?memstore_schema={place.schema}") as m:
        m.add("the nightly backup runs at 02:00", id="nightly")
    assert json.loads((data / JOURNAL_RECORD_FILE).read_text())["where"] == WHERE
    return data, place


def _schemas(place: PgPlace, name: str) -> list[tuple[object, ...]]:
    return place.sql("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", name)


COMMANDS = [
    ["add", "a note the server would never see", "--new-kind"],
    ["search", "nightly"],
    ["get", "nightly"],
    ["forget", "nightly"],
    ["stats"],
    ["export"],
    ["import", "-"],
]


def test_another_schema_is_refused_naming_both_and_made_nowhere(
    served: tuple[Path, PgPlace], pg_schemas: Schemas, tmp_path: Path
) -> None:
    data, place = served
    other = pg_schemas.new("other").schema
    for command in COMMANDS:
        done = memstore(
            *command, "--data", str(data), "--embedder", "none",
            "--journal", place.dsn, "--journal-schema", other,
            cwd=tmp_path, input="",
        )  # fmt: skip
        refused(done, 2)
        assert done.stderr == (
            f"memstore: --journal names another journal ({WHERE}, schema {other}) than the "
            f"one {data}/ is kept in ({WHERE}, schema {place.schema}), which its server was "
            f"given: give that journal, --journal postgresql://{WHERE} --journal-schema "
            f"{place.schema}, or another --data folder\n"
        ), command
    assert _schemas(place, other) == []  # never opened: no empty journal made beside
    assert place.sql("SELECT count(*) FROM {s}.versions")[0][0] == 1
    # The same journal reached another way is taken: a password, no port, the schema
    # in the DSN, the other scheme (another user too: same_journal's doctest).
    for dsn in (
        f"postgresql://postgres:pw@127.0.0.1/test?memstore_schema={place.schema}",
        f"postgres://postgres@127.0.0.1:5432/test?memstore_schema={place.schema}",
    ):
        done = memstore("get", "nightly", "--data", str(data), "--journal", dsn, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "02:00" in done.stdout


@pytest.mark.parametrize(
    "dsn",
    ["postgresql://postgres@127.0.0.1:5432/postgres", "postgresql://postgres@127.0.0.1:5433/test"],
    ids=["database", "port"],
)
def test_another_database_or_port_is_refused(
    served: tuple[Path, PgPlace], tmp_path: Path, dsn: str
) -> None:
    data, place = served
    done = memstore(
        "stats", "--data", str(data), "--journal", dsn, "--journal-schema", place.schema,
        cwd=tmp_path,
    )  # fmt: skip
    refused(done, 2, f"({dsn.removeprefix('postgresql://')}, schema {place.schema})", WHERE)


def test_a_folder_kept_in_a_hosts_own_journal_refuses_a_postgresql_one(
    pg_place: PgPlace, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / JOURNAL_RECORD_FILE).write_text(json.dumps({"journal": "HostJournal"}))
    done = memstore(
        "stats", "--data", str(data), "--journal", pg_place.dsn,
        "--journal-schema", pg_place.schema, cwd=tmp_path,
    )  # fmt: skip
    refused(done, 2, "a journal of its host's own (HostJournal)", pg_place.schema)
    assert _schemas(pg_place, pg_place.schema) == []
