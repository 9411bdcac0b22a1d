"""The examples run as a newcomer would run them, and say what they should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(script: str, folder: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), str(folder)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_ops_assistant(tmp_path: Path) -> None:
    out = run("ops_assistant.py", tmp_path)
    assert out[0] == "refuted the leak theory; 1 derived note(s) expired with it"
    answers = [line.strip() for line in out[2:5]]
    assert answers[0].startswith("[event] payment-api returned 502s")
    assert "[stable_fact] the ledger pool is too small for peak traffic" in answers
    assert not any("connection leak" in line or "roll back" in line for line in out)
    assert out[5].strip().startswith("linked (") and "ledger database connection pool" in out[5]
    assert (tmp_path / "journal.db").exists()


def test_personal_assistant(tmp_path: Path) -> None:
    out = run("personal_assistant.py", tmp_path)
    assert out[0] == "restatement merged: True"
    assert out[1] == "ana: My dentist appointment is Tuesday at 9."
    assert out[2] == "ben: My dentist appointment is Friday at 4."
    assert "dentist appointment" not in out[3]  # private notes stay private
