"""Every JSON answer's bytes: compact UTF-8 JSON and a closing newline.

A recall answers ten hits of a few hundred characters each, and encoding them
is a visible share of a busy server's CPU (all of it held under the GIL, on
the event loop's thread). :func:`json_bytes` encodes with ``orjson`` when it
is installed (the ``server`` extra brings it: ~4 us for a 7 KB recall answer,
against ~66 us for the standard library) and with :mod:`json` otherwise, or
for the rare value ``orjson`` does not take (an integer past 64 bits, a
mapping key that is not text). The two agree on what an answer holds: the
same bytes for text, integers, booleans, ``null``, lists and mappings with
text keys; floats may differ in spelling but not in value (``1e16`` against
``1e+16``); ``tests/test_json_bytes.py`` holds them to it.

Non-finite floats, which no answer holds (the engine refuses them where they
could enter), are refused by the standard library and written ``null`` by
``orjson``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["json_bytes", "stdlib_json_bytes"]

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # without the server extra: the standard library encodes everything
    _orjson = None

_OPTIONS = 0 if _orjson is None else _orjson.OPT_APPEND_NEWLINE


def stdlib_json_bytes(content: object) -> bytes:
    """:func:`json_bytes` by the standard library alone (the fallback, and the tests' oracle).

    >>> stdlib_json_bytes({"a": "é", "n": 1})
    b'{"a":"\\xc3\\xa9","n":1}\\n'
    """
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def json_bytes(content: object) -> bytes:
    """``content`` as compact UTF-8 JSON and a closing newline: every JSON answer's bytes.

    The newline lets a ``curl`` session read cleanly; parsers ignore it.

    >>> json_bytes({"a": "é", "n": 1})
    b'{"a":"\\xc3\\xa9","n":1}\\n'
    """
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(content, option=_OPTIONS))
        except TypeError:  # a value orjson does not take: the standard library decides
            pass
    return stdlib_json_bytes(content)
