"""Build script for the optional C extension; the project's metadata is in pyproject.toml.

``memstore._speedups`` compiles memstore's hottest Python loops: the
lexicon's write loop, the lexical rank, a cold query token's vocabulary search,
the lean fusion's candidates, and a durable write's per-item check and journal
row, each in a C file of its own (:data:`SOURCES`; ``memstore/_speedups.c``
says what each holds). It is optional: where no C compiler or no Python headers
are at hand, the build prints a warning and the install goes on without it,
and memstore runs the Python or numpy code each function stands in for, the
oracles the compiled ones are tested against.
"""

from setuptools import Extension, setup

SOURCES = (
    "_speedups",  # the module: its table of functions (and what each file holds)
    "_wordcount",
    "_wordsplit",
    "_lexrank",
    "_editnear",
    "_joined",
    "_bestlevels",
    "_slots",
    "_leantop",
    "_itemwrite",
)

setup(
    ext_modules=[
        Extension(
            "memstore._speedups",
            sources=[f"memstore/{name}.c" for name in SOURCES],
            depends=["memstore/_speedups.h"],
            optional=True,
        )
    ]
)
