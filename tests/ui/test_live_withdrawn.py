"""An item that leaves the tenant's sight without being deleted, as the inspector shows it.

The change stream withdraws such an item (a ``delete`` marked ``"withdrawn": true``,
``docs/hub.md``): another process moved it to another tenant, or made it private.
The page must not call that a deletion, nor answer it with a 404 from reloading it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from memstore import Item, Memory
from memstore.journal import PostgresJournal
from tests.pgtest import Schemas, require_pg
from tests.protocol.conftest import start_server, stop_server, wait_applied
from tests.ui.conftest import Page, Server


def note(id: str, content: str, *tags: str, scope: str = "public") -> Item:
    return Item(id=id, kind="note", content=content, scope=scope, tags=list(tags))


def test_an_item_that_leaves_the_tenant_is_shown_withdrawn_not_deleted(
    browser: Any, tmp_path: Path
) -> None:
    # Another process shares the server's PostgreSQL journal: it moves a listed and open
    # item to another tenant, then makes another private, then moves the first one back.
    require_pg()
    schemas = Schemas()
    place = schemas.new("ui_withdrawn")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-t": {"tenant": "t", "scopes": ["recall", "forget"]}}))
    tokens.chmod(0o600)
    proc, url = start_server(
        tmp_path / "data", tokens, "--journal", place.dsn, "--journal-schema", place.schema
    )
    context = browser.new_context()
    try:
        with Memory(journal=PostgresJournal(place.dsn, schema=place.schema), embedder=None) as mem:
            mem.store.upsert(note("moved", "Rosa keeps the ledger.", "tenant/t"))
            mem.store.upsert(note("hidden", "Sam keeps the keys.", "tenant/t"))
            mem.store.upsert(note("kept", "Tom keeps the maps.", "tenant/t"))
            wait_applied([url], mem.journal.head())
            tab = context.new_page()
            tab.set_default_timeout(15_000)
            tab.goto(f"{url}/ui")
            Page(tab, Server(url, {}), []).sign_in("tok-t")
            listed = tab.get_by_role("list", name="Results")
            live = tab.get_by_role("region", name="Live changes")
            item = tab.get_by_role("region", name="Item")
            expect(listed.get_by_role("listitem")).to_have_count(3)
            expect(live).to_contain_text("live")
            listed.get_by_role("button", name="Rosa keeps the ledger.").click()
            expect(item.locator('[data-field="content"]')).to_have_text("Rosa keeps the ledger.")

            mem.store.upsert(note("moved", "Rosa keeps the ledger.", "tenant/u"))
            withdrawn = tab.locator("#live-list li.change.withdrawn")
            expect(withdrawn).to_have_count(1)
            expect(withdrawn.locator(".op")).to_have_text("withdrawn")
            entry = tab.locator('#results > li[data-id="moved"]')
            expect(entry).to_have_class("hit withdrawn")
            expect(entry).to_contain_text("no longer in this view")
            expect(entry.get_by_role("button")).to_have_count(0)  # nothing to open or act on
            # The open item closes with a note, not a 404 from reloading it.
            expect(item.get_by_role("heading")).to_contain_text("no longer in this view")
            expect(item).to_contain_text("It was not deleted")
            expect(item.locator('[data-field="content"]')).to_have_count(0)
            expect(item.get_by_role("button", name="Forget")).to_have_count(0)
            expect(tab.get_by_role("alert")).to_be_hidden()

            mem.store.upsert(
                note("hidden", "Sam keeps the keys.", "tenant/t", "user:u1", scope="private")
            )
            expect(withdrawn).to_have_count(2)
            expect(tab.locator('#results > li[data-id="hidden"]')).to_contain_text(
                "no longer in this view"
            )
            expect(tab.locator("#results > li.deleted")).to_have_count(0)
            expect(live.locator("li.change.delete")).to_have_count(0)

            mem.store.upsert(note("moved", "Rosa keeps the ledger again.", "tenant/t"))
            back = listed.get_by_role("button", name="Rosa keeps the ledger again.")
            expect(back).to_be_visible()  # it came back: listed, and can be opened again
            expect(tab.locator('#results > li[data-id="moved"]')).to_have_class("hit")
            back.click()
            expect(item.locator('[data-field="content"]')).to_have_text(
                "Rosa keeps the ledger again."
            )
            expect(tab.get_by_role("alert")).to_be_hidden()
    finally:
        context.close()
        assert stop_server(proc) == 0
        schemas.drop_all()
