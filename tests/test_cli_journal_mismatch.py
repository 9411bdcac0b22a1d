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

The servers (``memstore serve``, ``serve --api mindlayer``, ``mcp``) took any
``--journal`` as it was: given another, one served (and made) that schema and
rewrote the folder's record to name it; given none, one served a new SQLite
memory beside the recorded one. Now each asks the same check as the data
commands, with the same words and exit status, before it makes anything.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memstore import Memory
from memstore._journal_record import JOURNAL_RECORD_FILE
from tests.cli_harness import memstore, refused
from tests.pgtest import PgPlace, Schemas
from tests.ports import free_port

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


SERVERS = [
    ["serve"],
    ["serve", "--api", "mindlayer"],
    ["mcp"],
    ["mcp", "--transport", "http"],
]


def _state(folder: Path) -> dict[str, object]:
    """Everything in ``folder`` that a start could change: names, bytes, times."""
    state: dict[str, object] = {".": folder.stat().st_mtime_ns}
    for path in sorted(folder.rglob("*")):
        stat = path.stat()
        state[str(path.relative_to(folder))] = (path.read_bytes(), stat.st_mtime_ns)
    return state


def _server(
    command: list[str], data: Path, *options: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    port = ["--port", str(free_port())] if command != ["mcp"] else []
    return memstore(
        *command, "--data", str(data), "--embedder", "none", *port, *options,
        cwd=cwd, input="", timeout=30,
    )  # fmt: skip


@pytest.mark.parametrize("command", SERVERS, ids=" ".join)
def test_a_server_given_another_journal_is_refused_before_it_makes_anything(
    served: tuple[Path, PgPlace], pg_schemas: Schemas, tmp_path: Path, command: list[str]
) -> None:
    data, place = served
    other = pg_schemas.new("other").schema
    before = _state(data)
    done = _server(command, data, "--journal", place.dsn, "--journal-schema", other, cwd=tmp_path)
    refused(done, 2)
    assert done.stderr == (
        f"memstore: --journal names another journal ({WHERE}, schema {other}) than the "
        f"one {data}/ is kept in ({WHERE}, schema {place.schema}), which its server was "
        f"given: give that journal, --journal postgresql://{WHERE} --journal-schema "
        f"{place.schema}, or another --data folder\n"
    )
    assert _state(data) == before  # the record still names its journal; no tokens.json
    assert _schemas(place, other) == []


@pytest.mark.parametrize("command", SERVERS, ids=" ".join)
def test_a_server_without_journal_on_a_served_folder_is_refused(
    served: tuple[Path, PgPlace], tmp_path: Path, command: list[str]
) -> None:
    data, place = served
    before = _state(data)
    done = _server(command, data, cwd=tmp_path)
    refused(done, 2)
    assert done.stderr == (
        f"memstore: {data}/ is kept in a PostgreSQL journal ({WHERE}, schema {place.schema}), "
        "not in a journal.db of its own (a server opened it with --journal): give that "
        f"journal, --journal postgresql://{WHERE} --journal-schema {place.schema} (with its "
        "password if it needs one)\n"
    )
    assert _state(data) == before  # no journal.db: no new memory beside the served one


def test_a_server_on_a_folder_of_a_hosts_own_journal_is_refused(
    pg_place: PgPlace, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / JOURNAL_RECORD_FILE).write_text(json.dumps({"journal": "HostJournal"}))
    before = _state(data)
    done = _server(
        ["serve"], data, "--journal", pg_place.dsn, "--journal-schema", pg_place.schema,
        cwd=tmp_path,
    )  # fmt: skip
    refused(done, 2, "a journal of its host's own (HostJournal)", pg_place.schema)
    assert _state(data) == before
    assert _schemas(pg_place, pg_place.schema) == []


def test_a_server_given_the_folders_journal_another_way_serves_it(
    served: tuple[Path, PgPlace], tmp_path: Path
) -> None:
    data, place = served
    # A password, no port, the schema in the DSN: the same journal (MCP over stdio
    # opens the memory, then ends with its client, here an empty input).
    dsn = f"postgresql://postgres:pw@127.0.0.1/test?memstore_schema={place.schema}"
    done = _server(["mcp"], data, "--journal", dsn, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((data / JOURNAL_RECORD_FILE).read_text())
    assert record == {"journal": "postgresql", "schema": place.schema, "where": WHERE}
    assert not (data / "journal.db").exists()


def test_a_servers_folder_with_its_tokens_but_no_journal_yet_is_served(tmp_path: Path) -> None:
    """A first start that made ``tokens.json`` and then failed leaves such a folder:
    the data commands take it for one served before folders recorded their journal;
    the servers, whose folder it is, start on it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "tokens.json").write_text("{}")
    done = _server(["mcp"], data, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (data / "journal.db").is_file()


@pytest.mark.parametrize("command", SERVERS, ids=" ".join)
def test_a_server_given_a_journal_on_a_folder_with_a_memory_of_its_own_is_refused(
    pg_place: PgPlace, tmp_path: Path, command: list[str]
) -> None:
    """Served from the journal, the folder would record it and hide its own memory from every
    command run on it: refused, the folder and the journal left as they were."""
    data = tmp_path / "data"
    with Memory(data, embedder=None) as m:
        m.add("the nightly backup runs at 02:00", id="nightly")
    before = _state(data)
    done = _server(
        command, data, "--journal", pg_place.dsn, "--journal-schema", pg_place.schema,
        cwd=tmp_path,
    )  # fmt: skip
    refused(done, 2)
    assert done.stderr == (
        f"memstore: {data}/ holds a memory of its own (journal.db): served from --journal, the "
        "folder would be recorded as that journal's and its own memory hidden from every "
        "command run on it. Give the server another --data folder (it keeps only its vectors "
        f"and tokens there), or copy this memory into the journal first: memstore export "
        f"--data {data} | memstore import - --data NEWDIR --journal postgresql://{WHERE} "
        f"--journal-schema {pg_place.schema}\n"
    )
    assert _state(data) == before
    assert _schemas(pg_place, pg_place.schema) == []


def test_the_way_the_refusal_gives_brings_the_folders_memory_into_the_journal(
    pg_place: PgPlace, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    with Memory(data, embedder=None) as m:
        m.add("the nightly backup runs at 02:00", id="nightly")
    journal = ["--journal", pg_place.dsn, "--journal-schema", pg_place.schema]
    dump = memstore("export", "--data", str(data), cwd=tmp_path)
    assert dump.returncode == 0, dump.stderr
    done = memstore(
        "import", "-", "--data", str(tmp_path / "new"), *journal, cwd=tmp_path, input=dump.stdout
    )
    assert done.returncode == 0, done.stderr
    got = memstore("get", "nightly", "--data", str(tmp_path / "new"), "--json", *journal,
                   cwd=tmp_path)  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["content"] == "the nightly backup runs at 02:00"


def test_a_server_given_a_journal_on_a_folder_whose_journal_holds_no_write_serves_it(
    pg_place: PgPlace, tmp_path: Path
) -> None:
    """A ``journal.db`` with no write in it (a start that stopped at once) hides nothing."""
    data = tmp_path / "data"
    Memory(data, embedder=None).close()
    done = _server(
        ["mcp"], data, "--journal", pg_place.dsn, "--journal-schema", pg_place.schema,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((data / JOURNAL_RECORD_FILE).read_text())["schema"] == pg_place.schema
