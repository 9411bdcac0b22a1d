"""The Mind Layer surface talks to the engine only; the engine's context block to no web code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.mindlayer.conftest import ROOT, clean_env, refused

OTHER_SURFACES = (
    "memstore.protocol",
    "memstore.mcp",
    "memstore.ui",
    "memstore.client",
    "memstore.integrations",
)


def loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_the_server_imports_no_other_surface() -> None:
    modules = loaded_after("import memstore.mindlayer.server, memstore.mindlayer.app")
    assert "starlette" in modules
    assert not {m for m in modules if m.startswith(OTHER_SURFACES)}


def test_the_python_api_and_context_block_import_no_web_framework() -> None:
    modules = loaded_after("import memstore.mindlayer, memstore.context_block")
    web = {"starlette", "fastapi", "uvicorn", "httpx"}
    assert not web & {m.split(".")[0] for m in modules}
    engine_only = loaded_after("import memstore.context_block")
    assert not {m for m in engine_only if m.startswith(("memstore.web", "memstore.mindlayer"))}


def test_flags_of_the_other_api_are_refused(tmp_path: Path) -> None:
    code, out = refused(tmp_path / "d", "--tokens-file", str(tmp_path / "t.json"))
    assert code == 2 and "--owner-token-file" in out
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memstore.cli",
            "serve",
            "--data",
            str(tmp_path / "p"),
            "--owner-token-file",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert done.returncode == 2 and "--api mindlayer" in done.stderr
