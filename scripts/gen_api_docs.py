"""Write docs/api.md from the docstrings of the public API.

    python scripts/gen_api_docs.py          # rewrite docs/api.md
    python scripts/gen_api_docs.py --check  # exit 1 if docs/api.md is out of date

The reference lists, per package, every name in ``__all__`` with its signature
and the first paragraph of its docstring. The test suite runs ``--check``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "api.md"
PACKAGES = [
    ("memstore", "The engine: items, the store, search, the front door."),
    ("memstore.journal", "Durable, versioned persistence."),
    ("memstore_index", "Embedders and the vector index."),
]
OPTIONAL = [
    ("memstore_hub", "The change hub: events to subscribers, SSE."),
    ("memstore.protocol", "The MemoryProtocol 0.1 HTTP adapter."),
    ("memstore.client", "The Python client of memstore serve (extra http)."),
]


def first_paragraph(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    para = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return para


def signature(obj: object) -> str:
    try:
        try:
            sig = str(inspect.signature(obj, eval_str=True))  # type: ignore[arg-type]
        except NameError:  # an annotation only importable for type checkers
            sig = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    sig = re.sub(r"<function (\w+) at 0x[0-9a-f]+>", r"\1", sig)  # no memory addresses
    sig = re.sub(r"<class '([\w.]+)'>", r"\1", sig)
    sig = re.sub(r"\b(?:[a-z_]\w*\.)+([A-Z]\w*)", r"\1", sig)  # Item, not memstore.item.Item
    return sig if len(sig) <= 160 else sig[:157] + "...)"


def _value(obj: object) -> str:
    if isinstance(obj, (set, frozenset)):  # hash order varies between runs
        inner = ", ".join(sorted(repr(v) for v in obj))
        return f"{type(obj).__name__}({{{inner}}})"
    return repr(obj)


def _own_members(cls: type) -> set[str]:
    """The names ``cls`` defines, with those of the private mixins it is built from.

    A class split along its seams into mixins of private modules (``Store``
    from ``memstore._store_lifecycle`` and the like) documents them as its own.
    """
    names = set(vars(cls))
    for base in cls.__mro__[1:]:
        if (
            "._" in base.__module__
            and base.__module__.split(".")[0] == cls.__module__.split(".")[0]
        ):
            names.update(vars(base))
    return names


def describe(module_name: str, blurb: str) -> list[str]:
    module = importlib.import_module(module_name)
    lines = [f"## `{module_name}`", "", blurb, ""]
    for name in sorted(getattr(module, "__all__", [])):
        obj = getattr(module, name)
        if inspect.isclass(obj):
            lines.append(f"### class `{name}{signature(obj)}`")
        elif callable(obj):
            lines.append(f"### `{name}{signature(obj)}`")
        else:
            lines.append(f"### `{name}` = `{_value(obj)}`"[:200])
        text = first_paragraph(obj) if (inspect.isclass(obj) or callable(obj)) else ""
        if text:
            lines += ["", text]
        if inspect.isclass(obj):
            methods = [
                (m, getattr(obj, m))
                for m in sorted(_own_members(obj))
                if not m.startswith("_") and callable(getattr(obj, m, None))
            ]
            for m, fn in methods:
                doc = first_paragraph(fn)
                lines.append(f"- `{m}{signature(fn)}`" + (f": {doc}" if doc else ""))
        lines.append("")
    return lines


def render() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings by `python scripts/gen_api_docs.py`; the test",
        "suite fails when it is out of date. Start with [getting-started.md](getting-started.md)",
        "and [concepts.md](concepts.md); this page is for looking things up.",
        "",
    ]
    for name, blurb in PACKAGES:
        lines += describe(name, blurb)
    for name, blurb in OPTIONAL:
        try:
            lines += describe(name, blurb)
        except ImportError:
            continue
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/api.md is out of date: run python scripts/gen_api_docs.py")
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
