"""MemoryProtocol 0.1 over HTTP: the pure pieces of the adapter (extra ``memstore-engine[server]``).

Nothing imported here needs a web framework: the v0 filter DSL, markdown
chunking, the error taxonomy, bearer-token auth, per-tenant rate limits and
hard-delete confirmations are plain Python, usable and tested without a
server. ``docs/protocol.md`` documents them and every decision the seed left
open.

>>> from memstore.protocol import evaluate, parse_filter
>>> evaluate(parse_filter("source LIKE 'helios:fs/%'"), {"source": "helios:fs/notes.md"})
True
"""

from memstore.protocol.auth import (
    ROUTE_SCOPES,
    SCOPES,
    Principal,
    TokensFileError,
    TokenTable,
    authorize,
    new_token,
    write_tokens_file,
)
from memstore.protocol.chunk import DEFAULT_MAX_CHUNK_CHARS, Chunk, chunk_markdown
from memstore.protocol.confirm import Confirmations, canonical_json
from memstore.protocol.errors import ERROR_KINDS, ErrorKind, ProtocolError, error_body
from memstore.protocol.filter import (
    Expr,
    FilterRecord,
    FilterSyntaxError,
    evaluate,
    format_filter,
    parse_filter,
)
from memstore.protocol.ratelimit import DEFAULT_BURST, DEFAULT_RATE_PER_SECOND, RateLimiter

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_MAX_CHUNK_CHARS",
    "DEFAULT_RATE_PER_SECOND",
    "ERROR_KINDS",
    "ROUTE_SCOPES",
    "SCOPES",
    "Chunk",
    "Confirmations",
    "ErrorKind",
    "Expr",
    "FilterRecord",
    "FilterSyntaxError",
    "Principal",
    "ProtocolError",
    "RateLimiter",
    "TokenTable",
    "TokensFileError",
    "authorize",
    "canonical_json",
    "chunk_markdown",
    "error_body",
    "evaluate",
    "format_filter",
    "new_token",
    "parse_filter",
    "write_tokens_file",
]
