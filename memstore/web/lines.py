"""JSON text for line-based streams (NDJSON, SSE), safe for every line reader.

NDJSON and SSE end a line at ``\\n`` (SSE also at ``\\r``), and JSON text
written with ``ensure_ascii=False`` holds no such character outside its
escapes. But it may hold U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR
and U+0085 NEXT LINE raw inside a string, and many readers split lines there
too: Python's :meth:`str.splitlines` and httpx's ``iter_lines()`` (what
memstore's own client reads snapshots and streams with) among them. A
snapshot holding an episode with a U+2028 in it then reached such a client
as two lines, neither of them JSON. :func:`line_safe` writes those three as
the JSON escapes that mean the same text, so every reader sees one line per
value and parses back the very string that was sent.

>>> line_safe('{"text":"a\\u2028b"}')
'{"text":"a\\\\u2028b"}'
>>> import json
>>> json.loads(line_safe(json.dumps({"t": "x\\u0085y"}, ensure_ascii=False)))["t"] == "x\\u0085y"
True
"""

from __future__ import annotations

from typing import Final

__all__ = ["LINE_BREAKING", "line_safe"]

LINE_BREAKING: Final = "\u2028\u2029\u0085"
"""Characters that common line readers break at, but NDJSON and SSE do not."""
_ESCAPES: Final = str.maketrans({c: f"\\u{ord(c):04x}" for c in LINE_BREAKING})


def line_safe(json_text: str) -> str:
    """``json_text`` with U+2028, U+2029 and U+0085 written as JSON escapes.

    Only for JSON text (or a frame whose only free text is JSON): those
    characters can occur there only inside strings, where the escape is the
    same character. ASCII text is returned as it is, without a scan.
    """
    if json_text.isascii():
        return json_text
    return json_text.translate(_ESCAPES)
