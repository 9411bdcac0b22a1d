"""The owner token: one secret that grants access to every scope, read from a file.

``--owner-token-file FILE`` names a file holding the token and a newline,
readable by its owner alone (mode 0600: a file others can read is refused).
The file is a :class:`~memstore.web.tokens.TokensFile`: it is re-read when it
changes (and on SIGHUP), so a rotated token applies from the next request,
under the rules start-up applies (mode 0600, the length a public bind needs):
a rotation breaking them is logged and the last good token keeps serving.

With no file, a loopback bind needs no token (seed 002's quick start); a
non-loopback bind refuses to start unless the token has at least
:data:`~memstore.mindlayer.limits.MIN_PUBLIC_TOKEN_CHARS` characters.

>>> parse_token("s3cret-token-of-the-owner\\n")
's3cret-token-of-the-owner'
>>> parse_token("two words\\n")
Traceback (most recent call last):
...
ValueError: the owner token must be one line of printable ASCII without spaces
>>> check_bearer("s3cret", "Bearer s3cret"), check_bearer("s3cret", "Bearer nope")
(True, False)
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Callable
from pathlib import Path

from memstore.mindlayer.limits import MIN_PUBLIC_TOKEN_CHARS
from memstore.web.hosts import is_loopback
from memstore.web.tokens import TokensFile

__all__ = ["OwnerTokenError", "check_bearer", "load_owner_token", "parse_token"]


class OwnerTokenError(ValueError):
    """The owner token file cannot be used (the server does not start)."""


def parse_token(text: str) -> str:
    """The token of a file's text: one line, printable ASCII, no spaces.

    :raises ValueError: anything else (an empty file, two lines, spaces).
    """
    token = text[:-1] if text.endswith("\n") else text
    token = token.removesuffix("\r")
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("the owner token must be one line of printable ASCII without spaces")
    return token


def check_bearer(token: str, authorization: str | None) -> bool:
    """Whether an ``Authorization`` header value carries ``token`` (constant time)."""
    if authorization is None:
        return False
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def load_owner_token(
    path: str | os.PathLike[str] | None, host: str, *, variable: tuple[str, str] | None = None
) -> TokensFile[str] | str | None:
    """The owner token to require, or None (no token: only on a loopback bind).

    ``path``: the token file (re-read when it changes). ``variable``: the name
    and value of an environment variable holding the token instead (seed
    002's ``MIND_LAYER_TOKEN``), under the same rules; giving both is refused.

    :raises OwnerTokenError: a file others may read, one that does not parse,
        no token on a public bind, a token too short for a public bind, or both
        a file and a variable. The message never quotes the token.
    """
    if variable is not None:
        name, value = variable
        if path is not None:
            raise OwnerTokenError(
                f"{name} is set and --owner-token-file is given: give one of them"
            )
        try:
            token = parse_token(value)
        except ValueError as e:
            raise OwnerTokenError(f"{name}: {e}") from None
        _check_length(token, host, name)
        return token
    if path is None:
        if not is_loopback(host):
            raise OwnerTokenError(
                f"refusing to serve on {host} without --owner-token-file: a server reachable "
                f"from the network needs an owner token of {MIN_PUBLIC_TOKEN_CHARS}+ characters"
            )
        return None
    file = Path(path)
    try:
        file.stat()
    except OSError as e:
        raise OwnerTokenError(f"cannot read the owner token file {str(file)!r}: {e}") from None
    try:
        return TokensFile(file, _file_parser(file, host))
    except OwnerTokenError:
        raise
    except (OSError, ValueError) as e:
        raise OwnerTokenError(f"{file}: {e}") from None


def _file_parser(file: Path, host: str) -> Callable[[str], str]:
    """The token of ``file``'s text, under the start-up rules, at start-up and on every re-read.

    A rotated token too short for a public bind, or written to a file others
    may read, raises :class:`OwnerTokenError` (a ``ValueError``): the
    :class:`~memstore.web.tokens.TokensFile` logs it and the last good token
    keeps serving, as for a file that does not parse.
    """

    def parse(text: str) -> str:
        _check_mode(file)
        try:
            token = parse_token(text)
        except ValueError as e:
            raise OwnerTokenError(f"{file}: {e}") from None
        _check_length(token, host, str(file))
        return token

    return parse


def _check_mode(file: Path) -> None:
    """Refuse a token file that its group or others may read or write."""
    try:
        mode = file.stat().st_mode
    except OSError as e:
        raise OwnerTokenError(f"cannot read the owner token file {str(file)!r}: {e}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise OwnerTokenError(
            f"{file}: the owner token file may be read by others (mode {stat.S_IMODE(mode):o}); "
            f"chmod 600 {file}"
        )


def _check_length(token: str, host: str, source: str) -> None:
    """Refuse a token too short for a public bind; ``source`` names where it came from."""
    if not is_loopback(host) and len(token) < MIN_PUBLIC_TOKEN_CHARS:
        raise OwnerTokenError(
            f"{source}: a server on {host} needs an owner token of at least "
            f"{MIN_PUBLIC_TOKEN_CHARS} characters"
        )
