"""The memstore command driven as a careless or hostile user drives it (a real process per call).

Each test names what a user relies on: a refused command says why in one line
(exit 2 for a value that cannot work, 1 for a failure), writes nothing, and
never shows a Python traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def memstore(*args: str | bytes, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``python -m memstore.cli ARGS`` in ``cwd``; text output, never a hang."""
    argv = [os.fsencode(sys.executable), b"-m", b"memstore.cli", *map(os.fsencode, args)]
    options: dict[str, object] = {"capture_output": True, "text": True, "env": ENV}
    options.update(kw)
    return subprocess.run(argv, cwd=cwd, timeout=300, **options)  # type: ignore[call-overload,no-any-return]


def refused(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    """``done`` exited ``code`` with one line on stderr holding ``words``, and no traceback."""
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)


def seed(folder: Path, *texts: str) -> None:
    """A memory in ``folder`` holding ``texts``, written by its own process."""
    code = (
        "import sys\n"
        "from memstore import Memory\n"
        "with Memory(sys.argv[1], embedder=None) as m:\n"
        "    m.add_many(sys.argv[2:])\n"
    )
    subprocess.run([sys.executable, "-c", code, str(folder), *texts], env=ENV, check=True)


def items(folder: Path) -> int:
    done = memstore("stats", "--json", "--data", str(folder), cwd=folder.parent)
    assert done.returncode == 0, done.stderr
    count: int = json.loads(done.stdout)["items"]
    return count


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
        refused(memstore("backup", "data", dest, cwd=tmp_path), 1, "inside the folder backed up")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "journal.db",
        "journal.db.lock",
    ]
    (tmp_path / "file").write_text("not a folder")
    refused(memstore("backup", "data", "file", cwd=tmp_path), 1, "is a file")
    refused(memstore("backup", "data", "", cwd=tmp_path), 2, "empty")
    assert memstore("backup", "data", "copy", cwd=tmp_path).returncode == 0
    assert items(tmp_path / "copy") == 1


# ------------------------------------------------------------ signals


def _stopped_import(tmp_path: Path, data: str, sig: signal.Signals) -> tuple[int, str]:
    """``memstore import - --data DATA`` stopped by ``sig`` half-way: its status and stderr."""
    argv = [sys.executable, "-m", "memstore.cli", "import", "-", "--data", data]
    with subprocess.Popen(
        [*argv, "--embedder", "none"],
        cwd=tmp_path,
        env=ENV,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdin is not None and proc.stderr is not None
            proc.stdin.write(
                '{"format": "memstore-journal-export/1", "partition": null, "head": null}\n'
            )
            proc.stdin.flush()  # the import now waits for the rest of its input
            deadline = time.monotonic() + 120  # a hang guard, not a measurement
            while not _has_open(proc.pid, "journal.db"):
                assert proc.poll() is None and time.monotonic() < deadline, "it never opened"
                time.sleep(0.05)
            proc.send_signal(sig)
            return proc.wait(timeout=120), proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()


def _has_open(pid: int, name: str) -> bool:
    """Whether process ``pid`` has a file called ``name`` open (Linux's /proc)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):  # closed since it was listed
            if os.readlink(fd).endswith(os.sep + name):
                return True
    return False


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
    env = {**ENV, "PYTHONIOENCODING": "ascii"}
    text = memstore("search", "café", "--embedder", "none", cwd=tmp_path, env=env)
    assert text.returncode == 0 and "Traceback" not in text.stderr, text.stderr
    assert "caf\\xe9 opens at 08:00 \\u2615" in text.stdout
    as_json = memstore("search", "café", "--embedder", "none", "--json", cwd=tmp_path, env=env)
    assert json.loads(as_json.stdout)["content"] == "the café opens at 08:00 ☕"
