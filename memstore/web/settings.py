"""A server's HTTP defence flags, read once for every HTTP surface: :func:`http_settings`.

``memstore serve`` (MemoryProtocol and the Mind Layer API) and ``memstore mcp
--transport http`` take the same flags, added to each command by one
function of the command line (``memstore.cli._http.add_http_defences``) and
read back here into the settings this package applies:

- ``--allow-host`` and ``--allow-origin``: :attr:`HttpSettings.hosts` and
  :attr:`HttpSettings.origins`, which :class:`~memstore.web.guard.HostOriginGuard`
  and :class:`~memstore.web.guard.ListedCors` apply;
- ``--header-timeout``, ``--body-timeout``, ``--keepalive-timeout``,
  ``--max-connections``, ``--max-connections-per-client`` and ``--max-header-bytes``:
  :attr:`HttpSettings.limits`, which :func:`~memstore.web.runner.serve_app` applies
  around every connection, as it applies :attr:`HttpSettings.shutdown_grace`
  (``--shutdown-grace``);
- ``--max-body``: :attr:`HttpSettings.max_body_bytes`, the surface's bound for its
  body read (:func:`~memstore.web.body.read_body`, 413 past it);
- ``--rate-per-second`` and ``--rate-burst``: :meth:`HttpSettings.rate_limiter`,
  the token buckets a surface takes one token from per request of a tenant.

:data:`HTTP_OPTIONS` names them all (as ``argparse`` stores them): what a
command without HTTP (``memstore mcp`` on stdio) refuses. A value that is not
one the settings can take is refused here, before a server binds or opens
anything, in words naming it.

>>> import argparse
>>> args = argparse.Namespace(host="127.0.0.1", header_timeout=0.5)
>>> s = http_settings(args, max_body_bytes=1024)
>>> s.limits.header_timeout, s.limits.body_timeout, s.max_body_bytes, str(s.hosts)
(0.5, 30.0, 1024, 'answers Host 127.0.0.1, localhost, [::1]')
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Final

from memstore.web.connections import ConnectionLimits
from memstore.web.hosts import HostPolicy, OriginPolicy
from memstore.web.ratelimit import DEFAULT_BURST, DEFAULT_RATE_PER_SECOND, RateLimiter
from memstore.web.shutdown import shutdown_grace

__all__ = ["CONNECTION_OPTIONS", "HTTP_OPTIONS", "HttpSettings", "http_settings"]

CONNECTION_OPTIONS: Final = (
    "header_timeout",
    "body_timeout",
    "keepalive_timeout",
    "max_connections",
    "max_connections_per_client",
    "max_header_bytes",
)
"""The flags that become :class:`~memstore.web.connections.ConnectionLimits`, as stored."""
HTTP_OPTIONS: Final = (
    "allow_host",
    "allow_origin",
    *CONNECTION_OPTIONS,
    "max_body",
    "rate_per_second",
    "rate_burst",
    "shutdown_grace",
)
"""Every HTTP defence flag, as ``argparse`` stores it (``--allow-host`` is ``allow_host``)."""


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """What the HTTP defence flags of one server come to."""

    hosts: HostPolicy
    """The ``Host`` values answered (``--allow-host``, and the bind address)."""
    origins: OriginPolicy
    """The web origins besides the server's own whose pages may call it (``--allow-origin``)."""
    limits: ConnectionLimits
    """Read timeouts and connection caps."""
    max_body_bytes: int
    """The largest request body; a larger one is refused 413."""
    rate_per_second: float
    """Each tenant's bucket refill rate."""
    rate_burst: int
    """Each tenant's bucket size: the requests it may send at once."""
    shutdown_grace: float
    """Seconds requests in flight may run on after SIGTERM or SIGINT."""

    def rate_limiter(self) -> RateLimiter:
        """Fresh token buckets at :attr:`rate_per_second` and :attr:`rate_burst`."""
        return RateLimiter(self.rate_per_second, self.rate_burst)


def http_settings(args: argparse.Namespace, *, max_body_bytes: int) -> HttpSettings:
    """The settings ``args`` (a parsed server command line) asks for.

    ``args`` needs ``host`` (the bind address: a public one answers any
    ``Host`` unless ``--allow-host`` is given); every flag of
    :data:`HTTP_OPTIONS` it lacks, or holds as ``None``, takes its default,
    and ``max_body_bytes`` is the surface's own default for ``--max-body``.

    :raises ValueError: an entry of ``--allow-host`` that is not a host name, of
        ``--allow-origin`` that is not a web origin, a timeout, cap, body size or
        rate out of range; the message names it.
    """
    given = {n: getattr(args, n) for n in CONNECTION_OPTIONS if getattr(args, n, None) is not None}
    max_body = getattr(args, "max_body", None)
    max_body = max_body_bytes if max_body is None else max_body
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body must be a positive number of bytes, got {max_body!r}")
    rate = getattr(args, "rate_per_second", None)
    burst = getattr(args, "rate_burst", None)
    settings = HttpSettings(
        hosts=HostPolicy.for_bind(args.host, getattr(args, "allow_host", None) or ()),
        origins=OriginPolicy(getattr(args, "allow_origin", None) or ()),
        limits=ConnectionLimits(**given),
        max_body_bytes=max_body,
        rate_per_second=DEFAULT_RATE_PER_SECOND if rate is None else rate,
        rate_burst=DEFAULT_BURST if burst is None else burst,
        shutdown_grace=shutdown_grace(args),
    )
    settings.rate_limiter()  # its own checks and messages
    return settings
