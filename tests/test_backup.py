"""Backups: ``journal.db`` alone is whole after close, and ``memstore backup`` runs beside writers.

The backup test writes groups of three notes from a thread while the backup
runs; the copy must open as a ``Memory`` and hold exactly the source's state
as of the copy's own head: whole groups only, the same items, their vectors.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memstore import Memory
from memstore.backup import VECTORS_FILE, BackupRaceError, backup
from memstore.cli import BACKUP_HELP, main
from memstore.errors import MemstoreError
from memstore.memory import JOURNAL_FILE

GROUP = 3


def test_close_folds_the_log_into_the_journal_file(tmp_path: Path) -> None:
    folder = tmp_path / "mem"
    with Memory(folder, embedder=None) as mem:
        mem.add_many([f"note number {i}" for i in range(3000)])
        mem.add("one more, in a transaction of its own", id="last")
        assert len(mem.search("note number 42")) > 0  # the read pool is in use
    wal = folder / (JOURNAL_FILE + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(folder / JOURNAL_FILE, alone / JOURNAL_FILE)  # the one file, nothing beside
    with Memory(alone, embedder=None) as copy:
        assert copy.stats().items == 3001
        assert copy.get("last") is not None


def _write_groups(mem: Memory, stop: threading.Event, written: list[int]) -> None:
    n = 0
    while not stop.is_set() or n < 20:
        mem.add_many(
            [{"text": f"group {n} note {k}", "data": {"group": str(n)}} for k in range(GROUP)]
        )
        written.append(n)
        n += 1


def test_backup_while_a_writer_runs_opens_as_a_consistent_memory(tmp_path: Path) -> None:
    source, dest = tmp_path / "source", tmp_path / "backups" / "copy"
    stop = threading.Event()
    written: list[int] = []
    with Memory(source, embedder="hash") as mem:
        mem.add("before the writer started", id="first")
        writer = threading.Thread(target=_write_groups, args=(mem, stop, written))
        writer.start()
        try:
            while len(written) < 5:  # the writer is under way
                stop.wait(0.01)
            files = backup(source, dest)
            during = len(written)
        finally:
            stop.set()
            writer.join()
        assert len(written) > during or len(written) >= 20  # it went on writing after
        with Memory(dest, embedder="hash") as restored:
            head = restored.stats().head
            assert head is not None
            got = {it.id: it.model_dump() for it in restored.as_of(head)}
            want = {it.id: it.model_dump() for it in mem.as_of(head)}
            assert got == want  # the source's state as of the copy's head, exactly
            live = {it.id: it for it in restored.recent(limit=1000)}
            assert set(live) == set(got)
            groups: dict[str, int] = {}
            for it in live.values():
                if "group" in it.data:
                    groups[it.data["group"]] = groups.get(it.data["group"], 0) + 1
            assert groups and set(groups.values()) == {GROUP}  # whole groups only
            assert restored.stats().vectors == len(live)
            assert restored.search("group 0 note 1")[0].item.data["group"] == "0"
    assert [p.name for p in files] == [JOURNAL_FILE, VECTORS_FILE]
    assert {JOURNAL_FILE, VECTORS_FILE} <= {p.name for p in dest.iterdir()}


WRITER = """
import sys
from pathlib import Path
from memstore import Memory
source, stop = Path(sys.argv[1]), Path(sys.argv[2])
with Memory(source, embedder="hash") as mem:
    n = 0
    while not stop.exists() or n < 20:
        mem.add_many([{"text": f"group {n} note {k}", "data": {"group": str(n)}} for k in range(3)])
        print(n, flush=True)
        n += 1
"""


def test_cli_backup_while_another_process_writes(tmp_path: Path) -> None:
    source, dest, stop = tmp_path / "source", tmp_path / "copy", tmp_path / "stop"
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(source), str(stop)], stdout=subprocess.PIPE, text=True
    ) as writer:
        try:
            assert writer.stdout is not None
            while int(writer.stdout.readline()) < 5:  # the writer is under way
                pass
            assert main(["backup", str(source), str(dest)]) == 0
            stop.touch()
            after = writer.stdout.read().split()
            assert writer.wait(timeout=120) == 0
        finally:
            if writer.poll() is None:
                writer.kill()
    assert after  # it kept writing while (and after) the backup ran
    with Memory(dest, embedder="hash") as restored, Memory(source, embedder="hash") as mem:
        head = restored.stats().head
        assert head is not None
        got = {it.id: it.model_dump() for it in restored.as_of(head)}
        assert got == {it.id: it.model_dump() for it in mem.as_of(head)}
        groups = sorted({it["data"]["group"] for it in got.values()}, key=int)
        assert groups == [str(n) for n in range(len(groups))]  # a prefix of whole groups
        assert len(got) == GROUP * len(groups)
        assert mem.stats().items > len(got)


def test_cli_backup_and_its_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, dest = tmp_path / "data", tmp_path / "copy"
    with Memory(source, embedder=None) as mem:
        mem.add("kept across the backup", id="kept")
    assert main(["backup", str(source), str(dest)]) == 0
    assert "backed up journal.db" in capsys.readouterr().err
    with Memory(dest, embedder=None) as restored:
        assert restored.get("kept") is not None
    # A taken destination, or a folder with no journal: exit 1, nothing written.
    assert main(["backup", str(source), str(dest)]) == 1
    assert "not empty" in capsys.readouterr().err
    assert main(["backup", str(tmp_path / "nothing"), str(tmp_path / "other")]) == 1
    assert not (tmp_path / "other").exists()
    with pytest.raises(MemstoreError, match=r"holds no journal\.db"):
        backup(tmp_path, tmp_path / "x")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_restore_commands_the_docs_print_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The restore line of ``memstore backup --help`` and of docs/journal.md, as printed."""
    source, dest = tmp_path / "data", tmp_path / "copy"
    with Memory(source, embedder=None) as mem:
        mem.add("kept across the backup", id="kept")
    assert main(["backup", str(source), str(dest)]) == 0
    journal_md = (Path(__file__).resolve().parents[1] / "docs" / "journal.md").read_text()
    for text, folder in ((BACKUP_HELP, "DEST"), (journal_md, "backups/2026-12-01")):
        restore = re.search(r"memstore \w+ --data " + re.escape(folder), text)
        assert restore is not None, text
        words = restore.group(0).replace(folder, str(dest)).split()[1:]
        assert main(words) == 0, (restore.group(0), capsys.readouterr().err)
    assert "items" in capsys.readouterr().out


def test_a_backup_into_a_symlink_to_an_empty_folder_lands_in_that_folder(tmp_path: Path) -> None:
    # A link to an empty folder passed the checks (an empty folder is a
    # valid destination), then the copy failed at the last step with
    # "Not a directory": the folder was replaced through its link's path.
    source, empty, link = tmp_path / "data", tmp_path / "empty", tmp_path / "link"
    with Memory(source, embedder=None) as mem:
        mem.add("kept across the backup", id="kept")
    empty.mkdir()
    link.symlink_to(empty, target_is_directory=True)
    written = backup(source, link)
    assert [p.name for p in written] == [JOURNAL_FILE]
    assert link.is_symlink() and (empty / JOURNAL_FILE).is_file()
    with Memory(link, embedder=None) as restored:
        assert restored.get("kept") is not None


def test_a_damaged_vector_file_does_not_stop_the_backup_of_the_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The vectors are a cache of the journal (opening sets a damaged file aside
    # and embeds again), but a damaged vectors.sqlite3 failed the whole backup:
    # the record could not be backed up until the memory was opened again.
    source, dest = tmp_path / "data", tmp_path / "copy"
    with Memory(source, embedder="hash") as mem:
        for i in range(5):
            mem.add(f"note {i} about the ledger pool", id=f"n{i}")
    damaged = b"not a database, just bytes" * 4
    (source / VECTORS_FILE).write_bytes(damaged)
    assert main(["backup", str(source), str(dest)]) == 0
    err = capsys.readouterr().err
    assert "backed up journal.db" in err and f"{VECTORS_FILE} in {source} is damaged" in err
    assert sorted(p.name for p in dest.iterdir()) == [JOURNAL_FILE]
    assert (source / VECTORS_FILE).read_bytes() == damaged  # the source is left as it was
    with Memory(dest, embedder="hash") as restored:
        assert sorted(it.id for it in restored.store.all_items()) == [f"n{i}" for i in range(5)]
        assert restored.search("note 3 about the ledger pool", limit=1)[0].item.id == "n3"


def _hold_exclusive(journal: Path) -> sqlite3.Connection:
    """A connection holding ``journal`` exclusively (readers wait) until it rolls back."""
    lock = sqlite3.connect(journal, isolation_level=None)
    lock.execute("PRAGMA locking_mode=EXCLUSIVE")
    lock.execute("BEGIN EXCLUSIVE")
    lock.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return lock


def test_two_threads_backing_up_to_one_place_at_once_keep_their_work_apart(
    tmp_path: Path,
) -> None:
    # Before: both calls of the process staged under the same hidden name, and the second
    # cleared it as "a failed earlier attempt": the first one's copy was deleted under it,
    # and it then moved the second's half-made folder into place. Now each call has its
    # own name: one backup lands whole, the other is refused, nothing hidden is left.
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add_many([f"note {i} on the ledger" for i in range(50)])
    # Hold the journal with an exclusive lock: each backup waits (busy timeout) mid-copy,
    # its hidden folder made, until the lock goes.
    lock = _hold_exclusive(tmp_path / "data" / JOURNAL_FILE)
    outcome: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            outcome[name] = backup(tmp_path / "data", tmp_path / "copy")
        except BaseException as e:  # reported below, whatever it is
            outcome[name] = e

    def hidden() -> list[os.stat_result]:
        return [p.stat() for p in tmp_path.iterdir() if p.name.startswith(".copy.")]

    first, second = (threading.Thread(target=run, args=(n,)) for n in ("first", "second"))
    try:
        first.start()
        while not hidden():
            assert first.is_alive(), outcome
            time.sleep(0.01)
        (mine,) = hidden()
        second.start()
        # Until the second has made its own folder (or, before, cleared the first's).
        while [s.st_ino for s in hidden()] == [mine.st_ino]:
            assert second.is_alive(), outcome
            time.sleep(0.01)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
        first.join()
        second.join()
    done = [r for r in outcome.values() if isinstance(r, list)]
    refused = [r for r in outcome.values() if isinstance(r, MemstoreError)]
    assert (len(done), len(refused)) == (1, 1), outcome
    assert isinstance(refused[0], BackupRaceError)
    assert str(refused[0]).startswith("another backup got there first: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "data"]
    with Memory(tmp_path / "copy", embedder=None) as copy:
        assert len(copy.store.all_items()) == 50


def test_two_memstore_backup_processes_to_one_place_one_wins_the_other_says_so(
    tmp_path: Path,
) -> None:
    # Before: the process that finished second failed with "cannot move the backup into
    # ...: [Errno 39] Directory not empty" and exit 1, as if the disk had failed. Now it
    # says another backup got there first, and the winner's copy is left whole.
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add_many([f"note {i} on the ledger" for i in range(40)])
    # Both processes stage their copy and wait mid-copy on this lock: both found DEST free.
    lock = _hold_exclusive(tmp_path / "data" / JOURNAL_FILE)
    command = [sys.executable, "-m", "memstore", "backup", str(tmp_path / "data")]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    runs: list[subprocess.Popen[str]] = []
    try:
        for _ in range(2):
            runs.append(
                subprocess.Popen(
                    [*command, str(tmp_path / "copy")],
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
            )
        while len([p for p in tmp_path.iterdir() if p.name.startswith(".copy.")]) < 2:
            assert all(r.poll() is None for r in runs), [r.communicate() for r in runs]
            time.sleep(0.02)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    results = sorted(((r.wait(60), r.communicate()[1]) for r in runs), key=lambda x: x[0])
    (won, _), (lost, err) = results
    assert (won, lost) == (0, 1), results
    assert "another backup got there first" in err and "Errno" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "data"]
    with Memory(tmp_path / "copy", embedder=None) as copy:
        assert len(copy.store.all_items()) == 40


def test_a_backup_into_an_empty_folder_fills_that_folder_and_keeps_it(tmp_path: Path) -> None:
    # The empty folder DEST (one the user made: a mount point, a folder with its own
    # permissions) was removed and the staged copy renamed into its place: another
    # folder under the same name, with the staging folder's mode, and a moment with
    # no folder there at all. Now the copy's files are moved into it; it stays.
    source, dest = tmp_path / "data", tmp_path / "copy"
    with Memory(source, embedder="hash") as mem:
        mem.add("kept across the backup", id="kept")
    dest.mkdir()
    dest.chmod(0o710)
    before = dest.stat()
    written = backup(source, dest)
    after = dest.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert sorted(p.name for p in written) == [JOURNAL_FILE, VECTORS_FILE]
    assert sorted(p.name for p in dest.iterdir()) == [JOURNAL_FILE, VECTORS_FILE]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    with Memory(dest, embedder="hash") as restored:
        assert restored.get("kept") is not None


def test_a_failed_backup_into_an_empty_folder_leaves_it_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, dest = tmp_path / "data", tmp_path / "copy"
    source.mkdir()
    (source / JOURNAL_FILE).write_bytes(b"not a database, just bytes" * 40)  # a damaged journal
    dest.mkdir()
    dest.chmod(0o710)
    before = dest.stat()
    assert main(["backup", str(source), str(dest)]) == 1
    assert "memstore: " in capsys.readouterr().err
    after = dest.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert list(dest.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "data"]


def test_a_file_put_into_the_empty_folder_while_the_backup_runs_is_kept(tmp_path: Path) -> None:
    # DEST was empty when the backup looked; while it copied, something else wrote
    # there. The folder was not empty any more when the copy was to go in: it is
    # refused as another backup's race, and what is there now is left as it is.
    with Memory(tmp_path / "data", embedder=None) as mem:
        mem.add_many([f"note {i} on the ledger" for i in range(20)])
    dest = tmp_path / "copy"
    dest.mkdir()
    lock = sqlite3.connect(tmp_path / "data" / JOURNAL_FILE, isolation_level=None)
    lock.execute("PRAGMA locking_mode=EXCLUSIVE")
    lock.execute("BEGIN EXCLUSIVE")
    lock.execute("SELECT count(*) FROM sqlite_master").fetchone()
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(backup(tmp_path / "data", dest))
        except BaseException as e:  # reported below, whatever it is
            outcome.append(e)

    thread = threading.Thread(target=run)
    try:
        thread.start()
        while not any(p.name.startswith(".") for p in [*dest.iterdir(), *tmp_path.iterdir()]):
            assert thread.is_alive(), outcome
            time.sleep(0.01)
        (dest / JOURNAL_FILE).write_text("the user's own file")
    finally:
        lock.execute("ROLLBACK")
        lock.close()
        thread.join()
    assert len(outcome) == 1 and isinstance(outcome[0], BackupRaceError), outcome
    assert sorted(p.name for p in dest.iterdir()) == [JOURNAL_FILE]
    assert (dest / JOURNAL_FILE).read_text() == "the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "data"]


def test_what_a_killed_backup_left_inside_the_empty_folder_is_swept(tmp_path: Path) -> None:
    """A backup killed mid-copy leaves its hidden folder inside DEST: the next one clears it."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(child.stdout)
    source, dest = tmp_path / "data", tmp_path / "copy"
    with Memory(source, embedder=None) as mem:
        mem.add("kept across the backup", id="kept")
    dest.mkdir()
    left = dest / f".backup.partial-{dead}"  # a killed run's (its process is gone)
    left.mkdir()
    (left / JOURNAL_FILE).write_bytes(b"half a copy")
    assert [p.name for p in backup(source, dest)] == [JOURNAL_FILE]
    assert sorted(p.name for p in dest.iterdir()) == [JOURNAL_FILE]
