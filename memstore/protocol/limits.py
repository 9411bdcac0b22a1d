"""The adapter's bounds, in one place: what the seed fixes and what it leaves to us.

Each number is documented in ``docs/protocol.md`` (a test keeps the two in
step). Requests past a size bound are refused with 413 ``payload_too_large``;
past any other bound with 400 ``invalid_request``.
"""

from __future__ import annotations

from typing import Final

from memstore.limits import adapter_cap
from memstore.protocol.chunk import DEFAULT_MAX_CHUNK_CHARS
from memstore.protocol.filter import MAX_FILTER_DEPTH, MAX_FILTER_LENGTH
from memstore.web.body import DEFAULT_MAX_JSON_DEPTH
from memstore.web.connections import DEFAULT_MAX_HEADER_BYTES

__all__ = [
    "DEFAULT_K",
    "MAX_BODY_BYTES",
    "MAX_CHUNK_CHARS",
    "MAX_CONTENT_BYTES",
    "MAX_EPISODE_CHUNKS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_LENGTH",
    "MAX_HEADER_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_K",
    "MAX_METADATA_BYTES",
    "MAX_QUERY_CHARS",
    "MAX_SOURCE_CHARS",
    "SSE_KEEPALIVE_SECONDS",
]

MAX_BODY_BYTES: Final = 256 * 1024
"""Largest request body read; a larger one is refused (413) before it is parsed."""
MAX_JSON_DEPTH: Final = DEFAULT_MAX_JSON_DEPTH
"""Deepest nesting of arrays and objects in a request body (400 ``invalid_request``)."""
MAX_HEADER_BYTES: Final = DEFAULT_MAX_HEADER_BYTES
"""Largest request line and headers (431 ``headers_too_large``, then the connection closes)."""
MAX_CONTENT_BYTES: Final = 16 * 1024
"""Largest episode ``content``, UTF-8 encoded (413): the seed's "~12 KB" with headroom."""
MAX_METADATA_BYTES: Final = 16 * 1024
"""Largest episode ``metadata`` object, as compact JSON (413)."""
MAX_SOURCE_CHARS: Final = 1024
"""Longest episode ``source`` (400)."""
MAX_QUERY_CHARS: Final = 4096
"""Longest recall ``query`` (400)."""
DEFAULT_K: Final = 10
"""Recall's ``k`` when the request has none (the seed's default)."""
MAX_K: Final = adapter_cap(100)
"""Largest recall ``k`` (400 above it, and below 1): this adapter's own cap, on purpose.

The engine answers up to :data:`~memstore.limits.MAX_RESULTS` (1,000) hits per
search; a recall's hits travel whole in one answer, reranked and (``graph``)
expanded along links, so a hundred is the most one call is given. The seed
sets no bound (``usize``); the cap is documented in ``docs/protocol.md``."""
MAX_CHUNK_CHARS: Final = DEFAULT_MAX_CHUNK_CHARS
"""Longest chunk ingest cuts an episode into (see :mod:`memstore.protocol.chunk`)."""
MAX_EPISODE_CHUNKS: Final = 800
"""Most chunks one episode may be cut into (400 above it).

Each heading starts a chunk, so 16 KiB of one-line sections could make
thousands, and the episode item lists its chunk ids: at most 98 characters
each (a 64-character tenant), 800 of them fit beside the largest ``source``
and ``metadata`` within the engine's ``MAX_DATA_CHARS`` of an item's data.
A document of ordinary sections never comes near (16 KiB in 800 chunks is 20
bytes a section)."""
SSE_KEEPALIVE_SECONDS: Final = 15.0
"""Idle time after which an SSE stream sends a keep-alive comment (the seed's 15 s)."""
