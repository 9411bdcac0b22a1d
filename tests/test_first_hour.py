"""The shell session of docs/getting-started.md ("Your first hour") runs as printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"


def _session() -> str:
    text = PAGE.read_text()
    section = text[text.index("## Your first hour") : text.index("## Next")]
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", section, re.S) if "memstore add" in b]
    return block


def test_the_first_hour_shell_session_runs_as_printed(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    assert (bindir / "memstore").exists(), "the memstore command is installed beside python"
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + _session()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert "the nightly backup runs at 02:00" in out[2], "the first hit answers the question"
    assert re.search(r"^ops\s+2$", done.stdout, re.M), "stats counts the partition"
    assert "imported 2 item(s), 0 unchanged" in done.stderr
    copy = subprocess.run(
        [str(bindir / "memstore"), "stats", "--json", "--data", "demo-copy"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(copy.stdout)["partitions"] == {"ops": 2}
