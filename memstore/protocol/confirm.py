"""The two-step hard-delete confirmation of POST /v1/forget.

The seed's contract: a hard forget must carry, as ``confirmation_token``, the
serialized receipt of a dry run of the same forget. Without one the answer is
428 ``confirmation_required``; with one that is not such a receipt, 400
``invalid_confirmation_token``.

The seed leaves open how a server knows that a receipt is a real dry run and
not one a client typed. Here a dry-run receipt is *sealed*: it gains one
field, ``confirmation``, holding an expiry, a nonce and an HMAC-SHA256 over the
tenant and the whole receipt. The client sends the receipt back verbatim (as
the JSON string it received, or re-serialised with every field kept), and
:meth:`Confirmations.redeem` accepts it only if the seal is genuine, the
tenant and target are the request's, it has not expired, and it was not
redeemed before (one dry run, one hard delete).

>>> clock = [1_000.0]
>>> confirmations = Confirmations(b"k" * 32, clock=lambda: clock[0])
>>> receipt = {"target": {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, "indices_affected": ["Kv"],
...            "rows_written": 0, "rows_deleted": 1, "audit_lsn": {"wall_ms": 5, "counter": 0},
...            "preview": True}
>>> sealed = confirmations.seal("acme", receipt)
>>> token = json.dumps(sealed)
>>> confirmations.redeem("acme", {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, token)["rows_deleted"]
1
>>> from memstore.protocol.errors import ProtocolError
>>> try:  # a second hard delete with the same receipt
...     confirmations.redeem("acme", {"Id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}, token)
... except ProtocolError as e:
...     print(e.status, e.code)
400 invalid_confirmation_token
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from memstore.protocol.errors import confirmation_required, invalid_confirmation_token

__all__ = [
    "CONFIRMATION_FIELD",
    "DEFAULT_CONFIRMATION_TTL_SECONDS",
    "RECEIPT_FIELDS",
    "Confirmations",
    "canonical_json",
]

CONFIRMATION_FIELD: Final = "confirmation"
"""The field a sealed dry-run receipt gains (a backwards-compatible addition)."""
DEFAULT_CONFIRMATION_TTL_SECONDS: Final = 300.0
"""How long a dry-run receipt can confirm a hard delete: five minutes."""
RECEIPT_FIELDS: Final = (
    "target",
    "indices_affected",
    "rows_written",
    "rows_deleted",
    "audit_lsn",
    "preview",
)
"""The fields of the seed's ForgetReceipt, all required in a confirmation token."""
_VERSION: Final = "v1"
_EXPIRY: Final = re.compile(r"[0-9]{1,16}")


def canonical_json(value: object) -> str:
    """One spelling of a JSON value: sorted keys, no spaces, UTF-8 text.

    >>> canonical_json({"b": [1, "é"], "a": None})
    '{"a":null,"b":[1,"é"]}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Confirmations:
    """Seals dry-run receipts and redeems them, once each, for a hard delete.

    :param key: the HMAC key, at least 16 bytes. Omitted, a random key is made,
        so receipts do not outlive the process (nor work across processes):
        pass the same key to every process that must honour them.
    :param ttl_seconds: how long a sealed receipt stays redeemable.
    :param clock: wall-clock seconds (``time.time`` by default).
    :param claim: records that a receipt was redeemed: called as
        ``claim(nonce, expires_ms, now_ms)``, it answers whether this is the
        first redemption of ``nonce`` (and may forget nonces expired by
        ``now_ms``). Omitted, this object remembers them itself, which is
        right for one process; replicas pass one shared record (for example
        :class:`~memstore.protocol.pgconfirm.PostgresClaims`), so that a
        receipt is good for one hard delete across all of them. A record with
        a ``release(nonce)`` method (as that one has) can take a claim back:
        :meth:`redeeming` gives a failed hard delete's receipt back with it,
        and one with a ``settle(nonce)`` method is told when the hard delete
        has landed (until then a claim whose server died may be taken again).

    State: the nonces redeemed and not yet expired (bounded by how many dry
    runs a tenant can make in ``ttl_seconds``, which the rate limit bounds).
    """

    def __init__(
        self,
        key: bytes | None = None,
        *,
        ttl_seconds: float = DEFAULT_CONFIRMATION_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
        claim: Callable[[str, int, int], bool] | None = None,
    ) -> None:
        if key is not None and len(key) < 16:
            raise ValueError("a confirmation key needs at least 16 bytes")
        if not ttl_seconds > 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
        self._key = key if key is not None else secrets.token_bytes(32)
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._redeemed: dict[str, int] = {}  # nonce -> expiry (ms)
        self._claim = claim if claim is not None else self._claim_here
        self._release: Callable[[str], None] | None = (
            self._release_here if claim is None else getattr(claim, "release", None)
        )
        self._settle: Callable[[str], None] | None = getattr(claim, "settle", None)

    def seal(self, tenant: str, receipt: Mapping[str, object]) -> dict[str, object]:
        """``receipt`` (a dry run's, ``preview`` true) with its ``confirmation`` field added."""
        if receipt.get("preview") is not True:
            raise ValueError("only a dry-run receipt (preview true) can confirm a hard delete")
        body = {k: v for k, v in receipt.items() if k != CONFIRMATION_FIELD}
        expires_ms = int((self._clock() + self.ttl_seconds) * 1000)
        nonce = secrets.token_hex(12)
        mac = self._mac(tenant, body, expires_ms, nonce)
        return {**body, CONFIRMATION_FIELD: f"{_VERSION}.{expires_ms}.{nonce}.{mac}"}

    def redeem(
        self,
        tenant: str,
        target: Mapping[str, object],
        token: str | Mapping[str, object] | None,
    ) -> dict[str, object]:
        """Check a hard forget's ``confirmation_token`` and use it up; the receipt it carries.

        ``target`` is the hard forget's own target, compared with the receipt's
        in canonical JSON (normalise both the same way, e.g. upper-case ULIDs).

        :raises ProtocolError: 428 ``confirmation_required`` when ``token`` is
            absent or blank; 400 ``invalid_confirmation_token`` when it is not
            JSON, not a sealed dry-run receipt, sealed for another tenant or
            target, altered, expired, or already redeemed.
        """
        receipt, nonce = self._redeem(tenant, target, token)
        if self._settle is not None:  # used up now: nothing to wait for
            self._settle(nonce)
        return receipt

    @contextlib.contextmanager
    def redeeming(
        self,
        tenant: str,
        target: Mapping[str, object],
        token: str | Mapping[str, object] | None,
    ) -> Iterator[dict[str, object]]:
        """:meth:`redeem` around the hard delete it confirms, given back if that fails.

        The body runs the hard delete. If it raises (the journal refused the
        write, so nothing was erased), the receipt's claim is released before
        the error goes on: the same receipt confirms a retry, as a caller told
        "nothing happened" expects, instead of answering "already used". With a
        claim record that cannot release (no ``release`` method), the receipt
        stays used. A release that itself fails leaves the receipt used and adds
        a note to the original error, which is the one raised.
        """
        receipt, nonce = self._redeem(tenant, target, token)
        try:
            yield receipt
        except Exception as err:
            if self._release is not None:
                try:
                    self._release(nonce)
                except Exception as gone:
                    err.add_note(f"the receipt stays used: releasing it failed: {gone!r}")
            raise
        if self._settle is not None:  # the erase landed: the claim is final
            self._settle(nonce)

    def _redeem(
        self,
        tenant: str,
        target: Mapping[str, object],
        token: str | Mapping[str, object] | None,
    ) -> tuple[dict[str, object], str]:
        """:meth:`redeem`'s work: the receipt, and the nonce it claimed."""
        receipt = _parse(token)
        seal = receipt.pop(CONFIRMATION_FIELD, None)
        if not isinstance(seal, str):
            raise invalid_confirmation_token(
                f"missing the {CONFIRMATION_FIELD!r} field of the dry-run receipt; send the "
                "receipt exactly as received, every field kept"
            )
        parts = seal.split(".")
        if (
            not seal.isascii()  # a seal is ASCII; compare_digest takes no other str
            or len(parts) != 4
            or parts[0] != _VERSION
            or not _EXPIRY.fullmatch(parts[1])
        ):
            raise invalid_confirmation_token(f"the {CONFIRMATION_FIELD!r} field is malformed")
        _, expires_raw, nonce, mac = parts
        expires_ms = int(expires_raw)
        if not hmac.compare_digest(mac, self._mac(tenant, receipt, expires_ms, nonce)):
            raise invalid_confirmation_token(
                "this receipt was not issued by this server for this tenant, or was altered"
            )
        if canonical_json(receipt["target"]) != canonical_json(target):
            raise invalid_confirmation_token("this receipt is for a different target")
        now_ms = int(self._clock() * 1000)
        if now_ms > expires_ms:
            raise invalid_confirmation_token(
                f"this receipt expired {(now_ms - expires_ms) / 1000:.0f} s ago; "
                "run the dry run again"
            )
        if not self._claim(nonce, expires_ms, now_ms):
            raise invalid_confirmation_token(
                "this receipt was already used for a hard delete; run the dry run again"
            )
        return receipt, nonce

    def _claim_here(self, nonce: str, expires_ms: int, now_ms: int) -> bool:
        """The in-process record of redeemed nonces (the default ``claim``)."""
        with self._lock:
            for old in [n for n, exp in self._redeemed.items() if exp < now_ms]:
                del self._redeemed[old]
            if nonce in self._redeemed:
                return False
            self._redeemed[nonce] = expires_ms
            return True

    def _release_here(self, nonce: str) -> None:
        """Forget that ``nonce`` was redeemed (the default record's ``release``)."""
        with self._lock:
            self._redeemed.pop(nonce, None)

    def _mac(self, tenant: str, body: Mapping[str, object], expires_ms: int, nonce: str) -> str:
        message = canonical_json(
            {"tenant": tenant, "receipt": body, "expires_ms": expires_ms, "nonce": nonce}
        )
        # A lone surrogate (the JSON escape "\\ud800") has no UTF-8 form, and never is in
        # a receipt this server sealed: encoded as is, it just fails to verify.
        data = message.encode("utf-8", "surrogatepass")
        digest = hmac.new(self._key, data, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _parse(token: str | Mapping[str, object] | None) -> dict[str, object]:
    """The receipt object a token spells, checked for the seed's fields."""
    if token is None or (isinstance(token, str) and not token.strip()):
        raise confirmation_required()
    if isinstance(token, str):
        try:
            value = json.loads(token)
        except json.JSONDecodeError as e:
            raise invalid_confirmation_token(str(e)) from None
        except ValueError:  # the only other: an integer past Python's 4300 digits
            raise invalid_confirmation_token("a number in it has too many digits") from None
        except RecursionError:
            raise invalid_confirmation_token("JSON nested too deeply") from None
    else:
        value = token
    if not isinstance(value, Mapping):
        raise invalid_confirmation_token("expected a JSON object")
    receipt = dict(value)
    missing = [f for f in RECEIPT_FIELDS if f not in receipt]
    if missing:
        raise invalid_confirmation_token(f"missing field {missing[0]!r}")
    if receipt["preview"] is not True:
        raise invalid_confirmation_token(
            "this is not a dry-run receipt (preview is not true); run the forget with "
            "dry_run true first"
        )
    return receipt
