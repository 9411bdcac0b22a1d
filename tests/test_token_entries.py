"""One tokens file, one reading: ``memstore serve`` and ``memstore mcp`` parse it alike.

Before, :mod:`memstore.protocol.auth` and :mod:`memstore.mcp.http` each parsed
the JSON shape themselves, and disagreed: the MCP side refused ``{}`` and a
token with no scope (serve took both, as docs/protocol.md says: ``{}`` lets
nobody in, the way to revoke every token without a restart), said a bad
tenant as "needs a token and a tenant", and crashed on a scope that was not a
string. Both now go through
:func:`memstore.web.tokens.parse_token_entries`: for every input below, what
one refuses the other refuses with the same message, and what one accepts the
other accepts as the same tenant and scopes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstore.mcp.http import TokensError, load_tokens, parse_tokens
from memstore.mcp.toolkit import Caller
from memstore.protocol.auth import SCOPES, TokensFileError, TokenTable
from memstore.web.tokens import TokenEntry, TokensFile, parse_token_entries

_REFUSED = [
    ("not json", "tokens file is not valid JSON"),
    ("[" * 100_000, "tokens file is not valid JSON: maximum recursion depth"),
    ('{"t": {"tenant": "a", "scopes": []}, "t": {"tenant": "b", "scopes": []}}', "twice"),
    ("[]", "tokens file must be a JSON object"),
    ('{"t": "acme"}', 'entry #1: expected {"tenant"'),
    ('{"t": {"tenant": "a", "scope": ["recall"], "scopes": []}}', "unknown keys ['scope']"),
    ('{"t": {"scopes": []}}', "entry #1: tenant must be a string"),
    ('{"t": {"tenant": "a"}}', "entry #1 (tenant 'a'): scopes must be a list of strings"),
    ('{"t": {"tenant": "a", "scopes": [["recall"]]}}', "scopes must be a list of strings"),
    ('{"ok": {"tenant": "a", "scopes": []}, "t": {"tenant": "a,b", "scopes": []}}', "entry #2:"),
    ('{"t": {"tenant": "a", "scopes": ["root"]}}', "unknown scopes ['root']"),
    ('{"tok en": {"tenant": "a", "scopes": []}}', "a token must be 1-512 of"),
    ('{"": {"tenant": "a", "scopes": []}}', "a token must be 1-512 of"),
    ('{"' + "t" * 513 + '": {"tenant": "a", "scopes": []}}', "token longer than 512"),
]


@pytest.mark.parametrize(("text", "says"), _REFUSED)
def test_both_surfaces_refuse_alike(text: str, says: str) -> None:
    with pytest.raises(TokensFileError) as served:
        TokenTable.from_json(text)
    with pytest.raises(TokensError) as mcp:
        parse_tokens(text)
    assert says in str(served.value)
    assert str(mcp.value) == str(served.value)
    assert "tok en" not in str(served.value)  # an entry is named by position, never token


def test_both_surfaces_accept_alike() -> None:
    entries = {
        "s3cr3t-Token_for.acme~1": {"tenant": "acme", "scopes": ["ingest", "recall", "forget"]},
        "other/tenant+token==": {"tenant": "globex-2.eu_1", "scopes": ["recall"]},
        "idle": {"tenant": "idle", "scopes": []},
    }
    text = json.dumps(entries)
    served, mcp = TokenTable.from_json(text), parse_tokens(text)
    for token, entry in entries.items():
        principal = served.authenticate(f"Bearer {token}")
        caller = mcp.caller(f"Bearer {token}")
        assert caller == Caller(principal.tenant, principal.scopes)
        assert (principal.tenant, sorted(principal.scopes)) == (
            entry["tenant"],
            sorted(entry["scopes"]),
        )
    assert parse_token_entries(text, SCOPES)[2] == TokenEntry("idle", "idle", frozenset())


def test_emptying_the_file_revokes_every_token_on_both_surfaces(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    path.write_text('{"tok": {"tenant": "acme", "scopes": ["recall"]}}', encoding="utf-8")
    served, mcp = TokensFile(path, TokenTable.from_json), load_tokens(path)
    assert served.current().lookup("tok") is not None
    assert mcp.current().caller("Bearer tok") is not None
    path.write_text("{}", encoding="utf-8")
    assert served.current().lookup("tok") is None and len(served.current()) == 0
    assert mcp.current().caller("Bearer tok") is None
    assert served.failures == mcp.failures == 0  # taken, not refused (the old tokens kept)


def test_both_surfaces_take_an_admin_token() -> None:
    """One tokens file serves ``memstore serve`` and ``memstore mcp``: ``admin`` in both
    (the inspector's server-wide statistics; ``memstore mcp`` grants nothing for it)."""
    text = json.dumps({"t": {"tenant": "ops", "scopes": ["recall", "admin"]}})
    assert TokenTable.from_json(text).authenticate("Bearer t").scopes == {"recall", "admin"}
    caller = parse_tokens(text).caller("Bearer t")
    assert caller is not None and caller.may("recall") and caller.may("admin")
