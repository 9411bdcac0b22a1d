"""Running the ``memstore`` command as real processes, for the command line's tests.

Each helper starts this checkout's code (``PYTHONPATH`` set to the repository)
the way a user's shell would: :func:`memstore` runs one command to its end
(:func:`spawn` starts one), :func:`seed` fills a folder from a process of its
own, :func:`holding` keeps a folder open as a writer until told to let go,
and :func:`wait_until_open` waits for a process to reach a file (Linux's
``/proc``), so that a test interleaves processes by what they hold, never by
sleeping.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HANG_GUARD_S = 120
"""The longest a helper waits for a process (a hang guard, not a measurement)."""


def memstore(
    *args: str | bytes,
    cwd: Path,
    module: str = "memstore.cli",
    env: dict[str, str] | None = None,
    **kw: object,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m MODULE ARGS`` in ``cwd``; text output, never a hang.

    ``env`` is added to :data:`ENV`; other keywords go to :func:`subprocess.run`
    (``timeout`` among them: 300 s unless given).
    """
    argv = [os.fsencode(sys.executable), b"-m", module.encode(), *map(os.fsencode, args)]
    options: dict[str, object] = {"capture_output": True, "text": True, "timeout": 300}
    options.update(kw)
    options["env"] = {**ENV, **(env or {})}
    return subprocess.run(argv, cwd=cwd, **options)  # type: ignore[call-overload,no-any-return]


def spawn(*args: str, cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    """Start ``python -m memstore.cli ARGS`` in ``cwd``, in text mode; ``kw`` to ``Popen``."""
    argv = [sys.executable, "-m", "memstore.cli", *args]
    return subprocess.Popen(argv, cwd=cwd, env=ENV, text=True, **kw)


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
    """How many items the memory in ``folder`` holds, as ``memstore stats`` counts them.

    Opened here as ``stats`` opens it, not by a process of its own: a check of
    what a command left behind, not a command under test (``stats`` has tests
    of its own), and a process each time cost a second of imports.
    """
    from memstore import Memory

    with Memory(folder, embedder=None) as memory:
        return memory.stats().items


def has_open(pid: int, name: str) -> bool:
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


def wait_until_open(proc: subprocess.Popen[str], name: str) -> None:
    """Wait until ``proc`` holds a file called ``name`` open; fail if it ends first."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not has_open(proc.pid, name):
        assert proc.poll() is None, f"it ended (status {proc.returncode}) before opening {name}"
        assert time.monotonic() < deadline, f"it never opened {name}"
        time.sleep(0.01)


@contextlib.contextmanager
def holding(cwd: Path, before: str = "", after: str = "") -> Iterator[subprocess.Popen[str]]:
    """A process holding ``cwd/data`` open as its writer, until its stdin is closed.

    It opens the folder (``Memory('data')`` as ``m``), runs ``before``, prints
    ``ready`` (read here before the block starts), waits for its stdin to
    close, then runs ``after``. Closing ``proc.stdin`` in the block lets it go
    on; leaving the block closes it if the block did not, and waits for the
    process to end (its ``returncode`` then says how it ended).
    """
    code = (
        "import sys\n"
        "from memstore import Memory\n"
        "m = Memory('data', embedder=None)\n"
        f"{before}"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        f"{after}"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
