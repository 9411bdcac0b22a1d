"""The inspector in a real browser against a real ``memstore serve`` (see conftest.py)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from memstore import Item, Memory
from memstore.item import ThoughtLink
from tests.protocol.conftest import start_server, stop_server
from tests.ui.conftest import Page, Server

ULID_A = "01J0000000000000000000000A"
ULID_B = "01J0000000000000000000000B"


def results(p: Page):  # type: ignore[no-untyped-def]
    return p.page.get_by_role("list", name="Results").get_by_role("listitem")


def test_sign_in_search_and_read_an_explanation(page: Page) -> None:
    tenant, token = page.server.tenant()
    page.server.ingest(token, "Alice adopted a tabby cat named Miso.", source="pets.md")
    page.server.ingest(token, "The quarterly budget review is on Friday.", source="work.md")
    assert page.page.url.endswith("/ui")  # / redirected here
    page.sign_in(token)
    expect(page.page.get_by_text(f"tenant {tenant}")).to_be_visible()
    page.search("tabby cat")
    hits = results(page)
    expect(hits.first).to_contain_text("tabby cat named Miso")
    first = hits.first
    first.get_by_text("Why this rank").click()
    why = first.locator("details.why")
    expect(why).to_contain_text("channels")
    expect(why).to_contain_text("lexical")
    expect(why).to_contain_text("fused score")
    expect(why).to_contain_text("lexical rank")
    expect(first.get_by_role("list", name="Rerank multipliers")).to_contain_text("recency")


def test_keyboard_only_sign_in_and_search(page: Page) -> None:
    _, token = page.server.tenant()
    page.server.ingest(token, "Keyboard users reach every control.", source="a11y.md")
    kb = page.page.keyboard
    page.page.get_by_role("textbox", name="Token").focus()
    kb.type(token)
    kb.press("Enter")
    box = page.page.get_by_role("searchbox", name="Search memories")
    expect(box).to_be_focused()
    kb.type("keyboard control")
    kb.press("Enter")
    # The search's answer, not the sign-in's listing of the newest items (it holds the
    # same text): that answer replaces the list, and a button focused before it is gone.
    expect(page.page.locator("#results-note")).to_contain_text("hit(s) for")
    expect(results(page).first).to_contain_text("Keyboard users")
    # Tab reaches the first result's button; Enter opens the item.
    box.focus()
    for _ in range(12):
        kb.press("Tab")
        focused = page.page.evaluate("document.activeElement.textContent")
        if "Keyboard users" in focused or focused == "a11y.md":
            break
    kb.press("Enter")
    expect(page.page.get_by_role("heading", name="History")).to_be_visible()


def test_a_wrong_token_shows_the_servers_error(page: Page) -> None:
    page.sign_in("not-a-token")
    expect(page.page.get_by_role("alert")).to_contain_text("401 unauthorized: unknown bearer token")
    expect(page.page.get_by_role("searchbox", name="Search memories")).to_be_hidden()
    assert page.page.evaluate("sessionStorage.length") == 0


def test_the_token_stays_in_session_storage(page: Page) -> None:
    _, token = page.server.tenant()
    page.sign_in(token)
    expect(page.page.get_by_role("button", name="Sign out")).to_be_visible()
    page.search("")
    assert page.page.evaluate("sessionStorage.getItem('memstore.token')") == token
    assert page.page.evaluate("document.cookie") == ""
    assert page.page.evaluate("localStorage.length") == 0
    assert all(token not in url for url in page.requests)
    page.page.reload()  # the same tab keeps its session
    expect(page.page.get_by_role("button", name="Sign out")).to_be_visible()


def test_item_history_and_time_travel_to_before_an_update(page: Page) -> None:
    _, token = page.server.tenant()
    first = page.server.ingest(token, "Bob lives in Lyon.", source="bob.md", id=ULID_A)
    page.server.ingest(token, "Bob lives in Paris now.", source="bob.md", id=ULID_A)
    before = f"{first['lsn']['wall_ms']}.{first['lsn']['counter']}"
    page.sign_in(token)
    page.search("Bob")
    results(page).get_by_role("button", name="bob.md").click()
    item = page.page.get_by_role("region", name="Item")
    expect(item.get_by_role("heading", name="History")).to_be_visible()
    versions = item.get_by_role("list", name="Versions").locator("> li")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("Bob lives in Lyon.")
    changes = versions.nth(1).get_by_role("list", name="Changes")
    expect(changes).to_contain_text("content")
    expect(changes).to_contain_text("Bob lives in Paris now.")
    expect(item.locator('[data-field="content"]')).to_have_text("Bob lives in Paris now.")

    page.page.get_by_role("textbox", name="As of").fill(before)
    page.page.get_by_role("textbox", name="As of").press("Enter")
    banner = page.page.get_by_role("status").filter(has_text="Time travel")
    expect(banner).to_contain_text(before)
    expect(item.locator('[data-field="content"]')).to_have_text("Bob lives in Lyon.")
    expect(page.page.get_by_role("list", name="Results")).to_contain_text("Lyon")
    expect(page.page.get_by_role("list", name="Results")).not_to_contain_text("Paris")
    expect(item.get_by_role("button", name="Forget")).to_have_count(0)  # the past is read-only

    page.page.get_by_role("button", name="Back to now").click()
    expect(banner).to_be_hidden()
    expect(item.locator('[data-field="content"]')).to_have_text("Bob lives in Paris now.")


def test_links_click_through(page: Page) -> None:
    # The protocol writes no links; the item view still lists none and related is empty.
    _, token = page.server.tenant()
    page.server.ingest(token, "Carol wrote the onboarding guide.", source="carol.md")
    page.sign_in(token)
    page.search("onboarding")
    results(page).get_by_role("button", name="carol.md").click()
    item = page.page.get_by_role("region", name="Item")
    expect(item.get_by_role("heading", name="Links out")).to_be_visible()
    expect(item.get_by_role("heading", name="Related")).to_be_visible()


def test_a_change_by_another_client_appears_live_and_the_stream_resumes(page: Page) -> None:
    _, token = page.server.tenant()
    page.sign_in(token)
    live = page.page.get_by_role("region", name="Live changes")
    expect(live).to_contain_text("live")
    page.server.ingest(token, "Dana joined the platform team.", source="dana.md")
    expect(live).to_contain_text("dana.md")
    expect(results(page).filter(has_text="dana.md")).to_have_count(1)  # no reload

    page.page.evaluate("window.memstoreInspector.dropLive()")
    page.server.ingest(token, "Erin leads the data team.", source="erin.md", id=ULID_B)
    expect(live).to_contain_text("erin.md")
    expect(live.get_by_text(re.compile(r"^live$"))).to_be_visible()

    # A delete by another client marks the listed item deleted.
    r = httpx.post(
        f"{page.server.url}/v1/forget",
        json={"target": {"Id": ULID_B}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    expect(live.locator("li.change.delete").first).to_be_visible()
    expect(results(page).filter(has_text="erin.md").get_by_text("deleted")).to_be_visible()


def test_forget_asks_first_and_escape_cancels(page: Page) -> None:
    _, token = page.server.tenant()
    page.server.ingest(token, "Frank prefers tea over coffee.", source="frank.md")
    page.sign_in(token)
    page.search("Frank tea")
    results(page).get_by_role("button", name="frank.md").click()
    item = page.page.get_by_role("region", name="Item")
    item.get_by_role("button", name="Forget").click()
    dialog = page.page.get_by_role("dialog", name="Forget this item?")
    expect(dialog).to_be_visible()
    page.page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(item.locator('[data-field="status"]')).to_have_text("active")

    item.get_by_role("button", name="Forget").click()
    dialog.get_by_role("button", name="Confirm forget").click()
    expect(item).to_contain_text("deleted now; its history remains")
    expect(page.page.get_by_role("list", name="Results")).not_to_contain_text("frank.md")


def test_hard_delete_previews_then_erases(page: Page) -> None:
    _, token = page.server.tenant()
    page.server.ingest(token, "Grace keeps a private diary.", source="grace.md")
    page.sign_in(token)
    page.search("Grace diary")
    results(page).get_by_role("button", name="grace.md").click()
    item = page.page.get_by_role("region", name="Item")
    item_id = item.locator('[data-field="id"]').inner_text()
    item.get_by_role("button", name="Hard delete").click()
    dialog = page.page.get_by_role("dialog", name="Erase permanently?")
    expect(dialog).to_contain_text("1 version(s)")
    dialog.get_by_role("button", name="Erase permanently").click()
    expect(item).to_be_hidden()
    assert page.server.api(token, f"items/{item_id}").status_code == 404


def test_a_script_in_memory_is_shown_as_text(page: Page) -> None:
    _, token = page.server.tenant()
    evil = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2"> zebra'
    page.server.ingest(token, evil, source="<b>evil</b>.md")
    page.sign_in(token)
    page.search("zebra")
    listed = page.page.get_by_role("list", name="Results")
    expect(listed).to_contain_text("<script>window.pwned = 1</script>")
    listed.get_by_role("button", name="<b>evil</b>.md").click()
    item = page.page.get_by_role("region", name="Item")
    expect(item.locator('[data-field="content"]')).to_contain_text('<img src="x"')
    assert page.page.evaluate("window.pwned") is None
    assert page.page.locator("main img, main b, main script").count() == 0


def test_statistics(page: Page) -> None:
    """A tenant's token sees its own counts and the journal's head, not the server's figures."""
    tenant, token = page.server.tenant()
    page.server.ingest(token, "Heidi runs the statistics desk.", source="heidi.md")
    page.sign_in(token)
    stats = page.page.get_by_role("region", name="Statistics")
    stats.get_by_role("button", name="Refresh statistics").click()
    expect(stats.get_by_role("table", name="Items by partition")).to_contain_text(tenant)
    expect(stats.get_by_role("table", name="Items by kind")).to_contain_text("episode")
    expect(stats.get_by_role("table", name="Journal")).to_contain_text("head")
    expect(stats).to_contain_text("shown to a token with the admin scope")
    for caption in ("Searches (all tenants)", "Search phases (all tenants)", "Storage"):
        expect(stats.get_by_role("table", name=caption)).to_have_count(0)
    expect(stats).not_to_contain_text("semantic calls")


def test_statistics_of_the_server_for_an_admin_token(page: Page) -> None:
    _, token = page.server.tenant()
    page.server.ingest(token, "Ivo keeps the server's books.", source="ivo.md")
    page.sign_in(page.server.admin)
    stats = page.page.get_by_role("region", name="Statistics")
    stats.get_by_role("button", name="Refresh statistics").click()
    expect(stats.get_by_role("table", name="Items by partition")).to_contain_text("ops")
    expect(stats.get_by_role("table", name="Search phases (all tenants)")).to_contain_text(
        "lexical"
    )
    expect(stats.get_by_role("table", name="Searches (all tenants)")).to_contain_text("total")
    expect(stats.get_by_role("table", name="Storage (all tenants)")).to_contain_text("vectors")
    expect(stats).not_to_contain_text("shown to a token with the admin scope")


def test_sign_out_leaves_nothing_for_the_next_token(page: Page) -> None:
    # A shared tab: one person signs out, another signs in with their own token.
    _, first = page.server.tenant()
    second_tenant, second = page.server.tenant()
    page.server.ingest(first, "Ivan's salary review is confidential.", source="ivan.md")
    page.sign_in(first)
    page.search("salary")
    results(page).get_by_role("button", name="ivan.md").click()
    item = page.page.get_by_role("region", name="Item")
    expect(item.get_by_role("heading", name="History")).to_be_visible()
    live = page.page.get_by_role("region", name="Live changes")
    page.server.ingest(first, "Ivan's bonus was approved.", source="bonus.md")
    expect(live).to_contain_text("bonus.md")
    page.page.get_by_role("textbox", name="As of").fill("2099-01-01T00:00:00Z")
    page.page.get_by_role("textbox", name="As of").press("Enter")
    expect(page.page.get_by_role("status").filter(has_text="Time travel")).to_be_visible()

    page.page.get_by_role("button", name="Sign out").click()
    # Signed out, the page holds none of the first tenant's memory, not even hidden.
    html = page.page.content()
    assert "Ivan" not in html and "ivan.md" not in html and "bonus.md" not in html

    page.sign_in(second)
    expect(page.page.get_by_text(f"tenant {second_tenant}")).to_be_visible()
    expect(page.page.get_by_role("status").filter(has_text="newest item")).to_be_visible()
    expect(item).to_be_hidden()
    expect(page.page.get_by_role("status").filter(has_text="Time travel")).to_be_hidden()
    assert page.page.get_by_role("textbox", name="As of").input_value() == ""
    assert "Ivan" not in page.page.content()


def test_a_bidi_control_in_memory_cannot_reorder_the_page_around_it(page: Page) -> None:
    # U+202E (right-to-left override) left open in a stored text would reverse what
    # follows it on the line: a history diff would read "before → after" backwards.
    _, token = page.server.tenant()
    page.server.ingest(token, "Kim is paid \u202e100 dollars.", source="pay.md", id=ULID_A)
    page.server.ingest(token, "Kim is paid 900 dollars.", source="pay.md", id=ULID_A)
    page.sign_in(token)
    page.search("Kim paid")
    results(page).get_by_role("button", name="pay.md").click()
    item = page.page.get_by_role("region", name="Item")
    change = item.get_by_role("list", name="Changes").locator("li").filter(has_text="content")
    expect(change).to_contain_text("900 dollars")
    before = change.locator("del").bounding_box()
    after = change.locator("ins").bounding_box()
    assert before is not None and after is not None
    assert after["y"] == before["y"]  # one line, so left to right is reading order
    assert after["x"] >= before["x"] + before["width"], (before, after)


def test_live_changes_respect_the_listings_filters(page: Page) -> None:
    _, token = page.server.tenant()
    page.sign_in(token)
    live = page.page.get_by_role("region", name="Live changes")
    expect(live).to_contain_text("live")
    page.page.get_by_role("textbox", name="Subject").fill("alice")
    page.search("")  # the newest items about alice: none yet
    expect(page.page.get_by_role("status").filter(has_text="0 newest item(s)")).to_be_visible()
    page.server.ingest(token, "Judy moved to the Oslo office.", source="judy.md")
    expect(live).to_contain_text("judy.md")
    expect(results(page)).to_have_count(0)  # its subject is not alice

    page.page.get_by_role("textbox", name="Subject").fill("")
    page.page.get_by_role("textbox", name="Kind").fill("chunk")  # typed, not yet searched
    page.server.ingest(token, "Ken moved to the Rome office.", source="ken.md")
    expect(live).to_contain_text("ken.md")
    expect(results(page)).to_have_count(0)  # the listing shown is still alice's


def test_a_long_memory_is_listed_page_by_page(page: Page) -> None:
    _, token = page.server.tenant()
    for n in range(11):  # an episode and its chunk each: 22 items, a page is 20
        page.server.ingest(token, f"Log entry number {n} of the night shift.", source=f"log{n}.md")
    page.sign_in(token)
    listed = results(page)
    expect(listed).to_have_count(20)
    expect(page.page.get_by_role("list", name="Results")).not_to_contain_text("log0.md")
    page.page.get_by_role("button", name="Show more").click()
    expect(listed).to_have_count(22)
    expect(listed.filter(has_text="log0.md")).to_have_count(1)  # the oldest, at last
    expect(page.page.get_by_role("button", name="Show more")).to_be_hidden()
    ids = page.page.evaluate(
        "[...document.querySelectorAll('#results > li')].map(li => li.dataset.id)"
    )
    assert len(set(ids)) == 22


@contextlib.contextmanager
def signed_in(
    browser: Any, tmp_path: Path, data: Path, scopes: tuple[str, ...] = ("recall",)
) -> Iterator[Any]:
    """A tab signed in to a server of its own over ``data`` (tenant ``t``, token ``tok-t``)."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-t": {"tenant": "t", "scopes": list(scopes)}}))
    tokens.chmod(0o600)
    proc, url = start_server(data, tokens)
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.set_default_timeout(15_000)
        tab.goto(f"{url}/ui")
        Page(tab, Server(url, {}), []).sign_in("tok-t")
        yield tab
    finally:
        context.close()
        assert stop_server(proc) == 0


def test_an_item_whose_id_is_a_dot_segment_opens(browser: Any, tmp_path: Path) -> None:
    # A URL path segment "." or ".." (even as %2e%2e) is resolved away by the browser's URL
    # parser: items/.. would ask for /ui/api/, so the page must not put ids in the path.
    data = tmp_path / "data"
    with Memory(data, embedder="hash") as mem:
        for id in ("..", "."):
            mem.add(Item(id=id, kind="note", content=f"Dots note {id}"), partition="t")
    with signed_in(browser, tmp_path, data) as tab:
        item = tab.get_by_role("region", name="Item")
        for id in ("..", "."):
            tab.get_by_role("list", name="Results").get_by_role(
                "button", name=f"Dots note {id}", exact=True
            ).click()
            expect(item.locator('[data-field="id"]')).to_have_text(id)
            expect(tab.get_by_role("alert")).to_be_hidden()


def test_the_newest_list_shows_retired_items_with_their_status(
    browser: Any, tmp_path: Path
) -> None:
    # A search ranks active items only: the blank query's list is where a superseded or
    # stale memory is found, marked as such so it is not read as current.
    data = tmp_path / "data"
    with Memory(data, embedder="hash") as mem:
        old = mem.add(Item(kind="fact", content="The pool holds 20"), partition="t")
        mem.supersede(old.id, "The pool holds 40")
    with signed_in(browser, tmp_path, data) as tab:
        listed = tab.get_by_role("list", name="Results").get_by_role("listitem")
        expect(listed).to_have_count(2)
        expect(listed.filter(has_text="holds 20").locator(".status")).to_have_text("superseded")
        expect(listed.filter(has_text="holds 40").locator(".status")).to_have_count(0)


def test_a_revoked_token_is_signed_out_by_the_live_stream(browser: Any, tmp_path: Path) -> None:
    # No click needed: the change stream ends for a revoked token, its reconnection is
    # refused (401), and the page signs out as any refused request does.
    tokens = tmp_path / "tokens.json"
    scopes = {"tenant": "t", "scopes": ["ingest", "recall"]}
    tokens.write_text(json.dumps({"tok-old": scopes, "tok-new": scopes}))
    tokens.chmod(0o600)
    proc, url = start_server(tmp_path / "data", tokens)
    server = Server(url, {})
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.set_default_timeout(15_000)
        tab.goto(f"{url}/ui")
        server.ingest("tok-new", "Liam keeps the vault codes.", source="liam.md")
        Page(tab, server, []).sign_in("tok-old")
        expect(tab.get_by_role("list", name="Results")).to_contain_text("liam.md")
        expect(tab.get_by_role("region", name="Live changes")).to_contain_text("live")
        revoked = tmp_path / "tokens.new"
        revoked.write_text(json.dumps({"tok-new": scopes}))
        revoked.chmod(0o600)
        revoked.replace(tokens)
        server.ingest("tok-new", "Mia changed the vault codes.", source="mia.md")
        expect(tab.get_by_role("alert")).to_contain_text("401 unauthorized")
        expect(tab.get_by_role("textbox", name="Token")).to_be_visible()
        assert "liam.md" not in tab.content() and "mia.md" not in tab.content()
        assert tab.evaluate("sessionStorage.length") == 0
    finally:
        context.close()
        assert stop_server(proc) == 0


def test_a_pasted_token_with_an_invisible_character_is_named(page: Page) -> None:
    # Chat apps and documents slip in a zero-width space or curly quotes; a header cannot
    # carry them, and the browser's own complaint ("non ISO-8859-1 code point") helps nobody.
    _, token = page.server.tenant()
    page.sign_in(token + "\u200b")
    alert = page.page.get_by_role("alert")
    expect(alert).to_contain_text("U+200B")
    expect(alert).to_contain_text("check what was pasted")
    assert page.page.evaluate("sessionStorage.length") == 0
    page.sign_in(token)  # the same token, clean, works
    expect(page.page.get_by_role("button", name="Sign out")).to_be_visible()


def test_a_reset_of_the_change_stream_reloads_what_the_page_shows(
    browser: Any, tmp_path: Path
) -> None:
    # The server restarts (a new hub): the page resumes the stream with an id the new hub
    # never issued and is told `reset`. What changed meanwhile never comes as a change, so
    # the page must reload its listing and its open item rather than keep showing them.
    data = tmp_path / "data"
    with Memory(data, embedder="hash") as mem:
        kept = mem.add(Item(kind="note", content="Nora keeps the spare keys."), partition="t")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-t": {"tenant": "t", "scopes": ["recall"]}}))
    tokens.chmod(0o600)
    proc, url = start_server(data, tokens)
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        tab.goto(f"{url}/ui")
        Page(tab, Server(url, {}), []).sign_in("tok-t")
        listed = tab.get_by_role("list", name="Results")
        live = tab.get_by_role("region", name="Live changes")
        expect(listed).to_contain_text("Nora keeps the spare keys.")
        expect(live).to_contain_text("live")
        listed.get_by_role("button", name="Nora keeps the spare keys.").click()
        item = tab.get_by_role("region", name="Item")
        expect(item.locator('[data-field="content"]')).to_have_text("Nora keeps the spare keys.")

        assert stop_server(proc) == 0
        with Memory(data, embedder="hash") as mem:  # changes the page is never sent
            mem.add(Item(kind="note", content="Omar found the spare keys."), partition="t")
            mem.update(kept.id, content="Nora lost the spare keys.")
        proc, url = start_server(data, tokens, port=int(url.rsplit(":", 1)[1]))

        # The page retries with a growing delay (up to 10 s) until the server is back.
        expect(listed).to_contain_text("Omar found the spare keys.", timeout=30_000)
        expect(listed).to_contain_text("Nora lost the spare keys.")
        expect(listed).not_to_contain_text("Nora keeps the spare keys.")
        expect(item.locator('[data-field="content"]')).to_have_text("Nora lost the spare keys.")
        expect(live).to_contain_text("some changes were missed: reloaded")
        expect(live.get_by_text(re.compile(r"^live$"))).to_be_visible()
    finally:
        context.close()
        assert stop_server(proc) == 0


def test_show_more_skips_nothing_after_a_listed_item_is_deleted_live(page: Page) -> None:
    # A listed item deleted by another client leaves the server's order: the next page
    # starts one place earlier in it, or the item that moved up into the shown range is
    # never listed.
    _, token = page.server.tenant()
    for n in range(11):  # an episode and its chunk each: 22 items, a page is 20
        page.server.ingest(token, f"Log entry number {n} of the night shift.", source=f"log{n}.md")
    page.sign_in(token)
    listed = results(page)
    expect(listed).to_have_count(20)
    gone = listed.nth(3).get_attribute("data-id")
    assert gone is not None
    r = httpx.post(
        f"{page.server.url}/ui/api/forget",
        params={"id": gone},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    expect(page.page.locator("#results > li.deleted")).to_have_count(1)
    page.page.get_by_role("button", name="Show more").click()
    expect(listed).to_have_count(22)  # the 21 left, and the deleted one, marked
    expect(listed.filter(has_text="log0.md")).to_have_count(1)
    expect(listed.filter(has_text="Log entry number 0 ").filter(has_text="chunk")).to_have_count(1)
    expect(page.page.get_by_role("button", name="Show more")).to_be_hidden()


def test_an_item_erased_elsewhere_leaves_the_page(page: Page) -> None:
    # Another client hard-deletes the open item: the page reloads it, is told 404, and
    # must not keep showing the erased text (with Forget buttons that can only fail).
    _, token = page.server.tenant()
    page.server.ingest(token, "Pia owns the red bike.", source="pia.md", id=ULID_A)
    page.sign_in(token)
    results(page).get_by_role("button", name="pia.md").click()
    item = page.page.get_by_role("region", name="Item")
    expect(item.locator('[data-field="content"]')).to_have_text("Pia owns the red bike.")
    erased = item.locator('[data-field="id"]').inner_text()
    auth = {"Authorization": f"Bearer {token}"}
    forget = f"{page.server.url}/ui/api/forget"
    preview = httpx.post(forget, params={"id": erased, "hard": "true"}, headers=auth).json()
    confirm = {"id": erased, "hard": "true", "confirmation": preview["confirmation"]}
    assert httpx.post(forget, params=confirm, headers=auth).status_code == 200
    alert = page.page.get_by_role("alert")
    expect(alert).to_contain_text(f"404 not_found: no item '{erased}'")
    expect(item).to_be_hidden()
    assert "Pia owns the red bike." not in page.page.locator("#item").inner_html()

    # Opened from its stale entry in the listing while another item is open: the answer
    # is the error alone, not the other item left in view as if it were this one.
    page.server.ingest(token, "Quinn owns the blue car.", source="quinn.md", id=ULID_B)
    results(page).get_by_role("button", name="quinn.md").click()
    expect(item.locator('[data-field="content"]')).to_have_text("Quinn owns the blue car.")
    expect(alert).to_be_hidden()
    results(page).get_by_role("button", name="pia.md").click()
    expect(alert).to_contain_text(f"404 not_found: no item '{erased}'")
    expect(item).to_be_hidden()


def test_a_listed_item_changed_elsewhere_is_shown_as_it_is_now(page: Page) -> None:
    # Another client rewrites a listed item: its entry shows the new text (in a listing of
    # the newest, at the top, where a reload would put it), not the text it had.
    _, token = page.server.tenant()
    page.server.ingest(token, "Pia owns the red bike.", source="pia.md", id=ULID_A)
    page.server.ingest(token, "Quinn owns the blue car.", source="quinn.md", id=ULID_B)
    page.sign_in(token)
    listed = results(page)
    expect(listed).to_have_count(4)
    expect(listed.first).to_contain_text("Quinn owns the blue car.")
    page.server.ingest(token, "Pia sold the red bike.", source="pia.md", id=ULID_A)
    pia = listed.filter(has_text="pia.md")
    expect(pia).to_contain_text("Pia sold the red bike.")
    expect(pia).to_have_count(1)
    expect(listed.filter(has_text="Pia sold the red bike.")).to_have_count(2)  # and its chunk
    shown = page.page.evaluate(
        "[...document.querySelectorAll('#results > li:not(.deleted)')].map(li => li.dataset.id)"
    )
    now = page.server.api(token, "search", q="").json()["hits"]
    assert shown == [h["item"]["id"] for h in now]  # the server's own newest-first order

    # In a search, the hit keeps its place and its score, which are said to be the old text's.
    page.search("Quinn blue car")
    quinn = listed.filter(has_text="quinn.md")
    expect(quinn).to_contain_text("score")
    page.server.ingest(token, "Quinn painted the blue car green.", source="quinn.md", id=ULID_B)
    expect(quinn).to_contain_text("Quinn painted the blue car green.")
    expect(quinn).to_contain_text("changed since this search")


def test_the_token_does_not_stay_in_the_sign_in_box(page: Page) -> None:
    # Signed in, the box is hidden but was never emptied: the token sat in the page, for
    # anything reading the DOM (an extension, a form-restoring browser) to find.
    _, token = page.server.tenant()
    page.sign_in(token)
    expect(page.page.get_by_role("button", name="Sign out")).to_be_visible()
    assert page.page.evaluate("document.getElementById('token').value") == ""


def test_a_long_history_shows_100_versions_and_counts_the_rest(page: Page) -> None:
    _, token = page.server.tenant()
    id = "01J000000000000000000000HX"
    lsns = []
    for i in range(105):
        r = page.server.ingest(token, f"Erin's desk is number {i}.", source="erin.md", id=id)
        lsns.append(f"{r['lsn']['wall_ms']}.{r['lsn']['counter']}")
    page.sign_in(token)
    page.search("Erin")
    results(page).get_by_role("button", name="erin.md").click()
    item = page.page.get_by_role("region", name="Item")
    versions = item.get_by_role("list", name="Versions").locator("> li")
    expect(versions).to_have_count(100)
    expect(item.get_by_text("5 older version(s) not shown")).to_be_visible()
    expect(versions.nth(0)).to_contain_text("Erin's desk is number 5.")
    page.page.get_by_role("textbox", name="As of").fill(lsns[0])
    page.page.get_by_role("textbox", name="As of").press("Enter")
    expect(item.locator('[data-field="content"]')).to_have_text("Erin's desk is number 0.")
    expect(item.get_by_text("5 newer version(s) not shown")).to_be_visible()
    expect(item.get_by_text("older version(s) not shown")).to_have_count(0)


def test_a_hub_item_lists_100_links_in_and_related_and_counts_the_rest(
    browser: Any, tmp_path: Path
) -> None:
    # 130 items link to one: its page lists 100 of them (and of what it activates) and
    # says how many it left out, rather than growing with every item that links to it.
    data = tmp_path / "data"
    with Memory(data, embedder="hash") as mem:
        mem.add(Item(id="hub", kind="note", content="The hub of the wiki."), partition="t")
        for i in range(130):
            link = ThoughtLink(to_id="hub", relation="explains")
            spoke = Item(id=f"s{i:03d}", kind="note", content=f"Spoke page {i}.", links=[link])
            mem.add(spoke, partition="t")
    with signed_in(browser, tmp_path, data) as tab:
        Page(tab, Server("", {}), []).search("hub wiki")
        listed = tab.get_by_role("list", name="Results")
        listed.get_by_role("button", name="The hub of the wiki.").click()
        item = tab.get_by_role("region", name="Item")
        expect(item.get_by_role("list", name="Links in").get_by_role("listitem")).to_have_count(100)
        expect(item.get_by_text("30 more link(s) in not shown")).to_be_visible()
        expect(item.get_by_role("list", name="Related").get_by_role("listitem")).to_have_count(100)
        expect(item.get_by_text("30 more related item(s) not shown")).to_be_visible()
        item.get_by_role("list", name="Links in").get_by_role(
            "button", name="Spoke page 0."
        ).click()
        expect(item.locator('[data-field="id"]')).to_have_text("s000")
        expect(item.get_by_text("more link(s) in not shown")).to_have_count(0)
