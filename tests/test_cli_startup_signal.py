"""Ctrl-C at any moment of a ``memstore`` command, start-up included (real processes).

What a user relies on: however early Ctrl-C comes, the command ends with the one
line ``memstore: stopped by SIGINT`` and exit status 130 (or, if it had already
finished, its normal output and status 0), never a Python traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
STOPPED = "memstore: stopped by SIGINT"


def _interrupted(tmp_path: Path, module: str, delay: float) -> tuple[int, str, str]:
    """``python -m MODULE search ...`` sent SIGINT ``delay`` s after its first own import.

    ``-X importtime`` reports each import on stderr as it completes; the first line
    naming a ``memstore`` module says the package's own code has begun to run (the
    rest of its imports, numpy and pydantic among them, still to come). Waiting for
    it keeps the signal off the interpreter's own start-up, which no Python code
    can guard. The returned stderr holds the command's lines, not the import times.
    """
    argv = [sys.executable, "-X", "importtime", "-m", module, "search", "deploy"]
    argv += ["--data", str(tmp_path / "data"), "--embedder", "none"]
    with subprocess.Popen(
        argv, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stderr is not None and proc.stdout is not None
            lines: list[str] = []
            for line in proc.stderr:
                lines.append(line)
                if line.startswith("import time:") and " memstore" in line:
                    break
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            out, rest = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    err = "".join(lines) + rest
    own = [x for x in err.splitlines() if not x.startswith("import time:")]
    return proc.returncode, out, "\n".join(own)


@pytest.mark.parametrize("module", ["memstore", "memstore.cli"])
@pytest.mark.parametrize("delay", [0.0, 0.2, 0.5, 1.0, 2.0, 4.0])
def test_ctrl_c_at_any_moment_stops_the_command_in_one_line(
    tmp_path: Path, module: str, delay: float
) -> None:
    seed = "from memstore import Memory\nwith Memory('data', embedder=None) as m: m.add('deploy')"
    subprocess.run([sys.executable, "-c", seed], cwd=tmp_path, env=ENV, check=True)
    code, out, err = _interrupted(tmp_path, module, delay)
    assert "Traceback" not in err, err
    if code == 0:  # it had finished before the signal came: its normal answer
        assert (err, out.count("deploy")) == ("", 1), (err, out)
        return
    assert (code, err.strip()) == (128 + signal.SIGINT, STOPPED), (code, err)
    assert out == ""
