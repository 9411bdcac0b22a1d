"""Build script for the optional C extension; the project's metadata is in pyproject.toml.

``memstore._speedups`` (``memstore/_speedups.c``, with ``_editnear.c`` and
``_joined.c``) compiles the lexicon's hottest write loop, the lexical rank, a
cold query token's vocabulary search, and a durable write's per-item check and
journal row. It is optional: where no C compiler or no Python headers are at
hand, the build prints a warning and the install goes on without it, and
memstore runs its pure Python loop (``memstore/_wordbatch.py``), numpy rank
(``memstore/_lexscore.py``), token expansion (``memstore/_editnear.py``,
``memstore/lexical.py``), recogniser (``memstore/_plainitem.py``) and
pydantic-core's row serializer, the oracles the compiled ones are tested against.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "memstore._speedups",
            sources=["memstore/_speedups.c", "memstore/_editnear.c", "memstore/_joined.c"],
            optional=True,
        )
    ]
)
