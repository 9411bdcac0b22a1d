"""The data commands on a folder a server serves on PostgreSQL.

``memstore serve --data DIR --journal postgresql://...`` keeps its memory in
PostgreSQL; DIR holds its vectors and tokens, no ``journal.db``. Before,
``memstore add --data DIR`` found no memory there and quietly made a new
SQLite one beside it (the server never saw the note), and the read commands
said there was no memory at all and to create one with ``memstore add``. Now
the folder records its journal (``journal.json``, no password), every data
command refuses it without ``--journal``, naming what to pass, and with
``--journal`` works on the server's memory (real PostgreSQL, the server's
``Memory`` open meanwhile as ``memstore serve`` holds it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from memstore import Memory
from memstore._journal_record import JOURNAL_RECORD_FILE
from memstore.backup import VECTORS_FILE
from memstore.cli import main
from memstore.memory import JOURNAL_FILE
from tests.pgtest import PgPlace, Schemas


def _with_password(dsn: str) -> str:
    """``dsn`` with a password (trust auth ignores it): the folder must not record it."""
    parts = urlsplit(dsn)
    netloc = parts.netloc.replace("@", ":s3cret-pw@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.fixture
def served(pg_schemas: Schemas, tmp_path: Path) -> tuple[Path, PgPlace, Memory]:
    """A folder and the memory a server keeps in PostgreSQL for it, open as a server holds it."""
    place = pg_schemas.new("served")
    data = tmp_path / "data"
    server = Memory(
        data,
        embedder="hash",
        journal=_with_password(place.dsn) + f"?memstore_schema={place.schema}",
    )
    server.add("the nightly backup runs at 02:00", id="nightly")
    return data, place, server


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_folder_records_its_journal_without_the_password(
    served: tuple[Path, PgPlace, Memory],
) -> None:
    data, place, server = served
    try:
        record = json.loads((data / JOURNAL_RECORD_FILE).read_text())
        assert record == {
            "journal": "postgresql",
            "schema": place.schema,
            "where": "postgres@127.0.0.1:5432/test",
        }
        assert "s3cret" not in (data / JOURNAL_RECORD_FILE).read_text()
        assert JOURNAL_FILE not in _files(data)
    finally:
        server.close()


@pytest.mark.parametrize(
    "command",
    [
        ["add", "a note the server would never see"],
        ["search", "nightly"],
        ["get", "nightly"],
        ["forget", "nightly"],
        ["stats"],
        ["export"],
        ["import", "-"],
    ],
    ids=lambda c: c[0],
)
def test_without_journal_every_data_command_is_refused_saying_what_to_pass(
    served: tuple[Path, PgPlace, Memory], capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    data, place, server = served
    try:
        before = _files(data)
        code = main([*command, "--data", str(data), "--embedder", "none"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err == (
            f"memstore: {data}/ is kept in a PostgreSQL journal (postgres@127.0.0.1:5432/test, "
            f"schema {place.schema}), not in a journal.db of its own (a server opened it with "
            "--journal): give that journal, --journal postgresql://postgres@127.0.0.1:5432/test "
            f"--journal-schema {place.schema} (with its password if it needs one)\n"
        )
        assert _files(data) == before  # no journal.db made beside the server's memory
        assert server.get("nightly") is not None
    finally:
        server.close()


def test_with_journal_the_commands_work_on_the_servers_memory(
    served: tuple[Path, PgPlace, Memory],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    data, place, server = served
    shared = ["--data", str(data), "--journal", place.dsn, "--journal-schema", place.schema,
              "--embedder", "hash"]  # fmt: skip
    try:
        before = _files(data)
        assert main(["add", "the weekly report goes out on Fridays", "--json", *shared]) == 0
        added = json.loads(capsys.readouterr().out)["id"]
        deadline = time.monotonic() + 30  # the server follows the journal: its replica lag
        while server.get(added) is None:
            assert time.monotonic() < deadline, "the server never saw the note"
            time.sleep(0.05)
        assert main(["search", "weekly report", *shared]) == 0
        assert added in capsys.readouterr().out
        assert main(["get", "nightly", *shared]) == 0
        assert "02:00" in capsys.readouterr().out
        assert main(["stats", "--json", *shared]) == 0
        assert json.loads(capsys.readouterr().out)["items"] == 2
        export = tmp_path / "all.jsonl"
        assert main(["export", "-o", str(export), *shared]) == 0
        assert main(["forget", "nightly", *shared]) == 0
        capsys.readouterr()
        while server.get("nightly") is not None:
            assert time.monotonic() < deadline, "the server never saw the delete"
            time.sleep(0.05)
        assert main(["import", str(export), *shared]) == 0  # the export's versions: on record
        assert _files(data) == before  # the folder's files are the server's: none touched
    finally:
        server.close()


def test_a_folder_served_before_it_recorded_its_journal_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / VECTORS_FILE).write_bytes(b"")  # what a server on PostgreSQL left, and no record
    assert main(["add", "x", "--data", str(data), "--embedder", "none"]) == 2
    err = capsys.readouterr().err
    assert f"{data}/ holds a server's files ({VECTORS_FILE}) but no journal.db" in err
    assert "--journal postgresql://USER@HOST/DB --journal-schema SCHEMA" in err
    assert _files(data) == [VECTORS_FILE]


def test_opening_the_folder_on_its_own_journal_again_forgets_the_record(
    served: tuple[Path, PgPlace, Memory], capsys: pytest.CaptureFixture[str]
) -> None:
    data, _, server = served
    server.close()
    with Memory(data, embedder=None) as mem:  # a SQLite memory of its own, on purpose
        mem.add("kept here", id="here")
    assert not (data / JOURNAL_RECORD_FILE).exists()
    assert main(["get", "here", "--data", str(data), "--embedder", "none"]) == 0
    assert "kept here" in capsys.readouterr().out


def test_backup_of_a_served_folder_says_where_its_memory_is(
    served: tuple[Path, PgPlace, Memory], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data, _, server = served
    server.close()
    assert main(["backup", str(data), str(tmp_path / "copy")]) == 1
    err = capsys.readouterr().err
    assert "its memory is kept in a PostgreSQL journal" in err and "pg_dump" in err
    assert not (tmp_path / "copy").exists()
