"""A real ``memstore serve`` and a headless Chromium for the inspector's browser tests.

The server is started once per session (``tests/protocol/conftest.py``'s
``start_server``) with a tokens file of :data:`TENANTS` tenants: each test
takes fresh ones (:func:`tenant`), so tests never see each other's items.
The browser is Debian's Chromium (``apt-get install chromium``; ``make
chromium`` does it), driven by Playwright's Python package: Playwright's own
browser download is never used. Without ``/usr/bin/chromium`` the browser
tests skip, saying how to install it.

Every page a test opens records the requests it makes; the ``page`` fixture
fails the test if one went anywhere but the server's own origin, or if the
page broke its Content-Security-Policy or threw.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.protocol.conftest import start_server, stop_server

CHROMIUM = Path(os.environ.get("MEMSTORE_CHROMIUM", "/usr/bin/chromium"))
TENANTS = 40
ALL = ["ingest", "recall", "forget"]


@dataclass
class Server:
    url: str
    tokens: dict[str, str]  # tenant -> token
    admin: str = ""
    """The token of tenant ``ops`` (no items) with ``recall`` and ``admin``: server figures."""
    _next: Iterator[int] = field(default_factory=itertools.count)

    def tenant(self) -> tuple[str, str]:
        """A tenant no other test uses, and its token."""
        n = next(self._next)
        name = f"t{n}"
        return name, self.tokens[name]

    def ingest(
        self, token: str, content: str, source: str = "notes.md", id: str | None = None
    ) -> Any:
        body: dict[str, Any] = {"source": source, "content": content}
        if id is not None:
            body["id"] = id
        r = httpx.post(
            f"{self.url}/v1/ingest",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        r.raise_for_status()
        return r.json()

    def api(self, token: str, path: str, **params: str) -> httpx.Response:
        return httpx.get(
            f"{self.url}/ui/api/{path}",
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("ui-server")
    tokens = {f"t{n}": f"tok-ui-{n}-{os.urandom(6).hex()}" for n in range(TENANTS)}
    tokens_file = root / "tokens.json"
    admin = f"tok-ui-ops-{os.urandom(6).hex()}"
    entries = {tok: {"tenant": t, "scopes": ALL} for t, tok in tokens.items()}
    entries[admin] = {"tenant": "ops", "scopes": ["recall", "admin"]}
    tokens_file.write_text(json.dumps(entries), encoding="utf-8")
    tokens_file.chmod(0o600)
    proc, url = start_server(root / "data", tokens_file)
    try:
        yield Server(url, tokens, admin)
    finally:
        assert stop_server(proc) == 0


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope, not session: while Playwright's sync API is open an asyncio loop
    # runs in this thread, and any later test calling asyncio.run() would fail.
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium (or make chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Page:
    """A browser tab on the inspector, with every request it made and every script error."""

    page: Any
    server: Server
    requests: list[str]

    def sign_in(self, token: str) -> None:
        self.page.get_by_role("textbox", name="Token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()

    def search(self, query: str) -> None:
        box = self.page.get_by_role("searchbox", name="Search memories")
        box.fill(query)
        box.press("Enter")


@pytest.fixture
def page(browser: Any, server: Server) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    requests: list[str] = []
    errors: list[str] = []
    tab.on("request", lambda r: requests.append(r.url))
    tab.on("pageerror", lambda e: errors.append(str(e)))  # an uncaught script error
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.goto(f"{server.url}/")  # redirects to /ui
    try:
        yield Page(tab, server, requests)
    finally:
        context.close()
    foreign = [u for u in requests if not u.startswith(f"{server.url}/")]
    assert not foreign, f"requests left the origin: {foreign}"
    assert requests, "the page made no request at all"
    # A CSP violation is a console error; so is a failed fetch the page did not expect.
    unexpected = [e for e in errors if "401" not in e and "Content-Security-Policy" in e]
    assert not unexpected, f"the page broke its own policy: {unexpected}"
    crashed = [e for e in errors if "Failed to load resource" not in e]
    assert not crashed, f"script errors: {crashed}"
