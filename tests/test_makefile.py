"""``make test`` works for a newcomer who cannot apt-get (no Debian, or not root)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_chromium_without_apt_get_says_the_browser_tests_will_skip(tmp_path: Path) -> None:
    # Before: with no /usr/bin/chromium, `make chromium` (the first step of `make test`)
    # ran apt-get unconditionally, so on a Mac or as a normal user `make test` stopped at
    # "apt-get: command not found" before running a single test.
    bin_dir = tmp_path / "bin"  # a PATH with a shell and id, but no apt-get
    bin_dir.mkdir()
    for tool in ("sh", "id"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    make = shutil.which("make")
    assert make is not None
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("MEMSTORE_CHROMIUM", None)
    done = subprocess.run(
        [make, "-s", "-C", str(ROOT), "chromium", f"CHROMIUM={tmp_path / 'no-chromium'}"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "the browser tests (tests/ui) will skip" in done.stdout
