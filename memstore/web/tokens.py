"""A tokens file that is re-read when it changes: revoking a token needs no restart.

:class:`TokensFile` holds what a parser made of a file (a surface's token
table) and checks, each time :meth:`~TokensFile.current` is asked, whether
the file changed: one ``os.stat`` (inode, size, modification and change
times), a few microseconds. A changed file is read and parsed again; from
then on the new table answers, so a token removed from the file fails from
the next request. A file that no longer parses (or was removed) leaves the
last good table in place and logs one clear error per change, never one per
request. :meth:`~TokensFile.reload` forces a read (``SIGHUP`` calls it).

>>> import json, os, tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "tokens.json")
...     with open(path, "w") as f:
...         _ = f.write(json.dumps({"a": 1}))
...     tokens = TokensFile(path, json.loads)
...     with open(path, "w") as f:
...         _ = f.write(json.dumps({"b": 2, "c": 3}))
...     sorted(tokens.current())
['b', 'c']

Every surface's tokens file has one JSON shape, a map from an opaque token to
the tenant it acts for and the scopes it holds::

    {"s3cr3t-token": {"tenant": "acme", "scopes": ["ingest", "recall"]}}

:func:`parse_token_entries` reads it, once for every surface: ``memstore
serve`` (:class:`~memstore.protocol.auth.TokenTable`) and ``memstore mcp
--transport http`` (:class:`~memstore.mcp.http.TokenMap`) each pass the scope
names they know and build their own table from the plain
:class:`TokenEntry` tuples it returns. What the file may hold is the same
everywhere: JSON whose objects list each key once (a token written twice
would silently be its last entry), a map (empty: nobody is let in, which is
how every token is revoked without a restart), entries of exactly
``tenant`` and ``scopes`` (``"scope"`` for ``"scopes"`` would otherwise be a
token with no scope), a token a bearer header can carry, a tenant name that
can be a partition, known scopes. A refusal names the entry by its position
(``entry #2``) and its tenant, never by its token:

>>> parse_token_entries('{"tok": {"tenant": "acme", "scopes": ["recall"]}}', ("recall",))
[TokenEntry(token='tok', tenant='acme', scopes=frozenset({'recall'}))]
>>> parse_token_entries('{"tok": {"tenant": "a", "scopes": ["root"]}}', ("read",))
Traceback (most recent call last):
...
memstore.web.tokens.TokensFileError: entry #1 (tenant 'a'): unknown scopes ['root']; scopes are read
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Generic, NamedTuple, TypeVar

from memstore.errors import MemstoreError
from memstore.web.bearer import B64TOKEN, MAX_TOKEN_CHARS

__all__ = [
    "ADMIN_SCOPE",
    "TENANT",
    "TokenEntry",
    "TokensFile",
    "TokensFileError",
    "check_token_entry",
    "parse_token_entries",
]

T = TypeVar("T")
_log = logging.getLogger("memstore.web")

_Signature = tuple[int, int, int, int, int]


def _signature(path: Path) -> _Signature | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class TokensFile(Generic[T]):
    """The latest good parse of a file; thread-safe.

    :param parse: the file's text to a value; raises ``ValueError`` (or a
        subclass) for text it refuses.
    :raises OSError, ValueError: at construction, when the file cannot be
        read or parsed (a server must not start without its tokens).
    """

    def __init__(self, path: str | os.PathLike[str], parse: Callable[[str], T]) -> None:
        self.path = Path(path)
        self._parse = parse
        self._lock = threading.Lock()
        self._signature = _signature(self.path)
        self._value: T = parse(self.path.read_text(encoding="utf-8"))
        self.reloads = 0
        """How many times a changed file was read into a new value."""
        self.failures = 0
        """How many times a changed file could not be used (the old value stayed)."""

    def current(self) -> T:
        """The value of the file as it is now, or the last good one when it became unusable."""
        if _signature(self.path) != self._signature:
            self.reload()
        return self._value

    def reload(self) -> bool:
        """Read the file again now; True when its value replaced the previous one.

        A file that cannot be used is logged (once per change: :meth:`current`
        reads a file again only after it changed) and the previous value stays.
        """
        with self._lock:
            signature = _signature(self.path)
            try:
                value = self._parse(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                self.failures += 1
                _log.error(
                    "memstore: %s can no longer be used, still serving the tokens read "
                    "before (fix the file; it is re-read when it changes): %s",
                    self.path,
                    e,
                )
                self._signature = signature
                return False
            self._signature = signature
            self._value = value
            self.reloads += 1
            return True

    def __repr__(self) -> str:
        return f"TokensFile({os.fspath(self.path)!r})"


# --- the tokens file's JSON shape, shared by every surface -------------------------------

ADMIN_SCOPE: Final = "admin"
"""A scope every surface's tokens file takes: the server's own figures, no one's items.

It grants no route and no item of another tenant. The inspector
(``GET /ui/api/stats``) shows a token holding it the figures of the whole
server beside its tenant's (every tenant's search counters, the journal's
size, the number of vectors); a token without it sees its own tenant's only.
A surface with nothing of the kind (``memstore mcp``) accepts it and grants
nothing, so one tokens file serves every surface."""
TENANT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A tenant name: 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit (a partition)."""
_ENTRY_KEYS: Final = frozenset({"tenant", "scopes"})
_SHAPE: Final = '{"<token>": {"tenant": ..., "scopes": [...]}}'


class TokensFileError(MemstoreError, ValueError):
    """A tokens file (or entry) that cannot be used; the message names the entry and the fix."""


class TokenEntry(NamedTuple):
    """One entry of a tokens file: the token, its tenant, its scopes."""

    token: str
    tenant: str
    scopes: frozenset[str]


def parse_token_entries(text: str, scopes: Sequence[str]) -> list[TokenEntry]:
    """The entries of a tokens file's text, in the file's order, each checked.

    ``scopes``: the scope names the surface knows (in the order its messages
    list them). An entry may hold none of them (a token that authenticates
    and may do nothing), and the map may be empty (``{}``: no token works).

    :raises TokensFileError: not JSON (or nested too deeply), a key twice in
        one object, not a JSON object, an entry not of exactly
        ``tenant`` and ``scopes``, or an entry :func:`check_token_entry` refuses.
    """
    try:
        raw = json.loads(text, object_pairs_hook=_once_each)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deeply
        raise TokensFileError(f"tokens file is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise TokensFileError(f"tokens file must be a JSON object {_SHAPE}")
    entries: list[TokenEntry] = []
    for position, (token, value) in enumerate(raw.items(), start=1):
        entry = _entry(token, value, position)
        check_token_entry(entry, position, scopes)
        entries.append(entry)
    return entries


def check_token_entry(entry: TokenEntry, position: int, scopes: Sequence[str]) -> None:
    """Refuse an entry a bearer header could not carry, or naming an unknown tenant or scope.

    What :func:`parse_token_entries` checks of each entry, for a table built
    in code (and a file about to be written) to refuse what a file would.

    >>> check_token_entry(TokenEntry("tok", "acme", frozenset({"recall"})), 3, ("recall",))
    >>> try:
    ...     check_token_entry(TokenEntry("tok", "a/b", frozenset()), 3, ("recall",))
    ... except TokensFileError as e:
    ...     print(str(e)[:35])
    entry #3: tenant 'a/b' must be 1-64

    :raises TokensFileError: naming the entry by ``position`` and tenant, never by token.
    """
    token, tenant, held = entry
    where = f"entry #{position} (tenant {tenant[:80]!r})"
    if not isinstance(token, str) or not B64TOKEN.fullmatch(token):
        raise TokensFileError(
            f"{where}: a token must be 1-{MAX_TOKEN_CHARS} of "
            "A-Z a-z 0-9 - . _ ~ + / (then optional =), as a bearer token is"
        )
    if len(token) > MAX_TOKEN_CHARS:
        raise TokensFileError(f"{where}: token longer than {MAX_TOKEN_CHARS}")
    if not TENANT.fullmatch(tenant):
        raise TokensFileError(
            f"entry #{position}: tenant {tenant[:80]!r} must be 1-64 of A-Z a-z 0-9 . _ -, "
            "starting with a letter or digit"
        )
    unknown = sorted(set(held) - set(scopes))
    if unknown:
        raise TokensFileError(f"{where}: unknown scopes {unknown}; scopes are {', '.join(scopes)}")


def _once_each(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object whose keys all differ: a token listed twice would be its last entry
    alone, silently (which tenant did the file mean?)."""
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key appears twice in one object (a token listed twice?)")
    return dict(pairs)


def _entry(token: str, value: object, position: int) -> TokenEntry:
    """An entry's JSON value as a :class:`TokenEntry` (its shape checked, not its values)."""
    where = f"entry #{position}"
    if not isinstance(value, dict):
        raise TokensFileError(f'{where}: expected {{"tenant": ..., "scopes": [...]}}')
    unknown = sorted(set(value) - _ENTRY_KEYS)
    if unknown:
        raise TokensFileError(f"{where}: unknown keys {unknown}; an entry has tenant and scopes")
    tenant = value.get("tenant")
    if not isinstance(tenant, str):
        raise TokensFileError(f"{where}: tenant must be a string")
    scopes = value.get("scopes")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise TokensFileError(f"{where} (tenant {tenant[:80]!r}): scopes must be a list of strings")
    return TokenEntry(token, tenant, frozenset(scopes))
