"""The command line's promises about data, held against real processes racing and failing.

Each test drives ``python -m memstore.cli`` as separate processes (the
helpers of :mod:`tests.cli_harness`) and names the promise it holds: two
writers at once both land, a refused import leaves a folder as it found it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from tests.cli_harness import ENV, holding, items, memstore, refused, seed, spawn, wait_until_open


def test_two_adds_at_once_both_land_the_second_waits_its_turn(tmp_path: Path) -> None:
    """Before: ``memstore add`` on a folder another ``add`` was writing at that moment
    exited 1, "being written by another process (a running memstore serve?)": of two
    adds a script ran together (``add A & add B``) one was lost. Now the second waits
    for the first to finish (up to a few seconds) and lands too."""
    seed(tmp_path / "data", "the deploy moved to Friday")
    # the first writer, holding the folder until told to stop
    with holding(tmp_path, after="m.add('written by the first')\nm.close()\n") as holder:
        argv = ("add", "written by the second", "--embedder", "none")
        with spawn(*argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as second:
            # The second has met the lock once it holds the lock file open (waiting on it);
            # unchanged, it opened it only to be refused, and exited.
            wait_until_open(second, "journal.db.lock")
            assert holder.stdin is not None
            holder.stdin.close()  # the first finishes its write and lets go
            out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert "written by the second" in out and err == ""
    assert holder.returncode == 0
    assert items(tmp_path / "data") == 3


def test_a_refused_import_into_an_empty_folder_leaves_it_empty(tmp_path: Path) -> None:
    """Before: ``mkdir restore; memstore import cut.ndjson --data restore`` was refused
    ("nothing was imported") yet left an empty memory (journal.db) in ``restore``, which
    then read as a memory of 0 items; into a missing folder the same import left
    nothing. Now an empty folder is filled as a missing one is: whole, or not at all."""
    seed(tmp_path / "data", "the deploy moved to Friday", "the on-call rota changed")
    export = tmp_path / "all.ndjson"
    assert memstore("export", "-o", str(export), cwd=tmp_path).returncode == 0
    cut = tmp_path / "cut.ndjson"
    cut.write_text(export.read_text()[:-30])  # cut mid-line
    (tmp_path / "restore").mkdir(mode=0o750)
    done = memstore("import", str(cut), "--data", "restore", "--embedder", "none", cwd=tmp_path)
    refused(done, 1, "nothing was imported")
    assert list((tmp_path / "restore").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "all.ndjson",
        "cut.ndjson",
        "data",
        "restore",
    ]
    whole = memstore("import", str(export), "--data", "restore", "--embedder", "none", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert items(tmp_path / "restore") == 2
    assert (tmp_path / "restore").stat().st_mode & 0o777 == 0o750  # the folder's own mode kept


def test_a_graph_line_nested_too_deeply_is_refused_in_one_line(tmp_path: Path) -> None:
    """Before: ``memstore import --format mcp-memory`` of a file holding a line such
    as ``[[[[...]]]]`` (100000 levels) died with a Python traceback (RecursionError),
    where the same line in a memstore export is refused in one line. Now the graph
    import refuses it in one line too, exit 1, creating nothing."""
    graph = tmp_path / "memory.jsonl"
    entity = '{"type": "entity", "name": "Ada", "entityType": "person", "observations": ["x"]}'
    graph.write_text(entity + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    done = memstore(
        "import", "--format", "mcp-memory", str(graph), "--embedder", "none", cwd=tmp_path
    )
    refused(done, 1, "line 2", "nested too deeply", "nothing was imported")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]


def test_a_data_folder_that_is_a_file_is_named_in_command_line_words(tmp_path: Path) -> None:
    """Before: ``memstore add x --data notes.txt`` (a file) said "notes.txt is a file;
    Memory(path) takes a folder": a Python call the command line user never made. Now
    it names the flag and what to give, for every command that writes."""
    (tmp_path / "notes.txt").write_text("my notes\n")
    export = tmp_path / "e.ndjson"
    seed(tmp_path / "data", "kept")
    assert memstore("export", "-o", str(export), cwd=tmp_path).returncode == 0
    for argv in (("add", "x"), ("import", str(export)), ("forget", "some-id")):
        done = memstore(*argv, "--data", "notes.txt", "--embedder", "none", cwd=tmp_path)
        refused(done, 1, "--data notes.txt is a file, not a folder")
        assert "Memory(" not in done.stderr, done.stderr
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"


def test_a_memstore_export_given_as_a_graph_says_which_flag_to_drop(tmp_path: Path) -> None:
    """Before: ``memstore import --format mcp-memory export.ndjson`` (a memstore export)
    said only 'line 1: expected an object with "type": "entity" or "relation"', while
    the mistake the other way round names ``--format mcp-memory``. Now it says the file
    is a memstore export and to import it without the flag."""
    seed(tmp_path / "data", "the deploy moved to Friday")
    export = tmp_path / "e.ndjson"
    assert memstore("export", "-o", str(export), cwd=tmp_path).returncode == 0
    argv = ("import", "--format", "mcp-memory", str(export), "--data", "copy")
    refused(memstore(*argv, "--embedder", "none", cwd=tmp_path), 1, "without --format mcp-memory")
    assert not (tmp_path / "copy").exists()
    right = memstore("import", str(export), "--data", "copy", "--embedder", "none", cwd=tmp_path)
    assert right.returncode == 0 and items(tmp_path / "copy") == 1


def test_an_export_of_a_newer_format_is_named_as_one(tmp_path: Path) -> None:
    """Before: an export whose first line names ``memstore-journal-export/3`` (a later
    memstore's) was refused as "not a memstore export", sending the user to look for
    another file. Now it is named a newer memstore's export, with what to do."""
    seed(tmp_path / "data", "the deploy moved to Friday")
    export = tmp_path / "e.ndjson"
    assert memstore("export", "-o", str(export), cwd=tmp_path).returncode == 0
    newer = tmp_path / "newer.ndjson"
    newer.write_text(
        export.read_text().replace("memstore-journal-export/2", "memstore-journal-export/3", 1)
    )
    done = memstore("import", str(newer), "--data", "copy", "--embedder", "none", cwd=tmp_path)
    refused(done, 1, "'memstore-journal-export/3'", "newer memstore", "nothing was imported")
    assert "not a memstore export" not in done.stderr
    assert not (tmp_path / "copy").exists()


def test_a_damaged_row_is_salvaged_from_the_command_line(tmp_path: Path) -> None:
    """Before: on a journal with one damaged row every command refused, saying "to
    salvage them, export with on_corrupt= and import into a new journal": a Python
    call, and ``memstore export`` refused like the rest, so the shell had no way to
    the other items. Now the refusal names ``memstore export --salvage``, which
    exports every readable version and names the one left out."""
    import sqlite3

    seed(tmp_path / "data", "the deploy moved to Friday", "the on-call rota changed")
    with contextlib.closing(sqlite3.connect(tmp_path / "data" / "journal.db")) as db:
        (damaged,) = db.execute("SELECT id FROM versions ORDER BY rowid LIMIT 1").fetchone()
        db.execute("UPDATE versions SET item = '{broken' WHERE id = ?", (damaged,))
        db.commit()
    stats = memstore("stats", cwd=tmp_path)
    refused(stats, 1, "unreadable", "memstore export --salvage --data data -o FILE")
    out = tmp_path / "rest.ndjson"
    done = memstore("export", "--salvage", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"left out the damaged version of {damaged}" in done.stderr
    back = memstore("import", str(out), "--data", "new", "--embedder", "none", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert items(tmp_path / "new") == 1
    kept = memstore("search", "deploy rota", "--data", "new", "--embedder", "none", cwd=tmp_path)
    assert damaged not in kept.stdout and kept.stdout.count("memory-") == 1, kept.stdout


def test_vectors_of_another_embedder_name_the_flag_that_reads_them(tmp_path: Path) -> None:
    """Before: a folder whose vectors another embedder made (here a 64-dimension hash;
    ``--embedder hash`` is 256) refused every command with "re-embed every stored text
    with CellStore.reembed(...)": a Python call. Now it names the ``--embedder``
    values, and ``--embedder none`` indeed reads the folder."""
    code = (
        "from memstore import Memory\n"
        "from memstore_index import HashEmbedder\n"
        "with Memory('data', embedder=HashEmbedder(dim=64)) as m:\n"
        "    m.add('the deploy moved to Friday')\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, check=True)
    done = memstore("search", "deploy", "--embedder", "hash", cwd=tmp_path)
    refused(done, 1, "hash-v1-64-0", "--embedder none")
    words = memstore("search", "deploy", "--embedder", "none", cwd=tmp_path)
    assert words.returncode == 0 and "the deploy moved" in words.stdout, words.stderr
