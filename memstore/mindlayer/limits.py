"""The Mind Layer API's bounds, in one place (seed 002's REST section fixes them).

A request past any of them is refused with 400 ``invalid_request`` and changes nothing.
"""

from __future__ import annotations

from typing import Final

from memstore.context_block import DEFAULT_CONTEXT_CHARS
from memstore.limits import adapter_cap

__all__ = [
    "DEFAULT_CONTEXT_CHARS",
    "DEFAULT_LIMIT",
    "ID_PATTERN",
    "MAX_ANSWER_BYTES",
    "MAX_BODY_BYTES",
    "MAX_CONTEXT_CHARS",
    "MAX_FACTS",
    "MAX_ID_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_LIMIT",
    "MAX_SESSION_BYTES",
    "MAX_TEXT_BYTES",
    "MIN_PUBLIC_TOKEN_CHARS",
    "MODES",
]

MAX_BODY_BYTES: Final = 1024 * 1024
"""Largest POST/PUT body (1 MiB)."""
MAX_JSON_DEPTH: Final = 16
"""Deepest nesting of a request body (the API's bodies nest two levels)."""
ID_PATTERN: Final = r"[A-Za-z0-9_.-]{1,128}"
"""Agent, user and memory ids: 1-128 ASCII letters, digits, ``_``, ``.`` and ``-``."""
MAX_ID_CHARS: Final = 128
"""Longest agent, user or memory id."""
MAX_TEXT_BYTES: Final = 8192
"""Longest memory text, query, ingest text or personality, UTF-8 encoded."""
MAX_SESSION_BYTES: Final = 128
"""Longest session label, UTF-8 encoded."""
DEFAULT_LIMIT: Final = 5
"""Hits a search returns when the request names no ``limit``."""
MAX_LIMIT: Final = adapter_cap(100)
"""Largest ``limit`` (and the smallest is 1): seed 002's range 1-100, tighter than the
engine's :data:`~memstore.limits.MAX_RESULTS` (``docs/mindlayer.md``, "Limits and errors")."""
MODES: Final = ("lexical", "semantic", "hybrid")
"""The retrieval modes; ``lexical`` is the default."""
MAX_CONTEXT_CHARS: Final = 100_000
"""Largest ``max_chars`` a context request may ask for (default :data:`DEFAULT_CONTEXT_CHARS`)."""
MAX_FACTS: Final = 20
"""Most facts one ingest may store; a provider answering more is invalid output."""
MAX_ANSWER_BYTES: Final = 64 * 1024
"""Longest chat answer accepted from the provider."""
MIN_PUBLIC_TOKEN_CHARS: Final = 32
"""Shortest owner token a non-loopback bind accepts."""
