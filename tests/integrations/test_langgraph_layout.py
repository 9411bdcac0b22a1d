"""The outer-ring rules for the LangGraph adapter (ARCHITECTURE.md, "The outer ring")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = [
    ROOT / "memstore" / "integrations" / "langgraph.py",
    *sorted((ROOT / "memstore" / "integrations").glob("_*.py")),
]
OTHER_SURFACES = (
    "memstore.protocol",
    "memstore.web",
    "memstore.mcp",
    "memstore.client",
    "memstore.mindlayer",
    "memstore.ui",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_adapter_imports_no_other_surface() -> None:
    for path in ADAPTER:
        bad = {n for n in _imports(path) if n.startswith(OTHER_SURFACES)}
        assert bad == set(), f"{path.name} imports {bad}"


def test_neither_the_engine_nor_the_integrations_package_imports_langgraph() -> None:
    code = (
        "import sys, memstore, memstore.integrations, memstore.partitions;"
        "roots = ('langgraph', 'langchain_core');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in roots))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
