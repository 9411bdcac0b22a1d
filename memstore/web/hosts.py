"""Which ``Host`` and ``Origin`` headers a server answers: the policies, without ASGI.

**Host.** A web page can make a browser send requests to a server on the
user's own machine by rebinding a domain it controls to ``127.0.0.1`` (DNS
rebinding): the browser then treats the server as that domain and lets the
page read the answers. The ``Host`` header still names the attacker's domain,
so a server that answers only the names it is known by defeats the attack.
:class:`HostPolicy` accepts the loopback names (:data:`LOOPBACK_NAMES`, with
any port) and the names it is given; :meth:`HostPolicy.for_bind` is the policy
for a listening address: on a loopback bind only those, on a public bind
those given, or any host when none is given.

**Origin.** Browsers send ``Origin`` with every cross-site request (and with
same-site POSTs). :class:`OriginPolicy` accepts a request without one (not a
browser, or a plain navigation), one whose origin is the server's own (the
scheme and the request's ``Host``: a page the server serves itself), and the
origins it lists; ``*`` lists them all.

>>> hosts = HostPolicy.for_bind("127.0.0.1", allowed=["memory.internal"])
>>> [hosts.allows(h) for h in ("127.0.0.1:8080", "localhost", "[::1]:1", "memory.internal",
...                            "evil.example", "127.0.0.1.evil.example")]
[True, True, True, True, False, False]
>>> origins = OriginPolicy(["https://app.example"])
>>> [origins.allows(o, "127.0.0.1:8080") for o in
...  ("https://app.example", "http://127.0.0.1:8080", "http://evil.example", "null")]
[True, True, False, False]
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "ANY",
    "LOOPBACK_NAMES",
    "HostPolicy",
    "OriginPolicy",
    "is_loopback",
    "normalize_origin",
    "split_host",
]

LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})
"""The names of this machine every policy accepts, with or without a port."""
ANY: Final = "*"
"""The wildcard entry: every host (``--allow-host '*'``) or every origin."""

_NAME: Final = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,252})|\[[0-9a-f:.]{2,45}\]")
_PORT: Final = re.compile(r"[0-9]{1,5}")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """Whether a listening address names only this machine (``localhost``, 127/8, ``::1``).

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` header value (name lower-cased), or None when malformed.

    >>> split_host("LocalHost:8080"), split_host("[::1]"), split_host("a b"), split_host("x:")
    (('localhost', 8080), ('[::1]', None), None, None)
    """
    text = value.strip().lower()
    name, port = text, ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[: end + 1], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return None
            port = rest[1:]
            if not port:
                return None
    elif ":" in text:
        name, _, port = text.rpartition(":")
        if not port:
            return None
    if not _NAME.fullmatch(name) or (port and not _PORT.fullmatch(port)):
        return None
    number = int(port) if port else None
    if number is not None and not 0 < number < 65536:
        return None
    return name, number


class HostPolicy:
    """The ``Host`` header values a server answers (see the module documentation).

    Entries are names (any port) or ``name:port`` (that port only), compared
    case-insensitively; :data:`ANY` accepts every well-formed host.

    :raises ValueError: an entry that is not a host name.
    """

    def __init__(self, allowed: Iterable[str] = (), *, any_host: bool = False) -> None:
        self.any_host = any_host
        self._names: set[str] = set(LOOPBACK_NAMES)
        self._pairs: set[tuple[str, int]] = set()
        self.entries: tuple[str, ...] = tuple(allowed)
        for entry in self.entries:
            if entry.strip() == ANY:
                self.any_host = True
                continue
            parsed = split_host(entry)
            if parsed is None:
                raise ValueError(f"{entry!r} is not a host name (name or name:port)")
            name, port = parsed
            if port is None:
                self._names.add(name)
            else:
                self._pairs.add((name, port))

    @classmethod
    def for_bind(cls, bind: str, allowed: Iterable[str] = ()) -> HostPolicy:
        """The policy of a server listening on ``bind``.

        Loopback bind: the loopback names and ``allowed``. Public bind: the
        loopback names and ``allowed``, or every host when ``allowed`` is empty.
        """
        entries = tuple(allowed)
        return cls(entries, any_host=not entries and not is_loopback(bind))

    def allows(self, value: str | None) -> bool:
        """Whether a request with ``Host: value`` is answered (None: no Host header: never)."""
        if value is None:
            return False
        parsed = split_host(value)
        if parsed is None:
            return False
        if self.any_host:
            return True
        name, port = parsed
        return name in self._names or (port is not None and (name, port) in self._pairs)

    def __repr__(self) -> str:
        if self.any_host:
            return "HostPolicy(any host)"
        return f"HostPolicy(loopback + {list(self.entries)})"

    def __str__(self) -> str:
        """The policy in words, as a server's start-up line prints it.

        >>> print(HostPolicy()); print(HostPolicy(["mem.example", "10.0.0.5:8080"]))
        answers Host 127.0.0.1, localhost, [::1]
        answers Host 127.0.0.1, localhost, [::1], mem.example, 10.0.0.5:8080
        >>> print(HostPolicy.for_bind("0.0.0.0"))
        answers any Host
        """
        if self.any_host:
            return "answers any Host"
        return "answers Host " + ", ".join(["127.0.0.1", "localhost", "[::1]", *self.entries])


def normalize_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-cased, without the scheme's default port; None if malformed.

    >>> normalize_origin("HTTPS://App.Example:443"), normalize_origin("null")
    ('https://app.example', None)
    """
    scheme, sep, authority = origin.strip().lower().partition("://")
    if not sep or scheme not in _DEFAULT_PORTS:
        return None
    parsed = split_host(authority)
    if parsed is None:
        return None
    name, port = parsed
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{name}"
    return f"{scheme}://{name}:{port}"


class OriginPolicy:
    """The ``Origin`` header values a server answers (see the module documentation).

    :param allowed: web origins (``https://app.example``, ``http://localhost:3000``)
        whose pages may call the server, or :data:`ANY`.
    :raises ValueError: an entry that is not an http(s) origin.
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.entries: tuple[str, ...] = tuple(allowed)
        self.any_origin = False
        self._origins: set[str] = set()
        for entry in self.entries:
            if entry.strip() == ANY:
                self.any_origin = True
                continue
            normal = normalize_origin(entry)
            if normal is None:
                raise ValueError(f"{entry!r} is not a web origin (http[s]://host[:port])")
            self._origins.add(normal)

    @property
    def origins(self) -> frozenset[str]:
        """The listed origins, normalised as browsers send them (:func:`normalize_origin`)."""
        return frozenset(self._origins)

    @property
    def listed(self) -> bool:
        """Whether any cross-origin caller is accepted (then CORS headers are answered)."""
        return self.any_origin or bool(self._origins)

    def allows(self, origin: str | None, host: str | None) -> bool:
        """Whether a request with ``Origin: origin`` and ``Host: host`` is answered.

        No ``Origin`` is always answered; ``null`` (sandboxed frames, files) only
        under :data:`ANY`.
        """
        if origin is None:
            return True
        if self.any_origin:
            return True
        normal = normalize_origin(origin)
        if normal is None:
            return False
        if normal in self._origins:
            return True
        return host is not None and normal.partition("://")[2] == _own_authority(
            host, normal.partition("://")[0]
        )

    def __repr__(self) -> str:
        return f"OriginPolicy({list(self.entries)})"


def _own_authority(host: str, scheme: str) -> str | None:
    """The request's ``Host`` as an origin's authority under ``scheme`` (default port dropped)."""
    parsed = split_host(host)
    if parsed is None:
        return None
    name, port = parsed
    return name if port is None or port == _DEFAULT_PORTS[scheme] else f"{name}:{port}"
