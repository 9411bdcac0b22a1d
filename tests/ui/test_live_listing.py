"""A listing in the inspector while another process changes what it lists.

A real ``memstore serve`` on a PostgreSQL journal, a ``Memory`` of another process
on the same journal making the changes, and the inspector in a real browser. A
listing is shown a page at a time and kept up to date by the live changes; a change
that comes while a page of it is on its way was lost, now and then: the page could
be one the server read before the change (an item that has since left the listing's
Subject shown in it), or one asked from a start the change moved (the next page
skipping an item). The tests hold that request (``page.route``) while the change is
made and its live change shown, so each race is taken every time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from memstore import Item, Memory
from memstore.journal import PostgresJournal
from tests.pgtest import Schemas, require_pg
from tests.protocol.conftest import start_server, stop_server, wait_applied
from tests.ui.conftest import Page, Server

ALICES = "**/ui/api/search?*subject=alice*"
"""The requests of a listing of alice's items (``page.route`` pattern)."""
WAIT_MS = 15_000


@contextlib.contextmanager
def signed_in(browser: Any, tmp_path: Path) -> Iterator[tuple[Any, Memory]]:
    """A tab signed in to a server whose memory holds 21 notes of alice's and, newest,
    one of carol's (so the first listing is not alice's), and another process's memory.

    The tab lists the newest items and follows the live changes before it is handed over.
    """
    require_pg()
    schemas = Schemas()
    place = schemas.new("ui")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-t": {"tenant": "t", "scopes": ["recall"]}}))
    tokens.chmod(0o600)
    journal = "--journal", place.dsn, "--journal-schema", place.schema
    proc, url = start_server(tmp_path / "data", tokens, *journal)
    context = browser.new_context()
    try:
        with Memory(journal=PostgresJournal(place.dsn, schema=place.schema), embedder=None) as mem:
            for n in range(21):
                mem.add(
                    Item(kind="note", subject="alice", content=f"Alice note {n}"), partition="t"
                )
            mem.add(Item(kind="note", subject="carol", content="Carol note"), partition="t")
            wait_applied([url], mem.journal.head())
            tab = context.new_page()
            tab.set_default_timeout(WAIT_MS)
            tab.goto(f"{url}/ui")
            Page(tab, Server(url, {}), []).sign_in("tok-t")
            expect(listed(tab).filter(has_text="Carol note")).to_have_count(1)
            expect(tab.get_by_role("region", name="Live changes")).to_contain_text("live")
            yield tab, mem
    finally:
        context.close()
        assert stop_server(proc) == 0
        schemas.drop_all()


def listed(tab: Any) -> Any:
    return tab.get_by_role("list", name="Results").get_by_role("listitem")


def list_alices(tab: Any) -> None:
    tab.get_by_role("textbox", name="Subject").fill("alice")
    tab.get_by_role("searchbox", name="Search memories").press("Enter")


def hold_first(tab: Any) -> list[Any]:
    """Hold the next request of alice's listing (the list it is put in); let others go."""
    held: list[Any] = []
    tab.route(ALICES, lambda route: route.continue_() if held else held.append(route))
    return held


def wait_held(tab: Any, held: list[Any]) -> Any:
    for _ in range(WAIT_MS // 20):
        if held:
            return held[0]
        tab.wait_for_timeout(20)  # the route's handler runs while the page is waited on
    raise AssertionError("the request was never made")


def move_out(tab: Any, mem: Memory, id: str) -> None:
    """Another process moves ``id`` to bob's subject; the page shows the live change."""
    mem.update(id, subject="bob")
    expect(tab.locator("#live-list li.change.upsert")).to_have_count(1)


def test_an_item_changed_out_of_the_listings_filter_leaves_it(browser: Any, tmp_path: Path) -> None:
    # A listing of alice's items must drop an item moved to another subject, not show it
    # at the top as if it were still hers, and its next page must skip nothing. Carol's
    # note is in the first listing only: once it is gone, alice's listing is shown (the
    # two held 20 notes each: taken for alice's, the first let the test move the item
    # while alice's listing was on its way).
    with signed_in(browser, tmp_path) as (tab, mem):
        list_alices(tab)
        expect(listed(tab)).to_have_count(20)
        expect(listed(tab).filter(has_text="Carol note")).to_have_count(0)  # alice's listing
        moved = listed(tab).nth(5).get_attribute("data-id")
        assert moved is not None
        move_out(tab, mem, moved)
        expect(tab.locator(f'#results > li[data-id="{moved}"]')).to_have_count(0)
        tab.get_by_role("button", name="Show more").click()
        expect(listed(tab)).to_have_count(20)  # the 20 alice notes left, none skipped
        expect(listed(tab).filter(has_text="Alice note 0")).to_have_count(1)
        expect(tab.get_by_role("button", name="Show more")).to_be_hidden()


def test_a_listing_read_before_a_change_that_came_first_is_asked_again(
    browser: Any, tmp_path: Path
) -> None:
    # Alice's listing is read by the server, then an item of it moves to bob, and its
    # live change reaches the page (applied to the listing shown then) before the
    # listing does: shown as it was read, it held bob's item for good.
    with signed_in(browser, tmp_path) as (tab, mem):
        moved = listed(tab).filter(has_text="Alice note 15").get_attribute("data-id")
        assert moved is not None
        held = hold_first(tab)
        list_alices(tab)
        route = wait_held(tab, held)
        answer = route.fetch()  # the server reads alice's listing now, before the change
        move_out(tab, mem, moved)
        route.fulfill(response=answer)
        expect(listed(tab).filter(has_text="Carol note")).to_have_count(0)
        expect(listed(tab)).to_have_count(20)  # her 20 notes left: the listing asked again
        expect(tab.locator(f'#results > li[data-id="{moved}"]')).to_have_count(0)
        expect(listed(tab).filter(has_text="Alice note 0")).to_have_count(1)


def test_a_next_page_asked_before_a_change_skips_nothing(browser: Any, tmp_path: Path) -> None:
    # "Show more" asks for the page after the 20 shown; before the server answers, an
    # item of the 20 moves to bob: the server's order lost one before that start, so the
    # page asked from it held nothing, and alice's oldest note was never listed.
    with signed_in(browser, tmp_path) as (tab, mem):
        list_alices(tab)
        expect(listed(tab).filter(has_text="Carol note")).to_have_count(0)
        expect(listed(tab)).to_have_count(20)
        moved = listed(tab).nth(5).get_attribute("data-id")
        assert moved is not None
        held = hold_first(tab)
        tab.get_by_role("button", name="Show more").click()
        route = wait_held(tab, held)
        move_out(tab, mem, moved)
        route.continue_()  # asked from the start as it was before the change
        expect(tab.locator(f'#results > li[data-id="{moved}"]')).to_have_count(0)
        expect(listed(tab).filter(has_text="Alice note 0")).to_have_count(1)
        expect(listed(tab)).to_have_count(20)
        expect(tab.get_by_role("button", name="Show more")).to_be_hidden()


def test_a_next_page_read_after_a_change_whose_live_change_comes_later_skips_nothing(
    browser: Any, tmp_path: Path
) -> None:
    # An item of the 20 shown moves to bob; "Show more" is answered after that (the server
    # reads the page from the start as it was before the change: it holds nothing, and no
    # page follows), and the live change reaches the page only after the answer. The page
    # must tell, by the answer's read_at, that the answer holds the change (its start was
    # one too far) and ask for the page again: alice's oldest note was never listed.
    with signed_in(browser, tmp_path) as (tab, mem):
        list_alices(tab)
        expect(listed(tab).filter(has_text="Carol note")).to_have_count(0)
        expect(listed(tab)).to_have_count(20)
        moved = listed(tab).nth(5).get_attribute("data-id")
        assert moved is not None
        held: list[Any] = []
        tab.route("**/v1/events", lambda route: held.append(route))  # the reconnection waits
        tab.evaluate("window.memstoreInspector.dropLive()")
        route = wait_held(tab, held)
        mem.update(moved, subject="bob")
        assert mem.journal is not None
        wait_applied([tab.url.split("/ui")[0]], mem.journal.head())
        tab.get_by_role("button", name="Show more").click()
        expect(tab.get_by_role("button", name="Show more")).to_be_hidden()  # answered: no more
        expect(tab.locator(f'#results > li[data-id="{moved}"]')).to_have_count(1)  # not heard yet
        route.continue_()  # the stream resumes: the change comes now, after the answer
        expect(tab.locator("#live-list li.change.upsert")).to_have_count(1)
        expect(tab.locator(f'#results > li[data-id="{moved}"]')).to_have_count(0)
        expect(listed(tab).filter(has_text="Alice note 0")).to_have_count(1)
        expect(listed(tab)).to_have_count(20)  # the 20 alice notes left, none skipped or doubled
        expect(tab.get_by_role("button", name="Show more")).to_be_hidden()
