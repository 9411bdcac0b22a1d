"""examples/mindlayer_quickstart.py runs against a real server and says what the seed's does."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.mindlayer.conftest import ROOT, Server, clean_env, start


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


def test_quickstart_without_a_server_says_to_start_one() -> None:
    # Before: a urllib traceback (Connection refused) for the first mistake a newcomer makes.
    with socket.socket() as closed:  # a port nothing listens on: bound, never listening
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "mindlayer_quickstart.py"), url],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"cannot reach {url} (")
    assert done.stderr.rstrip().endswith("memstore serve --api mindlayer --data data/")


def test_quickstart_without_the_owner_token_names_it(tmp_path: Path) -> None:
    token = "t" * 40
    (tmp_path / "owner").write_text(token + "\n")
    (tmp_path / "owner").chmod(0o600)
    server = start(tmp_path / "data", "--owner-token-file", str(tmp_path / "owner"))
    try:
        script = [sys.executable, str(ROOT / "examples" / "mindlayer_quickstart.py"), server.url]
        done = subprocess.run(script, capture_output=True, text=True, env=clean_env(), timeout=60)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("POST /v1/memories: 401 ")
        assert "MIND_LAYER_TOKEN" in done.stderr and token not in done.stderr
        given = clean_env({"MIND_LAYER_TOKEN": token})
        right = subprocess.run(script, capture_output=True, text=True, env=given, timeout=60)
        assert right.returncode == 0 and right.stdout.startswith("stored diet: "), right.stderr
    finally:
        assert server.stop() == 0
