"""JSON answers that end with a newline, so a ``curl`` session reads cleanly.

>>> NewlineJSONResponse({"ok": True}).body
b'{"ok":true}\\n'
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from memstore.web.refusal import json_bytes

__all__ = ["NewlineJSONResponse"]


class NewlineJSONResponse(JSONResponse):
    """Starlette's JSON response, rendered by :func:`~memstore.web.refusal.json_bytes`."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)
