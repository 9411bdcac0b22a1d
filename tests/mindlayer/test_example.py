"""examples/mindlayer_quickstart.py runs against a real server and says what the seed's does."""

from __future__ import annotations

import subprocess
import sys

from tests.mindlayer.conftest import ROOT, Server, clean_env


def test_quickstart_against_the_server(plain: Server) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mindlayer_quickstart.py"), plain.url],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    fact = "The user is vegetarian and cooks dinner for two people."
    assert lines[0] == f"stored diet: {fact}"
    assert lines[1].startswith("found diet (score ") and lines[1].endswith(fact)
    assert lines[2:] == [
        "context for the prompt:",
        "Personality:",
        "Be warm and practical.",
        "",
        "Memories:",
        f"- [diet] {fact}",
    ]
