"""Bearer tokens from the ``--tokens-file``, scopes per route, and the request gate.

The tokens file is the seed's JSON map from an opaque token to the tenant it
acts for and the verbs it may use::

    {
      "s3cr3t-token-for-acme": {"tenant": "acme", "scopes": ["ingest", "recall", "forget"]},
      "read-only-token":       {"tenant": "acme", "scopes": ["recall"]}
    }

The tenant is the partition every request of that token reads and writes; no
request field can name another. Scopes are :data:`SCOPES`; each route needs
the one in :data:`ROUTE_SCOPES`. The file is read by the parser every surface
shares (:func:`memstore.web.tokens.parse_token_entries`): checked whole when
loaded, a bad entry named by its position and tenant, never by its token.

>>> table = TokenTable.from_json('{"tok-1": {"tenant": "acme", "scopes": ["recall"]}}')
>>> table.authenticate("Bearer tok-1")
Principal(tenant='acme', scopes=frozenset({'recall'}))
>>> table.authenticate("Bearer nope")
Traceback (most recent call last):
...
memstore.protocol.errors.ProtocolError: 401 unauthorized: unknown bearer token
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from memstore._durable import move_into_place, remove_dead_leftovers, staging_name
from memstore.protocol.errors import forbidden, unauthorized
from memstore.protocol.ratelimit import RateLimiter
from memstore.web.bearer import MAX_TOKEN_CHARS, bearer_token
from memstore.web.tokens import (
    ADMIN_SCOPE,
    TokenEntry,
    TokensFileError,
    check_token_entry,
    parse_token_entries,
)

__all__ = [
    "MAX_TOKEN_CHARS",
    "ROUTE_SCOPES",
    "SCOPES",
    "Principal",
    "TokenTable",
    "TokensFileError",
    "authorize",
    "bearer_token",
    "new_token",
    "write_tokens_file",
]

SCOPES: Final = ("ingest", "recall", "forget", ADMIN_SCOPE)
"""Every scope a token may hold: one per write verb, ``recall`` for all reads.

``admin`` (:data:`~memstore.web.tokens.ADMIN_SCOPE`) needs no route of its
own: it shows the server-wide figures (search counters, journal size,
vectors: every tenant's together) in the inspector's statistics,
``GET /ui/api/stats``. It reads no other tenant's items."""
ROUTE_SCOPES: Final[Mapping[str, str]] = {
    "POST /v1/ingest": "ingest",
    "POST /v1/recall": "recall",
    "POST /v1/forget": "forget",
    "GET /v1/snapshot/{lsn}": "recall",
    "GET /v1/episode/{id}": "recall",
    "GET /v1/events": "recall",
}
"""The scope each authenticated route requires (``/healthz`` and ``/metrics`` need none)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: the token's tenant (its partition) and scopes."""

    tenant: str
    scopes: frozenset[str]

    def require(self, scope: str) -> None:
        """Pass if this principal holds ``scope``.

        :raises ProtocolError: 403 ``forbidden`` naming the missing scope.
        """
        if scope not in self.scopes:
            raise forbidden(scope)


@dataclass(frozen=True, slots=True)
class _Entry:
    token: bytes
    principal: Principal


class TokenTable:
    """Tokens to principals, looked up in constant time with respect to the token.

    Lookup hashes the presented token (SHA-256) to find the candidate entry,
    then compares the tokens themselves with :func:`hmac.compare_digest`: the
    time taken never depends on how much of a token an attacker has guessed.
    """

    def __init__(self, entries: Mapping[str, Principal]) -> None:
        self._by_digest: dict[bytes, _Entry] = {}
        for position, (token, principal) in enumerate(entries.items(), start=1):
            entry = TokenEntry(token, principal.tenant, principal.scopes)
            check_token_entry(entry, position, SCOPES)
            raw = token.encode("ascii")
            self._by_digest[hashlib.sha256(raw).digest()] = _Entry(raw, principal)
        self._tenants = frozenset(e.principal.tenant for e in self._by_digest.values())

    @classmethod
    def from_json(cls, text: str) -> TokenTable:
        """Parse the seed's ``{token: {"tenant": ..., "scopes": [...]}}`` map.

        With :func:`~memstore.web.tokens.parse_token_entries` and :data:`SCOPES`,
        as ``memstore mcp --transport http`` parses its tokens file.

        :raises TokensFileError: not JSON, not that shape, a token twice, an
            unknown scope or key, a bad tenant name.
        """
        entries = parse_token_entries(text, SCOPES)
        return cls({e.token: Principal(e.tenant, e.scopes) for e in entries})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TokenTable:
        """Read and parse the tokens file at ``path``.

        :raises TokensFileError: unreadable, or as :meth:`from_json`.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise TokensFileError(f"cannot read tokens file {os.fspath(path)!r}: {e}") from None
        try:
            return cls.from_json(text)
        except TokensFileError as e:
            raise TokensFileError(f"{os.fspath(path)}: {e}") from None

    def lookup(self, token: str) -> Principal | None:
        """The principal of ``token``, or None for an unknown token."""
        try:
            raw = token.encode("ascii")
        except UnicodeEncodeError:
            return None
        entry = self._by_digest.get(hashlib.sha256(raw).digest())
        if entry is None or not hmac.compare_digest(entry.token, raw):
            return None
        return entry.principal

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization: Bearer <token>`` header value.

        The scheme is case-insensitive (RFC 7235); the token must be an RFC 6750
        ``b64token``.

        :raises ProtocolError: 401 ``unauthorized`` for a missing or malformed
            header or an unknown token (the message says which, never the token).
        """
        if authorization is None or not authorization.strip():
            raise unauthorized("missing Authorization header; send 'Authorization: Bearer <token>'")
        token = bearer_token(authorization)
        if token is None:
            raise unauthorized("malformed Authorization header; expected 'Bearer <token>'")
        principal = self.lookup(token)
        if principal is None:
            raise unauthorized("unknown bearer token")
        return principal

    @property
    def tenants(self) -> frozenset[str]:
        """Every tenant some token acts for (the bound on per-tenant metric labels)."""
        return self._tenants

    def __len__(self) -> int:
        return len(self._by_digest)

    def __repr__(self) -> str:
        return f"TokenTable({len(self)} tokens, tenants={sorted(self.tenants)})"


def authorize(
    authorization: str | None,
    scope: str,
    *,
    tokens: TokenTable,
    limiter: RateLimiter | None = None,
) -> Principal:
    """The gate in front of every ``/v1`` route: authenticate, rate-limit, check the scope.

    In that order: an unauthenticated request is refused (401) before it can
    spend a tenant's tokens; every authenticated request counts against its
    tenant's bucket (429), including one that then lacks the scope (403).

    :raises ProtocolError: 401, 429 (with ``Retry-After``) or 403.
    """
    principal = tokens.authenticate(authorization)
    if limiter is not None:
        limiter.check(principal.tenant)
    principal.require(scope)
    return principal


def new_token() -> str:
    """A fresh random token: 256 bits, URL-safe, a valid bearer token."""
    return secrets.token_urlsafe(32)


def write_tokens_file(path: str | os.PathLike[str], entries: Mapping[str, Principal]) -> None:
    """Write ``entries`` as a tokens file readable by its owner only (mode 0600).

    The file is written next to ``path`` (under :func:`memstore._durable.staging_name`),
    flushed to disk and renamed over it, so a reader never sees half a file,
    and a power cut after it returns does not leave an empty file (which the
    server would refuse to start with). What a killed write left is removed
    first, once its process no longer runs.
    The entries are checked as :meth:`TokenTable.from_json` checks a file's.

    :raises TokensFileError: an entry a :class:`TokenTable` would refuse.
    """
    TokenTable(entries)
    data = {
        token: {"tenant": p.tenant, "scopes": [s for s in SCOPES if s in p.scopes]}
        for token, p in entries.items()
    }
    target = Path(path)
    remove_dead_leftovers(target)  # what a killed write of this file left
    tmp = staging_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        move_into_place(tmp, target)  # on disk before its token is printed or used
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
