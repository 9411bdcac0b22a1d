"""HTTP plumbing shared by memstore's HTTP surfaces (MemoryProtocol, Mind Layer, MCP over HTTP).

Everything here is surface-neutral: it knows HTTP, ASGI and uvicorn, not
what the routes mean. One concept per module:

| module | concept |
|---|---|
| :mod:`memstore.web.refusal` | a refused request (status, code, message) and its JSON body |
| :mod:`memstore.web.headers` | reading headers from an ASGI scope; a header that must come once |
| :mod:`memstore.web.body` | media type and coding, bounded read, UTF-8, nesting, repeated keys |
| :mod:`memstore.web.lines` | JSON in line-based streams (NDJSON, SSE), safe for line readers |
| :mod:`memstore.web.hosts` | which ``Host`` and ``Origin`` values a server answers |
| :mod:`memstore.web.guard` | the ASGI middleware applying them; CORS for listed origins |
| :mod:`memstore.web.security` | security headers on every answer |
| :mod:`memstore.web.failsafe` | an unexpected exception: one log line, a 500, the connection kept |
| :mod:`memstore.web.tokens` | a tokens file re-read when it changes; its JSON shape, parsed once |
| :mod:`memstore.web.connections` | read timeouts and connection caps around uvicorn's protocol |
| :mod:`memstore.web.listen` | the listening address, bound before a server opens anything |
| :mod:`memstore.web.runner` | ``serve_app``: uvicorn start-up, signals, shutdown |
| :mod:`memstore.web.ratelimit` | token buckets per tenant (``--rate-per-second``) |
| :mod:`memstore.web.settings` | every server's HTTP defence flags, read into these settings |
| :mod:`memstore.web.batching` | concurrent searches' query embeddings in one call, off the loop |

Importing this package imports no web framework; :mod:`memstore.web.runner`
needs uvicorn (extra ``memstore[server]``), and :class:`~memstore.web.guard.ListedCors`
Starlette once an origin is listed. Nothing here imports a surface (``memstore.protocol``) or the
engine's storage.
"""

from memstore.web.body import (
    DEFAULT_MAX_JSON_DEPTH,
    ClientDisconnected,
    RepeatedKey,
    check_identity_encoding,
    check_json_media,
    check_json_text,
    is_json_media,
    parse_unique_keys,
    read_body,
    replay,
    too_many_digits,
    unique_pairs,
)
from memstore.web.connections import (
    DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_TIMEOUT_SECONDS,
    DEFAULT_KEEPALIVE_TIMEOUT_SECONDS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    DEFAULT_MAX_HEADER_BYTES,
    ConnectionLimits,
)
from memstore.web.failsafe import Failsafe
from memstore.web.guard import HostOriginGuard, ListedCors
from memstore.web.headers import header_values, single_header
from memstore.web.hosts import LOOPBACK_NAMES, HostPolicy, OriginPolicy, is_loopback
from memstore.web.lines import line_safe
from memstore.web.refusal import REFUSAL_CODES, Refusal, refusal_body, send_refusal
from memstore.web.security import DEFAULT_SECURITY_HEADERS, SecurityHeaders
from memstore.web.tokens import TokensFile

__all__ = [
    "DEFAULT_BODY_TIMEOUT_SECONDS",
    "DEFAULT_HEADER_TIMEOUT_SECONDS",
    "DEFAULT_KEEPALIVE_TIMEOUT_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_CONNECTIONS_PER_CLIENT",
    "DEFAULT_MAX_HEADER_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_SECURITY_HEADERS",
    "LOOPBACK_NAMES",
    "REFUSAL_CODES",
    "ClientDisconnected",
    "ConnectionLimits",
    "Failsafe",
    "HostOriginGuard",
    "HostPolicy",
    "ListedCors",
    "OriginPolicy",
    "Refusal",
    "RepeatedKey",
    "SecurityHeaders",
    "TokensFile",
    "check_identity_encoding",
    "check_json_media",
    "check_json_text",
    "header_values",
    "is_json_media",
    "is_loopback",
    "line_safe",
    "parse_unique_keys",
    "read_body",
    "refusal_body",
    "replay",
    "send_refusal",
    "single_header",
    "too_many_digits",
    "unique_pairs",
]
