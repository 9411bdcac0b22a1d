"""The memstore command driven as a careless or hostile user drives it (a real process per call).

Each test names what a user relies on: a refused command says why in one line
(exit 2 for a value that cannot work, 1 for a failure), writes nothing, and
never shows a Python traceback.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli_harness import ENV, items, memstore, refused, seed, spawn, wait_until_open
from tests.ports import free_port

# ------------------------------------------------------------ export and backup targets


def test_export_into_the_data_folder_is_refused_and_the_journal_kept(tmp_path: Path) -> None:
    seed(tmp_path / "data", "the deploy moved to Friday", "the on-call rota changed")
    journal = (tmp_path / "data" / "journal.db").read_bytes()
    for target in ("data/journal.db", "data/vectors.sqlite3", "./data/../data/new.ndjson"):
        done = memstore("export", "-o", target, cwd=tmp_path)  # used to replace the journal
        refused(done, 2, "inside the data folder")
    (tmp_path / "link").symlink_to("data")
    refused(memstore("export", "-o", "link/journal.db", cwd=tmp_path), 2, "inside the data folder")
    assert (tmp_path / "data" / "journal.db").read_bytes() == journal
    assert items(tmp_path / "data") == 2
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "journal.db",
        "journal.db.lock",
    ]
    refused(memstore("export", "-o", "", cwd=tmp_path), 2, "empty file name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "link"]


def test_backup_into_the_folder_it_copies_is_refused(tmp_path: Path) -> None:
    seed(tmp_path / "data", "kept")
    for dest in ("data/copy", "data", "data/", "./data/nested/deeper"):
        # exit 2 as export's -o inside the data folder: a value that can never work (was 1)
        refused(memstore("backup", "data", dest, cwd=tmp_path), 2, "inside the folder backed up")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "journal.db",
        "journal.db.lock",
    ]
    (tmp_path / "file").write_text("not a folder")
    refused(memstore("backup", "data", "file", cwd=tmp_path), 1, "is a file")
    refused(memstore("backup", "data", "", cwd=tmp_path), 2, "empty")
    assert memstore("backup", "data", "copy", cwd=tmp_path).returncode == 0
    assert items(tmp_path / "copy") == 1


def test_a_missing_extra_is_a_failure_not_a_usage_error(tmp_path: Path) -> None:
    # The command line is right; the installation lacks a part: exit 1 (was 2).
    for command, blocked, extra in (("serve", "fastapi", "server"), ("mcp", "mcp", "mcp")):
        code = (
            "import sys\n"
            f"sys.modules[{blocked!r}] = None  # as if the extra were not installed\n"
            "from memstore.cli import main\n"
            f"sys.exit(main([{command!r}]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True
        )
        refused(done, 1, f"needs the {extra} extra", f"memstore-engine[{extra}]")
    assert list(tmp_path.iterdir()) == []


def test_a_journal_without_the_postgres_extra_is_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    # --journal postgresql://... reaches psycopg only when the command runs: each data
    # command and each server said so with a traceback, where it now names the extra.
    dsn = "postgresql://postgres@127.0.0.1:5432/test"
    for argv in (
        ["add", "a note"],
        ["search", "note"],
        ["stats"],
        ["export"],
        ["serve", "--port", str(free_port())],
        ["serve", "--api", "mindlayer", "--port", str(free_port())],
        ["mcp"],
    ):
        code = (
            "import sys\n"
            "sys.modules['psycopg'] = None  # as if the postgres extra were not installed\n"
            "from memstore.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, *argv, "--data", "data", "--journal", dsn],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        refused(done, 1, "needs the postgres extra", 'pip install "memstore-engine[postgres]"')
    assert list(tmp_path.iterdir()) == []


def test_the_client_without_the_http_extra_names_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['httpx'] = None  # as if the http extra were not installed\n"
        "from memstore.client import MemoryClient\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: memstore.client needs httpx (httpx is missing): "
        'pip install "memstore-engine[http]"'
    )


# ------------------------------------------------------------ signals


def _stopped_import(tmp_path: Path, data: str, sig: signal.Signals) -> tuple[int, str]:
    """``memstore import - --data DATA`` stopped by ``sig`` half-way: its status and stderr."""
    argv = ("import", "-", "--data", data, "--embedder", "none")
    with spawn(*argv, cwd=tmp_path, stdin=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            assert proc.stdin is not None and proc.stderr is not None
            proc.stdin.write(
                '{"format": "memstore-journal-export/1", "partition": null, "head": null}\n'
            )
            proc.stdin.flush()  # the import now waits for the rest of its input
            wait_until_open(proc, "journal.db")
            proc.send_signal(sig)
            return proc.wait(timeout=120), proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()


def test_an_import_stopped_half_way_leaves_everything_as_it_was(tmp_path: Path) -> None:
    seed(tmp_path / "data", "the deploy moved to Friday", "the on-call rota changed")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        for data in ("new", "data"):
            code, err = _stopped_import(tmp_path, data, sig)
            assert code == 128 + sig, (sig, data, err)
            assert err.strip() == f"memstore: stopped by {sig.name}", err
            # no memory half-made, no staging folder left: only what was there
            assert sorted(p.name for p in tmp_path.iterdir()) == ["data"], (sig, data)
            assert items(tmp_path / "data") == 2


def test_text_the_terminal_cannot_encode_is_printed_escaped(tmp_path: Path) -> None:
    seed(tmp_path / "data", "the café opens at 08:00 ☕")
    env = {"PYTHONIOENCODING": "ascii"}
    text = memstore("search", "café", "--embedder", "none", cwd=tmp_path, env=env)
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr
    assert "caf\\xe9 opens at 08:00 \\u2615" in text.stdout
    as_json = memstore("search", "café", "--embedder", "none", "--json", cwd=tmp_path, env=env)
    assert json.loads(as_json.stdout)["content"] == "the café opens at 08:00 ☕"


# ------------------------------------------------------------ what import reads


HEADER = '{"format": "memstore-journal-export/1", "partition": null, "head": null}'


def test_an_import_that_cannot_be_read_is_refused_in_one_line(tmp_path: Path) -> None:
    """Closed stdin, a device, a line with no end, a folder: refused, and nothing created."""
    for fmt in ("memstore", "mcp-memory"):  # stdin closed outright (sh: <&-)
        code = "import os, sys; os.close(0); os.execv(sys.executable, sys.argv[1:])"
        argv = [sys.executable, "-c", code, sys.executable, "-m", "memstore.cli", "import"]
        done = subprocess.run(
            [*argv, "--format", fmt, "-", "--data", "new"],
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
        refused(done, 2, "standard input is closed")  # was: TypeError traceback
    for fmt in ("memstore", "mcp-memory"):
        refused(memstore("import", "--format", fmt, "/dev/zero", cwd=tmp_path), 1, "a device")
    (tmp_path / "zeros").write_bytes(b"\0" * 200_000)  # a disk image: one endless line
    refused(memstore("import", "zeros", "--data", "new", cwd=tmp_path), 1, "runs past")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00garbage" * 10)
    binary = memstore("import", "--format", "mcp-memory", "binary", "--data", "new", cwd=tmp_path)
    refused(binary, 1, "not UTF-8 text")  # was: UnicodeDecodeError traceback
    refused(memstore("import", str(tmp_path), "--data", "new", cwd=tmp_path), 1, "cannot read")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary", "zeros"]


def test_an_export_saved_by_a_windows_editor_imports(tmp_path: Path) -> None:
    """A byte-order mark and CRLF line ends, from a file or stdin: the same items."""
    seed(tmp_path / "data", "the deploy moved to Friday", "the on-call rota changed")
    assert memstore("export", "-o", "e.ndjson", cwd=tmp_path).returncode == 0
    text = (tmp_path / "e.ndjson").read_text()
    windows = "\ufeff" + text.replace("\n", "\r\n\r\n")
    (tmp_path / "w.ndjson").write_text(windows, encoding="utf-8", newline="")
    as_file = memstore("import", "w.ndjson", "--data", "a", "--embedder", "none", cwd=tmp_path)
    assert as_file.returncode == 0, as_file.stderr  # was: 'Unexpected UTF-8 BOM'
    assert "imported 2 item(s), 0 unchanged" in as_file.stderr
    piped = memstore(
        "import", "-", "--data", "b", "--embedder", "none", cwd=tmp_path, input=windows
    )
    assert piped.returncode == 0 and "imported 2 item(s)" in piped.stderr, piped.stderr
    graph = '{"type": "entity", "name": "Alice", "entityType": "person", "observations": []}'
    (tmp_path / "g.jsonl").write_text("\ufeff" + graph + "\r\n", encoding="utf-8", newline="")
    mcp = memstore("import", "--format", "mcp-memory", "g.jsonl", "--data", "c", cwd=tmp_path)
    assert mcp.returncode == 0 and "imported 1 entities" in mcp.stderr, mcp.stderr
    assert items(tmp_path / "a") == items(tmp_path / "b") == 2


def test_partition_on_a_memstore_import_is_refused_not_ignored(tmp_path: Path) -> None:
    seed(tmp_path / "data", "the deploy moved to Friday")
    assert memstore("export", "-o", "e.ndjson", cwd=tmp_path).returncode == 0
    done = memstore("import", "e.ndjson", "--partition", "ops", "--data", "b", cwd=tmp_path)
    refused(done, 2, "--partition is for --format mcp-memory")  # was: imported untagged
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------ the other commands


def test_forget_in_a_folder_that_is_not_there_creates_nothing(tmp_path: Path) -> None:
    for hard in ([], ["--hard"]):
        done = memstore("forget", "some-id", *hard, "--data", "typo/data", cwd=tmp_path)
        refused(done, 1, "no memory in typo/data/")
    assert list(tmp_path.iterdir()) == [], "a refused forget used to create an empty memory"


def test_an_origin_nobody_knows_is_a_usage_error_naming_the_choices(tmp_path: Path) -> None:
    done = memstore("add", "x", "--origin", "bogus", "--embedder", "none", cwd=tmp_path)
    refused(done, 2, "'observed', 'derived', 'human', 'verified'")  # was: a pydantic dump
    assert "validation error" not in done.stderr and not (tmp_path / "data").exists()


def test_export_to_a_closed_stdout_says_so(tmp_path: Path) -> None:
    seed(tmp_path / "data", "kept")
    code = "import os, sys; os.close(1); os.execv(sys.executable, sys.argv[1:])"
    done = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "memstore.cli", "export"],
        cwd=tmp_path,
        env=ENV,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    refused(done, 2, "standard output is closed")  # was: 'fp must be a file opened for ...'


def test_json_is_offered_only_where_it_prints_json(tmp_path: Path) -> None:
    """``--json`` was accepted by forget, import, export, serve and mcp and did nothing."""
    seed(tmp_path / "data", "the deploy moved to Friday")
    assert memstore("export", "-o", "e.ndjson", cwd=tmp_path).returncode == 0
    imported = memstore("import", "e.ndjson", "--data", "b", "--json", cwd=tmp_path)
    assert json.loads(imported.stdout) == {"imported": 1, "unchanged": 0}, imported.stderr
    (item,) = [json.loads(line) for line in (tmp_path / "e.ndjson").read_text().splitlines()[1:-1]]
    forgot = memstore("forget", item["id"], "--json", "--data", "b", cwd=tmp_path)
    assert json.loads(forgot.stdout) == {"deleted": item["id"], "hard": False}
    for command in (["export"], ["serve", "--port", "1"], ["mcp"]):
        refused(memstore(*command, "--json", cwd=tmp_path), 2, "unrecognized arguments: --json")


def test_a_failed_backup_into_new_folders_leaves_none_of_them(tmp_path: Path) -> None:
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "journal.db").write_text("not an SQLite file")
    done = memstore("backup", "damaged", "backups/2026/12-01", cwd=tmp_path)
    refused(done, 1, "not an SQLite database")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged"], "backups/ was left behind"
    seed(tmp_path / "data", "kept")
    assert memstore("backup", "data", "backups/2026/12-01", cwd=tmp_path).returncode == 0
    assert items(tmp_path / "backups" / "2026" / "12-01") == 1


def test_a_limit_past_the_engine_cap_is_refused_before_the_folder_opens(tmp_path: Path) -> None:
    for limit in ("1001", "99999999999999999999999"):
        done = memstore("search", "x", "--limit", limit, "--data", "typo", cwd=tmp_path)
        refused(done, 2, "--limit", "at most 1000")  # was: 'no memory in typo/' (exit 1)
    assert "1..1000" in memstore("search", "--help", cwd=tmp_path).stdout


def test_a_search_for_a_kind_nobody_has_says_so(tmp_path: Path) -> None:
    seed(tmp_path / "data", "the deploy moved to Friday")
    typo = memstore("search", "deploy", "--kind", "nte", "--embedder", "none", cwd=tmp_path)
    assert typo.returncode == 0 and typo.stdout == ""
    refused(typo, 0, "no item here has kind 'nte'", "did you mean 'note'?")  # was: silence
    found = memstore("search", "deploy", "--kind", "note", "--embedder", "none", cwd=tmp_path)
    assert "the deploy moved" in found.stdout and found.stderr == ""


def test_a_stored_newline_or_escape_sequence_cannot_forge_a_hit_or_drive_the_terminal(
    tmp_path: Path,
) -> None:
    forged = "the rota\n  9.999  memory-forged  [stable_fact]  trust me\x1b[2J"
    added = memstore("add", forged, "--embedder", "none", cwd=tmp_path)
    assert added.returncode == 0 and len(added.stdout.splitlines()) == 1, added.stdout
    hits = memstore("search", "rota", "--embedder", "none", cwd=tmp_path)
    assert len(hits.stdout.splitlines()) == 1, hits.stdout  # was: two lines, the second forged
    assert "\x1b" not in hits.stdout and "\\n  9.999" in hits.stdout and "\\x1b[2J" in hits.stdout
    as_json = memstore("search", "rota", "--embedder", "none", "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout)["content"] == forged  # the text itself is kept whole
