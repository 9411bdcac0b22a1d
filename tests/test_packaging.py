"""The distribution a user installs: built, installed outside the checkout, and used.

Builds the sdist and the wheel from the tracked tree, installs the wheel with
its ``embed`` extra into a fresh virtual environment in a temporary folder
(dependencies come from the package index, through pip's cache, installed by
this environment's pip: the venv gets none of its own), and runs
the README quickstart and ``memstore --version`` from there, so nothing
depends on the source tree: the package data (``py.typed``, static assets)
must be inside the wheel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

from tests.test_readme_quickstart import QUICKSTART_FOLDER, quickstart

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DIST = PYPROJECT["project"]["name"]
VERSION = PYPROJECT["project"]["version"]
IMPORTS = ("memstore", "memstore_index", "memstore_hub")


def _source_copy(dest: Path) -> Path:
    """The files git knows (tracked, and new ones it does not ignore), copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        rel = Path(os.fsdecode(raw))
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


_BUILD = """
import sys
from build import ProjectBuilder
from build.env import DefaultIsolatedEnv

src, out = sys.argv[1:]
with DefaultIsolatedEnv() as env:
    builder = ProjectBuilder.from_isolated_env(env, src)
    env.install(builder.build_system_requires)
    for distribution in ("sdist", "wheel"):
        env.install(builder.get_requires_for_build(distribution))
        builder.build(distribution, out)
"""


def _build(src: Path, out: Path) -> tuple[Path, Path]:
    """(sdist, wheel) as ``python -m build --sdist --wheel`` makes them from ``src``.

    The backend runs in an isolated environment holding only what
    ``[build-system]`` requires (and what the backend asks for), as
    ``python -m build`` does, through build's own API: one environment serves
    both builds (``python -m build`` makes, and fills from the index, one each).
    """
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, str(src), str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def test_the_distribution_name_is_ours_and_says_so() -> None:
    # The index has an unrelated "memstore"; ours is published as memstore-engine.
    assert DIST == "memstore-engine"
    import memstore

    assert memstore.__version__ == VERSION
    for page in ("README.md", "docs/getting-started.md"):
        text = (ROOT / page).read_text()
        assert f"pip install {DIST}" in text or f'pip install "{DIST}[' in text, page
    hints = re.compile(r"""pip install ["']memstore\[""")
    offenders = [
        str(p.relative_to(ROOT))
        for pkg in IMPORTS
        for p in (ROOT / pkg).rglob("*.py")
        if hints.search(p.read_text())
    ]
    assert offenders == [], f"install hints naming the wrong distribution: {offenders}"


def test_the_wheel_installs_and_runs_the_quickstart_outside_the_checkout(tmp_path: Path) -> None:
    src = _source_copy(tmp_path / "src")
    sdist, wheel = _build(src, tmp_path / "dist")
    assert wheel.name.startswith(f"{DIST.replace('-', '_')}-{VERSION}-")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    for pkg in IMPORTS:
        assert f"{pkg}/__init__.py" in names and f"{pkg}/py.typed" in names, pkg
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    from memstore.ui.api import STATIC_FILES  # the inspector's page ships in the wheel

    missing = [f for f in STATIC_FILES if f"memstore/ui/static/{f}" not in names]
    assert missing == [], f"inspector files missing from the wheel: {missing}"
    # The optional extension: its source in the sdist (a build from it compiles
    # it), the module in the wheel where it must build (.ci/run says so).
    if os.environ.get("MEMSTORE_REQUIRE_SPEEDUPS", "") not in ("", "0"):
        assert any(re.fullmatch(r"memstore/_speedups\..*\.so", n) for n in names), names
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "memstore/py.typed"} <= members
    # Every C file and header of the extension: a build from the sdist compiles them all
    # (one missing, the optional extension would silently not be built).
    c_sources = {f"memstore/{p.name}" for p in (ROOT / "memstore").glob("*.[ch]")}
    assert "memstore/_speedups.h" in c_sources
    assert {"setup.py", *c_sources} <= members, sorted(c_sources - members)

    # A venv without pip of its own (ensurepip would install one only to run it
    # once): this environment's pip installs into it (--python). No bytecode is
    # compiled for the whole dependency tree; imports compile what they use.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(py)),
            *("install", "-q", "--no-compile", f"{wheel}[embed]"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    work = tmp_path / "elsewhere"
    work.mkdir()
    code, expected = quickstart()
    run = subprocess.run(
        [str(py), "-c", code], cwd=work, capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout == expected
    assert (work / QUICKSTART_FOLDER / "journal.db").exists()
    where, page = subprocess.run(
        [
            str(py),
            "-c",
            "import memstore; print(memstore.__file__); "
            "from importlib import resources; "
            "print(len((resources.files('memstore.ui') / 'static' / 'index.html').read_bytes()))",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.splitlines()
    assert str(venv) in where and str(ROOT) not in where, "imported from the checkout"
    assert int(page) > 0, "the inspector's page is not readable from the installed wheel"
    version = subprocess.run(
        [str(venv / "bin" / "memstore"), "--version"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert version.stdout.strip() == f"memstore {VERSION}"
