"""The README's curl session runs as printed against a real ``memstore serve``.

The block is run by bash with only the address changed (a free port instead
of 8080), in a folder whose ``data/`` the server made its token in, as a user
who ran ``make serve`` would have it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from .conftest import start_server, stop_server

ROOT = Path(__file__).resolve().parents[2]


def _curl_block() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if "curl" in b]
    assert len(blocks) == 1, "the README has one curl session"
    return blocks[0]


def test_the_readme_curl_session_runs_as_printed(tmp_path: Path) -> None:
    proc, url = start_server(tmp_path / "data", None)
    try:
        script = "set -euo pipefail\n" + _curl_block().replace("localhost:8080", url[7:])
        done = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
    finally:
        assert stop_server(proc) == 0
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines[0]
    assert re.fullmatch(r"\d+\.\d+", at), "the ingest's position, taken with the shell"
    snapshot = [json.loads(line) for line in lines if line.startswith('{"key"')]
    assert sorted(row["key"].split(":")[0] for row in snapshot) == ["chunk", "episode"], (
        "the snapshot at the ingest's position still shows what a later forget removed"
    )
    hits = json.loads(lines[1])
    assert hits and hits[0]["source"] == "helios:fs/notes.md" and hits[0]["episode"]
